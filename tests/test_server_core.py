"""The server core in-process: handshake, hit registration through the tick, culling, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from anticheat.detector import Detector
from server import protocol as proto
from server.config import CrosshairProbeConfig
from server.handshake import SessionCredentials
from server.rate_limit import ClientRateLimiter, RateLimitConfig
from server.replay_window import ReplayWindow
from server.session import ClientSession
from tests.server_harness import ScriptedClient, arena_map, make_core, place, run_ticks, weapon_ready
from world.weapons import WeaponId


def _two_players(game_map=None, pipeline=None, **overrides):
    core = make_core(game_map, **overrides)
    core.pipeline = pipeline
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    b = ScriptedClient("bob", ("127.0.0.1", 5002))
    for c in (a, b):
        c.connect(core, 0.0)
    run_ticks(core, [a, b], 3)  # spawn both
    return core, a, b


def test_handshake_allocates_no_state_before_the_challenge_round_trip() -> None:
    core = make_core()
    replies = core.receive(("127.0.0.1", 9), proto.encode(proto.Connect(nonce=b"n" * 16, name="x")), 0.0)
    assert len(replies) == 1 and not core.sessions
    challenge = proto.decode_server(replies[0][1])
    # A forged cookie gets no session, only a REJECT (invalid cookie).
    refused = proto.encode(proto.Reject(proto.RefuseCode.INVALID_COOKIE))
    bad = proto.ChallengeResponse(cookie=bytes(len(challenge.cookie)), nonce=b"n" * 16, name="x")
    assert core.receive(("127.0.0.1", 9), proto.encode(bad), 0.0) == [(("127.0.0.1", 9), refused)]
    assert not core.sessions and core.rejections["cookie_invalid"] == 1
    # The real cookie from another address is refused too (spoofed source).
    good = proto.ChallengeResponse(cookie=challenge.cookie, nonce=b"n" * 16, name="x")
    assert core.receive(("127.0.0.1", 10), proto.encode(good), 0.0) == [(("127.0.0.1", 10), refused)]
    accept = proto.decode_server(core.receive(("127.0.0.1", 9), proto.encode(good), 0.0)[0][1])
    assert isinstance(accept, proto.Accept) and len(core.sessions) == 1


def test_replies_to_unauthenticated_packets_are_never_larger() -> None:
    core = make_core()
    request = proto.encode(proto.Connect(nonce=b"n" * 16, name="x"))
    reply = core.receive(("127.0.0.1", 9), request, 0.0)[0][1]
    assert len(reply) <= len(request)


def test_a_standing_player_in_the_open_is_hit_and_killed() -> None:
    core, a, b = _two_players()
    place(core, a.slot, (10.0, 30.0), 0.0, a)
    place(core, b.slot, (25.0, 30.0), 180.0, b)
    weapon_ready(core, a.slot, int(WeaponId.PISTOL))
    run_ticks(core, [a, b], 40)
    health0 = float(core.world.health[b.slot])
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=0.0, pitch_deg=-1.5, view_time_s=0.0)

    def fire(c: ScriptedClient, now: float) -> bytes:
        if c is a and core.tick % 45 == 0:
            return c.command(now, yaw=0.0, pitch=-1.5, buttons=1, shots=(shot._replace(view_time_s=now - 0.1),))
        return c.command(now, yaw=0.0 if c is a else 180.0)

    run_ticks(core, [a, b], 45 * 8, fire)
    assert core.by_slot[a.slot].hits >= 1
    assert core.by_slot[a.slot].kills >= 1 or core.world.health[b.slot] < health0
    assert core.rejections.get("internal_error", 0) == 0
    # Every resolved shot counts its rewind decision; the view time 100 ms back is trusted.
    rewinds = {k: v for k, v in core.counters.items() if k.startswith("rewind_")}
    assert sum(rewinds.values()) == core.by_slot[a.slot].shots_fired > 0
    assert rewinds.get("rewind_claimed", 0) == core.by_slot[a.slot].shots_fired


def test_player_behind_a_full_wall_is_never_in_enemy_snapshots() -> None:
    wall = {"id": "w", "polygon": [[29, 10], [31, 10], [31, 50], [29, 50]], "height": 4.0}
    core, a, b = _two_players(arena_map([wall]))
    place(core, a.slot, (20.0, 30.0), 0.0, a)
    place(core, b.slot, (40.0, 30.0), 180.0, b)
    run_ticks(core, [a, b], 64)
    assert b.slot not in a.seen_slots() and a.slot not in b.seen_slots()
    # Step into the open: now they see each other.
    place(core, b.slot, (40.0, 55.0), 180.0, b)
    place(core, a.slot, (20.0, 55.0), 0.0, a)
    run_ticks(core, [a, b], 16)
    assert b.slot in a.seen_slots()


def test_malformed_spoofed_and_replayed_datagrams_are_counted_and_dropped() -> None:
    core, a, b = _two_players()
    now = core.next_tick_s()
    data = a.command(now)
    assert core.receive(a.address, data, now) == []
    core.receive(a.address, data, now)  # replayed
    core.receive(("127.0.0.1", 7777), data, now)  # spoofed source
    core.receive(a.address, b"\xc1garbage", now)
    forged = proto.decode_client(a.command(now))
    core.receive(a.address, proto.encode(
        proto.Input(token=bytes(16), packet_seq=forged.packet_seq, client_time_s=now, ack_tick=None,
                    command_block=forged.command_block)), now)
    r = core.rejections
    assert r["replay_duplicate"] == 1
    assert r["unknown_session"] == 1
    assert r["not_msgpack"] == 1
    assert r["token_invalid"] == 1
    core.step(now)
    assert np.all(np.isfinite(core.world.pos)) and core.rejections.get("internal_error", 0) == 0


def test_a_forged_far_future_packet_seq_does_not_lock_the_client_out() -> None:
    """The token authenticates the sender, not the fields: a copy of a client's packet with its
    packet_seq set near 2**32 is refused as too new, and the client's own packets still count."""
    core, a, b = _two_players()
    run_ticks(core, [a, b], 4)
    now = core.next_tick_s()
    real = proto.decode_client(a.command(now))
    core.receive(a.address, proto.encode(real._replace(packet_seq=2**32 - 1)), now)
    assert core.rejections["replay_too_new"] == 1
    applied = core.by_slot[a.slot].commands_applied
    run_ticks(core, [a, b], 8)
    assert core.by_slot[a.slot].commands_applied > applied
    assert core.rejections.get("replay_too_old", 0) == 0
    assert core.config.max_packet_jump() == 256 * 10 + 64


