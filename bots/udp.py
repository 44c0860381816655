"""Run sans-IO bot clients over real UDP with asyncio-dgram.

``run_bots`` gives every :class:`bots.client.BotClient` its own connected UDP socket (so the
server sees one address per player, as with real clients), feeds each socket's datagrams to its
client from one receive task per socket, and runs one scheduler task that calls ``step`` when
each client's ``next_step_s`` comes, on the loop's clock (``loop.time()``, seconds). The target
address may be the server or a link-emulator proxy (``testbed.link_proxy``) in front of it.

The run is bounded: it ends after ``duration_s`` seconds, when ``stop`` is set, or when no client
has anything left to do; every connected client then sends DISCONNECT and every socket closes.
With a ``connect_timeout_s`` it also ends, raising :class:`NoAnswer`, when the server has answered
no client's handshake by then; a host name that does not resolve raises :class:`UnresolvedHost`.

The event loop is the caller's: run it under uvloop (``run_bots_sync(..., use_uvloop=True)`` or
the caller's own policy) for ~8x cheaper receives (REFERENCES section 9).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncio_dgram
from asyncio_dgram.aio import DatagramClient

import server.protocol as proto
from bots.client import BotClient, ClientStats, ConnState
from world.mapfile import GameMap, builtin_map, builtin_map_names

__all__ = [
    "ConnectError",
    "MapMismatch",
    "NoAnswer",
    "Refused",
    "ServerInfo",
    "UnresolvedHost",
    "probe_server",
    "resolve_address",
    "run_bots",
    "run_bots_sync",
    "server_map",
]

log = logging.getLogger(__name__)

Address = tuple[str, int]


class ConnectError(Exception):
    """The bots could not reach a server (the message is one line, for the user)."""


class UnresolvedHost(ConnectError):
    """The server's host name does not resolve."""


class NoAnswer(ConnectError):
    """No client heard from the server within the connect timeout.

    Attributes:
        address: the (host, port) the clients sent to.
        waited_s: how long they waited (s).
    """

    def __init__(self, address: Address, waited_s: float) -> None:
        super().__init__(
            f"no answer from {address[0]}:{address[1]} within {waited_s:.1f} s (is a server running there?)"
        )
        self.address = address
        self.waited_s = waited_s


class Refused(ConnectError):
    """The server answered the handshake with REJECT (full, banned...)."""


class MapMismatch(ConnectError):
    """The server runs another map than the one the bots were given, or one they do not have."""


_UNANSWERED = (ConnState.IDLE, ConnState.CONNECTING, ConnState.FAILED)
"""Client states that do not show any answer from the server (a CHALLENGE moves a client on)."""


async def resolve_address(address: Address) -> Address:
    """``address`` with its host resolved for UDP (numeric addresses come back unchanged; the
    first address the resolver gives, as the sockets would use).

    Raises:
        UnresolvedHost: the host does not resolve.
    """
    host, port = address
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnresolvedHost(f"cannot resolve server host {host!r}: {reason}") from exc
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise UnresolvedHost(f"cannot resolve server host {host!r}")
    resolved = infos[0][4]
    return str(resolved[0]), int(resolved[1])

RECV_MAX_BYTES = 2048
RECV_QUEUE_DATAGRAMS = 64
"""Datagrams a bot keeps unread at most (one second of snapshots); beyond it the oldest go."""


