"""Challenge cookies, session tokens, the replay window and rate limits."""

from __future__ import annotations

import random

import pytest

from server import handshake as handshake_module
from server.handshake import (
    CookieStatus,
    Handshake,
    HandshakeConfig,
    SessionCredentials,
    TokenStatus,
    reply_allowed,
)
from server.protocol import (
    COOKIE_BYTES,
    TOKEN_BYTES,
    Accept,
    AcceptLimits,
    Challenge,
    ChallengeResponse,
    Connect,
    RefuseCode,
    Reject,
    decode,
    encode,
)
from server.rate_limit import ClientRateLimiter, RateLimitConfig, RateVerdict, TokenBucket
from server.replay_window import ReplayVerdict, ReplayWindow

SECRET = bytes(range(32))
ADDR = ("203.0.113.7", 40000)
NONCE = bytes(range(16))


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(clock: FakeClock, secret: bytes = SECRET) -> Handshake:
    return Handshake(secret, clock, random.Random(7).randbytes)


def flip(data: bytes, index: int) -> bytes:
    buf = bytearray(data)
    buf[index] ^= 0x01
    return bytes(buf)


# ------------------------------------------------------------------------------------------------
# Cookies


def test_cookie_valid_within_lifetime() -> None:
    clock = FakeClock()
    hs = make(clock)
    cookie = hs.issue_cookie(ADDR, NONCE)
    assert len(cookie) == COOKIE_BYTES
    assert hs.check_cookie(ADDR, NONCE, cookie) is CookieStatus.VALID
    clock.t += 9.9
    assert hs.check_cookie(ADDR, NONCE, cookie) is CookieStatus.VALID


def test_cookie_expires() -> None:
    clock = FakeClock()
    hs = make(clock)
    cookie = hs.issue_cookie(ADDR, NONCE)
    clock.t += 10.01
    assert hs.check_cookie(ADDR, NONCE, cookie) is CookieStatus.EXPIRED


def test_cookie_bound_to_address_and_nonce() -> None:
    hs = make(FakeClock())
    cookie = hs.issue_cookie(ADDR, NONCE)
    assert hs.check_cookie(("203.0.113.8", 40000), NONCE, cookie) is CookieStatus.INVALID
    assert hs.check_cookie(("203.0.113.7", 40001), NONCE, cookie) is CookieStatus.INVALID
    assert hs.check_cookie(ADDR, bytes(16), cookie) is CookieStatus.INVALID


def test_cookie_tampered() -> None:
    clock = FakeClock()
    hs = make(clock)
    cookie = hs.issue_cookie(ADDR, NONCE)
    for i in (0, 7, 8, 20, COOKIE_BYTES - 1):
        assert hs.check_cookie(ADDR, NONCE, flip(cookie, i)) is CookieStatus.INVALID
    assert hs.check_cookie(ADDR, NONCE, cookie[:-1]) is CookieStatus.INVALID
    # Refreshing the issue time of an expired cookie breaks its MAC.
    clock.t += 60.0
    now_ms = int(clock.t * 1000).to_bytes(8, "big")
    assert hs.check_cookie(ADDR, NONCE, now_ms + cookie[8:]) is CookieStatus.INVALID


def test_cookie_from_another_secret_or_the_future() -> None:
    clock = FakeClock()
    cookie = make(clock, secret=b"x" * 32).issue_cookie(ADDR, NONCE)
    assert make(clock).check_cookie(ADDR, NONCE, cookie) is CookieStatus.INVALID
    hs = make(clock)
    cookie = hs.issue_cookie(ADDR, NONCE)
    clock.t -= 5.0  # the clock never runs backwards, so this cookie is dated ahead
    assert hs.check_cookie(ADDR, NONCE, cookie) is CookieStatus.INVALID


def test_handshake_holds_no_client_state() -> None:
    hs = make(FakeClock())
    before = dict(vars(hs)) if hasattr(hs, "__dict__") else {}
    for port in range(1000):
        hs.issue_cookie(("198.51.100.1", port), NONCE)
    assert (dict(vars(hs)) if hasattr(hs, "__dict__") else {}) == before


def test_short_secret_refused() -> None:
    with pytest.raises(ValueError):
        Handshake(b"short", FakeClock(), random.Random(1).randbytes)


# ------------------------------------------------------------------------------------------------
# Session tokens


def test_token_valid() -> None:
    hs = make(FakeClock())
    session = hs.open_session(3, ADDR)
    assert len(session.token) == TOKEN_BYTES
    assert hs.check_token(session, session.token, ADDR) is TokenStatus.VALID


def test_token_tampered() -> None:
    hs = make(FakeClock())
    session = hs.open_session(3, ADDR)
    for i in range(TOKEN_BYTES):
        assert hs.check_token(session, flip(session.token, i), ADDR) is TokenStatus.INVALID
    assert hs.check_token(session, session.token[:8], ADDR) is TokenStatus.INVALID


