"""The real-time shell around ServerCore: a UDP socket drained in batches and a fixed-timestep tick loop.

Measured facts this follows (REFERENCES 9, issue 16): at the kernel's default receive buffer
(212,992 bytes, a few hundred small datagrams on loopback) a flood of 120-145k datagrams/s from
one source made the kernel drop 57-72 % of *all* datagrams, honest players' included, while the
server used 13-40 % of a core: the buffer filled during every tick. So the socket asks for a
large buffer (``SO_RCVBUFFORCE`` where allowed, else ``SO_RCVBUF`` capped by
``net.core.rmem_max``), and each readiness wake-up reads datagrams until the socket is empty (or
``reads_per_wakeup`` is reached, so ticks still run on time). Every datagram first passes a
per-source packet bucket (:class:`server.rate_limit.SourceRateLimiter`, a dict lookup and a few
float operations): a flooding source's excess is dropped before it is decoded and before it can
use up the core's per-tick budget (``max_datagrams_per_tick``), which then bounds only what many
sources together send.

The server reads its socket itself (``loop.add_reader`` and ``recvfrom`` until
``BlockingIOError``) rather than through asyncio-dgram: asyncio-dgram's stream delivers one
datagram per await, and an asyncio transport delivers one datagram per protocol callback (the
stdlib loop even one per selector wake-up); nothing of it was left to use but the bind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.core import ServerCore
from server.rate_limit import SourceRateLimiter
from server.socket_stats import UdpSocketStats, udp_socket_stats

log = logging.getLogger(__name__)

READ_SIZE_BYTES = 2048
"""Bytes read per datagram (ours are at most 1200; a longer one is cut here and still refused as
``too_large``)."""

SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33 if sys.platform.startswith("linux") else None)
"""Linux's option that sets the receive buffer beyond ``net.core.rmem_max`` (needs CAP_NET_ADMIN);
Python's socket module does not name it."""

_KERNEL_DOUBLES = sys.platform.startswith("linux")
"""Linux doubles the size asked for (its bookkeeping overhead) and reports the doubled value."""

