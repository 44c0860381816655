"""The real-time shell around ServerCore: asyncio-dgram sockets and a fixed-timestep tick loop.

Measured facts this follows (REFERENCES 9): stdlib asyncio reads every datagram into a 256 KiB
buffer (~15 us each), so without uvloop the transport's read size is cut to one datagram.
asyncio-dgram binds the socket and sends, but its receive queue (unbounded, and a task switch per
datagram) is bypassed: each datagram goes to the core as it arrives, so nothing waits in user
space, and the core refuses more than ``max_datagrams_per_tick`` datagrams per tick (counted), so
neither memory nor work grows with a flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncio_dgram

from server.core import ServerCore

log = logging.getLogger(__name__)

READ_SIZE_BYTES = 2048
"""Read buffer for one datagram on the stdlib loop (our datagrams are at most 1200 bytes)."""


class _Dispatch(asyncio.DatagramProtocol):
    """Hands each datagram to ``on_datagram`` at once; everything else (errors, connection loss,
    write flow control) goes to asyncio-dgram's own protocol, so its stream keeps working for sends."""

    def __init__(self, inner: asyncio.DatagramProtocol, on_datagram: Callable[[bytes, tuple[str, int]], None]) -> None:
        self.inner = inner
        self.datagram_received = on_datagram  # type: ignore[method-assign]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def error_received(self, exc: Exception) -> None:
        self.inner.error_received(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """Real-time transport settings.

    Attributes:
        host: bind address (127.0.0.1 by default: nothing is exposed unless asked).
        port: UDP port (0 picks a free one).
        max_catchup_ticks: after a stall the loop runs at most this many late ticks back to back,
            then skips the rest (counted) rather than spiralling.
        run_ticks: run the tick loop (False only to measure the receive path alone).
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_catchup_ticks: int = 8
    run_ticks: bool = True


class UdpServer:
    """Runs a ServerCore on a UDP socket in real time. Use as an async context manager or call
    :meth:`start` / :meth:`stop`; :meth:`run_for` runs for a duration."""

    def __init__(self, core: ServerCore, config: TransportConfig | None = None,
                 on_tick: Callable[[ServerCore], None] | None = None) -> None:
        self.core = core
        self.config = config or TransportConfig()
        self.on_tick = on_tick
        self._stream: asyncio_dgram.aio.DatagramServer | None = None
        self._clock: Callable[[], float] = time.monotonic
        self._tasks: list[asyncio.Task[None]] = []
        self._t0 = 0.0
        self.skipped_ticks = 0
        self.send_errors = 0

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        if self._stream is None:
            raise RuntimeError("server not started")
        host, port = self._stream.sockname[:2]
        return host, port

    def now_s(self) -> float:
        """Server time (s): seconds since start on the loop's monotonic clock."""
        return asyncio.get_running_loop().time() - self._t0

    async def start(self) -> None:
        """Bind the socket and start the tick task; datagrams are handled as they arrive."""
        loop = asyncio.get_running_loop()
        self._clock = loop.time
        self._stream = await asyncio_dgram.bind((self.config.host, self.config.port))
        transport = self._stream._transport
        if hasattr(transport, "max_size"):
            transport.max_size = READ_SIZE_BYTES
        self._t0 = loop.time() - self.core.time_s
        # asyncio-dgram queues every datagram for a task to await, which cost more than the
        # server's whole handling of an INPUT, and its queue is unbounded: the datagrams go
        # straight to the core instead, whose per-tick budget bounds the work (nothing is queued,
        # so nothing grows with a flood). Its protocol still gets everything else.
        transport.set_protocol(_Dispatch(transport.get_protocol(), self._on_datagram))
        self._tasks = []
        if self.config.run_ticks:
            self._tasks.append(asyncio.create_task(self._tick_loop()))
        log.info("serving %s on %s:%d at %d Hz", self.core.map.name, *self.address, self.core.config.tick_rate_hz)

    async def stop(self) -> None:
        """Stop the tasks and close the socket (the core stays usable for reports)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._stream is not None:
            self._stream.close()

    async def __aenter__(self) -> UdpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def run_for(self, duration_s: float) -> None:
        """Serve for ``duration_s`` seconds of real time."""
        async with self:
            await asyncio.sleep(duration_s)

    def _send_all(self, out: list[tuple[tuple[str, int], bytes]]) -> None:
        assert self._stream is not None
        transport = self._stream._transport
        for addr, data in out:
            try:
                transport.sendto(data, addr)
            except OSError:
                self.send_errors += 1

    def _on_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        replies = self.core.receive((addr[0], addr[1]), data, self._clock() - self._t0)
        if replies:
            self._send_all(replies)

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
