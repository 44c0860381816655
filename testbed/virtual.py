"""Virtual time: the sans-IO server core and bot clients in one process, over emulated links.

DESIGN principle 2 (one core, two clocks): nothing here touches a socket. One event heap keyed
by ``(time_s, priority, sequence)`` drives three kinds of events:

* packet deliveries: each bot has a ``LinkPair`` (uplink bot -> server, downlink server -> bot);
  a datagram is ``submit``-ted when sent and handed over at its ``due`` time, exactly;
* server ticks at the core's ``next_tick_s()`` (exact multiples of the tick duration);
* bot steps at each client's own ``next_step_s`` (its client tick, phase-shifted per bot).

At one instant, deliveries come first (a packet that arrives at tick time is read by that tick,
as a real server drains its socket before simulating), then the server tick, then bot steps;
ties within a priority keep the order they were scheduled in. Every input to the order is
deterministic, so the same seed gives the same run, byte for byte. The clock jumps from event to
event: the simulation runs as fast as the CPU allows.

Units: seconds of virtual time throughout (the server's clock and every client's clock are the
same virtual clock, starting at 0).
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from testbed.link import LinkPair, LinkStats, PathConfig

__all__ = [
    "Address",
    "ClientEndpoint",
    "ServerEndpoint",
    "VirtualNetwork",
    "VirtualProgress",
    "VirtualStats",
    "virtual_address",
]

log = logging.getLogger(__name__)

Address = tuple[str, int]

VIRTUAL_HOST = "127.0.0.1"
VIRTUAL_BASE_PORT = 20000
"""Virtual client addresses are loopback with distinct ports: the server core sees ordinary
addresses, yet no packet ever leaves the process."""

# Event priorities at one instant (smaller first).
_DELIVER_UP = 0
_DELIVER_DOWN = 1
_SERVER_TICK = 2
_CLIENT_START = 3
_CLIENT_STEP = 4


def virtual_address(index: int) -> Address:
    """The address of virtual client ``index``."""
    return (VIRTUAL_HOST, VIRTUAL_BASE_PORT + index)


class ServerEndpoint(Protocol):
    """What the simulation needs of the server core (``server.core.ServerCore``)."""

    def next_tick_s(self) -> float: ...

    def receive(self, addr: Address, datagram: bytes, now_s: float) -> list[tuple[Address, bytes]]: ...

    def step(self, now_s: float) -> list[tuple[Address, bytes]]: ...


class ClientEndpoint(Protocol):
    """What the simulation needs of a bot client (``bots.client.BotClient``)."""

    @property
    def next_step_s(self) -> float | None: ...

    def start(self, now_s: float) -> list[bytes]: ...

    def receive(self, datagram: bytes, now_s: float) -> None: ...

    def step(self, now_s: float) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class VirtualProgress:
    """Where a run is, for progress displays.

    Attributes:
        now_s: virtual time reached (s). until_s: virtual time the run ends at (s).
        wall_s: wall-clock time spent so far (s). ticks: server ticks run.
    """

    now_s: float
    until_s: float
    wall_s: float
    ticks: int

    @property
    def speedup(self) -> float:
        """Simulated seconds per wall second so far."""
        return self.now_s / self.wall_s if self.wall_s > 0 else math.inf


@dataclass(frozen=True, slots=True)
class VirtualStats:
    """Counters of a run.

    Attributes:
        sim_s: virtual time simulated (s). wall_s: wall-clock time it took (s). ticks: server
            ticks. client_steps: bot steps. datagrams_up / datagrams_down: datagrams sent by the
            bots / by the server (before the links). unroutable: server datagrams to an address
            no client has. links: per client index, (uplink, downlink) counters.
    """

    sim_s: float
    wall_s: float
    ticks: int
    client_steps: int
    datagrams_up: int
    datagrams_down: int
    unroutable: int
    links: tuple[tuple[LinkStats, LinkStats], ...]

    @property
    def speedup(self) -> float:
        """Simulated seconds per wall second."""
        return self.sim_s / self.wall_s if self.wall_s > 0 else math.inf


class _Client:
    __slots__ = ("index", "address", "endpoint", "pair", "start_s", "step_at", "up_at", "down_at")

    def __init__(self, index: int, address: Address, endpoint: ClientEndpoint, pair: LinkPair, start_s: float) -> None:
        self.index = index
        self.address = address
        self.endpoint = endpoint
        self.pair = pair
        self.start_s = start_s
        # Earliest pending event per stream; a popped event at another time is stale.
        self.step_at = math.inf
        self.up_at = math.inf
        self.down_at = math.inf


class VirtualNetwork:
    """Runs a server endpoint and client endpoints over emulated links in virtual time.

    Args:
        server: the server core (sans-IO).
        rng: generator for the links; each client's ``LinkPair`` gets a child spawned in the
            order clients are added, so a client's link never depends on another's traffic.
        clock: wall clock for speed measurements only (s); never influences the simulation.
    """

    def __init__(
        self, server: ServerEndpoint, rng: np.random.Generator, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._server = server
        self._rng = rng
        self._clock = clock
        self._clients: list[_Client] = []
        self._by_address: dict[Address, _Client] = {}
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._now_s = 0.0
        self._tick_at = math.inf
        self._ticks = 0
        self._client_steps = 0
        self._up = 0
        self._down = 0
        self._unroutable = 0
        self._wall_s = 0.0

    @property
    def now_s(self) -> float:
        """Current virtual time (s)."""
        return self._now_s

    @property
    def ticks(self) -> int:
        """Server ticks run so far."""
        return self._ticks

    def add_client(
        self, endpoint: ClientEndpoint, path: PathConfig, start_s: float = 0.0, address: Address | None = None
    ) -> Address:
        """Attach a client that will ``start`` at virtual time ``start_s`` (s); returns its address."""
        if not math.isfinite(start_s) or start_s < self._now_s:
            raise ValueError(f"start_s must be finite and not in the past, got {start_s!r}")
        index = len(self._clients)
        addr = address if address is not None else virtual_address(index)
        if addr in self._by_address:
            raise ValueError(f"address {addr!r} already in use")
        (link_rng,) = self._rng.spawn(1)
        client = _Client(index, addr, endpoint, LinkPair(path, link_rng), start_s)
        self._clients.append(client)
        self._by_address[addr] = client
        self._push(start_s, _CLIENT_START, index)
        return addr

    def client_address(self, index: int) -> Address:
        """The address of the client added ``index``-th."""
        return self._clients[index].address

    def link(self, index: int) -> LinkPair:
        """The link pair of the client added ``index``-th."""
        return self._clients[index].pair

    def _push(self, at_s: float, kind: int, index: int) -> None:
        heapq.heappush(self._heap, (at_s, kind, self._seq, index))
        self._seq += 1

    # --- sending --------------------------------------------------------------------------

    def _send_up(self, client: _Client, datagrams: list[bytes], now_s: float) -> None:
        if not datagrams:
            return
        uplink = client.pair.uplink
        for datagram in datagrams:
            uplink.submit(datagram, now_s)
        self._up += len(datagrams)
        due = uplink.next_due_s()
        if due is not None and due < client.up_at:
            client.up_at = due
            self._push(due, _DELIVER_UP, client.index)

    def _send_down(self, out: list[tuple[Address, bytes]], now_s: float) -> None:
        if not out:
            return
        touched: list[_Client] = []
        for addr, datagram in out:
            client = self._by_address.get(addr)
            if client is None:
                self._unroutable += 1
                continue
            client.pair.downlink.submit(datagram, now_s)
            touched.append(client)
        self._down += len(out)
        for client in touched:
            due = client.pair.downlink.next_due_s()
            if due is not None and due < client.down_at:
                client.down_at = due
                self._push(due, _DELIVER_DOWN, client.index)

    def _schedule_step(self, client: _Client) -> None:
        at = client.endpoint.next_step_s
        if at is None:
            return
        # A client asking for a time already past steps now: virtual time never goes back.
        at = max(at, self._now_s)
        if at < client.step_at:
            client.step_at = at
            self._push(at, _CLIENT_STEP, client.index)

    def _schedule_tick(self) -> None:
        at = max(self._server.next_tick_s(), self._now_s)
        if at < self._tick_at:
            self._tick_at = at
            self._push(at, _SERVER_TICK, -1)

    # --- the loop -------------------------------------------------------------------------

    def run(
        self,
        until_s: float,
        progress: Callable[[VirtualProgress], None] | None = None,
        progress_every_s: float = 1.0,
    ) -> VirtualStats:
        """Process every event up to and including virtual time ``until_s`` (s).

        ``progress`` is called every ``progress_every_s`` of virtual time (and at the end).
        May be called again with a later ``until_s`` to continue.
        """
        if not math.isfinite(until_s):
            raise ValueError(f"until_s must be finite, got {until_s!r}")
        server = self._server
        clients = self._clients
        heap = self._heap
        pop = heapq.heappop
        wall_start = self._clock()
        self._schedule_tick()
        next_progress = self._now_s + progress_every_s if progress is not None else math.inf
        last_reported = math.nan
        while heap and heap[0][0] <= until_s:
            at_s, kind, _, index = pop(heap)
            if at_s >= next_progress and progress is not None:
                # Every event before next_progress is done: report that instant, then skip the
                # marks an idle stretch jumped over.
                self._now_s = next_progress
                progress(self._progress(until_s, wall_start))
                last_reported = next_progress
                next_progress += progress_every_s * (math.floor((at_s - next_progress) / progress_every_s) + 1.0)
            self._now_s = at_s
            if kind == _DELIVER_UP:
                client = clients[index]
                if at_s != client.up_at:
                    continue
                uplink = client.pair.uplink
                addr = client.address
                for datagram in uplink.due(at_s):
                    self._send_down(server.receive(addr, datagram, at_s), at_s)
                client.up_at = math.inf
                due = uplink.next_due_s()
                if due is not None:
                    client.up_at = due
                    self._push(due, _DELIVER_UP, index)
            elif kind == _DELIVER_DOWN:
                client = clients[index]
                if at_s != client.down_at:
                    continue
                downlink = client.pair.downlink
                endpoint = client.endpoint
                for datagram in downlink.due(at_s):
                    endpoint.receive(datagram, at_s)
                client.down_at = math.inf
                due = downlink.next_due_s()
                if due is not None:
                    client.down_at = due
                    self._push(due, _DELIVER_DOWN, index)
                # A reply (a handshake step, a snapshot) may change when the client wants to run.
                self._schedule_step(client)
            elif kind == _SERVER_TICK:
                if at_s != self._tick_at:
                    continue
                self._tick_at = math.inf
                self._send_down(server.step(at_s), at_s)
                self._ticks += 1
                self._schedule_tick()
            elif kind == _CLIENT_START:
                client = clients[index]
                self._send_up(client, client.endpoint.start(at_s), at_s)
                self._schedule_step(client)
            else:
                client = clients[index]
                if at_s != client.step_at:
                    continue
                client.step_at = math.inf
                self._client_steps += 1
                self._send_up(client, client.endpoint.step(at_s), at_s)
                self._schedule_step(client)
        self._now_s = max(self._now_s, until_s)
        self._wall_s += self._clock() - wall_start
        if progress is not None and last_reported != self._now_s:
            progress(VirtualProgress(self._now_s, until_s, self._wall_s, self._ticks))
        return self.stats()

    def _progress(self, until_s: float, wall_start: float) -> VirtualProgress:
        return VirtualProgress(self._now_s, until_s, self._wall_s + self._clock() - wall_start, self._ticks)

    def stats(self) -> VirtualStats:
        """Counters so far."""
        return VirtualStats(
            sim_s=self._now_s,
            wall_s=self._wall_s,
            ticks=self._ticks,
            client_steps=self._client_steps,
            datagrams_up=self._up,
            datagrams_down=self._down,
            unroutable=self._unroutable,
            links=tuple((c.pair.uplink.stats(), c.pair.downlink.stats()) for c in self._clients),
        )