def test_a_forged_far_future_command_seq_does_not_freeze_the_player() -> None:
    """Commands numbered far past the newest one held are refused: applied, they would make
    every real command after them look applied already, and the player would stand frozen."""
    core, a, b = _two_players()
    run_ticks(core, [a, b], 4)
    now = core.next_tick_s()
    real = proto.decode_client(a.command(now))
    far = [c._replace(seq=2**32 - 10 + k) for k, c in enumerate(real.commands)]
    core.receive(a.address, proto.encode(real._replace(packet_seq=real.packet_seq + 100,
                                                       command_block=proto.pack_commands(far))), now)
    assert core.rejections["command_too_new"] == len(far)
    applied = core.by_slot[a.slot].commands_applied
    run_ticks(core, [a, b], 8)
    assert core.by_slot[a.slot].commands_applied >= applied + 8
    assert core.by_slot[a.slot].last_applied_seq < 2**31


def test_nan_claims_never_enter_state() -> None:
    core, a, b = _two_players()
    run_ticks(core, [a, b], 5)
    now = core.next_tick_s()
    msg = proto.decode_client(a.command(now))
    cmd = msg.commands[-1]._replace(pos=(float("nan"), 0.0, 0.0))
    raw = proto.encode(proto.Input.with_commands(a.token, a.packet_seq + 1, now, None, [cmd]), check_size=False)
    core.receive(a.address, raw, now)
    core.step(now)
    assert np.all(np.isfinite(core.world.pos))


class _ShotLog(Detector):
    """A detector that keeps every ShotResult and AimSample it is fed."""

    name = "shotlog"

    def __init__(self) -> None:
        self.shots: list = []
        self.aims: list = []

    def on_shot(self, shot, skip):  # type: ignore[no-untyped-def]
        self.shots.append(shot)
        return ()

    def on_aim(self, sample, skip):  # type: ignore[no-untyped-def]
        self.aims.append(sample)
        return ()


def _armed_duel(**overrides):
    """Alice 15 m west of Bob, facing him with a ready pistol; a pipeline keeps every ShotResult
    and AimSample. ``overrides``: ServerConfig fields."""
    from anticheat.pipeline import DetectionPipeline
    from anticheat.skip import SkipBook

    log = _ShotLog()
    core, a, b = _two_players(pipeline=DetectionPipeline([log], SkipBook()), **overrides)
    place(core, a.slot, (10.0, 30.0), 0.0, a)
    place(core, b.slot, (25.0, 30.0), 180.0, b)
    weapon_ready(core, a.slot, int(WeaponId.PISTOL))
    run_ticks(core, [a, b], 40)
    return core, log, a, b


def test_first_contact_tells_whether_the_crosshair_was_already_on_the_victim() -> None:
    core, log, a, b = _armed_duel()
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=0.0, pitch_deg=-1.5, view_time_s=0.0)
    # Per 160-tick round (shots 50-60 ticks apart, slower than the pistol's 0.6 s): at 20 the
    # crosshair has been on bob since the round began; at 70 it swings onto bob from 30 deg away
    # in the shot's own command; at 120 it points at empty space.
    def yaw_at(k: int) -> float:
        return 0.0 if k <= 20 else 30.0 if k < 70 else 0.0 if k < 120 else 60.0

    def script(c: ScriptedClient, now: float) -> bytes:
        if c is b:
            core.world.health[b.slot] = 100.0  # bob must survive to stay where he is
            return c.command(now, yaw=180.0)
        k = core.tick % 160
        yaw = yaw_at(k)
        if k in (20, 70, 120):
            return c.command(now, yaw=yaw, pitch=-1.5, buttons=1,
                             shots=(shot._replace(yaw_deg=yaw, view_time_s=now - 0.1),))
        return c.command(now, yaw=yaw, pitch=-1.5)

    run_ticks(core, [a, b], 160 * 2, script)
    fired = [(yaw_at((s.tick - 1) % 160), s.first_contact) for s in log.shots if s.shooter == a.slot]
    assert len(fired) == 6
    # (The server applies a command on the tick after it arrives.)
    held = [fc for y, fc in fired if y == 0.0]
    assert sorted(held, key=str) == [False, False, True, True]
    assert [fc for y, fc in fired if y == 60.0] == [None, None]
    # Shots without claims carry no claimed victim position.
    assert all(s.claimed_victim_pos is None for s in log.shots)


