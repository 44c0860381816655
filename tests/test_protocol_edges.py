"""The protocol's loose ends, against a real ServerCore: refusals (REJECT 3/4, SERVER_DISCONNECT
7) never larger than the request and rate-limited per source, the kill feed and spawn NOTICEs,
and an INPUT acking a tick the server has not reached."""

from __future__ import annotations

from dataclasses import dataclass, field

from server import protocol as proto
from server.handshake import HandshakeConfig
from server.netstats import ClientNetStats, NetStatsConfig
from server.session import Address
from tests.server_harness import (
    ScriptedClient,
    make_core,
    place,
    run_ticks,
    weapon_ready,
)
from world.weapons import WeaponId

SERVER_SIDE = ("127.0.0.1", 9)
NONCE = b"n" * 16


@dataclass
class NoticeClient(ScriptedClient):
    """The scripted client, keeping the NOTICEs it receives too."""

    notices: list[proto.Notice] = field(default_factory=list)

    def deliver(self, datagrams: list[tuple[Address, bytes]]) -> None:
        super().deliver(datagrams)
        for addr, data in datagrams:
            if addr == self.address:
                msg = proto.decode_server(data)
                if isinstance(msg, proto.Notice):
                    self.notices.append(msg)


def _only_reply(replies: list[tuple[Address, bytes]], request: bytes, to: Address) -> object:
    """The one reply, checked to go back to its source and to be no larger than the request."""
    assert len(replies) == 1
    addr, data = replies[0]
    assert addr == to and len(data) <= len(request)
    return proto.decode_server(data)


def _challenge(core, addr: Address, now_s: float) -> bytes:
    replies = core.receive(addr, proto.encode(proto.Connect(nonce=NONCE, name="x")), now_s)
    challenge = proto.decode_server(replies[0][1])
    assert isinstance(challenge, proto.Challenge)
    return challenge.cookie


def test_a_forged_or_foreign_cookie_gets_reject_invalid_cookie() -> None:
    core = make_core()
    cookie = _challenge(core, SERVER_SIDE, 0.0)
    forged = proto.encode(proto.ChallengeResponse(cookie=bytes(len(cookie)), nonce=NONCE, name="x"))
    reply = _only_reply(core.receive(SERVER_SIDE, forged, 0.0), forged, SERVER_SIDE)
    assert reply == proto.Reject(proto.RefuseCode.INVALID_COOKIE)
    # The real cookie from another address (a spoofed source) is refused the same way.
    other = ("127.0.0.1", 10)
    foreign = proto.encode(proto.ChallengeResponse(cookie=cookie, nonce=NONCE, name="x"))
    assert _only_reply(core.receive(other, foreign, 0.0), foreign, other) == proto.Reject(
        proto.RefuseCode.INVALID_COOKIE
    )
    assert core.rejections["cookie_invalid"] == 2 and not core.sessions
    assert core.counters["refusals_sent"] == 2


def test_an_expired_cookie_gets_reject_expired_cookie() -> None:
    core = make_core()
    cookie = _challenge(core, SERVER_SIDE, 0.0)
    core.step(core.config.handshake.cookie_lifetime_s + 1.0)  # the handshake's clock is the server's
    late = proto.encode(proto.ChallengeResponse(cookie=cookie, nonce=NONCE, name="x"))
    reply = _only_reply(core.receive(SERVER_SIDE, late, core.time_s), late, SERVER_SIDE)
    assert reply == proto.Reject(proto.RefuseCode.EXPIRED_COOKIE)
    assert core.rejections["cookie_expired"] == 1 and not core.sessions


def test_a_forged_token_or_unknown_session_gets_reject_and_the_session_lives_on() -> None:
    core = make_core()
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    a.connect(core, 0.0)
    run_ticks(core, [a], 3)
    real_token = a.token
    a.token = bytes(16)
    forged = a.command(core.time_s)
    reply = _only_reply(core.receive(a.address, forged, core.time_s), forged, a.address)
    assert reply == proto.Reject(proto.RefuseCode.INVALID_COOKIE)
    assert core.rejections["token_invalid"] == 1 and a.address in core.sessions
    # The same INPUT from an address with no session.
    stranger = ("127.0.0.1", 6000)
    reply = _only_reply(core.receive(stranger, forged, core.time_s), forged, stranger)
    assert reply == proto.Reject(proto.RefuseCode.INVALID_COOKIE)
    assert core.rejections["unknown_session"] == 1
    # Ping and disconnect with a forged token are refused alike, and the session stays open.
    for msg in (proto.Ping(token=bytes(16), packet_seq=90, client_time_s=1.0),
                proto.Disconnect(token=bytes(16), packet_seq=91)):
        request = proto.encode(msg)
        reply = _only_reply(core.receive(a.address, request, core.time_s), request, a.address)
        assert reply == proto.Reject(proto.RefuseCode.INVALID_COOKIE)
    a.token = real_token
    assert a.address in core.sessions and core.rejections["token_invalid"] == 3
    # A live session's replayed packet is silence, not a refusal.
    legit = a.command(core.time_s)
    assert core.receive(a.address, legit, core.time_s) == []
    assert core.receive(a.address, legit, core.time_s) == []
    assert core.rejections["replay_duplicate"] == 1


