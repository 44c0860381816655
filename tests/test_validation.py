"""Movement validation (claims vs the authoritative simulation) and the timer check."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from physics.buttons import Buttons
from physics.config import MovementConfig, ValidationConfig
from physics.evidence import MovementEvidence, MovementKind
from physics.movement import MoveCommands, MoveResult, simulate
from physics.validation import MovementValidator, TimerBalance, ValidationResult, Verdict
from world.geometry import MapGeometry
from world.mapfile import GameMap, Wall, builtin_map
from world.weapons import WEAPONS, WeaponId

DT = 1.0 / 64.0
SPEED = WEAPONS[WeaponId.RIFLE].move_speed_m_s
WALL_X = 5.0


@pytest.fixture(scope="module")
def wall_geometry() -> MapGeometry:
    """A 200 m square with one thin wall whose faces are x = 5 and x = 5.3."""
    wall = Wall("w", ((WALL_X, -40.0), (WALL_X + 0.3, -40.0), (WALL_X + 0.3, 40.0), (WALL_X, 40.0)), 4.0)
    return MapGeometry(GameMap(name="wall", bounds=(-100.0, -100.0, 100.0, 100.0), walls=(wall,), spawns=()))


@pytest.fixture(scope="module")
def corridors_geometry() -> MapGeometry:
    return MapGeometry(builtin_map("corridors"))


Claim = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""(client position before, authoritative before, authoritative after) -> claimed position."""


class Server:
    """K players simulated authoritatively and validated each tick (zero-latency corrections:
    a corrected client is told at once and acknowledges)."""

    def __init__(self, geometry: MapGeometry, pos: np.ndarray, config: ValidationConfig | None = None) -> None:
        self.geometry = geometry
        k = len(pos)
        self.slots = np.arange(k)
        self.pos = np.asarray(pos, dtype=np.float64).copy()
        self.vel = np.zeros((k, 3))
        self.on_ground = np.ones(k, dtype=bool)
        self.stance = np.zeros(k, dtype=np.int8)
        self.client = self.pos.copy()
        self.validator = MovementValidator(k, config)
        self.evidence: list[MovementEvidence] = []
        self.verdicts: list[np.ndarray] = []
        self.tick = 0

    def step(self, cmd: MoveCommands, claim: Claim | None = None) -> tuple[MoveResult, ValidationResult]:
        res = simulate(self.pos, self.vel, self.on_ground, self.stance, cmd, SPEED, self.geometry)
        claimed = res.pos.astype(np.float32).astype(np.float64) if claim is None else claim(self.client, self.pos, res.pos)
        out = self.validator.validate(
            self.slots, self.pos, self.vel, self.on_ground, cmd, res, claimed, SPEED, self.geometry, self.tick, self.tick * DT
        )
        self.evidence.extend(out.evidence)
        self.verdicts.append(out.verdict)
        corrected = out.setback
        self.client = np.where(corrected[:, None], out.pos, claimed)
        if corrected.any():
            self.validator.acknowledge(self.slots[corrected])
        self.pos, self.vel, self.on_ground, self.stance = out.pos, res.vel, res.on_ground, res.stance
        self.tick += 1
        return res, out


def run_forward(k: int = 1, yaw: float = 90.0, buttons: int = 0) -> MoveCommands:
    return MoveCommands(np.ones(k), np.zeros(k), np.full(k, yaw), np.zeros(k), np.full(k, buttons), np.full(k, DT))