def test_the_crosshair_probe_names_whom_each_command_aimed_at_and_whether_it_could_fire() -> None:
    """Every command's AimSample says whom its crosshair met (lag-compensated, as the command's
    shot would be) and whether the weapon could fire then: on Bob, off him by 30 deg, and on him
    again; the pistol not ready for its fire interval after a shot, ready again after it."""
    core, log, a, b = _armed_duel()
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=0.0, pitch_deg=-1.5, view_time_s=0.0)
    fired_at: list[int] = []

    def script(c: ScriptedClient, now: float) -> bytes:
        if c is b:
            core.world.health[b.slot] = 100.0
            return c.command(now, yaw=180.0)
        k = core.tick % 100
        yaw = 0.0 if k < 40 else 30.0 if k < 70 else 0.0
        if k == 20:
            fired_at.append(core.tick + 1)  # applied on the next tick
            return c.command(now, yaw=yaw, pitch=-1.5, buttons=1,
                             shots=(shot._replace(yaw_deg=yaw, view_time_s=now - 0.1),))
        return c.command(now, yaw=yaw, pitch=-1.5)

    log.aims.clear()
    run_ticks(core, [a, b], 250, script)
    mine = {s.tick: s for s in log.aims if s.player == a.slot}
    assert len(fired_at) == 2 and all(t in mine for t in fired_at)
    for t in fired_at:
        # The command that fired was on Bob and ready; the next one, a tick later, on him but not
        # ready (the pistol's 0.6 s interval); 0.7 s later ready again.
        assert mine[t].crosshair_target == b.slot and mine[t].fire_ready is True
        assert mine[t + 1].crosshair_target == b.slot and mine[t + 1].fire_ready is False
        assert mine[t + 45].fire_ready is True
    # 30 deg off (k 40-69): the crosshair is on nobody.
    off = [s for tick, s in mine.items() if 45 <= (tick - 1) % 100 < 69]
    assert off and all(s.crosshair_target is None for s in off)
    on = [s for tick, s in mine.items() if 75 <= (tick - 1) % 100 < 100 or 1 <= (tick - 1) % 100 < 39]
    assert on and all(s.crosshair_target == b.slot for s in on)
    # Bob faces Alice throughout.
    assert {s.crosshair_target for s in log.aims if s.player == b.slot} == {a.slot}
    # The probe switched off: no targets, readiness still told.
    core2, log2, a2, b2 = _armed_duel(crosshair=CrosshairProbeConfig(enabled=False))
    assert log2.aims and all(s.crosshair_target is None and s.fire_ready is not None for s in log2.aims)


def test_shots_of_one_tick_kill_in_order_and_each_kill_sees_the_world_of_its_ray() -> None:
    """Two duels shot on the same tick: alice's shotgun blast on bob (5 hit points left), then
    carol's pistol on dave. The pellet that empties bob's health kills him, its KillEvent right
    after its ShotResult, and the pellets after it deal nothing; a kill subscriber sees the world
    as it is at that pellet: bob dead, dave not yet hit."""
    from anticheat.events import KillEvent
    from anticheat.pipeline import DetectionPipeline
    from anticheat.skip import SkipBook

    log = _ShotLog()
    core = make_core()
    core.pipeline = DetectionPipeline([log], SkipBook())
    a, b, c, d = (ScriptedClient(n, ("127.0.0.1", 5001 + i)) for i, n in enumerate(("alice", "bob", "carol", "dave")))
    clients = [a, b, c, d]
    for client in clients:
        client.connect(core, 0.0)
    run_ticks(core, clients, 3)
    for shooter, victim, y in ((a, b, 20.0), (c, d, 40.0)):
        place(core, shooter.slot, (10.0, y), 0.0, shooter)
        place(core, victim.slot, (13.0 if shooter is a else 25.0, y), 180.0, victim)
    weapon_ready(core, a.slot, int(WeaponId.SHOTGUN))
    weapon_ready(core, c.slot, int(WeaponId.PISTOL))
    run_ticks(core, clients, 40)
    core.world.health[b.slot] = 5.0
    seen: list[tuple[object, bool, float]] = []

    def on_kill(event: KillEvent) -> None:
        before = core._tick_events[-2]
        seen.append((before, bool(core.world.alive[event.victim]), float(core.world.health[d.slot])))

    core.bus.subscribe(KillEvent, on_kill)
    weapons = {a.slot: (int(WeaponId.SHOTGUN), -8.0), c.slot: (int(WeaponId.PISTOL), -1.5)}
    fire_at = core.tick + 2

    def script(client: ScriptedClient, now: float) -> bytes:
        yaw = 180.0 if client in (b, d) else 0.0
        if client.slot in weapons and core.tick + 1 == fire_at:
            weapon, pitch = weapons[client.slot]
            shot = proto.Shot(cmd_seq=0, weapon=weapon, yaw_deg=yaw, pitch_deg=pitch, view_time_s=now - 0.1)
            return client.command(now, yaw=yaw, pitch=pitch, buttons=1, shots=(shot,))
        return client.command(now, yaw=yaw)

    run_ticks(core, clients, 6, script)
    results = log.shots
    blast = [r for r in results if r.shooter == a.slot]
    landed = [r for r in blast if r.victim == b.slot]
    assert len(landed) >= 2, "the blast must put at least two pellets on bob at 3 m"
    assert landed[0].damage > 0.0 and all(r.damage == 0.0 for r in landed[1:])
    assert [r.victim for r in results if r.shooter == c.slot] == [d.slot]
    assert float(core.world.health[d.slot]) < 100.0
    assert len(seen) == 1
    killing, alive, dave_health = seen[0]
    assert killing is landed[0] and not alive and dave_health == 100.0