_DEADLINE_EVERY = 32
"""Datagrams read between two looks at the clock while draining (a clock read costs more than a
limited datagram's filter)."""

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """Real-time transport settings.

    Attributes:
        host: bind address (127.0.0.1 by default: nothing is exposed unless asked).
        port: UDP port (0 picks a free one).
        max_catchup_ticks: after a stall the loop runs at most this many late ticks back to back,
            then skips the rest (counted) rather than spiralling.
        run_ticks: run the tick loop (False only to measure the receive path alone).
        receive_buffer_bytes: the socket's receive buffer as asked with ``setsockopt`` (bytes;
            Linux reserves twice this, its bookkeeping included). 4 MiB holds about 50 ms of a
            145k datagrams/s flood of small datagrams. None keeps the kernel's default.
        reads_per_wakeup: datagrams read at most per readiness wake-up before the loop gets to
            run other work; 1 reads one datagram per wake-up (the stdlib loop's way). Reading
            also stops when the next tick is due.
        source_rate_factor: each source address may send this many times the core's per-client
            packet rate and burst (``ServerConfig.rate_limit``) before the transport drops its
            datagrams undecoded (counted as ``rate_source``); >= 1 so that nothing the core would
            accept is dropped. None: no per-source limit in the transport.
        max_sources: sources the per-source limiter tracks at most (more are not limited here;
            the core's per-tick budget still bounds them).
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_catchup_ticks: int = 8
    run_ticks: bool = True
    receive_buffer_bytes: int | None = 4 * 1024 * 1024
    reads_per_wakeup: int = 256
    source_rate_factor: float | None = 2.0
    max_sources: int = 16_384

    def __post_init__(self) -> None:
        if self.receive_buffer_bytes is not None and self.receive_buffer_bytes < 1024:
            raise ValueError(f"receive_buffer_bytes must be >= 1024 or None, got {self.receive_buffer_bytes!r}")
        if self.reads_per_wakeup < 1:
            raise ValueError(f"reads_per_wakeup must be >= 1, got {self.reads_per_wakeup!r}")
        if self.source_rate_factor is not None and not self.source_rate_factor >= 1.0:
            raise ValueError(f"source_rate_factor must be >= 1 or None, got {self.source_rate_factor!r}")
        if self.max_sources < 1:
            raise ValueError(f"max_sources must be >= 1, got {self.max_sources!r}")


@dataclass(frozen=True, slots=True)
class ReceiveBuffer:
    """The outcome of sizing a socket's receive buffer.

    Attributes:
        asked_bytes: the size asked for (bytes), None when the kernel's default was kept.
        effective_bytes: ``getsockopt(SO_RCVBUF)`` afterwards (bytes; on Linux twice the size
            granted).
        forced: ``SO_RCVBUFFORCE`` was allowed (the ``net.core.rmem_max`` cap did not apply).
        capped: the kernel granted less than asked (raise ``net.core.rmem_max``, or run with
            CAP_NET_ADMIN).
    """

    asked_bytes: int | None
    effective_bytes: int
    forced: bool
    capped: bool


def size_receive_buffer(sock: socket.socket, size_bytes: int | None) -> ReceiveBuffer:
    """Ask for a ``size_bytes`` receive buffer on ``sock``: ``SO_RCVBUFFORCE`` first (allowed with
    CAP_NET_ADMIN, root in practice), else ``SO_RCVBUF``, which Linux caps at
    ``net.core.rmem_max``. A capped buffer is logged as a warning. None changes nothing."""
    if size_bytes is None:
        return ReceiveBuffer(None, sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), False, False)
    forced = False
    if SO_RCVBUFFORCE is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size_bytes)
            forced = True
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EACCES, errno.ENOPROTOOPT, errno.EINVAL):
                raise
    if not forced:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size_bytes)
    effective = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    wanted = 2 * size_bytes if _KERNEL_DOUBLES else size_bytes
    capped = effective < wanted
    if capped:
        log.warning(
            "UDP receive buffer capped at %d bytes (asked %d): raise net.core.rmem_max "
            "(sysctl -w net.core.rmem_max=%d) or run with CAP_NET_ADMIN, or a flood will make the kernel drop datagrams",
            effective, size_bytes, size_bytes)
    else:
        log.info("UDP receive buffer %d bytes (asked %d%s)", effective, size_bytes, ", forced" if forced else "")
    return ReceiveBuffer(size_bytes, effective, forced, capped)


class UdpServer:
    """Runs a ServerCore on a UDP socket in real time. Use as an async context manager or call
    :meth:`start` / :meth:`stop`; :meth:`run_for` runs for a duration.

    Counters: ``datagrams_received`` (read from the socket), ``source_limited`` (of those, dropped
    by the per-source limit before decoding; also in ``core.rejections['rate_source']``),
    ``wakeups`` (readiness callbacks that read), ``read_errors``, ``send_errors``,
    ``skipped_ticks``; :meth:`stats` adds the kernel's figures for the socket."""

    def __init__(self, core: ServerCore, config: TransportConfig | None = None,
                 on_tick: Callable[[ServerCore], None] | None = None) -> None:
        self.core = core
        self.config = config or TransportConfig()
        self.on_tick = on_tick
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._address: Address | None = None
        self._clock: Callable[[], float] = time.monotonic
        self._tasks: list[asyncio.Task[None]] = []
        self._t0 = 0.0
        factor = self.config.source_rate_factor
        rate = core.config.rate_limit
        self.source_limiter = (
            None if factor is None
            else SourceRateLimiter(rate.packets_per_s * factor, rate.packet_burst * factor, self.config.max_sources)
        )
        self.receive_buffer: ReceiveBuffer | None = None
        self.socket_stats_at_stop: UdpSocketStats | None = None
        self.datagrams_received = 0
        self.bytes_received = 0
        self.datagrams_sent = 0
        self.bytes_sent = 0
        self.source_limited = 0
        self.wakeups = 0
        self.read_errors = 0
        self.skipped_ticks = 0
        self.send_errors = 0

    @property
    def address(self) -> Address:
        """The bound (host, port)."""
        if self._address is None:
            raise RuntimeError("server not started")
        return self._address

    @property
    def socket(self) -> socket.socket | None:
        """The server's UDP socket while it runs (None before start and after stop)."""
        return self._sock

    def now_s(self) -> float:
        """Server time (s): seconds since start on the loop's monotonic clock."""
        return asyncio.get_running_loop().time() - self._t0

    async def start(self) -> None:
        """Bind the socket, size its receive buffer and start reading it and the tick task."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.config.host, self.config.port, type=socket.SOCK_DGRAM,
                                       flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            # Sized before bind: nothing can arrive (and be dropped) before the buffer is large.
            self.receive_buffer = size_receive_buffer(sock, self.config.receive_buffer_bytes)
            sock.bind(sockaddr)
            host, port = sock.getsockname()[:2]
            loop.add_reader(sock.fileno(), self._on_readable)
        except BaseException:
            sock.close()
            raise
        self._sock, self._loop, self._address = sock, loop, (host, port)
        self._clock = loop.time
        self._t0 = loop.time() - self.core.time_s
        self._tasks = []
        if self.config.run_ticks:
            self._tasks.append(asyncio.create_task(self._tick_loop()))
        log.info("serving %s on %s:%d at %d Hz", self.core.map.name, host, port, self.core.config.tick_rate_hz)

    async def stop(self) -> None:
        """Stop the tasks and close the socket (the core stays usable for reports; the kernel's
        last figures for the socket stay in :meth:`stats`)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        sock, self._sock = self._sock, None
        if sock is not None:
            self.socket_stats_at_stop = udp_socket_stats(sock)
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()

    async def __aenter__(self) -> UdpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def run_for(self, duration_s: float) -> None:
        """Serve for ``duration_s`` seconds of real time."""
        async with self:
            await asyncio.sleep(duration_s)

    def kernel_stats(self) -> UdpSocketStats | None:
        """The kernel's figures for the socket now (its last ones after :meth:`stop`; None where
        ``/proc/net/udp`` is not available)."""
        return udp_socket_stats(self._sock) if self._sock is not None else self.socket_stats_at_stop

    def stats(self) -> dict[str, Any]:
        """The transport's counters and the socket's kernel figures, plain: datagrams read,
        dropped by the source limit, read wake-ups, errors, skipped ticks, the receive buffer
        (asked and effective, bytes) and the kernel's ``drops`` and queued bytes."""
        kernel = self.kernel_stats()
        buf = self.receive_buffer
        return {
            "datagrams_received": self.datagrams_received,
            "bytes_received": self.bytes_received,
            "datagrams_sent": self.datagrams_sent,
            "bytes_sent": self.bytes_sent,
            "source_limited": self.source_limited,
            "wakeups": self.wakeups,
            "read_errors": self.read_errors,
            "skipped_ticks": self.skipped_ticks,
            "send_errors": self.send_errors,
            "rcvbuf_asked_bytes": None if buf is None else buf.asked_bytes,
            "rcvbuf_bytes": None if buf is None else buf.effective_bytes,
            "rcvbuf_capped": None if buf is None else buf.capped,
            "kernel_drops": None if kernel is None else kernel.drops,
            "kernel_queued_bytes": None if kernel is None else kernel.rx_queue_bytes,
        }

    def _send_all(self, out: list[tuple[Address, bytes]]) -> None:
        sock = self._sock
        if sock is None:
            return
        self.datagrams_sent += len(out)
        self.bytes_sent += sum([len(data) for _, data in out])
        for addr, data in out:
            try:
                sock.sendto(data, addr)
            except OSError:  # a full send buffer (BlockingIOError) included: a game drops, never queues
                self.send_errors += 1

    def _on_readable(self) -> None:
        """Read until the socket is empty or ``reads_per_wakeup`` datagrams were read; each passes
        the per-source limit, then goes to the core."""
        sock = self._sock
        if sock is None:
            return
        recvfrom = sock.recvfrom
        receive = self.core.receive
        clock, t0 = self._clock, self._t0
        perf_counter = time.perf_counter
        limiter = self.source_limiter
        allow = limiter.allow if limiter is not None else None
        budget = self.config.reads_per_wakeup
        # One time for the whole batch: every datagram read now was already waiting when the loop
        # woke (uvloop's clock is cached per loop iteration anyway), and at one time a refused
        # source stays refused (no refill), which lets a flood's datagrams skip the limiter.
        now = clock() - t0
        # The honest players' tick comes first: reading stops when it is due (checked every
        # _DEADLINE_EVERY reads), and a host short of CPU makes the kernel drop the excess
        # instead of making every tick late.
        deadline = perf_counter() + (self.core.next_tick_s() - now) if self.config.run_ticks else math.inf
        refused: object = None
        n = limited = errors = size = 0
        while n < budget:
            if not n % _DEADLINE_EVERY and n and perf_counter() >= deadline:
                break
            try:
                data, addr = recvfrom(READ_SIZE_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                # An ICMP error queued on the socket (a client's port gone): not a datagram.
                errors += 1
                log.debug("receive error: %s", exc)
                n += 1  # counts against the budget, so an error storm cannot hold the loop
                continue
            n += 1
            size += len(data)
            if addr == refused:
                limited += 1
                continue
            if len(addr) != 2:
                addr = (addr[0], addr[1])  # IPv6: (host, port, flowinfo, scope_id)
            if allow is not None and not allow(addr, now):
                refused = addr
                limited += 1
                continue
            replies = receive(addr, data, now)
            if replies:
                self._send_all(replies)
        self.wakeups += 1
        self.datagrams_received += n - errors
        self.bytes_received += size
        self.read_errors += errors
        if limited:
            self.source_limited += limited
            self.core.rejections["rate_source"] += limited

    async def _tick_loop(self) -> None:
        core, dt = self.core, self.core.tick_dt_s
        while True:
            now = self.now_s()
            due = core.next_tick_s()
            if now < due:
                await asyncio.sleep(due - now)
                continue
            late = int((now - due) / dt)
            if late > self.config.max_catchup_ticks:
                # Drop the backlog of ticks instead of running them all: time jumps, counted.
                skip = late - self.config.max_catchup_ticks
                core.tick += skip
                self.skipped_ticks += skip
            self._send_all(core.step(core.next_tick_s()))
            if self.on_tick is not None:
                self.on_tick(core)
            await asyncio.sleep(0)
