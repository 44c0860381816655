"""The sans-IO bot client against a small fake server built from the real codec, handshake,
movement simulation, movement validator and weapon mechanics, in virtual time."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import msgpack
import numpy as np
import pytest

from bots.client import BotClient, ClientConfig, ConnState
from bots.hooks import ClientHooks
from bots.perception import Intent, Perception
from bots.prediction import MoveState, Predictor
from bots.world_model import WorldModel, seen_rows
from physics.buttons import Buttons
from physics.movement import MoveCommands, simulate
from physics.validation import MovementValidator, Verdict
from physics.weapon_state import FireOutcome, WeaponState
from server.entity_block import EntityFlags, encode_entities, make_entities, split_entities
from server.handshake import CookieStatus, Handshake, SessionCredentials, TokenStatus
from server.protocol import (
    PROTOCOL_VERSION,
    Accept,
    AcceptLimits,
    Challenge,
    ChallengeResponse,
    Command,
    Connect,
    Correction,
    Disconnect,
    Input,
    MsgType,
    OwnState,
    Ping,
    Pong,
    ProtocolError,
    Shot,
    Snapshot,
    decode_client,
    encode,
    peek_type,
)
from testbed.link import LinkConfig, PathConfig
from testbed.virtual import Address, VirtualNetwork
from world.geometry import MapGeometry
from world.hitbox import Bone
from world.mapfile import GameMap, parse_map
from world.weapons import WEAPONS, WeaponId

TICK_HZ = 64
DT = 1.0 / TICK_HZ
Out = list[tuple[Address, bytes]]


def tiny_map() -> GameMap:
    """60 x 40 m: a full wall at x 30..32 (y 5..35), a crate, two spawns facing each other."""
    return parse_map(
        {
            "format": "referee-map/1",
            "name": "tiny",
            "bounds": [0, 0, 60, 40],
            "walls": [
                {"id": "wall", "polygon": [[30, 5], [32, 5], [32, 35], [30, 35]], "height": 4},
                {"id": "crate", "polygon": [[10, 30], [12, 30], [12, 32], [10, 32]], "height": 1.2},
            ],
            "spawns": [{"id": "a", "pos": [5, 20], "yaw": 0}, {"id": "b", "pos": [50, 20], "yaw": 180}],
        }
    )


@pytest.fixture(scope="module")
def game_map() -> GameMap:
    return tiny_map()


@pytest.fixture(scope="module")
def geometry(game_map: GameMap) -> MapGeometry:
    return MapGeometry(game_map)


# ------------------------------------------------------------------------------------------
# A fake server: real codec, handshake, movement, validation and weapon timing; nothing else.


@dataclass
class FakeSession:
    slot: int
    addr: Address
    name: str
    creds: SessionCredentials
    applied: int = -1
    queued: dict[int, Command] = field(default_factory=dict)
    shots: dict[int, list[Shot]] = field(default_factory=dict)
    received: set[int] = field(default_factory=set)
    inputs: list[Input] = field(default_factory=list)
    pos: np.ndarray = field(default_factory=lambda: np.zeros(3))
    vel: np.ndarray = field(default_factory=lambda: np.zeros(3))
    on_ground: bool = True
    stance: int = 0
    alive: bool = False
    health: float = 100.0
    yaw: float = 0.0
    pitch: float = 0.0
    cmd_time: float = 0.0
    spawn_due: bool = True
    verdicts: list[tuple[int, int, float]] = field(default_factory=list)
    fired: list[tuple[int, FireOutcome, Shot]] = field(default_factory=list)
    pings: int = 0
    disconnected: bool = False


class FakeServer:
    """A minimal authoritative server implementing ``testbed.virtual.ServerEndpoint``.

    It mirrors ``server.core``'s order within a command (movement with the held weapon, crouch
    press, switch, reload, fire on the per-player command clock), spawns a player on the first
    tick after ACCEPT with a CORRECTION and a validator reset, and sends every player a snapshot
    per tick (other players plus ``extra`` records, split into parts of ``part_size``).
    """

    def __init__(
        self,
        game_map: GameMap,
        geometry: MapGeometry,
        *,
        primary: int = int(WeaponId.ASSAULT_RIFLE),
        extra: Callable[[float], np.ndarray] | None = None,
        part_size: int = 29,
        tick_hz: int = TICK_HZ,
    ) -> None:
        self.map = game_map
        self.geometry = geometry
        self.primary = primary
        self.extra = extra
        self.part_size = part_size
        self.dt = 1.0 / tick_hz
        self.tick_hz = tick_hz
        self.now = 0.0
        self.tick = 0
        self.rng = np.random.default_rng(7)
        self.handshake = Handshake(b"s" * 32, clock=lambda: self.now, random_bytes=self.rng.bytes)
        self.sessions: dict[Address, FakeSession] = {}
        self.weapons = WeaponState(8)
        self.validator = MovementValidator(8)
        self.bad = 0
        self.on_tick: Callable[[FakeServer], Out] | None = None
        self.drop: Callable[[bytes], bool] | None = None

    # -- ServerEndpoint -----------------------------------------------------------------

    def next_tick_s(self) -> float:
        return (self.tick + 1) * self.dt

    def receive(self, addr: Address, datagram: bytes, now_s: float) -> Out:
        self.now = now_s
        if self.drop is not None and self.drop(datagram):
            return []
        try:
            msg = decode_client(datagram)
        except ProtocolError:
            self.bad += 1
            return []
        if isinstance(msg, Connect):
            return [(addr, encode(Challenge(self.handshake.issue_cookie(addr, msg.nonce))))]
        if isinstance(msg, ChallengeResponse):
            if self.handshake.check_cookie(addr, msg.nonce, msg.cookie) is not CookieStatus.VALID:
                return []
            s = self.sessions.get(addr)
            if s is None:
                slot = len(self.sessions)
                s = FakeSession(slot, addr, msg.name, self.handshake.open_session(slot, addr))
                self.sessions[addr] = s
            limits = AcceptLimits(1200, 4, 8, 0.1, 256.0, 307200.0)
            return [(addr, encode(Accept(s.creds.token, s.slot, self.tick_hz, self.map.name, now_s, limits)))]
        s = self.sessions.get(addr)
        if s is None or self.handshake.check_token(s.creds, msg.token, addr) is not TokenStatus.VALID:
            self.bad += 1
            return []
        if isinstance(msg, Input):
            s.inputs.append(msg)
            fresh = set()
            for c in msg.commands:
                s.received.add(c.seq)
                if c.seq > s.applied and c.seq not in s.queued:
                    s.queued[c.seq] = c
                    fresh.add(c.seq)
            for shot in msg.shots:
                if shot.cmd_seq in fresh:
                    s.shots.setdefault(shot.cmd_seq, []).append(shot)
            return []
        if isinstance(msg, Ping):
            s.pings += 1
            return [(addr, encode(Pong(msg.packet_seq, msg.client_time_s, now_s)))]
        if isinstance(msg, Disconnect):
            s.disconnected = True
        return []

    def step(self, now_s: float) -> Out:
        self.now = now_s
        self.tick += 1
        out: Out = []
        for s in self.sessions.values():
            if s.spawn_due:
                out += self.spawn(s, self.map.spawns[s.slot % len(self.map.spawns)])
            for seq in sorted(s.queued):
                out += self._apply(s, s.queued.pop(seq), now_s)
        if self.on_tick is not None:
            out += self.on_tick(self)
        for s in self.sessions.values():
            out += [(s.addr, d) for d in self._snapshot(s, now_s)]
        return out

    # -- game ----------------------------------------------------------------------------

    def spawn(self, s: FakeSession, spawn: object) -> Out:
        s.pos = np.array([spawn.x, spawn.y, 0.0])  # type: ignore[attr-defined]
        s.vel = np.zeros(3)
        s.on_ground, s.stance, s.alive, s.health = True, 0, True, 100.0
        s.yaw = spawn.yaw_deg  # type: ignore[attr-defined]
        s.spawn_due = False
        self.weapons.spawn(s.slot, [self.primary, int(WeaponId.PISTOL)], s.cmd_time)
        self.validator.reset(s.slot, self.now)
        return [(s.addr, encode(Correction(max(s.applied, 0), tuple(s.pos), (0.0, 0.0, 0.0))))]

    def _apply(self, s: FakeSession, c: Command, now_s: float) -> Out:
        out: Out = []
        s.applied = c.seq
        s.cmd_time += c.duration_s
        t = s.cmd_time
        sl = np.array([s.slot])
        self.weapons.advance_slots(sl, np.array([t]))
        s.yaw, s.pitch = c.yaw_deg, c.pitch_deg
        if s.alive:
            move = MoveCommands.single(c.forward, c.side, c.yaw_deg, c.buttons, c.duration_s, c.pitch_deg)
            held = int(self.weapons.weapon[s.slot])
            speed = WEAPONS[WeaponId(held)].move_speed_m_s if held else 6.0
            prev = (s.pos[None].copy(), s.vel[None].copy(), np.array([s.on_ground]))
            r = simulate(prev[0], prev[1], prev[2], np.array([s.stance]), move, speed, self.geometry)
            v = self.validator.validate(
                sl, prev[0], prev[1], prev[2], move, r, np.array([c.pos]), speed, self.geometry, self.tick, now_s
            )
            s.verdicts.append((c.seq, int(v.verdict[0]), float(v.deviation_m[0])))
            s.pos, s.vel = v.pos[0].copy(), r.vel[0].copy()
            s.on_ground, s.stance = bool(r.on_ground[0]), int(r.stance[0])
            if v.setback[0]:
                out.append((s.addr, encode(Correction(c.seq, tuple(s.pos), tuple(s.vel)))))
            if r.crouch_pressed[0]:
                self.weapons.note_crouch_presses(sl, t)
        if c.weapon_switch:
            self.weapons.switch_weapon(s.slot, c.weapon_switch, t)
        if c.buttons & Buttons.RELOAD:
            self.weapons.start_reload(s.slot, t)
        for shot in s.shots.pop(c.seq, []):
            s.fired.append((c.seq, self.weapons.try_fire(s.slot, shot.weapon, t, alive=s.alive), shot))
        return out

    def kill(self, s: FakeSession, respawn_after_s: float | None = None) -> None:
        s.alive, s.health, s.vel = False, 0.0, np.zeros(3)

    def _snapshot(self, s: FakeSession, now_s: float) -> list[bytes]:
        held = int(self.weapons.weapon[s.slot])
        own = OwnState(
            tuple(float(x) for x in s.pos), tuple(float(x) for x in s.vel), s.yaw, s.pitch, s.health, held,
            int(self.weapons.ammo[s.slot, held]) if held else 0, int(self.weapons.reserve[s.slot, held]) if held else 0,
            s.stance, s.on_ground, s.alive,
        )
        others = [o for o in self.sessions.values() if o is not s]
        recs = make_entities(
            np.array([o.slot for o in others], dtype=np.intp),
            np.array([int(EntityFlags.ALIVE) if o.alive else 0 for o in others], dtype=np.intp),
            np.array([o.pos for o in others]).reshape(-1, 3),
            np.array([o.vel for o in others]).reshape(-1, 3),
            np.array([o.yaw for o in others]),
            np.array([o.pitch for o in others]),
            np.array([int(self.weapons.weapon[o.slot]) for o in others], dtype=np.intp),
            np.array([o.health for o in others]),
        )
        if self.extra is not None:
            recs = np.concatenate([recs, self.extra(now_s)])
        last = s.applied if s.applied >= 0 else None
        parts = split_entities(recs, self.part_size)
        return [
            encode(Snapshot(self.tick, now_s, last, own, encode_entities(p), i, len(parts)))
            for i, p in enumerate(parts)
        ]


# ------------------------------------------------------------------------------------------
# Scripted brains


@dataclass
class ScriptBrain:
    """Walks, turns and (optionally) holds fire; switches weapon once at ``switch_at_s``."""

    forward: float = 1.0
    side: float = 0.0
    turn_deg_s: float = 40.0
    fire: bool = False
    switch_to: int = 0
    switch_at_s: float = math.inf
    last: Perception | None = None
    alive_seen: list[bool] = field(default_factory=list)

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        self.last = p
        self.alive_seen.append(p.alive)
        if not p.alive:
            return Intent(yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg)
        switch = 0
        if p.now_s >= self.switch_at_s:
            switch, self.switch_at_s = self.switch_to, math.inf
        return Intent(
            forward=self.forward,
            side=self.side,
            yaw_deg=p.yaw_deg + self.turn_deg_s * DT,
            pitch_deg=0.0,
            buttons=int(Buttons.FIRE) if self.fire else 0,
            weapon_switch=switch,
        )


@dataclass
class AimBrain:
    """Stands still and holds fire at a world point."""

    target: tuple[float, float, float]
    fire: bool = True

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        if not p.alive:
            return Intent(yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg)
        eye = np.array([p.pos[0], p.pos[1], p.pos[2] + 1.64])
        d = np.asarray(self.target) - eye
        yaw = math.degrees(math.atan2(d[1], d[0]))
        pitch = math.degrees(math.atan2(d[2], math.hypot(d[0], d[1])))
        return Intent(yaw_deg=yaw, pitch_deg=pitch, buttons=int(Buttons.FIRE) if self.fire else 0)


def make_client(game_map: GameMap, geometry: MapGeometry, brain: object, seed: int = 1, **kw: object) -> BotClient:
    return BotClient(f"bot{seed}", brain, game_map, np.random.default_rng(seed), geometry=geometry, **kw)  # type: ignore[arg-type]


def run(server: FakeServer, clients: list[BotClient], until_s: float, path: PathConfig | None = None,
        seed: int = 3) -> VirtualNetwork:
    net = VirtualNetwork(server, np.random.default_rng(seed))
    for c in clients:
        net.add_client(c, path or PathConfig.from_ping(40.0))
    net.run(until_s)
    return net


def entity_records(rows: list[tuple[int, int, tuple[float, float, float], float]]) -> np.ndarray:
    """(slot, flags, pos, yaw) rows -> entity records."""
    n = len(rows)
    return make_entities(
        np.array([r[0] for r in rows], dtype=np.intp),
        np.array([r[1] for r in rows], dtype=np.intp),
        np.array([r[2] for r in rows], dtype=np.float64).reshape(n, 3),
        np.zeros((n, 3)),
        np.array([r[3] for r in rows], dtype=np.float64),
        np.zeros(n),
        np.full(n, int(WeaponId.RIFLE), dtype=np.intp),
        np.full(n, 100.0),
    )


# ------------------------------------------------------------------------------------------
# Connection


def test_handshake_completes_and_resends(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    lost = {"connect": 0}

    def drop_first_connect(datagram: bytes) -> bool:
        if peek_type(datagram) is MsgType.CONNECT and lost["connect"] == 0:
            lost["connect"] += 1
            return True
        return False

    server.drop = drop_first_connect
    client = make_client(game_map, geometry, ScriptBrain(forward=0.0))
    run(server, [client], 3.0)
    assert client.connected and client.state is ConnState.CONNECTED
    assert client.slot == 0
    assert client.tick_rate_hz == TICK_HZ
    st = client.stats
    assert st.handshake_attempts == 3  # CONNECT, its resend after ~1 s, CHALLENGE_RESPONSE
    assert st.inputs > 100 and st.snapshots > 100
    assert client.alive


def test_rejected_and_unanswered_handshakes_end() -> None:
    gm = tiny_map()
    geo = MapGeometry(gm)
    client = make_client(gm, geo, ScriptBrain(), config=ClientConfig(handshake_timeout_s=3.0))
    t = 0.0
    out = client.start(t)
    assert len(out) == 1 and len(out[0]) >= 256
    sent = 1
    while client.next_step_s is not None:
        t = client.next_step_s
        sent += len(client.step(t))
    assert client.state is ConnState.FAILED and t <= 3.5
    assert sent == client.stats.handshake_attempts >= 3  # backoff: 1, 1.5, ... s

    other = make_client(gm, geo, ScriptBrain(), seed=2)
    other.start(0.0)
    from server.protocol import Reject, RefuseCode

    other.receive(encode(Reject(RefuseCode.SERVER_FULL)), 0.1)
    assert other.state is ConnState.REJECTED and other.stats.reject_code == 1 and other.next_step_s is None


def test_input_carries_last_four_commands(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    client = make_client(game_map, geometry, ScriptBrain())
    run(server, [client], 2.0)
    inputs = next(iter(server.sessions.values())).inputs
    assert len(inputs) > 100
    newest_prev = None
    for msg in inputs:
        seqs = [c.seq for c in msg.commands]
        assert seqs == list(range(seqs[-1] - len(seqs) + 1, seqs[-1] + 1))  # consecutive, increasing
        assert len(seqs) == min(4, seqs[-1])
        if newest_prev is not None:
            assert seqs[-1] == newest_prev + 1  # one new command per packet
        newest_prev = seqs[-1]
    assert [m.packet_seq for m in inputs] == sorted({m.packet_seq for m in inputs})
    assert 0 <= client.stats.commands - inputs[-1].commands[-1].seq <= 2  # the rest in flight


def test_a_late_driver_skips_ticks_and_counts_them(game_map: GameMap, geometry: MapGeometry) -> None:
    """A step called within ``max_behind_s`` of its tick leaves the next tick due at once (the
    driver catches up); one 0.5 s late skips the ticks in between and counts them."""
    server = FakeServer(game_map, geometry)
    client = make_client(game_map, geometry, ScriptBrain())
    run(server, [client], 1.0)
    assert client.connected and client.stats.ticks_skipped == 0
    due = client.next_step_s
    assert due is not None
    client.step(due + 0.05)
    assert client.next_step_s == pytest.approx(due + DT) and client.stats.ticks_skipped == 0
    late = client.next_step_s + 0.5
    client.step(late)
    assert client.next_step_s == pytest.approx(late + DT)
    assert client.stats.ticks_skipped == pytest.approx(0.5 / DT, abs=1)


def test_burst_loss_of_three_packets_loses_no_command(game_map: GameMap, geometry: MapGeometry) -> None:
    """30 % uplink loss in bursts of 3 INPUTs: every command still arrives (4-fold redundancy)."""
    server = FakeServer(game_map, geometry)
    count = {"n": 0}

    def drop(datagram: bytes) -> bool:
        if peek_type(datagram) is not MsgType.INPUT:
            return False
        count["n"] += 1
        return count["n"] % 10 in (3, 4, 5)

    server.drop = drop
    client = make_client(game_map, geometry, ScriptBrain())
    run(server, [client], 3.0)
    s = next(iter(server.sessions.values()))
    newest = client.stats.commands
    assert newest > 150
    # Everything but the last few commands (still in flight or only in dropped packets) arrived.
    assert set(range(1, newest - 4)) <= s.received


def test_random_loss_30pct_redundancy(game_map: GameMap, geometry: MapGeometry) -> None:
    """30 % independent uplink loss: a command is lost only when all 4 INPUTs carrying it are
    (0.3^4 = 0.8 %), against 30 % without redundancy."""
    server = FakeServer(game_map, geometry)
    sent_inputs: list[Input] = []
    delivered: set[int] = set()
    loss = np.random.default_rng(11)

    def drop(datagram: bytes) -> bool:
        if peek_type(datagram) is not MsgType.INPUT:
            return False
        msg = decode_client(datagram)
        assert isinstance(msg, Input)
        sent_inputs.append(msg)
        lost = bool(loss.random() < 0.3)
        if not lost:
            delivered.add(msg.packet_seq)
        return lost

    server.drop = drop
    client = make_client(game_map, geometry, ScriptBrain())
    run(server, [client], 4.0, path=PathConfig.from_ping(40.0))
    s = next(iter(server.sessions.values()))
    carriers: dict[int, list[int]] = {}
    for m in sent_inputs:
        for c in m.commands:
            carriers.setdefault(c.seq, []).append(m.packet_seq)
    newest = max(carriers)
    complete = [q for q in carriers if q <= newest - 4]  # carried by their 4 packets already
    missing = [q for q in complete if q not in s.received]
    # Exactly the commands whose every carrier was lost are missing.
    assert missing == [q for q in complete if not any(p in delivered for p in carriers[q])]
    assert all(len(carriers[q]) == 4 for q in complete if q > 3)
    packet_loss = 1.0 - len(delivered) / len(sent_inputs)
    assert 0.25 < packet_loss < 0.35
    assert len(missing) / len(complete) < 0.03


# ------------------------------------------------------------------------------------------
# Snapshots, interpolation, view time


def _snap(tick: int, t: float, records: np.ndarray, part: int = 0, count: int = 1, seq: int | None = None) -> Snapshot:
    own = OwnState((1.0, 1.0, 0.0), (0.0, 0.0, 0.0), 0.0, 0.0, 100.0, 1, 7, 35, 0, True, True)
    return Snapshot(tick, t, seq, own, encode_entities(records), part, count)


def test_snapshot_parts_merge_by_tick() -> None:
    wm = WorldModel(own_slot=0)
    recs = entity_records([(s, int(EntityFlags.ALIVE), (float(s), 2.0, 0.0), 0.0) for s in range(1, 8)])
    parts = split_entities(recs, 3)
    assert len(parts) == 3
    assert wm.add_snapshot(_snap(10, 1.0, parts[2], 2, 3), 5.0).new_tick
    assert not wm.frame(10).complete
    assert wm.add_snapshot(_snap(10, 1.0, parts[0], 0, 3), 5.001).new_tick is False
    assert wm.add_snapshot(_snap(10, 1.0, parts[0], 0, 3), 5.001).duplicate
    wm.add_snapshot(_snap(10, 1.0, parts[1], 1, 3), 5.002)
    f = wm.frame(10)
    assert f.complete and f.slots.tolist() == list(range(1, 8))
    view = wm.interpolate(1.0)
    assert view.slot.tolist() == list(range(1, 8))
    # The own slot is never an entity.
    wm.add_snapshot(_snap(11, 1.0 + DT, entity_records([(0, 1, (9.0, 9.0, 0.0), 0.0)])), 5.02)
    assert 0 not in wm.frame(11).slots.tolist()
    # A part older than the buffer is stale.
    wm.add_snapshot(_snap(500, 9.0, recs), 13.0)
    assert wm.add_snapshot(_snap(9, 0.9, recs), 13.1).stale


def test_lost_part_bridges_entities() -> None:
    wm = WorldModel()
    a = entity_records([(1, 1, (0.0, 0.0, 0.0), 0.0), (2, 1, (10.0, 0.0, 0.0), 0.0)])
    b = entity_records([(1, 1, (1.0, 0.0, 0.0), 0.0), (2, 1, (11.0, 0.0, 0.0), 0.0)])
    c = entity_records([(1, 1, (2.0, 0.0, 0.0), 0.0), (2, 1, (12.0, 0.0, 0.0), 0.0)])
    wm.add_snapshot(_snap(1, 1.0, a), 0.0)
    wm.add_snapshot(_snap(2, 1.1, b[:1], 0, 2), 0.1)  # part 1 (slot 2) lost
    wm.add_snapshot(_snap(3, 1.2, c), 0.2)
    v = wm.interpolate(1.15)
    assert v.slot.tolist() == [1, 2]
    np.testing.assert_allclose(v.pos[0], [1.5, 0.0, 0.0])
    np.testing.assert_allclose(v.pos[1], [11.5, 0.0, 0.0])  # bridged 1.0 -> 1.2
    v = wm.interpolate(1.05)
    np.testing.assert_allclose(v.pos[1], [10.5, 0.0, 0.0])
    # An entity missing from a complete frame is gone from that frame's time on.
    wm.add_snapshot(_snap(4, 1.3, c[:1]), 0.3)
    assert wm.interpolate(1.25).slot.tolist() == [1, 2]  # still shown until 1.3
    assert wm.interpolate(1.3).slot.tolist() == [1]


def test_rows_are_the_view_and_its_records() -> None:
    """The client's per-tick path (columns, records straight from them) shows exactly what
    ``interpolate`` and ``EntityView.seen`` show, across lost parts and departures."""
    wm = WorldModel()
    rows = [entity_records([(s, int(EntityFlags.ALIVE) | (int(EntityFlags.CROUCHING) if s == 2 else 0),
                             (float(s) + 0.3 * k, 1.0 - 0.1 * k, 0.0), 170.0 + 7.0 * k) for s in (1, 2, 3)])
            for k in range(4)]
    wm.add_snapshot(_snap(1, 1.0, rows[0]), 0.0)
    wm.add_snapshot(_snap(2, 1.1, rows[1][:2], 0, 2), 0.1)  # part 1 (slot 3) lost
    wm.add_snapshot(_snap(3, 1.2, rows[2]), 0.2)
    wm.add_snapshot(_snap(4, 1.3, rows[3][:1]), 0.3)  # slots 2 and 3 left
    for t in (0.5, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 2.0):
        ints, floats = wm.interpolate_rows(t)
        view = wm.interpolate(t)
        assert ints[:, 0].tolist() == view.slot.tolist()
        assert seen_rows(ints, floats) == view.seen()
    assert seen_rows(*WorldModel().interpolate_rows(1.0)) == ()


def test_interpolation_exact_at_snapshots_and_linear_between() -> None:
    wm = WorldModel()
    pa, pb = (3.25, -7.5, 0.0), (3.3125, -7.4375, 0.0625)
    a = entity_records([(4, int(EntityFlags.ALIVE), pa, 170.0)])
    b = entity_records([(4, int(EntityFlags.ALIVE | EntityFlags.CROUCHING), pb, -170.0)])
    ta, tb = 2.0, 2.0 + DT
    wm.add_snapshot(_snap(100, ta, a), 10.0)
    wm.add_snapshot(_snap(101, tb, b), 10.02)
    va = wm.interpolate(ta)
    assert va.pos[0].tolist() == list(pa) and va.yaw[0] == 170.0 and not va.stance[0]
    vb = wm.interpolate(tb)
    assert vb.pos[0].tolist() == list(pb) and vb.yaw[0] == -170.0 and vb.stance[0] == 1
    for frac in (0.25, 0.5, 0.9):
        v = wm.interpolate(ta + frac * DT)
        np.testing.assert_allclose(v.pos[0], np.add(pa, frac * np.subtract(pb, pa)), atol=1e-12)
        # Yaw takes the short way across +-180: 170 -> 190 (= -170).
        expect = 170.0 + 20.0 * frac
        assert math.isclose((v.yaw[0] - expect + 180.0) % 360.0 - 180.0, 0.0, abs_tol=1e-6)
        assert v.stance[0] == 0  # discrete fields come from the earlier snapshot
    # After the newest snapshot: held, never extrapolated.
    assert wm.interpolate(tb + 0.5).pos[0].tolist() == list(pb)
    # A jump faster than max_interp_speed (a respawn) is not slid across.
    far = entity_records([(4, int(EntityFlags.ALIVE), (40.0, 30.0, 0.0), 0.0)])
    wm.add_snapshot(_snap(102, tb + DT, far), 10.04)
    assert wm.interpolate(tb + 0.5 * DT).pos[0].tolist() == list(pb)


def test_view_time_follows_snapshots_smoothly() -> None:
    wm = WorldModel()
    recs = entity_records([(1, 1, (0.0, 0.0, 0.0), 0.0)])
    # Snapshots of server time 100 + k/64 arrive at client time 5 + k/64 + jitter.
    jitter = np.random.default_rng(0).normal(0.0, 0.003, 200)
    views = []
    for k in range(200):
        now = 5.0 + k * DT + 0.02 + jitter[k]
        wm.add_snapshot(_snap(k, 100.0 + k * DT, recs), now)
        views.append(wm.advance_view_time(5.0 + k * DT + 0.021))
    v = np.array(views[20:])
    assert np.all(np.diff(v) >= 0.0)
    # Rendered ~interp_delay behind the newest snapshot, advancing at the client's rate.
    newest = 100.0 + np.arange(20, 200) * DT
    assert np.all(np.abs(newest - v - 0.1) < 0.02)
    assert abs(np.mean(np.diff(v)) - DT) < 1e-3


def test_not_rendered_entities_are_seen_but_not_rendered(game_map: GameMap, geometry: MapGeometry) -> None:
    bait_flags = int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)
    # A bait right in the line of fire, a real player behind it.
    extra = entity_records([(5, int(EntityFlags.ALIVE), (15.0, 20.0, 0.0), 180.0), (200, bait_flags, (10.0, 20.0, 0.3), 0.0)])
    server = FakeServer(game_map, geometry, extra=lambda t: extra)
    brain = AimBrain(target=(15.0, 20.0, 1.26))
    client = make_client(game_map, geometry, brain)
    run(server, [client], 1.5)
    p = client.last_perception
    assert p is not None
    by_slot = {e.slot: e for e in p.entities}
    assert by_slot[200].rendered is False and by_slot[5].rendered is True
    s = next(iter(server.sessions.values()))
    shots = [shot for _, outcome, shot in s.fired if outcome.accepted]
    assert shots, "the aim brain fired"
    first = shots[0]
    assert first.claimed_victim == 5  # the bait neither takes nor stops the ray
    assert first.claimed_bone in (int(Bone.UPPER_TORSO), int(Bone.LOWER_TORSO), int(Bone.NECK))
    assert abs(first.claimed_hit_point[0] - 15.0) < 0.3
    # Hooks can cast claims of their own: a raw-snapshot cheat's ray is taken by the bait.
    eye = np.array([*client.predicted.pos[:2], 1.64])
    d = np.array([10.0, 20.0, 1.5]) - eye
    yaw, pitch = math.degrees(math.atan2(d[1], d[0])), math.degrees(math.atan2(d[2], math.hypot(d[0], d[1])))
    vt = p.view_time_s
    assert client.claim_shot(yaw, pitch, int(WeaponId.RIFLE), vt).victim == 5
    assert client.claim_shot(yaw, pitch, int(WeaponId.RIFLE), vt, include_hidden=True).victim == 200


def test_shot_claims_stop_at_walls(game_map: GameMap, geometry: MapGeometry) -> None:
    extra = entity_records([(5, int(EntityFlags.ALIVE), (50.0, 20.0, 0.0), 180.0)])
    server = FakeServer(game_map, geometry, extra=lambda t: extra)
    client = make_client(game_map, geometry, AimBrain(target=(50.0, 20.0, 1.26)))
    run(server, [client], 1.0)
    s = next(iter(server.sessions.values()))
    shots = [shot for _, outcome, shot in s.fired if outcome.accepted]
    assert shots
    first = shots[0]
    assert first.claimed_victim is None and first.claimed_bone == 0
    assert abs(first.claimed_hit_point[0] - 30.0) < 1e-6  # the wall's face at x = 30


# ------------------------------------------------------------------------------------------
# Prediction and reconciliation


def _accepted_after_first(verdicts: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    first = next(i for i, v in enumerate(verdicts) if v[1] == Verdict.ACCEPTED)
    return verdicts[first:]


def test_honest_claims_pass_the_validator(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    brain = ScriptBrain(forward=1.0, side=0.3, turn_deg_s=35.0)
    client = make_client(game_map, geometry, brain)
    path = PathConfig.symmetric(LinkConfig(latency_ms=30.0, jitter_ms=5.0))
    run(server, [client], 6.0, path=path)
    s = next(iter(server.sessions.values()))
    assert len(s.verdicts) > 300
    # Before the client learns of its spawn its claims are corrected silently (PENDING).
    assert {v for _, v, _ in s.verdicts} <= {Verdict.ACCEPTED, Verdict.PENDING}
    after = _accepted_after_first(s.verdicts)
    assert len(after) > 300 and all(v == Verdict.ACCEPTED for _, v, _ in after)
    assert max(d for _, _, d in after) <= 1e-9  # the same code on float64 claims: exact
    # It walked into walls on the way (prediction includes sliding).
    assert math.dist(client.predicted.pos, (5.0, 20.0, 0.0)) > 3.0
    assert client.stats.replays <= client.stats.corrections + 2


def test_correction_resets_prediction(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    client = make_client(game_map, geometry, ScriptBrain(forward=1.0, turn_deg_s=0.0))
    forced: dict[str, int] = {}

    def setback(srv: FakeServer) -> Out:
        if not srv.sessions:
            return []
        s = next(iter(srv.sessions.values()))
        if srv.tick == 128 and s.alive:
            # The server moves the player 2 m sideways after the last applied command.
            s.pos = s.pos + np.array([0.0, 2.0, 0.0])
            srv.validator.reset(s.slot, srv.now)
            forced["seq"] = s.applied
            return [(s.addr, encode(Correction(s.applied, tuple(s.pos), tuple(s.vel))))]
        return []

    server.on_tick = setback
    run(server, [client], 4.0, path=PathConfig.from_ping(60.0))
    s = next(iter(server.sessions.values()))
    assert client.stats.corrections >= 2  # the spawn and the setback
    after = [v for v in s.verdicts if v[0] > forced["seq"]]
    # Claims sent before the client heard of it are corrected silently, then all accepted.
    kinds = [v for _, v, _ in after]
    assert kinds[0] == Verdict.PENDING
    first_ok = kinds.index(Verdict.ACCEPTED)
    assert first_ok <= 8  # about one round trip of commands (60 ms at 64 Hz, plus a tick)
    assert all(k == Verdict.ACCEPTED for k in kinds[first_ok:])
    assert max(d for _, v, d in after[first_ok:]) <= 0.05
    assert abs(client.predicted.pos[1] - s.pos[1]) < 0.5


def test_predictor_reconcile_replays_pending(geometry: MapGeometry) -> None:
    start = MoveState((5.0, 20.0, 0.0), (0.0, 0.0, 0.0), True, 0)
    pred = Predictor(geometry, start)
    speed = WEAPONS[WeaponId.RIFLE].move_speed_m_s
    for seq in range(1, 11):
        pred.predict(seq, 1.0, 0.0, 0.0, 0.0, 0, DT, speed)
    before = pred.state
    # Agreement: no replay.
    r = pred.reconcile(3, pred.predicted_after(3))
    assert not r.replayed and pred.state == before and len(pred.pending) == 7
    # The server put the player 1 m further along y after command 5.
    auth5 = pred.predicted_after(5)
    moved = auth5._replace(pos=(auth5.pos[0], auth5.pos[1] + 1.0, 0.0))
    r = pred.reconcile(5, moved)
    assert r.replayed and math.isclose(r.error_m, 1.0, abs_tol=1e-9)
    # The replay is the same simulation from the corrected state.
    state = moved
    for _ in range(6, 11):
        res = simulate(np.array([state.pos]), np.array([state.vel]), np.array([state.on_ground]), np.array([state.stance]),
                       MoveCommands.single(1.0, 0.0, 0.0, 0, DT), speed, geometry)
        state = MoveState(tuple(res.pos[0]), tuple(res.vel[0]), bool(res.on_ground[0]), int(res.stance[0]))
    assert np.allclose(pred.state.pos, state.pos, atol=1e-12)
    assert pred.reconcile(4, start).stale and pred.reconcile(None, start).stale


def test_predictor_refuses_what_move_commands_refuses(geometry: MapGeometry) -> None:
    pred = Predictor(geometry, MoveState((5.0, 20.0, 0.0), (0.0, 0.0, 0.0), True, 0))
    speed = WEAPONS[WeaponId.RIFLE].move_speed_m_s
    for bad in ((math.nan, 0.0, 0.0, 0.0, 0, DT), (0.0, 0.0, 0.0, math.inf, 0, DT), (1.0, 0.0, 0.0, 0.0, 0, 0.0),
                (1.0, 0.0, 0.0, 0.0, 1 << 20, DT)):
        f, s, y, p, b, d = bad
        with pytest.raises(ValueError):
            MoveCommands.single(f, s, y, b, d, p)
        with pytest.raises(ValueError):
            pred.predict(1, f, s, y, p, b, d, speed)
    assert not pred.pending
    # Numbers of other types are taken as MoveCommands takes them.
    state, _ = pred.predict(1, np.float32(1.0), 0, np.float64(0.0), 0.0, True, DT, speed)
    assert pred.pending[0].forward == 1.0 and type(pred.pending[0].forward) is float
    assert pred.pending[0].buttons == 1 and state == pred.state


# ------------------------------------------------------------------------------------------
# Weapons and shots


def test_honest_shots_never_beat_the_fire_interval(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry, primary=int(WeaponId.ASSAULT_RIFLE))
    brain = ScriptBrain(forward=0.0, turn_deg_s=10.0, fire=True, switch_to=int(WeaponId.PISTOL), switch_at_s=7.0)
    client = make_client(game_map, geometry, brain)
    run(server, [client], 10.0, path=PathConfig.symmetric(LinkConfig(latency_ms=25.0, jitter_ms=4.0)))
    s = next(iter(server.sessions.values()))
    outcomes = [o for _, o, _ in s.fired]
    assert len(outcomes) == client.stats.shots_sent
    refused = [o.evidence.kind.value for o in outcomes if not o.accepted]  # type: ignore[union-attr]
    assert refused == []
    weapons = {o.weapon for o in outcomes}
    assert weapons == {int(WeaponId.ASSAULT_RIFLE), int(WeaponId.PISTOL)}
    # A full magazine of 30, a reload (2.5 s), more automatic fire, then the semi-automatic pistol.
    ar = [o for o in outcomes if o.weapon == WeaponId.ASSAULT_RIFLE]
    assert len(ar) >= 35
    intervals = [o.interval_s for o in outcomes if math.isfinite(o.interval_s)]
    assert min(intervals) >= WEAPONS[WeaponId.ASSAULT_RIFLE].fire_interval_s - 1e-9
    pistol = [o for o in outcomes if o.weapon == WeaponId.PISTOL]
    assert len(pistol) >= 4
    assert all(o.interval_s >= WEAPONS[WeaponId.PISTOL].fire_interval_s - 1e-9 for o in pistol[1:])
    # Recoil is reported: the claimed punch is what the server simulated for the shot.
    for seq, o, shot in s.fired[:10]:
        cmd_recoil = next(c for m in s.inputs for c in m.commands if c.seq == seq)
        assert math.isclose(cmd_recoil.recoil_pitch_deg, o.punch_pitch_deg, abs_tol=1e-9)


class RapidFire(ClientHooks):
    """A rapid-fire script: FIRE every tick, the client's own interval ignored."""

    bypass_fire_interval = True
    name = "rapid_fire"