def test_claimed_victim_is_rewound_even_when_the_server_ray_misses() -> None:
    core, log, a, b = _armed_duel()
    # Aimed 40 deg away from bob, claiming a head hit on him 60 m behind him (proaim).
    shot = proto.Shot(cmd_seq=0, weapon=int(WeaponId.PISTOL), yaw_deg=40.0, pitch_deg=0.0, view_time_s=0.0,
                      claimed_victim=b.slot, claimed_hit_point=(85.0, 30.0, 1.7), claimed_bone=2)

    def script(c: ScriptedClient, now: float) -> bytes:
        if c is a and core.tick % 50 == 0:
            return c.command(now, yaw=40.0, buttons=1, shots=(shot._replace(view_time_s=now - 0.1),))
        return c.command(now, yaw=40.0 if c is a else 180.0)

    run_ticks(core, [a, b], 160, script)
    mine = [s for s in log.shots if s.shooter == a.slot]
    assert len(mine) >= 2 and all(s.victim is None for s in mine)
    for s in mine:
        # The server attaches the firing command's view and the one before, for the silent-aim check.
        assert s.claim.view == (40.0, 0.0) and s.claim.prev_view == (40.0, 0.0)
        assert s.claimed_victim_pos is not None
        assert abs(s.claimed_victim_pos[0] - 25.0) < 0.1 and abs(s.claimed_victim_pos[1] - 30.0) < 0.1


def test_a_lost_respawn_correction_is_sent_again_until_claims_show_it_arrived() -> None:
    # A client that says nothing after connecting: the spawn CORRECTION goes out every 200 ms.
    core = make_core()
    quiet = ScriptedClient("quiet", ("127.0.0.1", 5009))
    quiet.connect(core, 0.0)
    run_ticks(core, [quiet], 40, lambda c, now: None)  # 0.62 s
    assert len(quiet.corrections) >= 3 and core.counters["corrections_resent"] >= 2

    # A client whose CORRECTIONs are all lost keeps claiming (0, 0, 0): one CORRECTION per
    # 200 ms, the ones in between suppressed, until a claim matches.
    core = make_core()
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    a.connect(core, 0.0)

    def lost(c: ScriptedClient, now: float) -> bytes:
        c.own = None
        return c.command(now)

    run_ticks(core, [a], 48, lost)  # 0.75 s
    assert 3 <= len(a.corrections) <= 5 and core.counters["corrections_suppressed"] >= 30
    spawn_pos = a.corrections[0].pos
    assert all(c.pos == spawn_pos for c in a.corrections)
    assert [c.cmd_seq for c in a.corrections] == sorted(c.cmd_seq for c in a.corrections)

    def healed(c: ScriptedClient, now: float) -> bytes:
        c.own = proto.OwnState(spawn_pos, (0.0, 0.0, 0.0), 0.0, 0.0, 100.0, 0, 0, 0, 0, True, True)
        return c.command(now)

    run_ticks(core, [a], 8, healed)
    sent = len(a.corrections)
    run_ticks(core, [a], 64, healed)
    assert len(a.corrections) == sent
    # No teleport evidence for the claims from the origin: they were never judged.
    assert core.validator.suppressed[a.slot] >= 30
    assert core.rejections.get("internal_error", 0) == 0


def test_tick_stats_split_the_tick_into_its_phases() -> None:
    from server.tick_stats import PHASES

    core, a, b = _two_players()
    run_ticks(core, [a, b], 64)
    summary = core.tick_stats.summary()
    phases = summary["phase_mean_ms"]
    assert list(phases) == list(PHASES)
    assert all(v >= 0.0 for v in phases.values()) and phases["visibility"] > 0.0 and phases["inputs"] > 0.0
    # The phases are inside the tick: their sum never exceeds the slowest tick.
    assert sum(phases.values()) <= summary["max_ms"] + 1e-9
    # The server's CPU time is measured beside the wall time of every tick.
    assert 0.0 < summary["cpu_p50_ms"] <= summary["cpu_p99_ms"]


def test_tick_stats_cpu_time_apart_from_wall_time() -> None:
    from server.tick_stats import TickStats

    stats = TickStats(budget_s=0.01)
    for i in range(100):
        # A host that takes the CPU away: wall times far above the CPU spent.
        stats.add(0.002 + (0.02 if i == 99 else 0.0), 0.001)
    stats.add(0.003)  # not measured: left out of the CPU percentiles
    summary = stats.summary()
    assert summary["overruns"] == 1
    assert summary["cpu_p99_ms"] == summary["cpu_p50_ms"] == 1.0
    assert summary["max_ms"] == 22.0 and summary["p50_ms"] == 2.0


def test_tick_stats_durations_oldest_first_across_the_ring() -> None:
    from server.tick_stats import TickStats

    stats = TickStats(budget_s=0.01, window=4)
    for ms in (1, 2, 3):
        stats.add(ms / 1e3)
    assert stats.durations_s().tolist() == [0.001, 0.002, 0.003]
    for ms in (4, 5, 6):
        stats.add(ms / 1e3)
    # The ring wrapped: the last four ticks, oldest first, as copies the stats no longer touch.
    got = stats.durations_s()
    assert got.tolist() == [0.003, 0.004, 0.005, 0.006]
    got[:] = 0.0
    assert stats.durations_s().tolist() == [0.003, 0.004, 0.005, 0.006]


