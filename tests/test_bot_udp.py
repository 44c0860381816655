"""``bots.udp.run_bots``: sans-IO clients over real loopback UDP against a fake server and the
real server core, each behind a small real-time runner."""

from __future__ import annotations

import asyncio
from types import TracebackType

import asyncio_dgram
import numpy as np
import pytest
from test_bot_client import FakeServer, ScriptBrain, make_client, tiny_map

from bots.client import ConnState
from bots.udp import run_bots
from testbed.virtual import ServerEndpoint
from world.geometry import MapGeometry
from world.mapfile import GameMap


@pytest.fixture(scope="module")
def game_map() -> GameMap:
    return tiny_map()


@pytest.fixture(scope="module")
def geometry(game_map: GameMap) -> MapGeometry:
    return MapGeometry(game_map)


class RealTimeServer:
    """A sans-IO server endpoint behind one asyncio-dgram socket on 127.0.0.1, ticking on the
    loop's clock (server time = loop time - start)."""

    def __init__(self, server: ServerEndpoint) -> None:
        self.server = server
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> RealTimeServer:
        loop = asyncio.get_running_loop()
        self.sock = await asyncio_dgram.bind(("127.0.0.1", 0))
        self.address = self.sock.sockname[:2]
        self.origin = loop.time()
        self._tasks = [asyncio.create_task(self._receive()), asyncio.create_task(self._tick())]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.sock.close()

    async def _send(self, out: list[tuple[tuple[str, int], bytes]]) -> None:
        for addr, data in out:
            try:
                await self.sock.send(data, addr)
            except OSError:
                pass

    async def _receive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, addr = await self.sock.recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError:
                continue
            await self._send(self.server.receive((addr[0], addr[1]), data, loop.time() - self.origin))

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            at = self.server.next_tick_s()
            delay = self.origin + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._send(self.server.step(at))


async def test_run_bots_against_fake_server(game_map: GameMap, geometry: MapGeometry) -> None:
    fake = FakeServer(game_map, geometry)
    bots = [make_client(game_map, geometry, ScriptBrain(turn_deg_s=20.0 * (i + 1), fire=True), seed=i + 1) for i in range(3)]
    async with RealTimeServer(fake) as srv:
        stats = await run_bots(srv.address, bots, 1.0)
        await asyncio.sleep(0.05)  # let the DISCONNECTs arrive
    assert len(stats) == 3
    assert {s.slot for s in stats} == {0, 1, 2}
    sessions = list(fake.sessions.values())
    assert len(sessions) == 3 and all(s.disconnected for s in sessions)
    for st, bot in zip(stats, bots):
        assert st.state is ConnState.DISCONNECTED and not bot.connected
        assert st.bad_datagrams == 0 and st.send_errors == 0
        # ~64 ticks in a second, less the handshake; every one sent an INPUT and got a snapshot.
        assert 45 <= st.inputs <= 70 and st.snapshots >= 40
        assert st.pongs >= 1 and st.rtt_s is not None and st.rtt_s < 0.05
    for s in sessions:
        assert len(s.inputs) >= 45
        assert all(v == 0 for _, v, _ in s.verdicts[-20:])  # claims accepted
    assert fake.bad == 0


async def test_run_bots_stops_on_event(game_map: GameMap, geometry: MapGeometry) -> None:
    fake = FakeServer(game_map, geometry)
    bots = [make_client(game_map, geometry, ScriptBrain(), seed=9)]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    async with RealTimeServer(fake) as srv:
        loop.call_later(0.3, stop.set)
        t0 = loop.time()
        stats = await run_bots(srv.address, bots, 5.0, stop=stop)
        elapsed = loop.time() - t0
    assert elapsed < 1.0
    assert stats[0].inputs > 5 and stats[0].state is ConnState.DISCONNECTED


async def test_run_bots_without_a_server_ends_when_handshakes_fail(game_map: GameMap, geometry: MapGeometry) -> None:
    from bots.client import ClientConfig

    # A bound socket that never answers.
    silent = await asyncio_dgram.bind(("127.0.0.1", 0))
    try:
        bot = make_client(game_map, geometry, ScriptBrain(), seed=4,
                          config=ClientConfig(handshake_retry_s=0.1, handshake_timeout_s=0.4))
        stats = await run_bots(silent.sockname[:2], [bot], 3.0)
    finally:
        silent.close()
    assert stats[0].state is ConnState.FAILED and stats[0].handshake_attempts >= 3


