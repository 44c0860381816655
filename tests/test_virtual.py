"""Virtual time: scheduler order, exact link delays and determinism, with fake endpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest

from testbed.link import LinkConfig, PathConfig
from testbed.virtual import Address, VirtualNetwork, VirtualProgress, virtual_address

DT = 1.0 / 64.0


class FakeServer:
    """Ticks at k*DT; acks every datagram at once; broadcasts the tick number every tick."""

    def __init__(self) -> None:
        self.tick = 0
        self.log: list[tuple[str, float, object]] = []
        self.known: list[Address] = []

    def next_tick_s(self) -> float:
        return self.tick * DT

    def receive(self, addr: Address, datagram: bytes, now_s: float) -> list[tuple[Address, bytes]]:
        self.log.append(("recv", now_s, (addr, datagram)))
        if addr not in self.known:
            self.known.append(addr)
        return [(addr, b"ack:" + datagram)]

    def step(self, now_s: float) -> list[tuple[Address, bytes]]:
        assert math.isclose(now_s, self.tick * DT)
        self.log.append(("tick", now_s, self.tick))
        self.tick += 1
        return [(a, b"t%d" % self.tick) for a in self.known]


class FakeClient:
    """Sends ``hello`` at start, then one datagram per client tick from ``start + phase``."""

    def __init__(self, name: str, phase_s: float = 0.0, max_steps: int | None = None) -> None:
        self.name = name
        self.phase_s = phase_s
        self.k = 0
        self.origin = 0.0
        self.max_steps = max_steps
        self.log: list[tuple[str, float, bytes]] = []
        self.steps: list[float] = []
        self.started = False

    @property
    def next_step_s(self) -> float | None:
        if not self.started or (self.max_steps is not None and self.k >= self.max_steps):
            return None
        return self.origin + (self.k + 1) * DT

    def start(self, now_s: float) -> list[bytes]:
        self.started = True
        self.origin = now_s
        return [self.name.encode() + b":hello"]

    def receive(self, datagram: bytes, now_s: float) -> None:
        self.log.append(("recv", now_s, datagram))

    def step(self, now_s: float) -> list[bytes]:
        self.k += 1
        self.steps.append(now_s)
        return [self.name.encode() + b":%d" % self.k]


def build(seed: int, paths: list[PathConfig], starts: list[float]) -> tuple[VirtualNetwork, FakeServer, list[FakeClient]]:
    server = FakeServer()
    net = VirtualNetwork(server, np.random.default_rng(seed))
    clients = []
    for i, (path, start) in enumerate(zip(paths, starts, strict=True)):
        client = FakeClient(f"c{i}")
        net.add_client(client, path, start_s=start)
        clients.append(client)
    return net, server, clients


def test_latency_is_honoured_exactly() -> None:
    net, server, (client,) = build(1, [PathConfig.from_ping(100.0)], [0.25])
    net.run(1.0)
    first = next(e for e in server.log if e[0] == "recv")
    assert first[1] == pytest.approx(0.25 + 0.05, abs=1e-12)
    assert first[2] == (virtual_address(0), b"c0:hello")
    ack = next(e for e in client.log if e[2] == b"ack:c0:hello")
    assert ack[1] == pytest.approx(0.25 + 0.10, abs=1e-12)
    # Every step's datagram arrives exactly one one-way latency later.
    recv_times = [t for kind, t, (_, d) in [(e[0], e[1], e[2]) for e in server.log if e[0] == "recv"] if d != b"c0:hello"]
    assert recv_times == pytest.approx([t + 0.05 for t in client.steps[: len(recv_times)]], abs=1e-12)


def test_server_ticks_on_exact_multiples_and_clients_keep_their_cadence() -> None:
    net, server, clients = build(2, [PathConfig(), PathConfig()], [0.0, 0.003])
    stats = net.run(2.0)
    ticks = [t for kind, t, _ in server.log if kind == "tick"]
    assert ticks == [k * DT for k in range(len(ticks))]
    assert len(ticks) == 129  # 0 .. 2.0 inclusive
    assert stats.ticks == 129
    assert clients[1].steps[:3] == pytest.approx([0.003 + DT, 0.003 + 2 * DT, 0.003 + 3 * DT])


def test_deliveries_precede_the_tick_at_the_same_instant() -> None:
    # One tick of one-way latency: the hello sent at t=0 arrives exactly at the second tick's
    # time and is read before that tick runs.
    net, server, _ = build(3, [PathConfig.from_ping(2000.0 * DT)], [0.0])
    net.run(1.5 * DT)
    assert [(e[0], e[1]) for e in server.log] == [("tick", 0.0), ("recv", DT), ("tick", DT)]


def test_same_seed_same_run_and_other_seed_differs() -> None:
    path = PathConfig.from_ping(120.0, jitter_ms=15.0, loss=0.1, reorder=0.05, duplicate=0.02)

    def run(seed: int) -> list[object]:
        net, server, clients = build(seed, [path] * 4, [0.0, 0.001, 0.002, 0.010])
        net.run(3.0)
        return [server.log, [c.log for c in clients]]

    a, b, c = run(7), run(7), run(8)
    assert a == b
    assert a != c


def test_loss_and_jitter_reach_the_counters() -> None:
    path = PathConfig.symmetric(LinkConfig(latency_ms=30.0, jitter_ms=5.0, loss=0.2))
    net, _, _ = build(4, [path], [0.0])
    stats = net.run(5.0)
    up, down = stats.links[0]
    assert up.sent > 300 and 0.1 < up.dropped / up.sent < 0.3
    assert down.sent == stats.datagrams_down
    assert up.sent == stats.datagrams_up


def test_unroutable_server_datagrams_are_counted() -> None:
    class Stray(FakeServer):
        def step(self, now_s: float) -> list[tuple[Address, bytes]]:
            super().step(now_s)
            return [(("127.0.0.1", 1), b"lost")]

    server = Stray()
    net = VirtualNetwork(server, np.random.default_rng(0))
    stats = net.run(10 * DT)
    assert stats.unroutable == 11


def test_progress_reports_and_run_can_continue() -> None:
    net, server, _ = build(5, [PathConfig.from_ping(50.0)], [0.0])
    seen: list[VirtualProgress] = []
    net.run(2.0, progress=seen.append, progress_every_s=0.5)
    assert [p.now_s for p in seen] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert seen[-1].speedup > 1.0
    net.run(3.0)
    assert net.now_s == 3.0
    assert server.tick == 193


def test_a_client_that_stops_stepping_stays_quiet() -> None:
    server = FakeServer()
    net = VirtualNetwork(server, np.random.default_rng(0))
    client = FakeClient("q", max_steps=3)
    net.add_client(client, PathConfig())
    stats = net.run(1.0)
    assert len(client.steps) == 3
    assert stats.client_steps == 3


def test_add_client_rejects_past_start_and_duplicate_address() -> None:
    net = VirtualNetwork(FakeServer(), np.random.default_rng(0))
    net.add_client(FakeClient("a"), PathConfig())
    with pytest.raises(ValueError):
        net.add_client(FakeClient("b"), PathConfig(), address=virtual_address(0))
    net.run(1.0)
    with pytest.raises(ValueError):
        net.add_client(FakeClient("c"), PathConfig(), start_s=0.5)


# --- the real server core in virtual time, with scripted protocol bots ---------------------------

from server import protocol as proto  # noqa: E402
from testbed.match import run_virtual  # noqa: E402
from testbed.scenario import BotGroup, Scenario  # noqa: E402


class ScriptedBot:
    """A minimal PROTOCOL.md client: handshake, then one INPUT per tick, walking and firing."""

    def __init__(self, name: str, rng: np.random.Generator, tick_rate_hz: int) -> None:
        self.name = name
        self.rng = rng
        self.dt = 1.0 / tick_rate_hz
        self.nonce = rng.bytes(16)
        self.token: bytes | None = None
        self.origin: float | None = None
        self.k = 0
        self.seq = 0
        self.packet_seq = 0
        self.history: list[proto.Command] = []
        self.own: proto.OwnState | None = None
        self.last_tick: int | None = None
        self.server_time = 0.0
        self.yaw = float(rng.uniform(0, 360))

    @property
    def next_step_s(self) -> float | None:
        if self.origin is None:
            return None
        return self.origin + self.k * self.dt

    def start(self, now_s: float) -> list[bytes]:
        self.origin = now_s
        self.hello = proto.encode(proto.Connect(nonce=self.nonce, name=self.name))
        return [self.hello]

    def receive(self, datagram: bytes, now_s: float) -> None:
        msg = proto.decode_server(datagram)
        if isinstance(msg, proto.Challenge) and self.token is None:
            self.hello = proto.encode(proto.ChallengeResponse(cookie=msg.cookie, nonce=self.nonce, name=self.name))
            self.resend_at = now_s
        elif isinstance(msg, proto.Accept):
            self.token = msg.token
        elif isinstance(msg, proto.Snapshot):
            self.own = msg.own
            self.last_tick = msg.tick
            self.server_time = msg.server_time_s

    def step(self, now_s: float) -> list[bytes]:
        self.k += 1
        if self.token is None:
            # Handshake packets are re-sent until ACCEPT: the link loses some.
            if now_s >= getattr(self, "resend_at", 0.0):
                self.resend_at = now_s + 0.25
                return [self.hello]
            return []
        self.seq += 1
        self.packet_seq += 1
        self.yaw = (self.yaw + float(self.rng.normal(0, 5))) % 360
        pos = self.own.pos if self.own is not None else (0.0, 0.0, 0.0)
        buttons = 0
        cmd = proto.Command(self.seq, self.seq, self.server_time, self.dt, 1.0, 0.0, self.yaw, 0.0, buttons, 0, 0.0, 0.0, pos)
        self.history.append(cmd)
        shots: tuple[proto.Shot, ...] = ()
        if self.own is not None and self.own.alive and self.own.weapon and self.own.ammo and self.seq % 16 == 0:
            shots = (proto.Shot(self.seq, self.own.weapon, self.yaw, 0.0, self.server_time),)
        msg = proto.Input.with_commands(self.token, self.packet_seq, now_s, self.last_tick, self.history[-4:], shots)
        return [proto.encode(msg)]


def scripted_factory(spec, *, game_map, geometry, tick_rate_hz, rng):  # type: ignore[no-untyped-def]
    return ScriptedBot(spec.name, rng, tick_rate_hz)


def small_scenario(seed: int = 3, duration_s: float = 2.0) -> Scenario:
    return Scenario(
        name="small",
        map="corridors",
        duration_s=duration_s,
        tick_rate_hz=64,
        seed=seed,
        bots=(
            BotGroup(count=2, ping_ms=40.0, name_prefix="a"),
            BotGroup(count=2, ping_ms=150.0, jitter_ms=10.0, loss=0.05, name_prefix="b"),
        ),
    )


def test_virtual_match_with_the_real_core_is_byte_identical_for_a_seed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = [tmp_path / "a.replay", tmp_path / "b.replay", tmp_path / "c.replay"]
    results = [
        run_virtual(small_scenario(seed), replay_path=p, bot_factory=scripted_factory)
        for seed, p in zip((3, 3, 4), paths, strict=True)
    ]
    assert all(p.connected for p in results[0].players)
    assert sum(p.shots for p in results[0].players) > 0
    assert results[0].players == results[1].players
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


def test_virtual_match_with_real_bots_is_byte_identical_for_a_seed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    scenario = small_scenario(5, duration_s=1.5)
    a, b = tmp_path / "a.replay", tmp_path / "b.replay"
    ra = run_virtual(scenario, replay_path=a)
    rb = run_virtual(scenario, replay_path=b)
    assert all(p.connected for p in ra.players)
    assert ra.players == rb.players
    assert a.read_bytes() == b.read_bytes()