def _random_world(core, rng: np.random.Generator) -> None:
    """Random positions, views, stances and liveness in every slot, random visibility."""
    w = core.world
    cap = w.capacity
    w.pos[:] = rng.uniform(-60.0, 60.0, (cap, 3)) * np.array([1.0, 1.0, 0.05])
    w.pos[3] = w.pos[2]  # two equally good targets for everyone: the first one wins
    w.stance[:] = rng.integers(0, 2, cap)
    w.stance[3] = w.stance[2]
    w.vel[:] = rng.normal(0.0, 4.0, (cap, 3))
    w.yaw[:] = rng.uniform(-180.0, 180.0, cap)
    w.pitch[:] = rng.uniform(-89.0, 89.0, cap)
    w.alive[:] = rng.random(cap) < 0.8
    w.active[:] = rng.random(cap) < 0.9
    core.culler.visible[:] = rng.random((cap, cap)) < 0.6
    core.weapons.punch_pitch_deg[:] = rng.normal(0.0, 2.0, cap)
    core.weapons.punch_yaw_deg[:] = rng.normal(0.0, 1.0, cap)
    core.weapons.weapon[:] = rng.integers(0, 3, cap)


def test_aim_kernels_match_the_numpy_formulation() -> None:
    """The compiled nearest-target search gives the numpy formulation's answers bit for bit
    (the norm's and einsum's summation orders, argmin's first-of-equals, zero distances)."""
    from server.aim_samples import CHEST_M as _CHEST_M
    from server.aim_samples import EYE_M as _EYE_M
    from world.state import view_direction

    core = make_core(max_clients=128)
    rng = np.random.default_rng(7)
    for _ in range(20):
        _random_world(core, rng)
        w = core.world
        slots = rng.permutation(w.capacity)[: rng.integers(1, 65)].astype(np.intp)
        rad = np.radians(np.stack((w.yaw[slots], w.pitch[slots])))
        k = len(slots)
        floats, ints, ground = core._aim_kernels(
            slots, np.array([k]), np.zeros(k, bool), np.stack((np.cos(rad), np.sin(rad))), 0, np.zeros((k, 3)),
            np.zeros(k, np.int8), np.zeros((k, 3)), np.zeros(k, bool),
        )

        eye = w.pos[slots].copy()
        eye[:, 2] += _EYE_M[w.stance[slots]]
        view = view_direction(w.yaw[slots], w.pitch[slots])
        chest = w.pos.copy()
        chest[:, 2] += _CHEST_M[w.stance]
        to_t = chest[None, :, :] - eye[:, None, :]
        dist = np.linalg.norm(to_t, axis=2)
        cosang = np.einsum("kj,knj->kn", view, to_t) / np.maximum(dist, 1e-9)
        angle = np.degrees(np.arccos(np.clip(cosang, -1.0, 1.0)))
        candidates = core.culler.visible[slots] & w.alive[None, :] & w.active[None, :]
        candidates[np.arange(len(slots)), slots] = False
        angle = np.where(candidates, angle, np.inf)
        best = np.argmin(angle, axis=1)
        rows = np.arange(len(slots))
        has = np.isfinite(angle[rows, best])
        assert np.array_equal(ints[0], np.where(has, best, -1))
        # Within rounding, not bit for bit: numpy's summation order may follow the CPU's SIMD width.
        np.testing.assert_allclose(floats[1], np.where(has, angle[rows, best], 180.0), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(floats[2], np.where(has, dist[rows, best], 0.0), rtol=1e-12, atol=1e-12)
        assert floats[0].tobytes() == np.hypot(w.vel[slots, 0], w.vel[slots, 1]).tobytes()
        assert np.array_equal(ints[1], w.stance[slots]) and np.array_equal(ground, w.on_ground[slots])


def test_aim_kernels_in_rounds_see_the_world_each_round_leaves() -> None:
    """Rounds of viewers in one call give, bit for bit, what one call per round gives on a world
    where each round's moved players have been put at their new state first (the server's rounds)."""
    core = make_core(max_clients=128)
    rng = np.random.default_rng(11)
    for _ in range(10):
        _random_world(core, rng)
        w = core.world
        cap = w.capacity
        moves = rng.random(cap) < 0.7
        rounds = [np.sort(rng.permutation(cap)[: rng.integers(1, 40)]).astype(np.intp) for _ in range(rng.integers(1, 5))]
        slots = np.concatenate(rounds)
        k = len(slots)
        moved = moves[slots]
        row_pos = rng.uniform(-60.0, 60.0, (k, 3)) * np.array([1.0, 1.0, 0.05])
        row_stance = rng.integers(0, 2, k).astype(np.int8)
        row_vel = rng.normal(0.0, 4.0, (k, 3))
        row_ground = rng.random(k) < 0.5
        deg = rng.uniform(-180.0, 180.0, (2, k))
        cos_sin = np.stack((np.cos(np.radians(deg)), np.sin(np.radians(deg))))
        stops = np.cumsum([len(r) for r in rounds])
        kept = (w.pos.copy(), w.stance.copy())
        got = core._aim_kernels(slots, stops, moved, cos_sin, 0, row_pos, row_stance, row_vel, row_ground)
        assert w.pos.tobytes() == kept[0].tobytes() and w.stance.tobytes() == kept[1].tobytes()
        want: list[list[np.ndarray]] = [[], [], []]
        a = 0
        for stop in stops:
            mine = np.arange(a, stop)[moved[a:stop]]
            s = slots[mine]
            w.pos[s], w.stance[s], w.vel[s], w.on_ground[s] = row_pos[mine], row_stance[mine], row_vel[mine], row_ground[mine]
            n = stop - a
            part = core._aim_kernels(slots[a:stop], np.array([n]), np.zeros(n, bool), cos_sin, a, row_pos, row_stance,
                                     row_vel, row_ground)
            for have, arr in zip(want, part, strict=True):
                have.append(arr)
            a = stop
        for arr, parts in zip(got, want, strict=True):
            assert arr.tobytes() == np.concatenate(parts, axis=-1).tobytes()


def test_snapshot_frames_encode_what_each_message_would() -> None:
    """Datagrams cut from the shared frame are byte for byte the encoded Snapshot messages built
    from the world for each client: own state, records in slot order, baits, parts."""
    from server.entity_block import EntityFlags, make_entities, split_entities

    core = make_core(max_clients=128)
    rng = np.random.default_rng(3)
    _random_world(core, rng)
    w, weapons = core.world, core.weapons
    weapons.weapon[:] = rng.integers(0, 4, w.capacity)
    weapons.ammo[:] = rng.integers(0, 30, weapons.ammo.shape)
    weapons.reserve[:] = rng.integers(0, 90, weapons.reserve.shape)
    w.health[:] = rng.uniform(0.0, 100.0, w.capacity).astype(np.float32)
    limits = core.config.protocol
    baits = [(200, (1.5, 2.0, 2.15)), (201, (-3.25, 4.0, 2.15))]

    def check(slot: int, targets: np.ndarray, slot_baits: list[tuple[int, tuple[float, float, float]]],
              seq: int) -> None:
        got = core.snapshots.build(w, weapons, slot, targets, baits=slot_baits, tick=42, server_time_s=0.328125,
                                   last_cmd_seq=seq)
        held = int(weapons.weapon[slot])
        own = proto.OwnState(
            pos=tuple(float(v) for v in w.pos[slot]), vel=tuple(float(v) for v in w.vel[slot]),
            yaw_deg=float(w.yaw[slot]), pitch_deg=float(w.pitch[slot]), health=float(w.health[slot]), weapon=held,
            ammo=int(weapons.ammo[slot, held]) if held else 0, reserve=int(weapons.reserve[slot, held]) if held else 0,
            stance=int(w.stance[slot]), on_ground=bool(w.on_ground[slot]), alive=bool(w.alive[slot]),
        )
        flags = np.where(w.alive[targets], int(EntityFlags.ALIVE), 0) | np.where(
            w.stance[targets] == 1, int(EntityFlags.CROUCHING), 0)
        records = make_entities(targets, flags, w.pos[targets], w.vel[targets], w.yaw[targets], w.pitch[targets],
                                weapons.weapon[targets], w.health[targets])
        if slot_baits:
            n = len(slot_baits)
            records = np.concatenate([records, make_entities(
                np.array([b[0] for b in slot_baits]), np.full(n, int(EntityFlags.ALIVE | EntityFlags.NOT_RENDERED)),
                np.array([b[1] for b in slot_baits]), np.zeros((n, 3)), np.zeros(n), np.zeros(n),
                np.zeros(n, dtype=np.int64), np.full(n, 100.0))])
        parts = split_entities(records, proto.max_entities_per_snapshot(limits))
        want = [
            proto.encode(proto.Snapshot(tick=42, server_time_s=0.328125, last_cmd_seq=seq if seq >= 0 else None,
                                        own=own, entities=part.tobytes(), part=i, part_count=len(parts)), limits)
            for i, part in enumerate(parts)
        ]
        assert got == want

    for slot, n_targets, slot_baits, seq in ((0, 0, [], -1), (5, 12, baits[:1], 7), (9, 70, baits, 12345)):
        # A snapshot shows active players only (the culler's rows are masked by ``active``).
        check(slot, np.sort(rng.choice(np.flatnonzero(w.active[10:]) + 10, n_targets, replace=False)), slot_baits, seq)
    # The frame stops at the last active slot (nothing past it is ever sent or receives).
    w.active[60:] = False
    w.active[59] = True
    active = np.flatnonzero(w.active)
    check(int(active[0]), active[1:], baits, 3)


def test_a_viewer_who_sees_everyone_gets_snapshots_a_client_accepts() -> None:
    """200 slots, every one visible to slot 0, and more live baits of slot 0 than the datagrams
    left over hold: the snapshot keeps every player and the newest baits that fit, in at most
    ``max_snapshot_parts`` datagrams (a client refuses more, and so would lose every snapshot)."""
    from server.shots import Bait as _Bait
    from server.entity_block import decode_entities

    core = make_core(max_clients=200)
    w = core.world
    w.active[:] = True
    w.alive[:] = True
    w.pos[:, 0] = np.arange(w.capacity) * 0.5
    core.culler.visible[:] = True
    np.fill_diagonal(core.culler.visible, False)
    core.by_slot[0] = _session()
    core.netstats.open(0, 0.0)
    room = core.config.snapshot_bait_room()
    assert 0 < room < 56
    core._baits = [_Bait(200 + k, 0, (float(k), 1.0, 2.15), 1e9) for k in range(56)]
    core._send_snapshots(0.0)
    parts = [proto.decode_server(d, core.config.protocol) for _, d in core._out]
    limits = core.config.protocol
    assert 1 < len(parts) <= limits.max_snapshot_parts
    ids = [int(i) for p in parts for i in decode_entities(p.entities)["slot"]]
    assert ids[:199] == list(range(1, 200))
    assert ids[199:] == list(range(200 + 56 - room, 256))  # the newest baits that fit


# ------------------------------------------------------------------------------------------------
# Re-sent commands: each INPUT carries the newest command and the 3 before it


def _cmd(seq: int) -> proto.Command:
    return proto.Command(seq, seq, 1.0 + seq / 64, 1 / 64, 1.0, -0.25, 10.0 + seq, -2.0, 0, 0, 0.5, -0.5,
                         (seq * 0.1, -1.0, 0.0))


def _session() -> ClientSession:
    creds = SessionCredentials(0, ("127.0.0.1", 1), b"s" * 16, 1e9, b"t" * 16)
    return ClientSession(0, creds.address, "x", creds, ReplayWindow(), ClientRateLimiter(RateLimitConfig(), 0.0),
                         0.0, 0.0, 0.0)


def _block(*seqs: int) -> bytes:
    return proto.pack_commands(_cmd(s) for s in seqs)


def test_session_queues_each_command_once_in_order() -> None:
    s = _session()
    assert s.queue(_block(1, 2, 3, 4), (), 16) == 4
    assert s.queue(_block(2, 3, 4, 5), (), 16) == 1  # three re-sent, one new
    assert s.queue(_block(2, 3, 4, 5), (), 16) == 0  # the same INPUT again
    assert list(s.queued) == [1, 2, 3, 4, 5] and s.queued[5] == proto.pack_command(_cmd(5))
    assert s.take(16, 0) == [proto.pack_command(_cmd(q)) for q in (1, 2, 3, 4, 5)] and s.last_applied_seq == 5
    assert s.queue(_block(3, 4, 5), (), 16) == 0  # applied already
    # 6 and 7 are lost with their packets; 9 arrives before 8 (reordered): each fills its place.
    assert s.queue(_block(8, 9), (), 16) == 2
    assert s.queue(_block(5, 6, 7, 8), (), 16) == 2
    assert list(s.queued) == [6, 7, 8, 9]
    assert s.take(16, 0) == [proto.pack_command(_cmd(q)) for q in (6, 7, 8, 9)]
    # A gap far back, with newer commands queued after it.
    assert s.queue(_block(12, 13), (), 16) == 2
    assert s.queue(_block(10, 11, 12, 13), (), 16) == 2
    assert list(s.queued) == [10, 11, 12, 13]


def test_session_queue_limit_and_shots() -> None:
    s = _session()
    shot = proto.Shot(cmd_seq=3, weapon=1, yaw_deg=0.0, pitch_deg=0.0, view_time_s=1.0)
    assert s.queue(_block(1, 2, 3, 4), (shot,), 3) == 4
    assert list(s.queued) == [2, 3, 4] and s.shots == {3: [shot]}  # the oldest went over the limit
    again = shot._replace(yaw_deg=5.0)  # a re-sent command's shot is not registered twice
    assert s.queue(_block(2, 3, 4, 5), (again,), 3) == 1
    assert s.shots == {3: [shot]} and list(s.queued) == [3, 4, 5]
    assert s.queue(_block(6, 7, 8), (), 3) == 3
    assert list(s.queued) == [6, 7, 8] and s.shots == {}
    assert s.commands_overflowed == 5  # 1, 2, 3, 4 and 5 went unapplied


def test_session_names_the_commands_missing_before_each_taken_one() -> None:
    s = _session()
    s.queue(_block(1, 2, 3), (), 16)
    assert s.missing_before(0, 3) is None  # a session's first commands have nothing before them
    s.take(3, 0)
    s.queue(_block(4, 5), (), 16)
    assert s.missing_before(0, 2) is None
    assert s.missing_before(1, 1) == [1]  # the timer drops 4: one missing before 5
    s.take(2, 0)
    s.queue(_block(8, 9), (), 16)  # 6 and 7 lost
    s.queue(_block(11), (), 16)  # 10 lost
    assert s.missing_before(0, 3) == [2, 0, 1]
    assert s.missing_before(1, 2) == [3, 1]
    s.take(0, 3)  # the timer drops all three this tick: the next command counts from 5
    s.queue(_block(12), (), 16)
    assert s.missing_before(0, 1) == [6]


def test_redundant_commands_are_applied_once_through_the_core() -> None:
    core, a, b = _two_players()
    session = core.by_slot[a.slot]
    applied0, first = session.commands_applied, a.seq + 1
    received0 = core.counters["commands_received"]
    for tick in range(24):
        now = core.next_tick_s()
        data = a.command(now)
        if tick != 5:  # lost at tick 5: its command arrives with the next INPUT
            core.receive(a.address, data, now - 0.001)
        if tick == 9:  # the same commands again under a new packet number
            msg = proto.decode_client(data)
            a.packet_seq += 1
            again = msg._replace(packet_seq=a.packet_seq)
            core.receive(a.address, proto.encode(again), now - 0.001)
        core.receive(b.address, b.command(now), now - 0.001)
        b.deliver(core.step(now))
    assert session.last_applied_seq == a.seq and not session.queued
    assert session.commands_applied - applied0 == a.seq - first + 1 == 24
    assert core.counters["commands_received"] - received0 == 24 + 24  # alice's and bob's, once each
    assert core.rejections.get("internal_error", 0) == 0


class _QueueModel:
    """ClientSession.queue / take written out plainly: every record checked, sort, trim."""

    def __init__(self) -> None:
        self.queued: dict[int, bytes] = {}
        self.shots: dict[int, list[proto.Shot]] = {}
        self.applied = -1

    def queue(self, cmds: list[proto.Command], shots: tuple[proto.Shot, ...], limit: int) -> int:
        new = [c for c in cmds if c.seq > self.applied and c.seq not in self.queued]
        for c in new:
            self.queued[c.seq] = proto.pack_command(c)
        if new:
            for s in shots:
                if s.cmd_seq in self.queued and s.cmd_seq not in self.shots:
                    self.shots[s.cmd_seq] = [x for x in shots if x.cmd_seq == s.cmd_seq]
            self.queued = dict(sorted(self.queued.items()))
            while len(self.queued) > limit:
                dropped = next(iter(self.queued))
                del self.queued[dropped]
                self.shots.pop(dropped, None)
        return len(new)

    def take(self, n: int) -> list[bytes]:
        seqs = list(self.queued)[:n]
        if seqs:
            self.applied = max(self.applied, seqs[-1])
        return [self.queued.pop(q) for q in seqs]


def test_session_queue_matches_a_plain_model_under_loss_reordering_and_duplicates() -> None:
    rng = np.random.default_rng(8)
    for trial in range(40):
        s, model = _session(), _QueueModel()
        limit = int(rng.integers(2, 8))
        sent: list[bytes] = []
        shots_of: dict[int, tuple[proto.Shot, ...]] = {}
        newest = 0
        for _ in range(60):
            newest += int(rng.choice([1, 1, 1, 2, 3]))  # seqs skip now and then (a cheat, a wrap)
            seqs = sorted({max(1, newest - int(k)) for k in rng.integers(0, 6, int(rng.integers(1, 5)))} | {newest})
            shots = tuple(proto.Shot(q, 1, float(q), 0.0, 1.0) for q in seqs if q % 3 == 0)
            sent.append(_block(*seqs))
            shots_of[len(sent) - 1] = shots
            # Deliver the newest INPUT, or an old one again (reordered, duplicated), or nothing (lost).
            pick = int(rng.choice([len(sent) - 1, len(sent) - 1, int(rng.integers(0, len(sent))), -1]))
            if pick >= 0:
                block = sent[pick]
                cmds = list(proto.Input(b"", 0, 0.0, None, block).commands)
                assert s.queue(block, shots_of[pick], limit) == model.queue(cmds, shots_of[pick], limit)
            if rng.random() < 0.4:
                n = int(rng.integers(0, 4))
                assert s.take(n, 0) == model.take(n)
            assert list(s.queued.items()) == list(model.queued.items()), trial
            assert s.shots == model.shots and s.last_applied_seq == model.applied


def test_a_decoder_bug_is_counted_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport hands datagrams to receive from its socket callback: whatever goes wrong
    while decoding one is counted and the server keeps serving."""
    core, a, b = _two_players()

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(proto, "decode_client", broken)
    assert core.receive(("127.0.0.1", 9), b"\x93\x01\x03", 1.0) == []
    assert core.rejections["internal_error"] == 1
    monkeypatch.undo()
    run_ticks(core, [a, b], 8)
    assert core.tick >= 8


def test_tick_command_columns_are_the_records_values_in_round_order() -> None:
    """The tick reads its commands' fields with one compiled pass: each row's values are those of
    its record, bit for bit, the yaw wrapped and the radians as numpy computes them."""
    from server.tick_commands import TickCommands as _TickCommands
    from world.state import WorldLimits, WorldState

    rng = np.random.default_rng(3)
    n = 40
    yaw = np.concatenate([[-180.0, 180.0, 540.0, -0.0, 0.0, 359.99999999999994], rng.uniform(-720.0, 720.0, n - 6)])
    cmds = [
        proto.Command(int(rng.integers(0, 2**32)), i, float(rng.uniform(0, 99)), 1 / 128, float(rng.uniform(-1, 1)),
                      float(rng.uniform(-1, 1)), float(yaw[i]), float(rng.uniform(-89, 89)), int(rng.integers(0, 512)),
                      int(rng.integers(0, 7)), float(rng.normal()), float(rng.normal()),
                      tuple(rng.uniform(-500, 500, 3).tolist()))
        for i in range(n)
    ]
    order = rng.permutation(n).astype(np.intp)
    world = WorldState(WorldLimits(max_players=n))
    words, halves = proto.command_arrays(proto.pack_commands(cmds))
    got = _TickCommands(words, halves, order, list(range(n)), [0.0] * n, world)
    rows = [cmds[r] for r in order.tolist()]
    bits = lambda xs: np.asarray(xs, dtype=np.float64).view(np.int64).tolist()  # noqa: E731
    numbers = [[c.duration_s, c.forward, c.side, c.yaw_deg, c.pitch_deg, float(c.buttons)] for c in rows]
    assert bits(got.numbers) == bits(np.array(numbers).T)
    assert bits(got.claimed) == bits([c.pos for c in rows])
    want_yaw = (np.array([c.yaw_deg for c in rows]) + 180.0) % 360.0 - 180.0
    assert bits(got.yaw) == bits(want_yaw)
    rad = np.radians(np.stack((want_yaw, [c.pitch_deg for c in rows])))
    assert bits(got.cos_sin[0]) == bits(np.cos(rad)) and bits(got.cos_sin[1]) == bits(np.sin(rad))
    assert (got.seq, got.buttons, got.switch) == tuple([getattr(c, f) for c in rows]
                                                       for f in ("seq", "buttons", "weapon_switch"))
    assert (got.view_yaw, got.view_pitch, got.recoil_pitch, got.recoil_yaw) == tuple(
        [getattr(c, f) for c in rows] for f in ("yaw_deg", "pitch_deg", "recoil_pitch_deg", "recoil_yaw_deg"))
    assert [got.command(i) for i in range(n)] == rows


def test_round_rows_put_each_players_kth_command_in_round_k() -> None:
    from server.tick_commands import round_rows as _round_rows

    # Sessions took 2, 0, 1 and 3 commands; rows in session order are a0 a1 | c0 | d0 d1 d2.
    assert _round_rows([2, 0, 1, 3]) == ([[0, 2, 3], [0, 3], [3]], [0, 2, 3, 1, 4, 5])
    assert _round_rows([1, 0, 1]) == ([[0, 2]], None)