async def test_run_bots_gives_up_after_the_connect_timeout(game_map: GameMap, geometry: MapGeometry) -> None:
    """A silent server: NoAnswer once the connect timeout is over, long before the duration or the
    bots' own 30 s handshake timeout; a server that answers is not affected by the timeout."""
    from bots.udp import NoAnswer

    silent = await asyncio_dgram.bind(("127.0.0.1", 0))
    loop = asyncio.get_running_loop()
    bots = [make_client(game_map, geometry, ScriptBrain(), seed=i + 20) for i in range(2)]
    t0 = loop.time()
    try:
        with pytest.raises(NoAnswer, match=r"no answer from 127\.0\.0\.1:\d+ within 0\.[34] s") as caught:
            await run_bots(silent.sockname[:2], bots, 30.0, connect_timeout_s=0.3)
    finally:
        silent.close()
    assert 0.3 <= loop.time() - t0 < 2.0 and caught.value.address == silent.sockname[:2]
    assert all(b.state is ConnState.DISCONNECTED for b in bots)  # handshakes abandoned, sockets closed

    fake = FakeServer(game_map, geometry)
    bot = make_client(game_map, geometry, ScriptBrain(), seed=30)
    async with RealTimeServer(fake) as srv:
        stats = await run_bots(srv.address, [bot], 0.6, connect_timeout_s=0.3)
    assert stats[0].slot is not None and stats[0].inputs > 10


async def test_run_bots_refuses_a_host_that_does_not_resolve(game_map: GameMap, geometry: MapGeometry) -> None:
    from bots.udp import UnresolvedHost

    bot = make_client(game_map, geometry, ScriptBrain(), seed=31)
    with pytest.raises(UnresolvedHost, match="cannot resolve server host 'no.such.host.invalid'"):
        await run_bots(("no.such.host.invalid", 27015), [bot], 5.0, connect_timeout_s=1.0)


async def test_run_bots_against_server_core(game_map: GameMap, geometry: MapGeometry) -> None:
    from server.config import ServerConfig
    from server.core import ServerCore

    core = ServerCore(ServerConfig(), game_map, secret=np.random.default_rng(1).bytes(32), seed=3, geometry=geometry)
    bots = [make_client(game_map, geometry, ScriptBrain(turn_deg_s=30.0, fire=True), seed=i + 1) for i in range(2)]
    async with RealTimeServer(core) as srv:
        stats = await run_bots(srv.address, bots, 1.2)
        await asyncio.sleep(0.05)
    report = core.report()
    assert report["counters"]["connects"] == 2
    assert report["counters"].get("disconnect_client", 0) == 2
    assert report["counters"]["commands_received"] >= 2 * 50
    assert all(st.snapshots >= 40 and st.bad_datagrams == 0 for st in stats)
    assert core.validator.desyncs.sum() == 0
    assert not any(k.startswith("shot_") for k in report["rejections"])


def test_run_bots_on_uvloop(game_map: GameMap, geometry: MapGeometry) -> None:
    uvloop = pytest.importorskip("uvloop")

    async def play() -> list:
        fake = FakeServer(game_map, geometry)
        bots = [make_client(game_map, geometry, ScriptBrain(turn_deg_s=30.0, fire=False), seed=i + 7) for i in range(2)]
        async with RealTimeServer(fake) as srv:
            return await run_bots(srv.address, bots, 0.5)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        stats = runner.run(play())
    assert len(stats) == 2 and {s.slot for s in stats} == {0, 1}
    assert all(s.snapshots >= 15 and s.send_errors == 0 for s in stats)


def test_receive_queue_keeps_the_newest_datagrams() -> None:
    from bots.udp import NewestQueue

    q = NewestQueue(3)
    for i in range(5):
        q.put_nowait(i)
    assert q.dropped == 2 and [q.get_nowait() for _ in range(3)] == [2, 3, 4]