def test_bypass_fire_interval_hook_fires_too_soon(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry, primary=int(WeaponId.RIFLE))
    client = make_client(game_map, geometry, ScriptBrain(forward=0.0, fire=True), hooks=RapidFire())
    run(server, [client], 1.5)
    s = next(iter(server.sessions.values()))
    kinds = [o.evidence.kind.value for _, o, _ in s.fired if not o.accepted]  # type: ignore[union-attr]
    assert kinds and set(kinds) == {"too_soon"}


# ------------------------------------------------------------------------------------------
# Hooks


class Recorder(ClientHooks):
    """Records the hook calls; doubles the commands, holds every other tick's packets, moves
    the claim 1 cm and drops all shots."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ticks = 0
        self.attached: object = None

    def attach(self, client: object) -> None:
        self.attached = client

    def perceive(self, p: Perception) -> Perception:
        self.calls.append("perceive")
        return p

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        self.calls.append("intent")
        return honest

    def commands_this_step(self, now_s: float, rng: np.random.Generator) -> int:
        self.calls.append("count")
        return 2

    def command(self, cmd: Command, p: Perception) -> Command:
        self.calls.append("command")
        return cmd._replace(pos=(cmd.pos[0], cmd.pos[1] + 0.01, cmd.pos[2]))

    def shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        self.calls.append("shots")
        return []

    def hold_packet(self, now_s: float, rng: np.random.Generator) -> bool:
        self.calls.append("hold")
        self.ticks += 1
        return self.ticks % 2 == 1


def test_hooks_are_called_in_order(game_map: GameMap, geometry: MapGeometry) -> None:
    hooks = Recorder()
    server = FakeServer(game_map, geometry)
    client = make_client(game_map, geometry, ScriptBrain(fire=True), hooks=hooks)
    assert hooks.attached is client
    run(server, [client], 1.0)
    first = hooks.calls.index("perceive")
    assert hooks.calls[first:first + 7] == ["perceive", "intent", "count", "command", "command", "shots", "hold"]
    s = next(iter(server.sessions.values()))
    st = client.stats
    assert st.commands == 2 * st.inputs  # two commands per tick
    assert st.held_datagrams > 0 and st.shots_sent == 0 and not s.fired
    # Held packets go out in bursts: the server saw every INPUT, two at a time.
    assert len(s.inputs) >= st.inputs - 2
    # The moved claim is believed by the client: it predicts on from it.
    assert client.predicted.pos[1] - 20.0 > 0.05


def test_default_hooks_are_identity() -> None:
    h = ClientHooks()
    rng = np.random.default_rng(0)
    intent = Intent(forward=1.0)
    cmd = Command(1, 1, 0.0, DT, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, 0.0, (1.0, 2.0, 0.0))
    assert h.intent(None, intent, rng) is intent  # type: ignore[arg-type]
    assert h.command(cmd, None) is cmd  # type: ignore[arg-type]
    shots: list[Shot] = []
    assert h.shots(shots, None, rng) is shots  # type: ignore[arg-type]
    assert h.commands_this_step(0.0, rng) == 1 and not h.hold_packet(0.0, rng) and not h.bypass_fire_interval


# ------------------------------------------------------------------------------------------
# Robustness, ping, death


def test_bad_datagrams_are_counted_and_dropped(game_map: GameMap, geometry: MapGeometry) -> None:
    client = make_client(game_map, geometry, ScriptBrain())
    client.start(0.0)
    bad = [
        b"",
        b"\xc1garbage",
        msgpack.packb([PROTOCOL_VERSION, 19, 1]),  # SNAPSHOT with the wrong arity
        msgpack.packb([PROTOCOL_VERSION + 1, 16, b"x" * 40]),  # wrong version
        encode(Ping(b"t" * 16, 1, 0.0)),  # a client -> server type
        b"\x00" * 1300,
    ]
    for d in bad:
        client.receive(d, 0.1)
    st = client.stats
    assert st.bad_datagrams == len(bad)
    assert st.bad_by_reason == {
        "not_msgpack": 2, "bad_arity": 1, "bad_version": 1, "wrong_direction": 1, "too_large": 1
    }
    # Well-formed but out of place: a PONG before ACCEPT.
    client.receive(encode(Pong(1, 0.0, 0.0)), 0.2)
    assert client.stats.unexpected == 1 and client.state is ConnState.CONNECTING


def test_ping_measures_rtt(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    client = make_client(game_map, geometry, ScriptBrain(forward=0.0))
    run(server, [client], 3.5, path=PathConfig.from_ping(80.0))
    st = client.stats
    assert st.pings >= 3 and st.pongs == st.pings
    assert client.rtt_s is not None and abs(client.rtt_s - 0.080) < 1e-6


def test_death_and_respawn(game_map: GameMap, geometry: MapGeometry) -> None:
    server = FakeServer(game_map, geometry)
    brain = ScriptBrain(forward=1.0, turn_deg_s=0.0)
    client = make_client(game_map, geometry, brain)

    def script(srv: FakeServer) -> Out:
        if not srv.sessions:
            return []
        s = next(iter(srv.sessions.values()))
        if srv.tick == 100:
            srv.kill(s)
        if srv.tick == 200:
            return srv.spawn(s, srv.map.spawns[1])
        return []

    server.on_tick = script
    net = VirtualNetwork(server, np.random.default_rng(0))
    net.add_client(client, PathConfig.from_ping(40.0))
    net.run(2.5)  # dead from tick 100 (1.56 s)
    s = next(iter(server.sessions.values()))
    assert not client.alive and brain.alive_seen[-1] is False
    dead_pos = client.predicted.pos
    tail = [c for c in s.inputs[-1].commands]
    assert all(c.forward == 0.0 and c.side == 0.0 and c.buttons == 0 for c in tail)
    assert all(c.pos == dead_pos for c in tail)
    net.run(5.0)
    assert client.alive and client.stats.deaths == 1 and client.stats.spawns == 2
    after = [v for v in s.verdicts if v[0] > s.inputs[-1].commands[-1].seq - 120]
    assert after[-1][1] == Verdict.ACCEPTED
    assert abs(client.predicted.pos[1] - 20.0) < 1e-6 and client.predicted.pos[0] < 50.0


def test_idle_fast_path_matches_simulate(geometry: MapGeometry) -> None:
    speed = WEAPONS[WeaponId.SMG].move_speed_m_s
    for stance in (0, 1):
        for buttons in (0, int(Buttons.CROUCH), int(Buttons.WALK | Buttons.FIRE), int(Buttons.CROUCH | Buttons.SPRINT)):
            start = MoveState((7.5, 12.25, 0.0), (0.0, 0.0, 0.0), True, stance)
            pred = Predictor(geometry, start)
            fast, pressed = pred.predict(1, 0.0, 0.0, 33.0, -4.0, buttons, DT, speed)
            assert pred.simulated == 0
            r = simulate(np.array([start.pos]), np.zeros((1, 3)), np.array([True]), np.array([stance]),
                         MoveCommands.single(0.0, 0.0, 33.0, buttons, DT, -4.0), speed, geometry)
            assert fast.pos == tuple(r.pos[0]) and fast.vel == tuple(r.vel[0])
            assert fast.stance == int(r.stance[0]) and fast.on_ground == bool(r.on_ground[0])
            assert pressed == bool(r.crouch_pressed[0])


# ------------------------------------------------------------------------------------------
# End to end with the real server core, in virtual time


def test_end_to_end_with_server_core(game_map: GameMap, geometry: MapGeometry) -> None:
    from server.config import ServerConfig
    from server.core import ServerCore

    core = ServerCore(ServerConfig(), game_map, secret=b"k" * 32, seed=5, geometry=geometry)
    bots = [
        make_client(game_map, geometry, ScriptBrain(forward=1.0, side=0.3 * i, turn_deg_s=25.0 * (i + 1), fire=True), seed=i + 1)
        for i in range(2)
    ]
    net = VirtualNetwork(core, np.random.default_rng(2))
    for b in bots:
        net.add_client(b, PathConfig.symmetric(LinkConfig(latency_ms=25.0, jitter_ms=4.0, loss=0.02)))
    net.run(4.0)
    report = core.report()
    assert all(b.connected and b.alive for b in bots)
    assert report["counters"]["connects"] == 2
    for b in bots:
        st = b.stats
        assert st.bad_datagrams == 0 and st.unexpected == 0 and st.snapshots > 200
        assert st.rtt_s is not None and 0.04 < st.rtt_s < 0.08
    # Honest prediction: no desync beyond the spawn's silent correction; honest fire: no refusal.
    slots = [b.slot for b in bots]
    assert core.validator.desyncs[slots].sum() == 0
    assert not any(k.startswith("shot_") for k in report["rejections"])
    assert sum(p["shots"] for p in report["players"]) == sum(b.stats.shots_sent for b in bots)


def test_receive_never_raises_on_arbitrary_input(game_map: GameMap, geometry: MapGeometry) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    client = make_client(game_map, geometry, ScriptBrain())
    client.start(0.0)
    client.receive(encode(Challenge(b"c" * 40)), 0.01)
    limits = AcceptLimits(1200, 4, 8, 0.1, 256.0, 307200.0)
    client.receive(encode(Accept(b"t" * 16, 3, TICK_HZ, "tiny", 1.0, limits)), 0.02)
    assert client.connected
    scalars = st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.booleans(), st.none(),
                        st.binary(max_size=40), st.text(max_size=10))
    server_types = st.sampled_from([int(t) for t in MsgType if t >= 16])
    messages = st.tuples(server_types, st.lists(st.one_of(scalars, st.lists(scalars, max_size=12)), max_size=8)).map(
        lambda m: msgpack.packb([PROTOCOL_VERSION, m[0], *m[1]], use_bin_type=True)
    )

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.one_of(st.binary(max_size=1300), messages))
    def check(data: bytes) -> None:
        client.receive(data, 0.5)
        client.step(client.next_step_s or 0.5)

    check()
    assert client.stats.bad_datagrams + client.stats.unexpected > 0


def test_map_mismatch_is_logged_once_and_counted(
    game_map: GameMap, geometry: MapGeometry, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server on another map: one WARNING for the whole process, however many bots connect and
    however many ACCEPTs and snapshots arrive; every mismatched connection is counted."""
    import bots.client as client_module

    monkeypatch.setattr(client_module, "_MAP_MISMATCH", client_module.RepeatedWarning(client_module.log))
    limits = AcceptLimits(1200, 4, 8, 0.1, 256.0, 307200.0)
    records = entity_records([(1, int(EntityFlags.ALIVE), (20.0, 20.0, 0.0), 0.0)])
    clients = [make_client(game_map, geometry, ScriptBrain(), seed=i + 1) for i in range(100)]
    with caplog.at_level("DEBUG", logger="bots.client"):
        for i, client in enumerate(clients):
            client.start(0.0)
            client.receive(encode(Challenge(b"c" * 40)), 0.01)
            client.receive(encode(Accept(bytes([i]) * 16, i % 64, TICK_HZ, "city", 1.0, limits)), 0.02)
            assert client.connected
        first = clients[0]
        for k in range(100):  # duplicate ACCEPTs and a snapshot stream on one connection
            first.receive(encode(Accept(bytes([0]) * 16, 0, TICK_HZ, "city", 1.0, limits)), 0.03 + k * DT)
            first.receive(encode(_snap(k + 1, 1.0 + k * DT, records, seq=None)), 0.03 + k * DT)
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "server runs map" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].getMessage() == "bot1: server runs map 'city', client has 'tiny' (logged once; repeats are counted)"
    assert client_module.map_mismatches() == {("city", "tiny"): 100}