class NewestQueue(asyncio.Queue):  # type: ignore[type-arg]
    """A bounded receive queue that drops its *oldest* item when full, counting drops.

    asyncio-dgram's own queue is unbounded: a client that falls behind for a moment (a busy
    machine) would then read ever-older snapshots and carry that lag for the rest of the match. A
    game client wants the newest state, and a real socket buffer drops on overflow too."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.dropped = 0

    def put_nowait(self, item: object) -> None:
        if self.full():
            self.get_nowait()
            self.dropped += 1
        super().put_nowait(item)
"""Read size (bytes) for the stdlib selector loop: datagrams are at most 1200 bytes, and the
default 256 KiB read buffer costs ~15 us per datagram (REFERENCES section 9)."""


async def _open(server_addr: Address, bind_host: str) -> DatagramClient:
    """A UDP socket bound to ``bind_host`` (any port) and connected to ``server_addr``.

    On uvloop, ``asyncio_dgram.from_socket`` cannot tag its transport with the peer address
    (uvloop's transports take no new attributes), so the socket is made by
    ``asyncio_dgram.connect`` instead and the kernel picks the local address by route (loopback
    for a loopback server, which is where bots run)."""
    if not isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop):
        return _bounded(await asyncio_dgram.connect(server_addr))
    infos = socket.getaddrinfo(server_addr[0], server_addr[1], type=socket.SOCK_DGRAM)
    family = infos[0][0]
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.bind((bind_host, 0))
        sock.connect(infos[0][4])
        sock.setblocking(False)
        stream = await asyncio_dgram.from_socket(sock)
    except BaseException:
        sock.close()
        raise
    # Private to asyncio's selector transport (uvloop has no such attribute and needs none).
    transport: Any = getattr(stream, "_transport", None)
    if transport is not None and hasattr(transport, "max_size"):
        transport.max_size = RECV_MAX_BYTES
    if not isinstance(stream, DatagramClient):  # pragma: no cover - from_socket on a connected socket
        raise RuntimeError("expected a connected datagram stream")
    return _bounded(stream)


def _bounded(stream: DatagramClient) -> DatagramClient:
    """Swap asyncio-dgram's unbounded receive queue for a :class:`NewestQueue` (no public hook:
    the stream and its protocol share the private ``_recvq``)."""
    queue = NewestQueue(RECV_QUEUE_DATAGRAMS)
    stream._recvq = queue  # type: ignore[attr-defined]
    stream._transport.get_protocol()._recvq = queue  # type: ignore[attr-defined]
    return stream


async def _send(bot: BotClient, stream: DatagramClient, datagrams: list[bytes]) -> None:
    for data in datagrams:
        # asyncio-dgram raises a *stale* queued error (an earlier ICMP port unreachable, e.g.
        # while the server was not up yet) before sending, without sending: retry once.
        for attempt in range(2):
            try:
                await stream.send(data)
                break
            except asyncio_dgram.TransportClosed:
                return
            except OSError as exc:
                if attempt:
                    bot.record_send_error()
                    log.debug("%s: send failed: %s", bot.name, exc)


class _Wake:
    """The scheduler's alarm: set by a timer, by a receive that makes a client due sooner, or
    by the stop event."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.at_s = math.inf


async def _receive(bot: BotClient, stream: DatagramClient, wake: _Wake) -> None:
    loop = asyncio.get_running_loop()
    while True:
        try:
            data, _ = await stream.recv()
        except asyncio_dgram.TransportClosed:
            return
        except OSError as exc:
            # ICMP errors (server not up, or gone) surface here; the client's timeout decides.
            log.debug("%s: receive error: %s", bot.name, exc)
            continue
        bot.receive(data, loop.time())
        due = bot.next_step_s
        if due is not None and due < wake.at_s:
            wake.event.set()


async def _watch_stop(stop: asyncio.Event, wake: _Wake) -> None:
    await stop.wait()
    wake.event.set()


def _answered(bots: Sequence[BotClient]) -> bool:
    """Whether the server has answered at least one client's handshake."""
    return any(bot.state not in _UNANSWERED for bot in bots)


async def _watch_connect(bots: Sequence[BotClient], timeout_s: float, give_up: asyncio.Event, wake: _Wake) -> None:
    """After ``timeout_s`` seconds, give up the run if no client has heard from the server."""
    await asyncio.sleep(timeout_s)
    if not _answered(bots):
        give_up.set()
        wake.event.set()