def test_an_expired_token_gets_server_disconnect_and_closes_the_session() -> None:
    core = make_core(handshake=HandshakeConfig(token_lifetime_s=0.5))
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    a.connect(core, 0.0)
    run_ticks(core, [a], 2)
    for _ in range(80):  # past the lifetime: the core's clock is what the token is checked against
        core.step(core.next_tick_s())
    assert core.time_s > 0.5
    request = a.command(core.time_s)
    reply = _only_reply(core.receive(a.address, request, core.time_s), request, a.address)
    assert reply == proto.ServerDisconnect(proto.DisconnectCode.TOKEN_EXPIRED)
    assert core.rejections["token_expired"] == 1 and a.address not in core.sessions
    assert core.counters["disconnect_token_expired"] == 1


def test_refusals_are_rate_limited_per_source() -> None:
    core = make_core()
    flood = proto.encode(proto.Ping(token=bytes(16), packet_seq=1, client_time_s=1.0))
    victim, other = ("10.0.0.1", 1), ("10.0.0.2", 1)
    answered = sum(len(core.receive(victim, flood, 0.0)) for _ in range(20))
    burst = int(core.config.handshake.refusal_burst)
    assert answered == burst
    assert core.counters["refusals_rate"] == 20 - burst
    assert core.rejections["unknown_session"] == 20  # every datagram is still counted by its reason
    assert len(core.receive(other, flood, 0.0)) == 1  # another source has its own allowance
    # The allowance refills at refusals_per_s.
    later = 1.0 / core.config.handshake.refusals_per_s
    assert len(core.receive(victim, flood, later)) == 1


def test_no_refusal_is_larger_than_its_request() -> None:
    core = make_core()
    requests = [
        proto.encode(proto.Disconnect(token=bytes(16), packet_seq=0)),  # the smallest authenticated packet
        proto.encode(proto.Ping(token=bytes(16), packet_seq=0, client_time_s=0.0)),
        proto.encode(proto.ChallengeResponse(cookie=bytes(40), nonce=NONCE, name="x")),
    ]
    for i, request in enumerate(requests):
        addr = ("10.0.1.1", 100 + i)
        replies = core.receive(addr, request, 0.0)
        assert len(replies) == 1 and len(replies[0][1]) <= len(request)


def _duel() -> tuple:
    core = make_core()
    a = NoticeClient("alice", ("127.0.0.1", 5001))
    b = NoticeClient("bob", ("127.0.0.1", 5002))
    for c in (a, b):
        c.connect(core, 0.0)
    run_ticks(core, [a, b], 3)
    return core, a, b


def test_each_player_is_told_its_own_spawn_only() -> None:
    core, a, b = _duel()
    for me, them in ((a, b), (b, a)):
        spawns = [n for n in me.notices if n.code == proto.NoticeCode.SPAWN]
        assert len(spawns) == 1 and spawns[0].numbers[0] == me.slot
        assert list(spawns[0].numbers[1:]) == core.world.pos[me.slot].tolist()
        assert all(n.numbers[0] != them.slot for n in me.notices)


def test_a_kill_is_told_to_every_player_and_the_respawn_to_the_victim() -> None:
    core, a, b = _duel()
    place(core, a.slot, (10.0, 30.0), 0.0, a)
    place(core, b.slot, (25.0, 30.0), 180.0, b)
    weapon_ready(core, a.slot, int(WeaponId.PISTOL))
    run_ticks(core, [a, b], 40)
    core.world.health[b.slot] = 1.0  # any hit kills
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=0.0, pitch_deg=-1.5, view_time_s=0.0)

    def fire(c: ScriptedClient, now: float) -> bytes:
        if c is a and core.tick % 45 == 0 and core.by_slot[a.slot].kills == 0:
            return c.command(now, yaw=0.0, pitch=-1.5, buttons=1, shots=(shot._replace(view_time_s=now - 0.1),))
        return c.command(now, yaw=0.0 if c is a else 180.0)

    for c in (a, b):
        c.notices.clear()
    for _ in range(8 * 45):
        run_ticks(core, [a, b], 1, fire)
        if core.by_slot[a.slot].kills:
            break
    assert core.by_slot[a.slot].kills == 1
    kill_tick = core.tick
    for c in (a, b):
        kills = [n for n in c.notices if n.code == proto.NoticeCode.KILL]
        assert len(kills) == 1
        killer, victim, weapon, bone, distance = kills[0].numbers
        assert (killer, victim, weapon) == (a.slot, b.slot, int(WeaponId.PISTOL))
        assert 2 <= bone <= 17 and 14.0 < distance < 16.0
        assert kills[0].text == "alice killed bob"
    # The respawn: bob (only) is told where, once the respawn delay has passed.
    run_ticks(core, [a, b], int(core.config.respawn_delay_s * core.config.tick_rate_hz) + 2)
    assert core.tick > kill_tick
    spawns = [n for n in b.notices if n.code == proto.NoticeCode.SPAWN]
    assert len(spawns) == 1 and spawns[0].numbers[0] == b.slot and bool(core.world.alive[b.slot])
    assert not [n for n in a.notices if n.code == proto.NoticeCode.SPAWN]


