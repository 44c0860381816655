"""Clients: the datagrams that arrive between ticks (the handshake, authentication, INPUT
intake, ping, disconnect), sessions opening and closing, timeouts and kicks (ioquake3's
``sv_client``). Every function takes the server core (:class:`~server.core_state.CoreState`)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from anticheat.events import SessionEvent
from server import protocol as proto
from server.core_state import CoreState, Outgoing, send
from server.events import PlayerConnected, PlayerDisconnected
from server.handshake import CookieStatus, TokenStatus
from server.player_report import player_record
from server.rate_limit import ClientRateLimiter, RateVerdict
from server.replay_window import ReplayVerdict, ReplayWindow
from server.session import Address, ClientSession
from world.weapons import WeaponId

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DepartedPlayer:
    """A player who left: ``record`` (their :meth:`ServerCore.report` entry when they left),
    ``detections`` (their live detection counter), ``left_s`` (server time, s), ``reason``."""

    record: dict[str, Any]
    detections: Counter[str]
    left_s: float
    reason: str


def receive(core: CoreState, addr: Address, datagram: bytes, now_s: float) -> Outgoing:
    """Handle one datagram from ``addr`` at server time ``now_s`` (s); returns immediate replies.
    Never raises on a datagram: anything invalid is dropped and counted by reason in
    ``core.rejections``."""
    core._datagrams_this_tick += 1
    if core._datagrams_this_tick > core.config.max_datagrams_per_tick:
        core.rejections["tick_budget"] += 1
        return []
    try:
        msg = proto.decode_client(datagram, core.config.protocol)
    except proto.ProtocolError as exc:
        core.rejections[exc.reason.value] += 1
        return []
    except Exception:  # a decoder bug must not reach the transport's callback either
        core.rejections["internal_error"] += 1
        log.exception("error decoding a datagram from %s", addr)
        return []
    try:
        kind = type(msg)
        if kind is proto.Input:  # every client's per-tick packet: tested first, answered only when refused
            session = authenticate(core, addr, msg, len(datagram), now_s)
            if session is None:
                return refuse_session(core, addr, msg, len(datagram), now_s)
            on_input(core, session, msg, now_s)
            return []
        if kind is proto.Connect:
            return on_connect(core, addr, msg, len(datagram))
        if kind is proto.ChallengeResponse:
            return on_challenge_response(core, addr, msg, len(datagram), now_s)
        session = authenticate(core, addr, msg, len(datagram), now_s)
        if session is None:
            return refuse_session(core, addr, msg, len(datagram), now_s)
        if kind is proto.Ping:
            pong = proto.Pong(ping_seq=msg.packet_seq, client_time_s=msg.client_time_s, server_time_s=now_s)
            return [(addr, proto.encode(pong, core.config.protocol))]
        if kind is proto.Disconnect:
            drop(core, session, "client")
        return []
    except Exception:  # never let one datagram stop the server; count and keep going
        core.rejections["internal_error"] += 1
        log.exception("error handling a datagram from %s", addr)
        return []


def on_connect(core: CoreState, addr: Address, msg: proto.Connect, size: int) -> Outgoing:
    """CONNECT: a stateless challenge cookie, never a reply bigger than the request."""
    cookie = core.handshake.issue_cookie(addr, msg.nonce)
    reply = proto.encode(proto.Challenge(cookie=cookie), core.config.protocol)
    if len(reply) > size:  # no amplification: never answer bigger than asked
        core.rejections["unpadded_connect"] += 1
        return []
    return [(addr, reply)]


def on_challenge_response(
    core: CoreState, addr: Address, msg: proto.ChallengeResponse, size: int, now_s: float
) -> Outgoing:
    """CHALLENGE_RESPONSE: a valid cookie opens a session (or repeats the ACCEPT of an open one)."""
    status = core.handshake.check_cookie(addr, msg.nonce, msg.cookie)
    if status is not CookieStatus.VALID:
        core.rejections[f"cookie_{status.value}"] += 1
        code = proto.RefuseCode.EXPIRED_COOKIE if status is CookieStatus.EXPIRED else proto.RefuseCode.INVALID_COOKIE
        return refusal(core, addr, proto.Reject(code=code), size, now_s)
    session = core.sessions.get(addr)
    if session is None:
        slot = core.world.free_slot()
        if slot is None:
            core.rejections["server_full"] += 1
            return refusal(core, addr, proto.Reject(code=proto.RefuseCode.SERVER_FULL), size, now_s)
        session = open_session(core, addr, slot, msg.name, now_s)
    config = core.config
    accept = proto.Accept(
        token=session.creds.token,
        slot=session.slot,
        tick_rate_hz=config.tick_rate_hz,
        map_name=core.map.name,
        server_time_s=now_s,
        limits=proto.AcceptLimits(
            max_datagram_bytes=config.protocol.max_datagram_bytes,
            max_commands=config.protocol.max_commands,
            max_shots=config.protocol.max_shots,
            max_command_duration_s=config.protocol.max_command_duration_s,
            max_packets_per_s=config.rate_limit.packets_per_s,
            max_bytes_per_s=config.rate_limit.bytes_per_s,
        ),
    )
    reply = proto.encode(accept, config.protocol)
    if len(reply) > size:
        core.rejections["unpadded_response"] += 1
        return []
    return [(addr, reply)]


def refusal(core: CoreState, addr: Address, message: Any, request_bytes: int, now_s: float) -> Outgoing:
    """``message`` (a REJECT or SERVER_DISCONNECT) to ``addr`` in answer to a refused request of
    ``request_bytes``, unless it would be larger than the request (no amplification) or ``addr``
    was sent its share of refusals lately; ``core.counters`` counts refusals sent
    (``refusals_sent``) and withheld (``refusals_larger``, ``refusals_rate``)."""
    reply = proto.encode(message, core.config.protocol)
    if len(reply) > request_bytes:
        core.counters["refusals_larger"] += 1
        return []
    if not core.handshake.may_refuse(addr, now_s):
        core.counters["refusals_rate"] += 1
        return []
    core.counters["refusals_sent"] += 1
    return [(addr, reply)]


def refuse_session(core: CoreState, addr: Address, msg: Any, size: int, now_s: float) -> Outgoing:
    """The answer to an authenticated packet :func:`authenticate` refused: REJECT invalid cookie
    (the server has no session with that token at that address: connect again) for an unknown
    session or a wrong token, SERVER_DISCONNECT token expired (and the session closes) for an
    expired one; silence for replayed and rate-limited packets, which belong to a live session."""
    session = core.sessions.get(addr)
    status = TokenStatus.INVALID if session is None else core.handshake.check_token(session.creds, msg.token, addr)
    if status is TokenStatus.INVALID:
        return refusal(core, addr, proto.Reject(code=proto.RefuseCode.INVALID_COOKIE), size, now_s)
    if status is TokenStatus.EXPIRED and session is not None:
        drop(core, session, "token_expired")
        return refusal(core, addr, proto.ServerDisconnect(proto.DisconnectCode.TOKEN_EXPIRED), size, now_s)
    return []


def open_session(core: CoreState, addr: Address, slot: int, name: str, now_s: float) -> ClientSession:
    """A new client in ``slot``: its session, its player (spawning at once) and every per-slot
    state reset."""
    creds = core.handshake.open_session(slot, addr)
    session = ClientSession(
        slot=slot,
        address=addr,
        name=name,
        creds=creds,
        window=ReplayWindow(max_jump=core._max_packet_jump),
        max_seq_jump=core._max_packet_jump * core.config.protocol.max_commands,
        limiter=ClientRateLimiter(core.config.rate_limit, now_s),
        connected_s=now_s,
        last_packet_s=now_s,
        cmd_time_s=now_s,
    )
    core.sessions[addr] = session
    core.by_slot[slot] = session
    core.world.activate(slot, weapon=int(WeaponId.PISTOL), ammo=0, reserve=0)
    core.netstats.open(slot, now_s)
    core.validator.clear(slot)
    core.timer.reset(slot)
    core.culler.forget(slot)
    core.detections[slot] = Counter()
    # Detector state follows from this event, live and in a replay alike.
    core._session_events.append(SessionEvent(player=slot, tick=core.tick, time_s=now_s, kind="connect", name=name))
    session.respawn_at_s = now_s
    core.counters["connects"] += 1
    core.bus.publish(PlayerConnected(slot=slot, name=name, address=f"{addr[0]}:{addr[1]}", time_s=now_s))
    return session


def authenticate(core: CoreState, addr: Address, msg: Any, size: int, now_s: float) -> ClientSession | None:
    """The session of an authenticated packet (token, replay window, rate), else None (counted)."""
    session = core.sessions.get(addr)
    if session is None:
        core.rejections["unknown_session"] += 1
        return None
    status = core.handshake.check_token(session.creds, msg.token, addr)
    if status is not TokenStatus.VALID:
        core.rejections[f"token_{status.value}"] += 1
        return None
    verdict = session.window.accept(msg.packet_seq)
    if verdict is not ReplayVerdict.FRESH:
        core.rejections[f"replay_{verdict.value}"] += 1
        return None
    rate = session.limiter.allow(size, now_s)
    if rate is not RateVerdict.OK:
        core.rejections[f"rate_{rate.value}"] += 1
        return None
    session.last_packet_s = now_s
    return session


def on_input(core: CoreState, session: ClientSession, msg: proto.Input, now_s: float) -> None:
    """INPUT: link figures, and the commands new to the session queued for the next tick. An
    INPUT acking a tick the server has not reached yet (``ack_tick`` > ``core.tick``, the newest
    snapshot's) is dropped (``ack_tick_future``): no client can have that snapshot."""
    ack = msg.ack_tick
    if ack is not None and ack > core.tick:
        core.rejections["ack_tick_future"] += 1
        return
    core.netstats.on_input(session.slot, msg.packet_seq, msg.client_time_s, msg.ack_tick, now_s)
    block = msg.command_block
    too_new, overflowed = session.commands_too_new, session.commands_overflowed
    new = session.queue(block, msg.shots, core.config.max_queued_commands)
    if new:
        session.commands_arrived_s = now_s
    counters = core.counters
    counters["commands_received"] += new
    refused = session.commands_too_new - too_new
    if refused:
        core.rejections["command_too_new"] += refused
    if session.commands_overflowed != overflowed:
        core.rejections["queue_overflow"] += session.commands_overflowed - overflowed
    counters["commands_redundant"] += len(block) // proto.COMMAND_BYTES - new - refused


def drop(core: CoreState, session: ClientSession, reason: str) -> None:
    """Close ``session`` (``reason``: client, timeout, kicked...): its record joins the departed."""
    slot = session.slot
    # Taken before the slot is released: the link figures and the sanction are the slot's.
    # The detection counter stays shared, so detections delivered later (the detectors'
    # flush at close) still count for the player who left, unless the slot is reused.
    core.departed.append(
        DepartedPlayer(player_record(core, session), core.detections.setdefault(slot, Counter()), core.time_s, reason)
    )
    core.sessions.pop(session.address, None)
    core.by_slot.pop(slot, None)
    core.world.deactivate(slot)
    core.weapons.clear(slot)
    core.validator.clear(slot)
    core.timer.reset(slot)
    core.culler.forget(slot)
    core.netstats.close(slot)
    core._session_events.append(
        SessionEvent(player=slot, tick=core.tick, time_s=core.time_s, kind="disconnect", name=session.name)
    )
    core.counters[f"disconnect_{reason}"] += 1
    core.bus.publish(PlayerDisconnected(slot=slot, name=session.name, reason=reason, time_s=core.time_s))


def apply_kicks(core: CoreState) -> None:
    """Disconnect the players kicked since the last tick (SERVER_DISCONNECT KICKED sent)."""
    kicks, core._kicks = core._kicks, {}
    for slot, reason in kicks.items():
        session = core.by_slot.get(slot)
        if session is not None:
            send(core, session, proto.ServerDisconnect(proto.DisconnectCode.KICKED))
            drop(core, session, reason)


def expire_clients(core: CoreState, now_s: float) -> None:
    """Drop the clients silent for longer than ``client_timeout_s``."""
    for session in list(core.sessions.values()):
        if now_s - session.last_packet_s > core.config.client_timeout_s:
            drop(core, session, "timeout")