async def run_bots(
    server_addr: Address,
    bots: Sequence[BotClient],
    duration_s: float,
    *,
    bind_host: str = "127.0.0.1",
    stop: asyncio.Event | None = None,
    connect_timeout_s: float | None = None,
) -> list[ClientStats]:
    """Connect ``bots`` to ``server_addr`` and run them for ``duration_s`` seconds (or until
    ``stop`` is set, or every client is finished); returns each client's final stats.

    Each bot must not have been started. Sockets bind to ``bind_host`` on a free port.

    Args:
        connect_timeout_s: when given, the run ends after this many seconds (s) if the server
            has answered no client's handshake (a CHALLENGE, ACCEPT or REJECT), and also when
            the run ends for another reason than ``stop`` before any answer came.

    Raises:
        UnresolvedHost: the server's host name does not resolve.
        NoAnswer: no answer within ``connect_timeout_s`` (only with a timeout).
    """
    if not math.isfinite(duration_s) or duration_s < 0.0:
        raise ValueError(f"duration_s must be finite and >= 0, got {duration_s!r}")
    if connect_timeout_s is not None and not (math.isfinite(connect_timeout_s) and connect_timeout_s > 0.0):
        raise ValueError(f"connect_timeout_s must be positive and finite, got {connect_timeout_s!r}")
    loop = asyncio.get_running_loop()
    server_addr = await resolve_address(server_addr)
    streams: list[DatagramClient] = []
    tasks: list[asyncio.Task[None]] = []
    wake = _Wake()
    give_up = asyncio.Event()
    heard = True
    t0 = loop.time()
    try:
        for bot in bots:
            streams.append(await _open(server_addr, bind_host))
        for i, (bot, stream) in enumerate(zip(bots, streams)):
            tasks.append(asyncio.create_task(_receive(bot, stream, wake), name=f"bot-recv-{i}"))
        if stop is not None:
            tasks.append(asyncio.create_task(_watch_stop(stop, wake), name="bot-stop"))
        if connect_timeout_s is not None:
            tasks.append(asyncio.create_task(_watch_connect(bots, connect_timeout_s, give_up, wake), name="bot-connect"))
        t0 = loop.time()
        end_s = t0 + duration_s
        for bot, stream in zip(bots, streams):
            await _send(bot, stream, bot.start(loop.time()))
        await _schedule(bots, streams, wake, end_s, stop, give_up)
        heard = _answered(bots) or (stop is not None and stop.is_set() and not give_up.is_set())
        now = loop.time()
        for bot, stream in zip(bots, streams):
            await _send(bot, stream, bot.disconnect(now))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for stream in streams:
            stream.close()
    if connect_timeout_s is not None and not heard:
        raise NoAnswer(server_addr, loop.time() - t0)
    return [bot.stats for bot in bots]


async def _schedule(
    bots: Sequence[BotClient],
    streams: Sequence[DatagramClient],
    wake: _Wake,
    end_s: float,
    stop: asyncio.Event | None,
    give_up: asyncio.Event | None = None,
) -> None:
    """Call each client's ``step`` when it is due until ``end_s`` (loop time, s), or until
    ``stop`` or ``give_up`` is set."""
    loop = asyncio.get_running_loop()
    while True:
        # Cleared before the sweep: a receive during it (sends yield) that makes a client due
        # sooner sets it again, so the wait below returns at once instead of losing the wake-up.
        wake.event.clear()
        now = loop.time()
        if now >= end_s or (stop is not None and stop.is_set()) or (give_up is not None and give_up.is_set()):
            return
        earliest = math.inf
        for bot, stream in zip(bots, streams):
            due = bot.next_step_s
            # A late scheduler catches up a few ticks at once; the client itself skips ticks
            # missed by more than its max_behind_s.
            for _ in range(8):
                if due is None or due > now:
                    break
                await _send(bot, stream, bot.step(now))
                due = bot.next_step_s
            if due is not None:
                earliest = min(earliest, due)
        if earliest == math.inf:
            return  # every client is done (rejected, disconnected, timed out)
        wake.at_s = min(earliest, end_s)
        handle = loop.call_at(wake.at_s, wake.event.set)
        try:
            await wake.event.wait()
        finally:
            handle.cancel()
            wake.at_s = math.inf