def test_an_ack_of_a_future_tick_is_refused_and_leaves_the_rtt_alone() -> None:
    core = make_core()
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    a.connect(core, 0.0)
    run_ticks(core, [a], 20)
    before = core.netstats.sample(a.slot, core.time_s)
    assert before.rtt_samples > 0
    a.last_tick = core.tick + 1000
    queued = core.counters["commands_received"]
    assert core.receive(a.address, a.command(core.time_s), core.time_s) == []
    assert core.rejections["ack_tick_future"] == 1
    assert core.counters["commands_received"] == queued  # the whole INPUT is dropped
    after = core.netstats.sample(a.slot, core.time_s)
    assert (after.rtt_ms, after.rtt_samples) == (before.rtt_ms, before.rtt_samples)
    # Acking the current tick is fine, and sampling goes on.
    a.last_tick = core.tick
    run_ticks(core, [a], 10)
    assert core.rejections["ack_tick_future"] == 1
    assert core.netstats.sample(a.slot, core.time_s).rtt_samples > before.rtt_samples


def test_netstats_ignores_an_ack_newer_than_every_snapshot_sent() -> None:
    stats = ClientNetStats(NetStatsConfig(), 0.0)
    stats.on_snapshot_sent(10, 1.0)
    stats.on_ack(500, 1.05)  # never sent: no sample, and it must not hold back the real acks
    assert stats.rtt_samples == 0
    stats.on_ack(10, 1.05)
    assert stats.rtt_samples == 1 and abs(stats.srtt_s - 0.05) < 1e-9


def test_printable_strings_are_the_documented_ones() -> None:
    """PROTOCOL.md's "printable": no control, format or line/paragraph separator character;
    every kind of space, emoji, private-use and unassigned code points pass."""
    core = make_core()
    accepted = ["a\u00a0b", "\u3000x", "\U0001f600", "a\U000f0000", "a\U0003fffd", "a b"]
    refused = ["a\nb", "a\tb", "a\x7fb", "a\x85b", "a\u200bb", "a\u202eb", "a\u00adb", "a\u2028b", "a\u2029b"]
    for i, name in enumerate(accepted + refused):
        request = proto.encode(proto.Connect(nonce=NONCE, name=name))
        replies = core.receive(("10.0.2.1", 100 + i), request, 0.0)
        assert (len(replies) == 1) == (name in accepted), repr(name)
    assert core.rejections["bad_string"] == len(refused)


def test_a_repeated_handshake_from_a_live_address_gets_the_same_session() -> None:
    """PROTOCOL.md section 2: a second CONNECT and CHALLENGE_RESPONSE from a live address get the
    live session's ACCEPT (same token and slot, no rename); the name is the response's."""
    core = make_core()
    addr = ("127.0.0.1", 7000)

    def handshake(connect_name: str, response_name: str) -> proto.Accept:
        cookie = _challenge(core, addr, core.time_s) if connect_name == "x" else None
        if cookie is None:
            reply = core.receive(addr, proto.encode(proto.Connect(nonce=NONCE, name=connect_name)), core.time_s)
            cookie = proto.decode_server(reply[0][1]).cookie
        request = proto.encode(proto.ChallengeResponse(cookie=cookie, nonce=NONCE, name=response_name))
        accept = _only_reply(core.receive(addr, request, core.time_s), request, addr)
        assert isinstance(accept, proto.Accept)
        return accept

    first = handshake("x", "carol")
    assert core.sessions[addr].name == "carol"  # the response's name, not the CONNECT's
    core.step(core.next_tick_s())
    again = handshake("dave", "erin")
    assert (again.token, again.slot) == (first.token, first.slot) and len(core.sessions) == 1
    assert core.sessions[addr].name == "carol" and core.counters["connects"] == 1
