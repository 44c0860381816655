"""A loopback UDP proxy that puts an emulated impaired link between clients and a real server.

Clients send to the proxy instead of the server. For every new client address the proxy opens
its own upstream socket connected to the server, so the server sees one distinct source per
client (as it would without the proxy), and gives that client a ``LinkPair``: datagrams
client -> server go through its uplink, replies server -> client through its downlink.

Timing: ``loop.time()`` (seconds) is the links' clock; one delivery task sleeps until the
earliest ``next_due_s`` of all clients and is woken early when a new packet is due sooner.
Accuracy is the event loop's timer resolution (about 1 ms with the selector loop).

Memory is bounded by each link's ``queue_limit`` (excess is dropped and counted) and by
``max_clients`` (datagrams from further source addresses are dropped and counted). The
receive queues inside asyncio-dgram are unbounded, but they are drained continuously by the
receive tasks, so they only hold what arrived since the last loop iteration.

Binds to loopback only: this is a lab tool, never a service.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType

import asyncio_dgram
import numpy as np
from asyncio_dgram.aio import DatagramClient, DatagramServer

from testbed.link import LinkPair, LinkStats, PathConfig

logger = logging.getLogger(__name__)

Address = tuple[str, int]
ClientConfigs = Mapping[Address | int, PathConfig] | Callable[[Address, int], PathConfig | None]
"""Per-client path configs: a mapping keyed by client address or by first-seen index
(0 for the first client), or a callable ``(address, index) -> PathConfig | None``.
A miss (missing key or None) falls back to the proxy's default path."""


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Where the proxy listens and forwards.

    Attributes:
        upstream: the real server's (host, port).
        default: path impairments for clients without a per-client config.
        listen: (host, port) the proxy binds; the host must be a loopback address; port 0
            picks a free port (read it back from ``LinkProxy.address``).
        seed: root seed; each client's ``LinkPair`` gets a generator spawned from it in
            first-seen order, so a run with the same clients in the same order repeats.
        max_clients: distinct client addresses served; datagrams from more are dropped.
    """

    upstream: Address
    default: PathConfig = field(default_factory=PathConfig)
    listen: Address = ("127.0.0.1", 0)
    seed: int = 0
    max_clients: int = 256

    def __post_init__(self) -> None:
        host = self.listen[0]
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"listen host must be a loopback address literal, got {host!r}")
        if self.max_clients < 1:
            raise ValueError(f"max_clients must be >= 1, got {self.max_clients!r}")


@dataclass(frozen=True, slots=True)
class ClientStats:
    """Counters of one client's path.

    Attributes:
        address: the client's (host, port) as seen by the proxy.
        index: first-seen order (0 for the first client).
        upstream_address: local (host, port) of this client's upstream socket, i.e. the source
            the server sees.
        uplink: client -> server link counters.
        downlink: server -> client link counters.
        send_errors: send attempts that raised (either direction), stale ICMP errors included;
            a datagram is retried once, so this is not the count of datagrams lost.
        recv_errors: errors reported on the upstream socket (e.g. ICMP port unreachable).
    """

    address: Address
    index: int
    upstream_address: Address
    uplink: LinkStats
    downlink: LinkStats
    send_errors: int
    recv_errors: int


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """Counters of the whole proxy.

    Attributes:
        clients: per-client counters keyed by client address.
        rejected: datagrams dropped because ``max_clients`` was reached.
        listen_errors: errors reported on the listening socket.
    """

    clients: dict[Address, ClientStats]
    rejected: int
    listen_errors: int


class _Client:
    """Mutable per-client state owned by one proxy."""

    __slots__ = ("address", "index", "pair", "upstream", "upstream_address", "pump", "send_errors", "recv_errors")

    def __init__(self, address: Address, index: int, pair: LinkPair, upstream: DatagramClient) -> None:
        self.address = address
        self.index = index
        self.pair = pair
        self.upstream = upstream
        host, port = upstream.sockname[:2]
        self.upstream_address: Address = (host, port)
        self.pump: asyncio.Task[None] | None = None
        self.send_errors = 0
        self.recv_errors = 0


class LinkProxy:
    """Asyncio UDP proxy emulating a ``LinkPair`` per client; use as an async context manager.

    ``async with LinkProxy(ProxyConfig(upstream=server_addr)) as proxy:`` then point clients
    at ``proxy.address``. Packets still in flight when the proxy stops are discarded; ``stats``
    stays readable after stop. A proxy runs once.
    """

    def __init__(self, config: ProxyConfig, per_client: ClientConfigs | None = None) -> None:
        self._config = config
        self._per_client = per_client
        self._seed_rng = np.random.default_rng(config.seed)
        self._clients: dict[Address, _Client] = {}
        self._listen: DatagramServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._wake_at_s = math.inf
        self._rejected = 0
        self._listen_errors = 0
        self._started = False

    async def __aenter__(self) -> LinkProxy:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def address(self) -> Address:
        """The (host, port) clients should send to."""
        if self._listen is None:
            raise RuntimeError("proxy not started")
        host, port = self._listen.sockname[:2]
        return host, port

    async def start(self) -> None:
        """Bind the listening socket and start the receive and delivery tasks."""
        # One run per proxy: stop closes the clients' sockets, while their stats stay readable.
        if self._started:
            raise RuntimeError("a LinkProxy can be started only once")
        self._started = True
        self._listen = await asyncio_dgram.bind(self._config.listen)
        self._tasks = [
            asyncio.create_task(self._receive_clients(), name="link-proxy-listen"),
            asyncio.create_task(self._deliver(), name="link-proxy-deliver"),
        ]
        logger.info("link proxy on %s -> %s", self.address, self._config.upstream)

    async def stop(self) -> None:
        """Stop all tasks and close every socket; in-flight packets are discarded."""
        tasks = self._tasks + [c.pump for c in self._clients.values() if c.pump is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        for client in self._clients.values():
            client.pump = None
            client.upstream.close()
        if self._listen is not None:
            self._listen.close()
            self._listen = None

    def stats(self) -> ProxyStats:
        """A snapshot of every client's counters and the proxy's own."""
        clients = {
            c.address: ClientStats(
                address=c.address,
                index=c.index,
                upstream_address=c.upstream_address,
                uplink=c.pair.uplink.stats(),
                downlink=c.pair.downlink.stats(),
                send_errors=c.send_errors,
                recv_errors=c.recv_errors,
            )
            for c in self._clients.values()
        }
        return ProxyStats(clients=clients, rejected=self._rejected, listen_errors=self._listen_errors)

    def _path_for(self, address: Address, index: int) -> PathConfig:
        source = self._per_client
        path: PathConfig | None = None
        if source is None:
            path = None
        elif isinstance(source, Mapping):
            path = source.get(address, source.get(index))
        else:
            path = source(address, index)
        return self._config.default if path is None else path

    async def _client_for(self, address: Address) -> _Client | None:
        client = self._clients.get(address)
        if client is not None:
            return client
        if len(self._clients) >= self._config.max_clients:
            return None
        index = len(self._clients)
        path = self._path_for(address, index)
        (rng,) = self._seed_rng.spawn(1)
        upstream = await asyncio_dgram.connect(self._config.upstream)
        client = _Client(address, index, LinkPair(path, rng), upstream)
        self._clients[address] = client
        client.pump = asyncio.create_task(self._receive_server(client), name=f"link-proxy-up-{index}")
        logger.info("link proxy client %d %s via %s: %s", index, address, upstream.sockname, path)
        return client

    def _poke(self, due_s: float | None) -> None:
        # Wake the delivery task only when the new packet is due before its planned wake-up.
        if due_s is not None and due_s < self._wake_at_s:
            self._wake.set()

    async def _receive_clients(self) -> None:
        assert self._listen is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, address = await self._listen.recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError as exc:
                # ICMP errors from a vanished client surface here; they must not stop the proxy.
                self._listen_errors += 1
                logger.debug("link proxy listen error: %s", exc)
                continue
            address = (address[0], address[1])
            client = await self._client_for(address)
            if client is None:
                self._rejected += 1
                continue
            client.pair.uplink.submit(data, loop.time())
            self._poke(client.pair.uplink.next_due_s())

    async def _receive_server(self, client: _Client) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, _ = await client.upstream.recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError as exc:
                # Usually "connection refused" while the server is not up yet: keep going.
                client.recv_errors += 1
                logger.debug("link proxy upstream error for %s: %s", client.address, exc)
                continue
            client.pair.downlink.submit(data, loop.time())
            self._poke(client.pair.downlink.next_due_s())

    async def _send(self, client: _Client, send: Callable[..., Awaitable[None]], *args: object) -> None:
        # asyncio-dgram raises a *stale* queued error (e.g. an earlier ICMP port unreachable)
        # before sending, without sending: one retry sends this datagram; a second failure
        # is counted and the datagram is lost, as it would be on a real network.
        for attempt in range(2):
            try:
                await send(*args)
                return
            except OSError as exc:
                client.send_errors += 1
                if attempt:
                    logger.debug("link proxy send for %s failed: %s", client.address, exc)

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        listen = self._listen
        assert listen is not None
        while True:
            # Cleared before the sweep, and any submission during it (a send may yield) sets
            # it again, so nothing that arrives mid-sweep waits for a later timer.
            self._wake.clear()
            self._wake_at_s = math.inf
            now = loop.time()
            earliest = math.inf
            for client in list(self._clients.values()):
                for payload in client.pair.uplink.due(now):
                    await self._send(client, client.upstream.send, payload)
                for payload in client.pair.downlink.due(now):
                    await self._send(client, listen.send, payload, client.address)
                next_s = client.pair.next_due_s()
                if next_s is not None and next_s < earliest:
                    earliest = next_s
            self._wake_at_s = earliest
            if earliest == math.inf:
                await self._wake.wait()
                continue
            handle = loop.call_at(earliest, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                handle.cancel()