def run_bots_sync(
    server_addr: Address,
    bots: Sequence[BotClient],
    duration_s: float,
    *,
    bind_host: str = "127.0.0.1",
    use_uvloop: bool = False,
    connect_timeout_s: float | None = None,
) -> list[ClientStats]:
    """Blocking convenience around :func:`run_bots` in a new event loop (uvloop when asked and
    installed; the process-wide loop policy is left alone)."""
    factory = None
    if use_uvloop:
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a Linux dependency
            log.warning("uvloop requested but not installed; using the stdlib event loop")
        else:
            factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(run_bots(server_addr, bots, duration_s, bind_host=bind_host, connect_timeout_s=connect_timeout_s))


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a server's ACCEPT tells before playing: ``map_name``, ``tick_rate_hz``."""

    map_name: str
    tick_rate_hz: int


async def probe_server(
    server_addr: Address, *, name: str = "probe", timeout_s: float = 5.0, retry_s: float = 1.0
) -> ServerInfo:
    """Handshake once with ``server_addr`` to read its ACCEPT (the map it runs), then leave
    (DISCONNECT). The protocol has no session-less query, so the server sees a short session
    named ``name``. CONNECT / CHALLENGE_RESPONSE are resent every ``retry_s`` seconds.

    Raises:
        UnresolvedHost: the host does not resolve.
        NoAnswer: no ACCEPT or REJECT within ``timeout_s`` seconds.
        Refused: the server answered REJECT.
    """
    server_addr = await resolve_address(server_addr)
    loop = asyncio.get_running_loop()
    nonce = os.urandom(16)
    request = proto.encode(proto.Connect(nonce=nonce, name=name))
    t0 = loop.time()
    stream = await asyncio_dgram.connect(server_addr)
    try:
        while loop.time() - t0 < timeout_s:
            with contextlib.suppress(OSError):  # an ICMP error from a server not up (yet)
                await stream.send(request)
            wait_until = min(loop.time() + retry_s, t0 + timeout_s)
            while (left := wait_until - loop.time()) > 0:
                try:
                    data, _ = await asyncio.wait_for(stream.recv(), left)
                    msg = proto.decode_server(data)
                except (TimeoutError, OSError, proto.ProtocolError):
                    continue
                if isinstance(msg, proto.Challenge):
                    request = proto.encode(proto.ChallengeResponse(cookie=msg.cookie, nonce=nonce, name=name))
                    break  # send it now
                if isinstance(msg, proto.Reject):
                    reason = proto.RefuseCode(msg.code).name.lower().replace("_", " ")
                    raise Refused(f"{server_addr[0]}:{server_addr[1]} refused the connection ({reason})")
                if isinstance(msg, proto.Accept):
                    with contextlib.suppress(OSError):
                        await stream.send(proto.encode(proto.Disconnect(token=msg.token, packet_seq=1)))
                    return ServerInfo(map_name=msg.map_name, tick_rate_hz=msg.tick_rate_hz)
    finally:
        stream.close()
    raise NoAnswer(server_addr, loop.time() - t0)


def server_map(server_map_name: str, requested: GameMap | None) -> GameMap:
    """The map the bots play against a server running ``server_map_name``.

    Without a ``requested`` map the bots take the server's built-in map. A requested map (a
    built-in one or a file) must carry the server's map name; ACCEPT names the map but carries
    no digest of it, so a file of the same name with other walls cannot be told apart.

    Raises:
        MapMismatch: the requested map has another name, or none was given and the server's map
            is not built in (one line, for the user).
    """
    if requested is None:
        if server_map_name in builtin_map_names():
            return builtin_map(server_map_name)
        raise MapMismatch(f"the server runs map {server_map_name!r}, which is not built in "
                          f"({', '.join(builtin_map_names())}): pass its map file with --map FILE")
    if requested.name == server_map_name:
        return requested
    hint = ("leave out --map to play it" if server_map_name in builtin_map_names()
            else f"pass the file of map {server_map_name!r} with --map")
    raise MapMismatch(f"the server runs map {server_map_name!r}, not {requested.name!r} "
                      f"(from {requested.source}): {hint}")
