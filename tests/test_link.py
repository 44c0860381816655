"""Link emulator core (virtual time) and the loopback UDP proxy (real time, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import struct
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable

import asyncio_dgram
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncio_dgram.aio import DatagramStream

from testbed.link import GilbertElliott, Link, LinkConfig, LinkPair, PathConfig
from testbed.link_proxy import Address, LinkProxy, ProxyConfig

_IDX = struct.Struct("!I")


def _packets(n: int, spacing_s: float, start_s: float = 0.0) -> list[tuple[float, bytes]]:
    return [(start_s + i * spacing_s, _IDX.pack(i)) for i in range(n)]


def simulate(link: Link, sends: Iterable[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """Run a virtual-time schedule: deliveries before each send are drained first.

    Returns (delivery time s, payload) in delivery order; the delivery time is read from
    ``next_due_s`` just as a virtual-time scheduler would jump to it.
    """
    out: list[tuple[float, bytes]] = []

    def drain(until_s: float) -> None:
        while (t := link.next_due_s()) is not None and t <= until_s:
            out.extend((t, p) for p in link.due(t))

    for send_s, payload in sends:
        drain(send_s)
        link.submit(payload, send_s)
    drain(float("inf"))
    return out


def _index(payload: bytes) -> int:
    return _IDX.unpack(payload)[0]


def _delays(sends: list[tuple[float, bytes]], delivered: list[tuple[float, bytes]]) -> np.ndarray:
    sent_at = {p: t for t, p in sends}
    return np.array([t - sent_at[p] for t, p in delivered])


# ---------------------------------------------------------------- core, virtual time


def test_loss_rate_within_one_percent() -> None:
    link = Link(LinkConfig(loss=0.1), np.random.default_rng(1))
    sends = _packets(20_000, 0.001)
    delivered = simulate(link, sends)
    lost = 1.0 - len(delivered) / len(sends)
    assert lost == pytest.approx(0.1, abs=0.01)
    stats = link.stats()
    assert stats.dropped == len(sends) - len(delivered)
    assert stats.delivered == len(delivered) and stats.in_flight == 0


def test_latency_exact_without_jitter() -> None:
    link = Link(LinkConfig(latency_ms=37.5), np.random.default_rng(2))
    sends = _packets(200, 0.0073, start_s=12.0)
    delays = _delays(sends, simulate(link, sends))
    assert len(delays) == 200
    np.testing.assert_allclose(delays, 0.0375, atol=1e-12)


@pytest.mark.parametrize("distribution", ["normal", "pareto_normal"])
def test_block_draws_are_numpys_per_packet_draws(distribution: str) -> None:
    """The link draws ahead in blocks; the schedule is the one of numpy's per-packet calls
    (random(4), standard_normal(2) [, pareto(5, 2)]), exactly, across block boundaries."""
    cfg = LinkConfig(latency_ms=50.0, jitter_ms=10.0, jitter_distribution=distribution, loss=0.3,  # type: ignore[arg-type]
                     duplicate=0.25, preserve_order=False)
    sends = _packets(3 * 256 + 7, 0.001)
    got = simulate(Link(cfg, np.random.default_rng(12)), sends)
    ref = np.random.default_rng(12)
    expected: list[tuple[float, int, bytes]] = []
    for send_s, payload in sends:
        u_loss, u_dup, _, _ = ref.random(4).tolist()
        normal = ref.standard_normal(2)
        if distribution == "pareto_normal":
            pareto = (ref.pareto(5.0, 2) - 0.25) / math.sqrt(5.0 / (16.0 * 3.0))
            normal = math.sqrt(0.25) * normal + math.sqrt(0.75) * pareto
        noise = normal.tolist()
        if u_loss < 0.3:
            continue
        for copy in ((0,) if u_dup >= 0.25 else (0, 1)):
            expected.append((send_s + max(0.0, 50.0 / 1000.0 + 10.0 / 1000.0 * noise[copy]), len(expected), payload))
    expected.sort()
    assert got == [(t, p) for t, _, p in expected]


@pytest.mark.parametrize("distribution", ["normal", "pareto_normal"])
def test_jitter_has_configured_stddev(distribution: str) -> None:
    cfg = LinkConfig(latency_ms=100.0, jitter_ms=10.0, jitter_distribution=distribution)  # type: ignore[arg-type]
    link = Link(cfg, np.random.default_rng(3))
    # 200 ms apart: far beyond the spread, so the FIFO clamp never bites and we see raw noise.
    sends = _packets(5000, 0.2)
    delays = _delays(sends, simulate(link, sends)) * 1000.0
    assert statistics.fmean(delays) == pytest.approx(100.0, abs=1.0)
    assert float(np.std(delays)) == pytest.approx(10.0, rel=0.15)
    assert delays.min() >= 0.0
    skew = float(np.mean((delays - delays.mean()) ** 3) / np.std(delays) ** 3)
    assert (skew > 1.0) == (distribution == "pareto_normal")  # the heavy right tail is there


@pytest.mark.parametrize("distribution", ["normal", "pareto_normal"])
def test_jitter_never_gives_negative_delay(distribution: str) -> None:
    cfg = LinkConfig(latency_ms=2.0, jitter_ms=10.0, jitter_distribution=distribution, preserve_order=False)  # type: ignore[arg-type]
    link = Link(cfg, np.random.default_rng(4))
    sends = _packets(3000, 0.001)
    delays = _delays(sends, simulate(link, sends))
    assert delays.min() >= 0.0
    assert (delays == 0.0).sum() > 100  # the clip at zero is actually exercised


def test_fifo_preserved_without_reorder() -> None:
    cfg = LinkConfig(latency_ms=50.0, jitter_ms=20.0)
    sends = _packets(3000, 0.001)
    order = [_index(p) for _, p in simulate(Link(cfg, np.random.default_rng(5)), sends)]
    assert order == sorted(order) and len(order) == 3000
    # The same jitter without the FIFO rule does reorder: the rule is what keeps order.
    loose = LinkConfig(latency_ms=50.0, jitter_ms=20.0, preserve_order=False)
    order = [_index(p) for _, p in simulate(Link(loose, np.random.default_rng(5)), sends)]
    assert order != sorted(order)


def test_reorder_lets_later_packets_overtake() -> None:
    cfg = LinkConfig(latency_ms=10.0, reorder=0.1, reorder_extra_ms=20.0)
    link = Link(cfg, np.random.default_rng(6))
    sends = _packets(2000, 0.001)
    order = [_index(p) for _, p in simulate(link, sends)]
    assert sorted(order) == list(range(2000))
    overtaken = sum(1 for a, b in zip(order, order[1:]) if a > b)
    assert overtaken > 100
    assert link.stats().reordered == pytest.approx(200, rel=0.2)


def test_duplication_rate() -> None:
    link = Link(LinkConfig(latency_ms=5.0, duplicate=0.05), np.random.default_rng(7))
    sends = _packets(20_000, 0.001)
    delivered = simulate(link, sends)
    stats = link.stats()
    assert stats.duplicated / stats.sent == pytest.approx(0.05, abs=0.01)
    assert len(delivered) == stats.sent + stats.duplicated == stats.delivered
    assert max(Counter(p for _, p in delivered).values()) == 2


def test_burst_loss_matches_stationary_rate_and_bursts() -> None:
    ge = GilbertElliott(p_enter_bad=0.02, p_leave_bad=0.25)
    link = Link(LinkConfig(loss_burst=ge), np.random.default_rng(8))
    sends = _packets(20_000, 0.001)
    got = {_index(p) for _, p in simulate(link, sends)}
    lost = np.array([i not in got for i in range(len(sends))])
    assert lost.mean() == pytest.approx(ge.mean_loss, abs=0.015)
    # Runs of consecutive losses last 1 / p_leave_bad = 4 packets on average (geometric).
    edges = np.flatnonzero(np.diff(np.concatenate(([0], lost.astype(np.int8), [0]))))
    runs = edges[1::2] - edges[::2]
    assert statistics.fmean(runs) == pytest.approx(4.0, rel=0.2)


def test_rate_serializes_packets() -> None:
    # 1250 bytes at 1000 kbit/s = 10 ms on the wire each, then 5 ms propagation.
    link = Link(LinkConfig(latency_ms=5.0, rate_kbit_s=1000.0), np.random.default_rng(9))
    sends = [(0.0, bytes(1250)[:-4] + _IDX.pack(i)) for i in range(5)]
    times = [t for t, _ in simulate(link, sends)]
    np.testing.assert_allclose(times, [0.015, 0.025, 0.035, 0.045, 0.055], atol=1e-12)


def test_queue_limit_drops_and_counts() -> None:
    link = Link(LinkConfig(latency_ms=100.0, queue_limit=10), np.random.default_rng(10))
    for i in range(50):
        link.submit(_IDX.pack(i), 0.0)
    stats = link.stats()
    assert stats.in_flight == 10 and stats.overflowed == 40
    assert [_index(p) for p in link.due(1.0)] == list(range(10))


def _schedule(seed: int) -> list[tuple[float, bytes]]:
    cfg = LinkConfig(latency_ms=30.0, jitter_ms=8.0, loss=0.05, duplicate=0.02, reorder=0.05)
    return simulate(Link(cfg, np.random.default_rng(seed)), _packets(2000, 0.002))


def test_same_seed_same_schedule_and_different_seeds_differ() -> None:
    assert _schedule(42) == _schedule(42)
    assert _schedule(42) != _schedule(43)


def test_next_due_and_due_boundaries() -> None:
    link = Link(LinkConfig(latency_ms=10.0), np.random.default_rng(11))
    assert link.next_due_s() is None and link.due(100.0) == []
    link.submit(b"a", 1.0)
    assert link.next_due_s() == pytest.approx(1.01)
    assert link.due(1.0099) == []
    assert link.due(1.01) == [b"a"]
    with pytest.raises(ValueError):
        link.submit(b"b", float("nan"))


def test_pair_directions_are_independent_streams() -> None:
    path = PathConfig.from_ping(300.0, jitter_ms=5.0, loss=0.1)
    assert path.uplink.latency_ms == path.downlink.latency_ms == 150.0
    a, b = LinkPair.from_seed(path, 5), LinkPair.from_seed(path, 5)
    sends = _packets(500, 0.01)
    up_a = simulate(a.uplink, sends)
    # Traffic on b's downlink must not change b's uplink decisions.
    simulate(b.downlink, _packets(300, 0.003))
    assert simulate(b.uplink, sends) == up_a
    assert simulate(a.downlink, sends) != up_a
    assert a.next_due_s() is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"latency_ms": -1.0},
        {"latency_ms": float("nan")},
        {"jitter_ms": float("inf")},
        {"loss": 1.5},
        {"loss": -0.1},
        {"duplicate": 2.0},
        {"reorder": float("nan")},
        {"reorder_extra_ms": -5.0},
        {"rate_kbit_s": 0.0},
        {"queue_limit": 0},
        {"jitter_distribution": "uniform"},
        {"loss": 0.1, "loss_burst": GilbertElliott(0.1, 0.5)},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LinkConfig(**kwargs)  # type: ignore[arg-type]


def test_config_from_mapping() -> None:
    cfg = LinkConfig.from_mapping({"latency_ms": 20, "loss_burst": {"p_enter_bad": 0.01, "p_leave_bad": 0.5}})
    assert cfg.loss_burst == GilbertElliott(0.01, 0.5)
    assert cfg.mean_loss == pytest.approx(0.01 / 0.51)
    with pytest.raises(ValueError, match="unknown"):
        LinkConfig.from_mapping({"latency": 20})
    with pytest.raises(ValueError):
        GilbertElliott(p_enter_bad=1.2, p_leave_bad=0.5)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    loss=st.floats(0.0, 0.5),
    duplicate=st.floats(0.0, 0.5),
    jitter_ms=st.floats(0.0, 50.0),
    queue_limit=st.integers(1, 50),
    n=st.integers(0, 300),
)
def test_accounting_and_fifo_invariants(
    seed: int, loss: float, duplicate: float, jitter_ms: float, queue_limit: int, n: int
) -> None:
    cfg = LinkConfig(latency_ms=20.0, jitter_ms=jitter_ms, loss=loss, duplicate=duplicate, queue_limit=queue_limit)
    link = Link(cfg, np.random.default_rng(seed))
    delivered = simulate(link, _packets(n, 0.0005))
    s = link.stats()
    assert s.sent - s.dropped + s.duplicated - s.overflowed == s.delivered + s.in_flight
    assert s.delivered == len(delivered) and s.in_flight == 0
    times = [t for t, _ in delivered]
    assert times == sorted(times)
    order = [_index(p) for _, p in delivered]
    assert order == sorted(order)


# ---------------------------------------------------------------- proxy, real UDP on loopback


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[tuple[Address, list[Address]]]:
    """A UDP echo server on 127.0.0.1; yields its address and the sources it has seen."""
    server = await asyncio_dgram.bind(("127.0.0.1", 0))
    sources: list[Address] = []

    async def serve() -> None:
        while True:
            try:
                data, addr = await server.recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError:
                continue
            sources.append((addr[0], addr[1]))
            await server.send(data, addr)

    task = asyncio.create_task(serve())
    try:
        yield server.sockname[:2], sources
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.close()


async def _ping(
    client: DatagramStream, count: int, spacing_s: float, quiet_s: float, to: Address | None = None
) -> tuple[dict[int, float], dict[int, float]]:
    """Send ``count`` numbered requests (to ``to`` if the socket is unconnected); return send
    and first-reply times (loop clock, s) by request number."""
    loop = asyncio.get_running_loop()
    sent: dict[int, float] = {}
    got: dict[int, float] = {}

    async def receive() -> None:
        while True:
            data, _ = await client.recv()
            got.setdefault(_index(data), loop.time())

    rx = asyncio.create_task(receive())
    try:
        for i in range(count):
            sent[i] = loop.time()
            if to is None:
                await client.send(_IDX.pack(i))  # type: ignore[call-arg]
            else:
                await client.send(_IDX.pack(i), to)  # type: ignore[call-arg]
            await asyncio.sleep(spacing_s)
        await asyncio.sleep(quiet_s)
    finally:
        rx.cancel()
        await asyncio.gather(rx, return_exceptions=True)
    return sent, got


async def test_proxy_rtt_is_twice_one_way_latency() -> None:
    async with echo_server() as (server_addr, _):
        config = ProxyConfig(upstream=server_addr, default=PathConfig.from_ping(100.0), seed=1)
        async with LinkProxy(config) as proxy:
            client = await asyncio_dgram.connect(proxy.address)
            sent, got = await _ping(client, 40, 0.01, 0.2)
            client.close()
    assert len(got) == 40
    rtts = [got[i] - sent[i] for i in got]
    assert min(rtts) >= 0.099  # never early: delivery waits for next_due_s
    assert statistics.median(rtts) == pytest.approx(0.100, abs=0.02)
    assert max(rtts) < 0.150


async def test_proxy_loss_each_direction_independent() -> None:
    p = 0.2
    async with echo_server() as (server_addr, seen):
        config = ProxyConfig(upstream=server_addr, default=PathConfig.symmetric(LinkConfig(loss=p)), seed=2)
        async with LinkProxy(config) as proxy:
            client = await asyncio_dgram.connect(proxy.address)
            sent, got = await _ping(client, 500, 0.0005, 0.2)
            client.close()
            (stats,) = proxy.stats().clients.values()
    # A reply needs both legs to survive: delivered fraction (1 - p)^2 = 0.64.
    assert len(got) / len(sent) == pytest.approx((1 - p) ** 2, abs=0.07)
    assert stats.uplink.sent == 500
    assert stats.uplink.dropped / stats.uplink.sent == pytest.approx(p, abs=0.06)
    assert stats.downlink.dropped / stats.downlink.sent == pytest.approx(p, abs=0.06)
    assert len(seen) == stats.uplink.delivered == stats.downlink.sent
    assert len(got) == stats.downlink.delivered


async def test_proxy_two_clients_get_own_sockets_and_configs() -> None:
    async with echo_server() as (server_addr, seen):
        # Unconnected client sockets: their addresses are known before the proxy exists.
        a = await asyncio_dgram.bind(("127.0.0.1", 0))
        b = await asyncio_dgram.bind(("127.0.0.1", 0))
        # a by first-seen index, b by its address: both kinds of key are exercised.
        per_client = {0: PathConfig.from_ping(20.0), b.sockname[:2]: PathConfig.from_ping(120.0)}
        config = ProxyConfig(upstream=server_addr, default=PathConfig.from_ping(400.0), seed=3)
        async with LinkProxy(config, per_client) as proxy:
            sent_a, got_a = await _ping(a, 10, 0.005, 0.05, to=proxy.address)
            sent_b, got_b = await _ping(b, 10, 0.005, 0.17, to=proxy.address)
            stats = proxy.stats()
            proxy_addr = proxy.address
        a.close()
        b.close()
    rtt_a = statistics.median(got_a[i] - sent_a[i] for i in got_a)
    rtt_b = statistics.median(got_b[i] - sent_b[i] for i in got_b)
    assert len(got_a) == len(got_b) == 10
    assert rtt_a == pytest.approx(0.020, abs=0.015)
    assert rtt_b == pytest.approx(0.120, abs=0.02)
    upstreams = {c.upstream_address for c in stats.clients.values()}
    assert len(upstreams) == 2 and set(seen) == upstreams
    assert proxy_addr not in upstreams
    assert sorted(c.index for c in stats.clients.values()) == [0, 1]


async def test_proxy_bounds_flood_per_link() -> None:
    async with echo_server() as (server_addr, seen):
        path = PathConfig.symmetric(LinkConfig(latency_ms=150.0, queue_limit=10))
        async with LinkProxy(ProxyConfig(upstream=server_addr, default=path)) as proxy:
            client = await asyncio_dgram.connect(proxy.address)
            for i in range(100):
                await client.send(_IDX.pack(i))
            await asyncio.sleep(0.45)
            (stats,) = proxy.stats().clients.values()
            client.close()
    assert stats.uplink.sent == 100
    assert stats.uplink.overflowed == 90
    assert len(seen) == 10


async def test_proxy_rejects_clients_beyond_max() -> None:
    async with echo_server() as (server_addr, _):
        async with LinkProxy(ProxyConfig(upstream=server_addr, max_clients=1)) as proxy:
            a = await asyncio_dgram.connect(proxy.address)
            b = await asyncio_dgram.connect(proxy.address)
            await a.send(b"a")
            await asyncio.sleep(0.02)
            await b.send(b"b")
            reply, _ = await asyncio.wait_for(a.recv(), 1.0)
            await asyncio.sleep(0.05)
            stats = proxy.stats()
            a.close()
            b.close()
    assert reply == b"a"
    assert len(stats.clients) == 1 and stats.rejected == 1


def test_proxy_refuses_non_loopback_listen() -> None:
    with pytest.raises(ValueError, match="loopback"):
        ProxyConfig(upstream=("127.0.0.1", 9), listen=("0.0.0.0", 0))


async def test_proxy_stop_is_clean_and_restart_refused() -> None:
    t0 = time.monotonic()
    async with echo_server() as (server_addr, _):
        proxy = LinkProxy(ProxyConfig(upstream=server_addr, default=PathConfig.from_ping(1000.0)))
        async with proxy:
            client = await asyncio_dgram.connect(proxy.address)
            await client.send(b"in flight at stop")
            await asyncio.sleep(0.02)
            with pytest.raises(RuntimeError):
                await proxy.start()
            client.close()
        with pytest.raises(RuntimeError):
            _ = proxy.address
        with pytest.raises(RuntimeError):
            await proxy.start()
        assert proxy.stats().clients  # counters outlive the sockets
    assert time.monotonic() - t0 < 0.5


async def test_proxy_survives_server_not_listening() -> None:
    probe = await asyncio_dgram.bind(("127.0.0.1", 0))
    dead: Address = probe.sockname[:2]
    probe.close()  # nothing listens there now: the kernel answers with ICMP port unreachable
    async with LinkProxy(ProxyConfig(upstream=dead)) as proxy:
        client = await asyncio_dgram.connect(proxy.address)
        for _ in range(4):
            await client.send(b"anyone?")
            await asyncio.sleep(0.02)
        (stats,) = proxy.stats().clients.values()
        client.close()
        assert all(not t.done() for t in proxy._tasks)  # noqa: SLF001 - the tasks must still run
    assert stats.uplink.delivered == 4
    # The ICMP errors surface on the next operation on that socket and are counted, not raised.
    assert stats.recv_errors + stats.send_errors >= 1
