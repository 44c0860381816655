"""Stateless challenge cookies and session tokens (netcode.io in spirit, REFERENCES section 7).

The connection handshake is CONNECT -> CHALLENGE(cookie) -> CHALLENGE_RESPONSE(cookie, nonce)
-> ACCEPT(token). The cookie is an HMAC over the client's address, its nonce and the issue time,
so the server keeps no per-client state until a client proves it receives packets at the address
it claims (spoofed sources never get past the cookie). The session token, an HMAC over the slot,
address, a per-session salt and the expiry, then authenticates every later packet of that session:
it is computed once, when issued, and kept with the session; a packet's token is compared with it
in constant time, so the per-packet check costs no HMAC.

Neither the cookie nor the token encrypts or signs a packet's content: an on-path attacker who
sees the token can forge packets for that session. They stop off-path spoofing and amplification,
which is what a game server on the open internet faces most.

The secret, the clock and the random source are injected, so a run in virtual time is
reproducible for a seed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from server.protocol import COOKIE_BYTES, NONCE_BYTES, TOKEN_BYTES
from server.rate_limit import SourceRateLimiter

Address = tuple[str, int]
"""(host, port) of a UDP peer; IPv6 flow info and scope id are ignored."""

_COOKIE_TIME = struct.Struct(">Q")
_COOKIE_MAC_BYTES = COOKIE_BYTES - _COOKIE_TIME.size
_COOKIE_DOMAIN = b"referee/cookie/v1\x00"
_TOKEN_DOMAIN = b"referee/token/v1\x00"
MIN_SECRET_BYTES = 32
"""Shortest accepted server secret (bytes): the HMAC-SHA256 key should carry 256 bits."""


@dataclass(frozen=True, slots=True)
class HandshakeConfig:
    """Handshake timing.

    Attributes:
        cookie_lifetime_s: a cookie is accepted for this long after issue (s). 10 s covers a
            round trip on any sane link plus a retry; shorter narrows replay of a sniffed cookie.
        cookie_future_tolerance_s: a cookie dated this far ahead of the clock is still accepted
            (s); 0 because only this server's own clock ever dates cookies.
        token_lifetime_s: a session token expires this long after ACCEPT (s); 4 h, longer than
            any match, so expiry ends forgotten sessions rather than live ones.
        salt_bytes: length of the per-session salt (bytes).
        refusals_per_s: REJECT replies per second to one source address, sustained; 2/s tells
            a client retrying once a second why it fails, while a spoofed flood aimed at one
            victim gets at most this many 4-byte datagrams a second.
        refusal_burst: REJECT replies one source may get at once (packets).
    """

    cookie_lifetime_s: float = 10.0
    cookie_future_tolerance_s: float = 0.0
    token_lifetime_s: float = 4 * 3600.0
    salt_bytes: int = 16
    refusals_per_s: float = 2.0
    refusal_burst: float = 4.0

    def __post_init__(self) -> None:
        for name in ("cookie_lifetime_s", "token_lifetime_s", "refusals_per_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"HandshakeConfig.{name} must be positive and finite, got {value!r}")
        if not (math.isfinite(self.cookie_future_tolerance_s) and self.cookie_future_tolerance_s >= 0.0):
            raise ValueError("HandshakeConfig.cookie_future_tolerance_s must be >= 0 and finite")
        if not 8 <= self.salt_bytes <= 64:
            # Above 64 bytes (the HMAC's block) a salt adds nothing but the cost of drawing it.
            raise ValueError(f"HandshakeConfig.salt_bytes must be in [8, 64], got {self.salt_bytes}")
        if not (math.isfinite(self.refusal_burst) and self.refusal_burst >= 1.0):
            raise ValueError(f"HandshakeConfig.refusal_burst must be >= 1 and finite, got {self.refusal_burst!r}")


class CookieStatus(str, Enum):
    """Outcome of checking a CHALLENGE_RESPONSE cookie."""

    VALID = "valid"
    EXPIRED = "expired"
    """Authentic (this server issued it for this address and nonce) but older than its lifetime."""
    INVALID = "invalid"
    """Malformed, tampered, issued to another address or nonce, by another secret, or dated ahead."""


class TokenStatus(str, Enum):
    """Outcome of checking a session token."""

    VALID = "valid"
    EXPIRED = "expired"
    INVALID = "invalid"


_TOKEN_VALID = TokenStatus.VALID
"""Module constant: reading an Enum member off its class costs ~50 ns more than a global."""


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """What the server keeps per session to verify its token.

    Attributes: slot (player slot), address, salt (random bytes), expiry_s (clock time, s),
    token (the TOKEN_BYTES sent in ACCEPT: the HMAC over the other four, computed once by
    :meth:`Handshake.open_session`; every packet of the session must carry it).
    """

    slot: int
    address: Address
    salt: bytes
    expiry_s: float
    token: bytes


def _address_bytes(address: Address) -> bytes:
    host, port = address[0], address[1]
    # Length-prefixed so that no two different (host, port) pairs share an encoding.
    h = host.encode("utf-8")
    return struct.pack(">H", len(h)) + h + struct.pack(">H", port & 0xFFFF)


class Handshake:
    """Issues and checks cookies and tokens; holds no per-client state (only the bounded,
    self-pruning table of how many refusals each source was sent lately).

    Args:
        secret: HMAC key (>= 32 bytes), e.g. ``os.urandom(32)`` at server start.
        clock: returns the current time (s), monotonic.
        random_bytes: returns n unpredictable bytes (``os.urandom`` live, a seeded generator in tests).
        config: timing.
    """

    def __init__(
        self,
        secret: bytes,
        clock: Callable[[], float],
        random_bytes: Callable[[int], bytes],
        config: HandshakeConfig | None = None,
    ) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"secret must be at least {MIN_SECRET_BYTES} bytes")
        self._secret = bytes(secret)
        self._clock = clock
        self._random_bytes = random_bytes
        self.config = config or HandshakeConfig()
        self._refusals = SourceRateLimiter(self.config.refusals_per_s, self.config.refusal_burst)

    def may_refuse(self, address: Address, now_s: float) -> bool:
        """True when a refusal (REJECT) may go to ``address`` at ``now_s`` (s), within the
        per-source reply rate; each True spends one reply of that source's allowance."""
        return self._refusals.allow(address, now_s)

    # -- cookies -------------------------------------------------------------------------------

    def _cookie_mac(self, issued_ms: int, address: Address, nonce: bytes) -> bytes:
        msg = _COOKIE_DOMAIN + _COOKIE_TIME.pack(issued_ms) + _address_bytes(address) + nonce
        return hmac.new(self._secret, msg, hashlib.sha256).digest()[:_COOKIE_MAC_BYTES]

    def issue_cookie(self, address: Address, nonce: bytes) -> bytes:
        """Cookie (COOKIE_BYTES) for a CONNECT from ``address`` with ``nonce``: issue time in ms + MAC."""
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
        issued_ms = max(0, int(self._clock() * 1000.0))
        return _COOKIE_TIME.pack(issued_ms) + self._cookie_mac(issued_ms, address, nonce)

    def check_cookie(self, address: Address, nonce: bytes, cookie: bytes) -> CookieStatus:
        """Check a CHALLENGE_RESPONSE: authentic for this address and nonce, and still fresh."""
        if len(cookie) != COOKIE_BYTES or len(nonce) != NONCE_BYTES:
            return CookieStatus.INVALID
        (issued_ms,) = _COOKIE_TIME.unpack_from(cookie)
        expected = self._cookie_mac(issued_ms, address, nonce)
        if not hmac.compare_digest(expected, cookie[_COOKIE_TIME.size :]):
            return CookieStatus.INVALID
        age_s = self._clock() - issued_ms / 1000.0
        if age_s < -self.config.cookie_future_tolerance_s - 0.001:  # 1 ms: the ms truncation
            return CookieStatus.INVALID
        if age_s > self.config.cookie_lifetime_s:
            return CookieStatus.EXPIRED
        return CookieStatus.VALID

    # -- session tokens ------------------------------------------------------------------------

    def _token(self, slot: int, address: Address, salt: bytes, expiry_s: float) -> bytes:
        msg = _TOKEN_DOMAIN + struct.pack(">Id", slot, expiry_s) + _address_bytes(address) + salt
        return hmac.new(self._secret, msg, hashlib.sha256).digest()[:TOKEN_BYTES]

    def open_session(self, slot: int, address: Address) -> SessionCredentials:
        """New credentials for ``slot`` at ``address``: a fresh salt, expiry = now + token lifetime."""
        if not 0 <= slot <= 0xFFFF_FFFF:
            raise ValueError(f"slot out of range: {slot}")
        salt = self._random_bytes(self.config.salt_bytes)
        expiry_s = self._clock() + self.config.token_lifetime_s
        return SessionCredentials(slot, address, salt, expiry_s, self._token(slot, address, salt, expiry_s))

    def check_token(self, session: SessionCredentials, token: bytes, address: Address) -> TokenStatus:
        """Check the token of a packet that arrived from ``address`` for ``session``.

        The token is bound to the address it was issued to: from any other address it is
        invalid. Otherwise it is compared with the issued one in constant time (no HMAC per
        packet: ``session.token`` is the HMAC computed by :meth:`open_session`), then the expiry
        against the clock (s).
        """
        if address != session.address or not hmac.compare_digest(session.token, token):
            return TokenStatus.INVALID
        if self._clock() > session.expiry_s:
            return TokenStatus.EXPIRED
        return _TOKEN_VALID


def reply_allowed(request_bytes: int, reply_bytes: int) -> bool:
    """True when a reply to an unauthenticated packet does not amplify it (reply <= request)."""
    return reply_bytes <= request_bytes