def test_token_of_another_slot_or_address() -> None:
    hs = make(FakeClock())
    mine = hs.open_session(3, ADDR)
    other = hs.open_session(4, ADDR)
    assert mine.salt != other.salt and mine.token != other.token
    assert hs.check_token(other, mine.token, ADDR) is TokenStatus.INVALID
    assert hs.check_token(mine, other.token, ADDR) is TokenStatus.INVALID
    assert hs.check_token(mine, mine.token, ("203.0.113.99", 40000)) is TokenStatus.INVALID
    assert hs.check_token(mine, mine.token, (ADDR[0], ADDR[1] + 1)) is TokenStatus.INVALID


def test_token_is_the_hmac_of_its_credentials() -> None:
    """Issued once: an HMAC under the secret over slot, address, salt and expiry."""
    mine = make(FakeClock()).open_session(3, ADDR)

    def issue(secret: bytes, slot: int, address: tuple[str, int]) -> bytes:
        return Handshake(secret, FakeClock(), lambda n: mine.salt).open_session(slot, address).token

    assert issue(SECRET, 3, ADDR) == mine.token
    assert len({mine.token, issue(SECRET, 4, ADDR), issue(SECRET, 3, ("203.0.113.8", 40000)),
                issue(SECRET[::-1], 3, ADDR)}) == 4
    later = Handshake(SECRET, FakeClock(2000.0), lambda n: mine.salt).open_session(3, ADDR)
    assert later.expiry_s != mine.expiry_s and later.token != mine.token
    assert mine == SessionCredentials(3, ADDR, mine.salt, mine.expiry_s, mine.token)