def scaled(factor: float) -> Claim:
    """A speed hack: the client moves ``factor`` times the model's horizontal step."""

    def claim(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        step = after - before
        step[:, :2] *= factor
        return client + step

    return claim


def test_honest_clients_are_always_accepted(corridors_geometry: MapGeometry) -> None:
    """32 players with random held inputs, sliding along corridor walls, jumping and crouching,
    claims rounded to float32 as on the wire: every claim accepted, no evidence, no correction."""
    rng = np.random.default_rng(7)
    spawns = np.array([(s.x, s.y) for s in corridors_geometry.game_map.spawns])
    k = 32
    server = Server(corridors_geometry, np.column_stack([spawns[rng.integers(0, len(spawns), k)], np.zeros(k)]))
    cmd = MoveCommands(np.ones(k), np.zeros(k), rng.uniform(-180, 180, k), np.zeros(k), np.zeros(k, dtype=int), np.full(k, DT))
    touched = 0
    for _ in range(400):
        change = rng.random(k) < 0.05
        cmd = MoveCommands(
            np.where(change, rng.uniform(-1, 1, k), cmd.forward_move),
            np.where(change, rng.uniform(-1, 1, k), cmd.side_move),
            np.where(change, rng.uniform(-180, 180, k), cmd.yaw_deg),
            cmd.pitch_deg,
            np.where(change, rng.integers(0, 64, k), cmd.buttons),
            cmd.dt_s,
        )
        res, out = server.step(cmd)
        touched += int(res.touched_wall.sum())
        assert out.accepted.all() and not out.setback.any()
    assert server.evidence == []
    assert server.validator.desyncs.sum() == 0 and server.validator.advantage_m.max() < 1e-3
    assert touched > 100


def test_speed_hack_is_flagged_and_set_back(wall_geometry: MapGeometry) -> None:
    server = Server(wall_geometry, np.array([[-50.0, -60.0, 0.0]]))
    for _ in range(64):
        server.step(run_forward())
    assert server.evidence == []
    honest_end = server.pos.copy()
    for _ in range(128):
        server.step(run_forward(), scaled(1.5))
    kinds = {e.kind for e in server.evidence}
    assert kinds == {MovementKind.SPEED}
    assert len(server.evidence) >= 30
    for e in server.evidence:
        assert e.setback and e.value > e.limit
        assert e.value == pytest.approx(1.5 * SPEED, rel=0.02)
        # Per command (limit with the 10 % tolerance) or from the accumulated advantage of the
        # commands that stayed within accept_m (limit without it).
        assert e.limit == pytest.approx(1.1 * SPEED, rel=1e-6) or e.limit == pytest.approx(SPEED, rel=1e-6)
    # The server never moved the player faster than the model: 2 s at the rifle's speed.
    assert server.pos[0, 1] - honest_end[0, 1] == pytest.approx(128 * DT * SPEED, rel=1e-6)


def test_small_speed_hack_caught_by_accumulated_advantage(wall_geometry: MapGeometry) -> None:
    """1.05x stays inside the 10 % tolerance on every command; Grim's advantage still adds up."""
    server = Server(wall_geometry, np.array([[-50.0, -60.0, 0.0]]))
    for _ in range(64):
        server.step(run_forward())
    for _ in range(64 * 6):
        server.step(run_forward(), scaled(1.05))
    speed = [e for e in server.evidence if e.kind is MovementKind.SPEED]
    assert speed, "the accumulated advantage never triggered"
    assert {e.kind for e in server.evidence} == {MovementKind.SPEED}
    for e in speed:
        assert e.limit < e.value < e.limit * 1.1
    # In between, the drift beyond accept_m was corrected as plain desyncs.
    assert server.validator.desyncs[0] > 0


def test_claim_through_a_wall_is_wall_clip(wall_geometry: MapGeometry) -> None:
    server = Server(wall_geometry, np.array([[WALL_X - 0.5, 0.0, 0.0]]))
    server.step(run_forward(yaw=0.0))

    def through(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        return before + np.array([[1.2, 0.0, 0.0]])

    _, out = server.step(run_forward(yaw=0.0), through)
    assert out.setback[0] and out.verdict[0] == Verdict.WALL_CLIP
    (e,) = server.evidence
    assert e.kind is MovementKind.WALL_CLIP and e.setback
    assert e.claimed is not None and e.claimed[0] > WALL_X + 0.3
    assert e.value > 0.5
    assert not wall_geometry.circle_blocked(out.pos[:, :2]).any()


def test_claim_ending_inside_a_wall_is_wall_clip(wall_geometry: MapGeometry) -> None:
    server = Server(wall_geometry, np.array([[WALL_X - 0.5, 0.0, 0.0]]))
    server.step(run_forward(yaw=0.0))

    def into(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        return np.array([[WALL_X - 0.3, before[0, 1], 0.0]])

    _, out = server.step(run_forward(yaw=0.0), into)
    assert out.verdict[0] == Verdict.WALL_CLIP
    assert [e.kind for e in server.evidence] == [MovementKind.WALL_CLIP]


def test_long_jump_is_teleport(wall_geometry: MapGeometry) -> None:
    server = Server(wall_geometry, np.array([[-50.0, 0.0, 0.0]]))

    def jump(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        return before + np.array([[0.0, 50.0, 0.0]])

    _, out = server.step(run_forward(), jump)
    assert out.verdict[0] == Verdict.TELEPORT and out.setback[0]
    (e,) = server.evidence
    assert e.kind is MovementKind.TELEPORT and e.value == pytest.approx(50.0) and e.limit == 40.0
    assert out.pos[0, 1] < 0.1


def test_desync_is_corrected_without_evidence(wall_geometry: MapGeometry) -> None:
    server = Server(wall_geometry, np.array([[-50.0, -60.0, 0.0]]))
    for _ in range(64):
        server.step(run_forward())

    def off(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        return after + np.array([[0.0, -0.06, 0.0]])  # lagging behind, not faster

    _, out = server.step(run_forward(), off)
    assert out.setback[0] and out.verdict[0] == Verdict.DESYNC
    assert server.evidence == [] and server.validator.desyncs[0] == 1


def test_claims_before_acknowledgement_are_corrected_silently(wall_geometry: MapGeometry) -> None:
    """After a respawn the client still claims its old position until the correction arrives."""
    validator = MovementValidator(1)
    pos = np.array([[0.0, 0.0, 0.0]])
    old = np.array([[60.0, 0.0, 0.0]])
    validator.reset(0, now_s=0.0)
    cmd = run_forward()
    for i in range(10):
        res = simulate(pos, np.zeros((1, 3)), [True], [0], cmd, SPEED, wall_geometry)
        out = validator.validate(np.array([0]), pos, np.zeros((1, 3)), np.array([True]), cmd, res, old, SPEED, wall_geometry, i, i * DT)
        assert out.verdict[0] == Verdict.PENDING and out.setback[0] and out.evidence == ()
    assert validator.suppressed[0] == 10
    # Once the client is where the server put it, it is judged again.
    out = validator.validate(np.array([0]), pos, np.zeros((1, 3)), np.array([True]), cmd, res, res.pos, SPEED, wall_geometry, 11, 11 * DT)
    assert out.accepted[0]
    out = validator.validate(np.array([0]), pos, np.zeros((1, 3)), np.array([True]), cmd, res, old, SPEED, wall_geometry, 12, 12 * DT)
    assert out.verdict[0] == Verdict.TELEPORT
    # A client that never acknowledges is judged again after the timeout.
    validator.reset(0, now_s=20.0)
    out = validator.validate(np.array([0]), pos, np.zeros((1, 3)), np.array([True]), cmd, res, old, SPEED, wall_geometry, 0, 20.5)
    assert out.verdict[0] == Verdict.PENDING
    out = validator.validate(np.array([0]), pos, np.zeros((1, 3)), np.array([True]), cmd, res, old, SPEED, wall_geometry, 0, 21.01)
    assert out.verdict[0] == Verdict.TELEPORT


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_claims_rejected_without_touching_state(wall_geometry: MapGeometry, bad: float) -> None:
    server = Server(wall_geometry, np.array([[-50.0, 0.0, 0.0], [-40.0, 0.0, 0.0]]))

    def poisoned(client: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        out = after.copy()
        out[0, 1] = bad
        return out

    _, out = server.step(run_forward(2), poisoned)
    assert out.verdict.tolist() == [Verdict.REJECTED, Verdict.ACCEPTED]
    assert out.setback.tolist() == [True, False]
    assert np.all(np.isfinite(out.pos)) and np.all(np.isfinite(server.validator.last_claim))
    assert server.evidence == [] and server.validator.rejected.tolist() == [1, 0]


# ---------------------------------------------------------------------- timer


def test_timer_real_rate_never_flagged() -> None:
    timer = TimerBalance(1)
    rng = np.random.default_rng(3)
    # One command per tick, arriving with up to 40 ms of jitter.
    arrival = 0.0
    for i in range(64 * 10):
        arrival = max(arrival, i * DT + rng.uniform(0.0, 0.04))
        accepted, ev = timer.on_commands(0, 1, DT, arrival)
        assert accepted == 1 and ev is None


def test_timer_fast_client_flagged_and_excess_dropped() -> None:
    """A client sending commands at 1.5x real time: flagged once its lead exceeds 120 ms, and the
    commands the server applies never run ahead of real time by more than the allowance."""
    timer = TimerBalance(1)
    applied = 0
    first_flag = None
    evidence = []
    sent = 0.0
    for i in range(1, 64 * 4 + 1):
        now = i * DT
        n = int(np.floor(1.5 * i)) - int(np.floor(1.5 * (i - 1)))
        sent += n
        accepted, ev = timer.on_commands(0, n, DT, now)
        applied += accepted
        assert applied * DT <= now + 0.120 + 1e-9
        if ev is not None:
            evidence.append(ev)
            first_flag = first_flag if first_flag is not None else now
    assert first_flag is not None and 0.2 < first_flag < 0.3  # 0.120 s of lead at 0.5 s per s
    assert all(e.kind is MovementKind.TIMER and e.value > e.limit == 120.0 for e in evidence)
    # The balance starts at the first arrival (t = DT): real time since then plus the allowance.
    assert applied * DT == pytest.approx(4.0 - DT + 0.120, abs=DT)
    assert timer.dropped[0] == sent - applied


def test_timer_lag_is_repaid_not_banked() -> None:
    """Silent for 1 s, then the client flushes 1 s of commands. With forgiveness the clamped
    silence is owed to it: the whole flush is applied, without evidence, and the balance is back
    at zero, so the steady play that follows stays clear of the allowance. Without forgiveness at
    most floor + allowance (0.24 s) is applied and the rest is evidence."""
    for forgive in (True, False):
        timer = TimerBalance(1, ValidationConfig(timer_forgive_lag_burst=forgive))
        for i in range(64):
            assert timer.on_commands(0, 1, DT, i * DT) == (1, None)
        now = 63 * DT + 1.0
        accepted, ev = timer.on_commands(0, 64, DT, now)
        strict = int((0.120 + 0.120) / DT)
        assert accepted == (64 if forgive else strict)
        assert (ev is None) == forgive
        if forgive:
            assert timer.forgiven[0] == 64 - strict
            # Where it stood before the silence: one command ahead of its first arrival.
            assert timer.balance_s[0] == pytest.approx(DT, abs=1e-9)
        # Back at real rate afterwards: never flagged again.
        for i in range(1, 128):
            assert timer.on_commands(0, 1, DT, now + i * DT) == (1, None)


def test_timer_lag_is_owed_once() -> None:
    """Only the silence really clamped away is owed: a 1 s silence followed by 2 s of commands
    applies 1 s plus the allowances, and the excess is evidence."""
    timer = TimerBalance(1)
    timer.on_commands(0, 1, DT, 0.0)
    accepted, ev = timer.on_commands(0, 128, DT, 1.0)
    owed = 1.0 - DT - 0.120  # the balance stood at DT before the silence
    assert accepted == int((0.120 + owed + 0.120) / DT + 1e-9)
    assert ev is not None and ev.value > ev.limit


@pytest.mark.parametrize("catch_up_per_tick", [8.0, 1.25])
def test_timer_catching_up_after_a_gradual_lag_is_not_evidence(catch_up_per_tick: float) -> None:
    """A starved client falls behind over 3 s (every fifth command late), then catches up, three
    times; with 5 ms of arrival jitter throughout. Each cycle starts where the last left the
    balance: before the debt brought it back to zero, it started at the allowance's edge and made
    timer evidence (an honest LAN player in a UDP match). At 1.25 commands a tick the catch-up
    outlasts the 1 s window after the last clamp, so the debt must live on while it is repaid."""
    rng = np.random.default_rng(3)
    timer = TimerBalance(1)
    evidence = []
    tick, sent = 0, 0
    for _cycle in range(3):
        start = tick
        for _ in range(192):  # 3 s at 80 % of the rate
            tick += 1
            due = start + int((tick - start) * 0.8)
            n, sent = due - sent, due
            if n:
                _, ev = timer.on_commands(0, n, DT, tick * DT + float(rng.uniform(0, 0.005)))
                evidence.append(ev)
        start, start_sent = tick, sent
        while sent < tick:  # the catch-up
            tick += 1
            n = min(start_sent + int((tick - start) * catch_up_per_tick), tick) - sent
            sent += n
            _, ev = timer.on_commands(0, n, DT, tick * DT + float(rng.uniform(0, 0.005)))
            evidence.append(ev)
        for _ in range(320):  # 5 s at the real rate
            tick += 1
            sent += 1
            _, ev = timer.on_commands(0, 1, DT, tick * DT + float(rng.uniform(0, 0.005)))
            evidence.append(ev)
    assert [e for e in evidence if e is not None] == []


def test_timer_small_catch_up_after_silence_accepted() -> None:
    timer = TimerBalance(1, ValidationConfig(timer_forgive_lag_burst=False))
    timer.on_commands(0, 1, DT, 0.0)
    # 1 s of silence, then 0.2 s worth of commands: within floor + allowance.
    assert timer.on_commands(0, 12, DT, 1.0) == (12, None)


def test_timer_sustained_over_rate_after_lag_is_flagged() -> None:
    """Forgiveness covers the clamped silence only, not a speed hack that follows it."""
    timer = TimerBalance(1)
    timer.on_commands(0, 1, DT, 0.0)
    flagged = False
    for i in range(1, 64 * 4):
        _, ev = timer.on_commands(0, 2, DT, 0.5 + i * DT)
        flagged |= ev is not None
    assert flagged


def test_timer_reset_and_bad_input() -> None:
    timer = TimerBalance(2)
    timer.on_commands(0, 20, DT, 0.0)
    timer.reset(0)
    assert timer.on_commands(0, 1, DT, 0.01) == (1, None)
    for bad in (np.nan, np.inf, 0.0, 0.5):
        with pytest.raises(ValueError):
            timer.on_commands(1, 1, bad, 1.0)
    with pytest.raises(ValueError):
        timer.on_commands(1, 1, DT, np.nan)
    with pytest.raises(ValueError):
        timer.on_commands(1, -1, DT, 1.0)


def test_timer_batch_matches_single() -> None:
    single, batch = TimerBalance(3), TimerBalance(3)
    counts = np.array([1, 2, 3])
    for i in range(40):
        now = i * DT
        got, _ = batch.on_commands_batch(np.arange(3), counts, DT, now)
        want = [single.on_commands(s, int(c), DT, now)[0] for s, c in enumerate(counts)]
        assert got.tolist() == want


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        ValidationConfig(accept_m=float("nan"))
    with pytest.raises(ValueError):
        ValidationConfig(advantage_decay=1.5)
    with pytest.raises(ValueError):
        MovementConfig(gravity_m_s2=-1.0)


def test_crouching_claims_judged_against_crouch_speed(wall_geometry: MapGeometry) -> None:
    """The speed limit follows the command: a crouching client claiming running speed is flagged."""
    server = Server(wall_geometry, np.array([[-50.0, -60.0, 0.0]]))
    crouch = run_forward(buttons=int(Buttons.CROUCH))
    for _ in range(128):
        server.step(crouch)
    assert server.evidence == []
    for _ in range(32):
        server.step(crouch, scaled(1.0 / 0.34))
    assert server.evidence and all(e.kind is MovementKind.SPEED for e in server.evidence)


def _timer_reference(
    t: TimerBalance, sl: np.ndarray, n: np.ndarray, dt: float, now_s: float, jitter_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The numpy formulation the compiled timer kernel replaced: (accepted, ms ahead of flagged slots)."""
    cfg = t.config
    extra = 0.0 if jitter_s is None else np.minimum(jitter_s * cfg.timer_jitter_allowance, cfg.timer_jitter_allowance_cap_s)
    dtv = np.full(len(sl), dt)
    last = t.last_now_s[sl]
    fresh = np.isnan(last)
    last = np.where(fresh, now_s, last)
    bal = np.where(fresh, 0.0, t.balance_s[sl]) - (now_s - last)
    forgive = np.where(now_s > t.forgive_until_s[sl], 0.0, t.forgive_s[sl])
    forgive_until = t.forgive_until_s[sl]
    floor = -cfg.timer_lag_floor_s
    clamped = np.maximum(floor - bal, 0.0)
    was = clamped > 0.0
    forgive = np.where(was, np.minimum(forgive + clamped, cfg.timer_forgive_cap_s), forgive)
    forgive_until = np.where(was, now_s + cfg.timer_forgive_window_s, forgive_until)
    bal = np.maximum(bal, floor)
    strict = np.clip(np.floor((cfg.timer_drift_allowance_s + extra - bal) / dtv + 1e-9), 0, n).astype(np.int64)
    room = np.floor((cfg.timer_drift_allowance_s + extra + forgive - bal) / dtv + 1e-9)
    accepted = np.clip(room, 0, n).astype(np.int64)
    excess = n - accepted
    ahead_ms = (bal - forgive + n * dtv) * 1000.0
    bal = bal + accepted * dtv
    pay = np.minimum(np.maximum(bal, 0.0), forgive)
    bal, forgive = bal - pay, np.maximum(forgive - pay, 0.0)
    forgive_until = np.where(pay > 0.0, now_s + cfg.timer_forgive_window_s, forgive_until)
    t.balance_s[sl], t.last_now_s[sl], t.forgive_s[sl], t.forgive_until_s[sl] = bal, now_s, forgive, forgive_until
    t.dropped[sl] += excess
    t.forgiven[sl] += accepted - strict
    return accepted, np.where(excess > 0, ahead_ms, np.nan)


def test_timer_kernel_matches_the_numpy_formulation() -> None:
    rng = np.random.default_rng(11)
    got, want = TimerBalance(16), TimerBalance(16)
    now = 0.0
    for _ in range(400):
        now += float(rng.choice([0.0, DT, 2 * DT, 0.3]))
        sl = np.sort(rng.choice(16, int(rng.integers(1, 17)), replace=False))
        n = rng.integers(0, 30, len(sl))
        jitter = rng.uniform(0.0, 0.08, len(sl)) if rng.random() < 0.5 else None
        accepted, evidence = got.on_commands_batch(sl, n, DT, now, jitter_s=jitter)
        ref_accepted, ref_ahead = _timer_reference(want, sl, n, DT, now, jitter)
        assert accepted.tolist() == ref_accepted.tolist()
        assert [(e.player, e.value) for e in evidence] == [
            (int(s), float(v)) for s, v in zip(sl, ref_ahead, strict=True) if not np.isnan(v)
        ]
        for name in ("balance_s", "last_now_s", "forgive_s", "forgive_until_s", "dropped", "forgiven"):
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name


def test_validate_batches_is_validate_batch_after_batch(wall_geometry: MapGeometry) -> None:
    """Validating several rounds in one call leaves every verdict, evidence and counter where
    one call per round would: accepted, desync, speed, teleport, wall clip, NaN and pending claims."""
    rng = np.random.default_rng(5)
    k = 12
    one, many = MovementValidator(k), MovementValidator(k)
    pos = np.column_stack([rng.uniform(-40.0, -10.0, k), rng.uniform(-30.0, 30.0, k), np.zeros(k)])
    vel = np.zeros((k, 3))
    ground = np.ones(k, dtype=bool)
    stance = np.zeros(k, dtype=np.int8)
    verdicts: set[int] = set()
    for tick in range(60):
        now = tick * DT
        rounds = []
        for _ in range(int(rng.integers(1, 4))):
            sl = np.sort(rng.choice(k, int(rng.integers(1, k + 1)), replace=False))
            m = len(sl)
            cmd = MoveCommands(rng.uniform(-1, 1, m), rng.uniform(-1, 1, m), rng.uniform(-180, 180, m), np.zeros(m),
                               rng.choice([0, int(Buttons.CROUCH), int(Buttons.JUMP)], m), np.full(m, DT))
            res = simulate(pos[sl], vel[sl], ground[sl], stance[sl], cmd, SPEED, wall_geometry)
            claimed = res.pos + rng.choice([0.0, 0.01, 0.2, 1.0], (len(sl), 1)) * rng.normal(size=(len(sl), 3))
            claimed[rng.random(len(sl)) < 0.05] = (WALL_X + 1.0, 0.0, 0.0)  # through the wall
            claimed[rng.random(len(sl)) < 0.05] += 60.0  # a teleport
            claimed[rng.random(len(sl)) < 0.03, 1] = np.nan
            rounds.append((sl, pos[sl], vel[sl], ground[sl], cmd, res, claimed))
            pos[sl], vel[sl], ground[sl], stance[sl] = res.pos, res.vel, res.on_ground, res.stance
        want = [one.validate(sl, p, v, g, cmd, res, c, SPEED, wall_geometry, tick, now)
                for sl, p, v, g, cmd, res, c in rounds]
        cols = list(zip(*rounds, strict=True))
        cmd_all = MoveCommands(*(np.concatenate([getattr(c, f) for c in cols[4]]) for f in
                                 ("forward_move", "side_move", "yaw_deg", "pitch_deg", "buttons", "dt_s")))
        got = many.validate_batches(
            [len(sl) for sl in cols[0]], np.concatenate(cols[0]), np.concatenate(cols[1]), np.concatenate(cols[2]),
            np.concatenate(cols[3]), cmd_all, np.concatenate([r.pos for r in cols[5]]), np.concatenate(cols[6]),
            SPEED, wall_geometry, tick, now,
        )
        for g_out, w_out in zip(got, want, strict=True):
            verdicts.update(w_out.verdict.tolist())
            assert g_out.evidence == w_out.evidence
            for f in ("pos", "accepted", "setback", "deviation_m", "verdict"):
                assert getattr(g_out, f).tobytes() == getattr(w_out, f).tobytes(), f
        if tick % 7 == 0:
            for v in (one, many):
                v.acknowledge(np.arange(0, k, 3))
    for name in ("advantage_m", "pending_since_s", "last_claim", "claim_valid", "desyncs", "rejected", "suppressed"):
        assert getattr(many, name).tobytes() == getattr(one, name).tobytes(), name
    assert set(Verdict) - {Verdict.SPEED} <= verdicts


def _random_batches(rng: np.random.Generator, geometry: MapGeometry, k: int) -> tuple:
    """validate_batches' arguments for a few random rounds of ``k`` players (claims of every kind)."""
    sizes, parts = [], []
    for _ in range(int(rng.integers(1, 4))):
        sl = np.sort(rng.choice(k, int(rng.integers(1, k + 1)), replace=False))
        sizes.append(len(sl))
        parts.append(sl)
    sl = np.concatenate(parts)
    n = len(sl)
    pos = np.column_stack([rng.uniform(-40.0, -10.0, n), rng.uniform(-30.0, 30.0, n), np.zeros(n)])
    vel = rng.normal(0.0, 3.0, (n, 3))
    ground = rng.random(n) < 0.7
    cmd = MoveCommands(rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-180, 180, n), np.zeros(n),
                       rng.choice([0, int(Buttons.CROUCH), int(Buttons.JUMP), int(Buttons.SPRINT)], n), np.full(n, DT))
    speed = rng.uniform(4.0, 7.0, n)
    res = simulate(pos, vel, ground, np.zeros(n, dtype=np.int8), cmd, speed, geometry)
    claimed = res.pos + rng.choice([0.0, 0.01, 0.2, 1.0, 50.0], (n, 1)) * rng.normal(size=(n, 3))
    claimed[rng.random(n) < 0.1] = (WALL_X + 1.0, 0.0, 0.0)
    return sizes, sl, pos, vel, ground, cmd, res.pos, claimed, speed


def _outcome(v: MovementValidator, args: tuple, tick: int, geometry: MapGeometry) -> list[tuple]:
    return [
        (r.pos.tobytes(), r.accepted.tobytes(), r.setback.tobytes(), r.deviation_m.tobytes(), r.verdict.tobytes(),
         r.evidence)
        for r in v.validate_batches(*args, geometry, tick, tick * DT)
    ]


@pytest.mark.parametrize("fault", ["none", "nan_vel", "inf_speed"])
def test_compiled_speed_limits_are_max_horizontal_speed(
    wall_geometry: MapGeometry, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The top speeds computed inside validate_batches' compiled pass give every verdict,
    evidence value and counter that max_horizontal_speed's numpy model gives (which still runs
    where a velocity or weapon speed is not finite)."""
    import physics.validation as validation

    rng = np.random.default_rng(17)
    k = 10
    compiled, numpy_model = MovementValidator(k), MovementValidator(k)
    for tick in range(80):
        args = list(_random_batches(rng, wall_geometry, k))
        if fault == "nan_vel":
            args[3][0, 2] = np.nan  # a vertical component: the kernel's check covers every column
        elif fault == "inf_speed":
            args[8][-1] = np.inf
        got = _outcome(compiled, tuple(args), tick, wall_geometry)
        with monkeypatch.context() as m:
            m.setattr(validation, "max_speed_kernel_args", lambda *a, **kw: None)
            want = _outcome(numpy_model, tuple(args), tick, wall_geometry)
        assert got == want
    for name in ("advantage_m", "pending_since_s", "last_claim", "claim_valid", "desyncs", "rejected", "suppressed"):
        assert getattr(compiled, name).tobytes() == getattr(numpy_model, name).tobytes(), name


def test_validate_batches_names_slot_faults_first(wall_geometry: MapGeometry) -> None:
    rng = np.random.default_rng(2)
    sizes, sl, pos, vel, ground, cmd, auth, claimed, speed = _random_batches(rng, wall_geometry, 6)
    v = MovementValidator(6)
    bad = sl.copy()
    bad[-1] = 6
    dup = sl.copy()
    dup[-1] = dup[-2] if sizes[-1] > 1 else 7
    short = speed[:-1]
    for slots, err in ((bad, IndexError), (dup, (IndexError, ValueError))):
        for weapon_speed, on_ground in ((speed, ground), (short, ground), (speed, ground[:-1])):
            with pytest.raises(err) as info:
                v.validate_batches(sizes, slots, pos, vel, on_ground, cmd, auth, claimed, weapon_speed, wall_geometry, 0, 0.0)
            assert "shape" not in str(info.value)
    with pytest.raises(ValueError, match="weapon_speed_m_s must have shape"):
        v.validate_batches(sizes, sl, pos, vel, ground, cmd, auth, claimed, short, wall_geometry, 0, 0.0)
    with pytest.raises(ValueError, match="on_ground must have shape"):
        v.validate_batches(sizes, sl, pos, vel, ground[:-1], cmd, auth, claimed, speed, wall_geometry, 0, 0.0)
    assert v.desyncs.sum() == 0 and np.isnan(v.pending_since_s).all()  # refused calls write nothing


def test_timer_names_slot_faults_first() -> None:
    timer = TimerBalance(4)
    for slots in (np.array([0, 4]), np.array([1, 1])):
        err = IndexError if 4 in slots else ValueError
        for counts, dt, now in ((np.array([1, 2]), DT, 0.0), (np.array([1.0, 2.0]), DT, 0.0),
                                (np.array([1, -2]), DT, 0.0), (np.array([1, 2]), np.zeros(3), 0.0),
                                (np.array([1, 2]), DT, np.nan), (np.array([1, 2]), 0.0, 0.0)):
            with pytest.raises(err, match="slot out of range" if err is IndexError else "slots must be distinct"):
                timer.on_commands_batch(slots, counts, dt, now)
    accepted, _ = timer.on_commands_batch(np.array([2, 0, 3]), np.array([1, 0, 2]), np.array([DT, 2 * DT, DT]), 0.0)
    assert accepted.tolist() == [1, 0, 2]


def test_a_claim_after_missing_commands_is_judged_over_their_time_too(wall_geometry: MapGeometry) -> None:
    """Running at full speed, the client's commands 2-4 never reach the server: its claim after
    command 5 is four steps from its last judged claim. Over one command that is four times the
    top speed (evidence); over the five commands' time it is the honest speed (a correction only,
    since the server moved the player one step)."""
    def run(skipped: float | None) -> tuple[MovementEvidence, ...]:
        server = Server(wall_geometry, np.array([[-50.0, -60.0, 0.0]]))
        for _ in range(64):
            server.step(run_forward())
        v = server.validator
        cmd = run_forward()
        res = simulate(server.pos, server.vel, server.on_ground, server.stance, cmd, SPEED, wall_geometry)
        step = res.pos - server.pos
        claim = server.client + 5 * step
        gap = None if skipped is None else np.array([skipped])
        out = v.validate_batches([1], server.slots, server.pos, server.vel, server.on_ground, cmd, res.pos, claim, SPEED,
                                 wall_geometry, 64, 1.0, gap)[0]
        assert out.setback.all()  # the server is one step on, the client five
        return out.evidence

    assert [e.kind for e in run(None)] == [MovementKind.SPEED]
    assert run(4 * DT) == ()
    with pytest.raises(ValueError, match="skipped_s"):
        run(float("nan"))


def _jittery_arrivals(rate: float, jitter_sd_s: float, seconds: float, seed: int) -> list[tuple[float, int]]:
    """(server time, commands) per tick of a client sending one command every DT of its own clock
    (``rate`` x real time) over a link whose one-way delay is 150 ms + normal jitter (in order):
    the commands that have arrived by each 64 Hz server tick."""
    rng = np.random.default_rng(seed)
    n = int(seconds / DT * rate)
    sent = np.arange(n) * DT / rate
    # In order, as the link emulator keeps it: a late datagram holds back the ones behind it.
    arrive = np.maximum.accumulate(sent + 0.15 + rng.normal(0.0, jitter_sd_s, n))
    ticks = np.arange(0.2, seconds, DT)
    counts = np.diff(np.searchsorted(arrive, ticks, side="right"), prepend=0)
    return [(float(t), int(c)) for t, c in zip(ticks, counts, strict=True) if c]


def test_timer_allowance_widens_with_measured_jitter_but_a_speed_hack_still_shows() -> None:
    """Ten minutes on a wifi link with 35 ms delay jitter (RFC 3550 jitter ~40 ms), three times:
    the fixed 120 ms allowance flags the honest client's bunched commands; widened by its jitter
    it does not. A 5 % fast clock on the same link is still flagged within seconds, 1 % within
    half a minute."""
    def evidence(rate: float, jitter_s: float | None, seed: int) -> list[float]:
        timer = TimerBalance(1)
        times = []
        for now, c in _jittery_arrivals(rate, 0.035, 600.0, seed):
            jit = None if jitter_s is None else np.array([jitter_s])
            _, ev = timer.on_commands_batch(np.array([0]), np.array([c]), DT, now, jitter_s=jit)
            times += [e.time_s for e in ev]
        return times

    assert sum(len(evidence(1.0, None, seed)) for seed in (1, 2, 3)) >= 3
    assert all(evidence(1.0, 0.040, seed) == [] for seed in (1, 2, 3))
    fast = evidence(1.05, 0.040, 1)
    assert len(fast) > 1000 and fast[0] < 10.0
    subtle = evidence(1.01, 0.040, 1)
    assert len(subtle) > 200 and subtle[0] < 30.0


def test_timer_runs_on_each_slots_arrival_clock() -> None:
    """Per-slot arrival times are each slot's clock: the same as calling at that time alone."""
    both, one, two = TimerBalance(2), TimerBalance(2), TimerBalance(2)
    for k in range(1, 60):
        t0, t1 = k * DT, k * DT + 0.3 * (k // 20)  # slot 1's commands come in after two silences
        n = np.array([1, 3 if k % 20 == 1 else 1])
        a, ev = both.on_commands_batch(np.array([0, 1]), n, DT, k * DT, arrived_s=np.array([t0, t1]))
        a0, _ = one.on_commands_batch(np.array([0]), n[:1], DT, t0)
        a1, _ = two.on_commands_batch(np.array([1]), n[1:], DT, t1)
        assert a.tolist() == [int(a0[0]), int(a1[0])]
    assert both.balance_s.tolist() == [one.balance_s[0], two.balance_s[1]]
    with pytest.raises(ValueError, match="arrived_s"):
        both.on_commands_batch(np.array([0, 1]), np.array([1, 1]), DT, 1.0, arrived_s=np.array([1.0]))