def test_token_check_computes_no_hmac(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every authenticated packet is checked: against the stored token, in constant time."""
    hs = make(FakeClock())
    session = hs.open_session(3, ADDR)

    def no_hmac(*args: object, **kwargs: object) -> None:
        raise AssertionError("check_token computed an HMAC")

    monkeypatch.setattr(handshake_module.hmac, "new", no_hmac)
    assert hs.check_token(session, session.token, ADDR) is TokenStatus.VALID
    assert hs.check_token(session, flip(session.token, 3), ADDR) is TokenStatus.INVALID


def test_token_expires() -> None:
    clock = FakeClock()
    hs = Handshake(SECRET, clock, random.Random(1).randbytes, HandshakeConfig(token_lifetime_s=60.0))
    session = hs.open_session(0, ADDR)
    clock.t += 59.0
    assert hs.check_token(session, session.token, ADDR) is TokenStatus.VALID
    clock.t += 2.0
    assert hs.check_token(session, session.token, ADDR) is TokenStatus.EXPIRED


def test_token_deterministic_for_seeded_randomness() -> None:
    a = Handshake(SECRET, FakeClock(), random.Random(5).randbytes).open_session(1, ADDR)
    b = Handshake(SECRET, FakeClock(), random.Random(5).randbytes).open_session(1, ADDR)
    assert a == b


def test_full_handshake_over_the_codec_without_amplification() -> None:
    clock = FakeClock()
    hs = make(clock)
    connect_dgram = encode(Connect(NONCE, "alice"))
    connect = decode(connect_dgram)
    assert isinstance(connect, Connect)
    challenge_dgram = encode(Challenge(hs.issue_cookie(ADDR, connect.nonce)))
    assert reply_allowed(len(connect_dgram), len(challenge_dgram))
    reject_dgram = encode(Reject(RefuseCode.SERVER_FULL))
    assert reply_allowed(len(connect_dgram), len(reject_dgram))

    challenge = decode(challenge_dgram)
    assert isinstance(challenge, Challenge)
    clock.t += 0.05
    response_dgram = encode(ChallengeResponse(challenge.cookie, NONCE, "alice"))
    response = decode(response_dgram)
    assert isinstance(response, ChallengeResponse)
    assert hs.check_cookie(ADDR, response.nonce, response.cookie) is CookieStatus.VALID
    session = hs.open_session(0, ADDR)
    accept = encode(Accept(session.token, 0, 128, "city", clock.t, AcceptLimits(1200, 4, 8, 0.1, 256.0, 307200.0)))
    assert reply_allowed(len(response_dgram), len(accept))
    assert not reply_allowed(10, 11)


# ------------------------------------------------------------------------------------------------
# Replay window


def test_replay_window_duplicate() -> None:
    w = ReplayWindow()
    assert w.accept(5) is ReplayVerdict.FRESH
    assert w.accept(5) is ReplayVerdict.DUPLICATE
    assert w.accept(6) is ReplayVerdict.FRESH
    assert w.accept(5) is ReplayVerdict.DUPLICATE


def test_replay_window_out_of_order_within_window() -> None:
    w = ReplayWindow()
    for seq in (10, 13, 12, 11, 200, 100):
        assert w.accept(seq) is ReplayVerdict.FRESH, seq
    assert w.accept(12) is ReplayVerdict.DUPLICATE
    assert w.newest == 200


def test_replay_window_too_old() -> None:
    w = ReplayWindow(256)
    w.accept(1000)
    assert w.check(1000 - 255) is ReplayVerdict.FRESH
    assert w.check(1000 - 256) is ReplayVerdict.TOO_OLD
    assert w.accept(3) is ReplayVerdict.TOO_OLD
    assert w.accept(-1) is ReplayVerdict.TOO_OLD


def test_replay_window_refuses_a_jump_past_max_jump_without_moving() -> None:
    w = ReplayWindow(256, max_jump=1000)
    assert w.accept(2**32 - 1) is ReplayVerdict.FRESH  # a session's first number may be anything
    w = ReplayWindow(256, max_jump=1000)
    assert w.accept(10) is ReplayVerdict.FRESH
    assert w.check(2**32 - 1) is ReplayVerdict.TOO_NEW
    assert w.accept(2**32 - 1) is ReplayVerdict.TOO_NEW
    assert w.accept(1011) is ReplayVerdict.TOO_NEW
    assert w.newest == 10
    assert w.accept(11) is ReplayVerdict.FRESH  # the client goes on as before
    assert w.accept(1011) is ReplayVerdict.FRESH  # a gap of max_jump is allowed
    assert w.newest == 1011


def test_replay_window_check_does_not_record() -> None:
    w = ReplayWindow()
    assert w.check(1) is ReplayVerdict.FRESH
    assert w.check(1) is ReplayVerdict.FRESH
    assert w.newest == -1


def test_replay_window_slot_reuse_is_not_a_duplicate() -> None:
    w = ReplayWindow(256)
    w.accept(1)
    assert w.accept(257) is ReplayVerdict.FRESH  # same ring slot, different number
    assert w.accept(1) is ReplayVerdict.TOO_OLD


# ------------------------------------------------------------------------------------------------
# Rate limits


def test_128hz_client_always_passes() -> None:
    limiter = ClientRateLimiter(RateLimitConfig(), now_s=0.0)
    refused = 0
    for i in range(128 * 10):
        refused += limiter.allow(1200, i / 128.0) is not RateVerdict.OK
    assert refused == 0


def test_flood_is_limited_to_the_rate() -> None:
    cfg = RateLimitConfig()
    limiter = ClientRateLimiter(cfg, now_s=0.0)
    passed = sum(limiter.allow(100, i / 2000.0) is RateVerdict.OK for i in range(2000 * 5))
    expected = cfg.packets_per_s * 5 + cfg.packet_burst
    assert abs(passed - expected) <= 2


def test_byte_limit() -> None:
    cfg = RateLimitConfig(packets_per_s=10_000.0, packet_burst=10_000.0, bytes_per_s=10_000.0, byte_burst=5_000.0)
    limiter = ClientRateLimiter(cfg, now_s=0.0)
    verdicts = [limiter.allow(1000, 0.0) for _ in range(6)]
    assert verdicts == [RateVerdict.OK] * 5 + [RateVerdict.BYTES]
    assert limiter.allow(1000, 0.1) is RateVerdict.OK  # 0.1 s earns 1000 bytes
    assert limiter.allow(1000, 0.1) is RateVerdict.BYTES


def test_packet_limit_verdict_and_no_charge_on_refusal() -> None:
    cfg = RateLimitConfig(packets_per_s=1.0, packet_burst=2.0)
    limiter = ClientRateLimiter(cfg, now_s=0.0)
    assert [limiter.allow(10, 0.0) for _ in range(3)] == [RateVerdict.OK, RateVerdict.OK, RateVerdict.PACKETS]
    bytes_left = limiter.bytes.tokens
    limiter.allow(10, 0.0)
    assert limiter.bytes.tokens == bytes_left


def test_token_bucket_refill_caps_and_ignores_backwards_time() -> None:
    bucket = TokenBucket(rate=10.0, burst=5.0, now_s=0.0)
    assert all(bucket.take(1.0, 0.0) for _ in range(5))
    assert not bucket.take(1.0, 0.0)
    assert bucket.take(1.0, 0.1)
    bucket.refill(100.0)
    assert bucket.tokens == 5.0
    bucket.refill(50.0)
    assert bucket.tokens == 5.0


def test_rate_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        RateLimitConfig(packets_per_s=0.0)
    with pytest.raises(ValueError):
        RateLimitConfig(byte_burst=float("nan"))
