"""Weapon mechanics: fire interval, crouch-cancel, ammo and reload, switch, recoil and spread."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from physics.config import WeaponConfig
from physics.evidence import FireKind
from physics.weapon_state import TABLE, WeaponState, current_spread_deg, shot_directions
from world.constants import STANCE_CROUCHING
from world.state import WorldState, view_direction
from world.weapons import WEAPONS, WeaponId

P, R, SMG, SG, SN, AR = (
    WeaponId.PISTOL,
    WeaponId.RIFLE,
    WeaponId.SMG,
    WeaponId.SHOTGUN,
    WeaponId.SNIPER,
    WeaponId.ASSAULT_RIFLE,
)
CBUG_WEAPONS = [w for w, spec in WEAPONS.items() if spec.cbug]
PLAIN_WEAPONS = [w for w, spec in WEAPONS.items() if not spec.cbug]


def armed_with(weapon: WeaponId, *others: WeaponId, now: float = 0.0) -> WeaponState:
    ws = WeaponState(4)
    ws.spawn(0, [weapon, *others], now)
    return ws


def crouch(ws: WeaponState, now: float, slot: int = 0) -> bool:
    return bool(ws.note_crouch_presses(np.array([slot]), now)[0])


def test_cbug_weapons_are_the_monitored_ones() -> None:
    assert set(CBUG_WEAPONS) == {P, R, SG, SN}


@pytest.mark.parametrize("weapon", list(WeaponId))
def test_interval_enforced_and_exact_interval_accepted(weapon: WeaponId) -> None:
    spec = WEAPONS[weapon]
    ws = armed_with(weapon)
    t0 = 1.0
    first = ws.try_fire(0, weapon, t0)
    assert first.accepted and first.interval_s == math.inf and first.evidence is None
    early = ws.try_fire(0, weapon, t0 + spec.fire_interval_s * 0.5, tick=9)
    assert not early.accepted
    assert early.evidence is not None and early.evidence.kind is FireKind.TOO_SOON
    assert early.evidence.tick == 9 and early.evidence.interval_s == pytest.approx(spec.fire_interval_s * 0.5)
    assert early.evidence.allowed_s == spec.fire_interval_s
    on_time = ws.try_fire(0, weapon, t0 + spec.fire_interval_s)
    assert on_time.accepted and not on_time.cbug_used
    assert on_time.interval_s == pytest.approx(spec.fire_interval_s)


@pytest.mark.parametrize("weapon", CBUG_WEAPONS)
def test_crouch_in_window_cancels_recovery(weapon: WeaponId) -> None:
    spec = WEAPONS[weapon]
    ws = armed_with(weapon)
    assert ws.try_fire(0, weapon, 0.0).accepted
    assert crouch(ws, spec.cbug_window_s * 0.5)
    too_early = ws.try_fire(0, weapon, spec.cbug_interval_s - 0.01)
    assert too_early.evidence is not None and too_early.evidence.kind is FireKind.TOO_SOON
    assert too_early.evidence.allowed_s == spec.cbug_interval_s and too_early.cbug_armed
    shot = ws.try_fire(0, weapon, spec.cbug_interval_s)
    assert shot.accepted and shot.cbug_used and shot.allowed_s == spec.cbug_interval_s
    assert shot.interval_s == pytest.approx(spec.cbug_interval_s)
    # The cancel is used up: the next shot needs a new crouch press.
    again = ws.try_fire(0, weapon, 2 * spec.cbug_interval_s)
    assert again.evidence is not None and again.evidence.kind is FireKind.TOO_SOON
    assert again.allowed_s == spec.fire_interval_s


@pytest.mark.parametrize("weapon", CBUG_WEAPONS)
def test_crouch_outside_window_changes_nothing(weapon: WeaponId) -> None:
    spec = WEAPONS[weapon]
    ws = armed_with(weapon)
    ws.try_fire(0, weapon, 0.0)
    assert not crouch(ws, spec.cbug_window_s + 0.01)
    t = max(spec.cbug_interval_s, spec.cbug_window_s + 0.02)
    out = ws.try_fire(0, weapon, t)
    assert not out.accepted and out.evidence is not None and out.evidence.kind is FireKind.TOO_SOON
    assert out.allowed_s == spec.fire_interval_s and not out.cbug_armed


@pytest.mark.parametrize("weapon", PLAIN_WEAPONS)
def test_crouch_does_nothing_for_other_weapons(weapon: WeaponId) -> None:
    spec = WEAPONS[weapon]
    ws = armed_with(weapon)
    ws.try_fire(0, weapon, 0.0)
    assert not crouch(ws, spec.fire_interval_s * 0.1)
    out = ws.try_fire(0, weapon, spec.fire_interval_s * 0.5)
    assert not out.accepted and out.allowed_s == spec.fire_interval_s


def test_crouch_before_first_shot_or_while_reloading_does_not_arm() -> None:
    ws = armed_with(P)
    assert not crouch(ws, 0.0)
    ws.try_fire(0, P, 1.0)
    ws.start_reload(0, 1.05)
    assert not crouch(ws, 1.1)


@settings(max_examples=60, deadline=None)
@given(
    weapon=st.sampled_from(list(WeaponId)),
    actions=st.lists(st.tuples(st.floats(0.0, 0.4), st.sampled_from(["fire", "crouch", "fire"])), min_size=5, max_size=80),
)
# A crouch 0.25 s after the shot by the sum of the steps, a hair over it in floating point.
@example(weapon=WeaponId.PISTOL,
         actions=[(0.3863844065954474, "fire"), (0.1, "fire"), (0.0, "fire"), (0.15, "crouch"), (0.0, "fire")])
def test_no_shot_ever_beats_the_rules(weapon: WeaponId, actions: list[tuple[float, str]]) -> None:
    """Any sequence of fire attempts and crouch presses: consecutive accepted shots are at least
    the fire interval apart, unless a crouch press fell within the window after the previous
    shot, and then at least the crouch-cancel interval (and only for cbug weapons)."""
    spec = WEAPONS[weapon]
    ws = armed_with(weapon)
    ws.reserve[0, int(weapon)] = 0  # no reloads: only the interval rule in play
    ws.ammo[0, int(weapon)] = 1000
    t = 0.0
    last_shot: float | None = None
    crouched_in_window = False
    for dt, action in actions:
        t += dt
        if action == "crouch":
            crouch(ws, t)
            # The same tolerance as the weapon state's: a press exactly at the window's end arms.
            if last_shot is not None and t - last_shot <= spec.cbug_window_s + ws.config.interval_epsilon_s:
                crouched_in_window = True
            continue
        out = ws.try_fire(0, weapon, t)
        if out.accepted:
            if last_shot is not None:
                interval = t - last_shot
                if out.cbug_used:
                    assert spec.cbug and crouched_in_window
                    assert interval >= spec.cbug_interval_s - 1e-6
                else:
                    assert interval >= spec.fire_interval_s - 1e-6
            last_shot = t
            crouched_in_window = False
        else:
            assert out.evidence is not None and out.evidence.kind is FireKind.TOO_SOON
            assert out.interval_s < out.allowed_s


def test_ammo_empty_and_reload() -> None:
    spec = WEAPONS[P]
    ws = armed_with(P)
    t = 0.0
    for i in range(spec.magazine):
        out = ws.try_fire(0, P, t)
        assert out.accepted and out.ammo_left == spec.magazine - 1 - i
        t += spec.fire_interval_s
    empty = ws.try_fire(0, P, t)
    assert empty.evidence is not None and empty.evidence.kind is FireKind.EMPTY and empty.reload_started
    during = ws.try_fire(0, P, t + spec.reload_s - 0.01)
    assert during.evidence is not None and during.evidence.kind is FireKind.RELOADING
    done = ws.try_fire(0, P, t + spec.reload_s)
    assert done.accepted and done.ammo_left == spec.magazine - 1
    assert ws.reserve[0, int(P)] == spec.reserve - spec.magazine


def test_reload_button_and_partial_reserve() -> None:
    spec = WEAPONS[R]
    ws = armed_with(R)
    assert not ws.start_reload(0, 0.0)  # full magazine
    ws.try_fire(0, R, 0.0)
    ws.try_fire(0, R, 1.0)
    ws.reserve[0, int(R)] = 1
    assert ws.start_reload(0, 1.5)
    assert not ws.start_reload(0, 1.6)  # already reloading
    ws.advance(1.5 + spec.reload_s)
    assert ws.ammo[0, int(R)] == spec.magazine - 1 and ws.reserve[0, int(R)] == 0
    assert not ws.start_reload(0, 10.0)  # reserve empty


def test_switch_deploy_wrong_weapon_and_cancelled_reload() -> None:
    cfg = WeaponConfig()
    ws = armed_with(P, R)
    ws.try_fire(0, P, 0.0)
    ws.start_reload(0, 0.1)
    assert ws.switch_weapon(0, R, 0.2)
    assert np.isnan(ws.reload_end_s[0])
    wrong = ws.try_fire(0, P, 1.0)
    assert wrong.evidence is not None and wrong.evidence.kind is FireKind.WRONG_WEAPON
    deploying = ws.try_fire(0, R, 0.2 + cfg.deploy_s - 0.01)
    assert deploying.evidence is not None and deploying.evidence.kind is FireKind.SWITCHING
    assert ws.try_fire(0, R, 0.2 + cfg.deploy_s).accepted
    assert not ws.switch_weapon(0, SMG, 1.0)  # not carried
    # Quick switch back: the pistol's own interval still counts, the switch never shortens it.
    ws2 = armed_with(R, P)
    ws2.try_fire(0, R, 0.0)
    ws2.switch_weapon(0, P, 0.01)
    ws2.switch_weapon(0, R, 0.02)
    back = ws2.try_fire(0, R, 0.02 + cfg.deploy_s)
    assert back.evidence is not None and back.evidence.kind is FireKind.TOO_SOON


def test_dead_player_cannot_fire() -> None:
    ws = armed_with(P)
    out = ws.try_fire(0, P, 0.0, alive=False)
    assert out.evidence is not None and out.evidence.kind is FireKind.DEAD
    assert ws.ammo[0, int(P)] == WEAPONS[P].magazine


def test_recoil_follows_pattern_and_recovers() -> None:
    spec = WEAPONS[AR]
    ws = armed_with(AR)
    expected = np.zeros(2)
    t = 0.0
    for i in range(12):
        out = ws.try_fire(0, AR, t)
        assert out.accepted and out.shot_index == i
        assert (out.punch_pitch_deg, out.punch_yaw_deg) == pytest.approx(tuple(expected), abs=1e-9)
        expected += spec.recoil_kick(i)
        t += spec.fire_interval_s
        # Linear recovery of the punch's magnitude until the next shot.
        mag = np.hypot(*expected)
        expected *= max(mag - spec.recoil_recovery_deg_s * spec.fire_interval_s, 0.0) / mag
    assert expected[0] > 1.0  # the spray climbs
    ws.advance(t + 5.0)
    assert ws.punch_pitch_deg[0] == 0.0 and ws.punch_yaw_deg[0] == 0.0
    # After a pause the spray starts from the first pattern entry again.
    assert ws.try_fire(0, AR, t + 5.0).shot_index == 0


def test_switch_resets_punch_and_spray() -> None:
    ws = armed_with(AR, P)
    for i in range(5):
        ws.try_fire(0, AR, i * 0.1)
    ws.switch_weapon(0, P, 0.45)
    assert ws.punch_pitch_deg[0] == 0.0 and ws.shot_index[0] == 0


def test_advance_is_vectorised_over_slots() -> None:
    ws = WeaponState(3)
    for s in range(3):
        ws.spawn(s, [P], 0.0)
        ws.try_fire(s, P, 0.0)
    ws.start_reload(1, 0.1)
    ws.advance(0.1 + WEAPONS[P].reload_s)
    assert ws.punch_pitch_deg.tolist() == [0.0, 0.0, 0.0]
    assert ws.ammo[:, int(P)].tolist() == [6, 7, 6]


def _random_weapons(rng: np.random.Generator, n: int = 16) -> WeaponState:
    ws = WeaponState(n)
    ids = [int(w) for w in WEAPONS]
    for s in range(n):
        ws.spawn(s, [int(w) for w in rng.choice(ids, 2, replace=False)], 0.0)
    ws.punch_pitch_deg[:] = rng.choice([0.0, 1.0, -2.5], n) * rng.random(n)
    ws.punch_yaw_deg[:] = rng.choice([0.0, 1.0, -0.5], n) * rng.random(n)
    ws.punch_time_s[:] = rng.uniform(0.0, 1.0, n)
    held = ws.weapon.astype(np.intp)
    ws.ammo[np.arange(n), held] = rng.integers(0, 5, n)
    ws.reload_end_s[:] = np.where(rng.random(n) < 0.5, rng.uniform(0.0, 1.0, n), np.nan)
    return ws


_WEAPON_ARRAYS = ("punch_pitch_deg", "punch_yaw_deg", "punch_time_s", "reload_end_s", "ammo", "reserve")


def test_compiled_advance_matches_the_numpy_formulation() -> None:
    """advance_slots (compiled) leaves every array as _recover then _finish_reloads (numpy) would,
    bit for bit; a slot named twice gets numpy's last-write-wins semantics."""
    rng = np.random.default_rng(2)
    for trial in range(50):
        seed = int(rng.integers(1 << 30))
        got, want = _random_weapons(np.random.default_rng(seed)), _random_weapons(np.random.default_rng(seed))
        slots = rng.choice(16, int(rng.integers(1, 17)), replace=trial % 5 == 0)
        now = rng.uniform(0.0, 1.5, len(slots))
        got.advance_slots(slots, now)
        want._recover(slots, now)
        want._finish_reloads(slots, now)
        for name in _WEAPON_ARRAYS:
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
    with pytest.raises(ValueError):
        got.advance_slots(np.array([0]), np.array([np.nan]))


def test_sync_to_world() -> None:
    world = WorldState()
    ws = WeaponState(world.capacity)
    ws.spawn(5, [R, P], 0.0)
    ws.try_fire(5, R, 0.0)
    ws.sync_to(world)
    assert (world.weapon[5], world.ammo[5], world.reserve[5]) == (int(R), WEAPONS[R].magazine - 1, WEAPONS[R].reserve)


def test_bad_inputs_rejected() -> None:
    ws = armed_with(P)
    with pytest.raises(ValueError):
        ws.try_fire(0, P, float("nan"))
    with pytest.raises(ValueError):
        ws.note_crouch_presses(np.array([0]), float("inf"))
    with pytest.raises(ValueError):
        ws.spawn(0, [99], 0.0)
    with pytest.raises(ValueError):
        ws.try_fire(7, P, 0.0)


# ---------------------------------------------------------------------- spread


def _angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.degrees(np.arccos(np.clip(a @ b, -1.0, 1.0)))


def test_shot_directions_deterministic_and_within_cone() -> None:
    spec = WEAPONS[SG]
    a = shot_directions(30.0, 5.0, 0.0, 0.0, 2.0, spec.pellets, spec.pellet_spread_deg, np.random.default_rng(42))
    b = shot_directions(30.0, 5.0, 0.0, 0.0, 2.0, spec.pellets, spec.pellet_spread_deg, np.random.default_rng(42))
    c = shot_directions(30.0, 5.0, 0.0, 0.0, 2.0, spec.pellets, spec.pellet_spread_deg, np.random.default_rng(43))
    assert a.shape == (spec.pellets, 3) and np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert len({tuple(r) for r in a.round(9)}) == spec.pellets
    rng = np.random.default_rng(0)
    aim = view_direction(30.0, 5.0)
    for _ in range(200):
        d = shot_directions(30.0, 5.0, 0.0, 0.0, 2.0, spec.pellets, spec.pellet_spread_deg, rng)
        assert np.all(_angle_deg(d, aim) <= 2.0 + spec.pellet_spread_deg + 1e-9)


def _shot_directions_as_arrays(yaw_deg: float, pitch_deg: float, punch_pitch_deg: float, punch_yaw_deg: float,
                               spread_deg: float, pellets: int, pellet_spread_deg: float,
                               rng: np.random.Generator) -> np.ndarray:
    """The reference: shot_directions written with whole-array numpy operations."""
    aim_yaw = yaw_deg - punch_yaw_deg
    fwd = view_direction(aim_yaw, float(np.clip(pitch_deg + punch_pitch_deg, -90.0, 90.0)))
    yaw = math.radians(aim_yaw)
    right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
    up = np.cross(right, fwd)

    def disc(radius: float, count: int) -> np.ndarray:
        u = rng.random((count, 2))
        r = radius * np.sqrt(u[:, 0])
        a = 2.0 * np.pi * u[:, 1]
        return np.column_stack([r * np.cos(a), r * np.sin(a)])

    offset = disc(spread_deg, 1)
    if pellets > 1:
        offset = offset + disc(pellet_spread_deg, pellets)
    rho = np.radians(np.hypot(offset[:, 0], offset[:, 1]))
    phi = np.arctan2(offset[:, 1], offset[:, 0])
    side = np.cos(phi)[:, None] * right + np.sin(phi)[:, None] * up
    out = np.cos(rho)[:, None] * fwd + np.sin(rho)[:, None] * side
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-720.0, 720.0), st.floats(-89.0, 89.0), st.floats(-10.0, 10.0), st.floats(-10.0, 10.0),
    st.sampled_from([0.0, 0.3, 2.5, 12.0]), st.sampled_from([1, 2, 8, 12]), st.sampled_from([0.0, 1.0, 4.5]),
    st.integers(0, 2**32 - 1),
)
def test_shot_directions_are_bit_for_bit_the_array_formulation(
    yaw: float, pitch: float, punch_pitch: float, punch_yaw: float, spread: float, pellets: int,
    pellet_spread: float, seed: int,
) -> None:
    args = (yaw, pitch, punch_pitch, punch_yaw, spread, pellets, pellet_spread)
    got = shot_directions(*args, np.random.default_rng(seed))
    want = _shot_directions_as_arrays(*args, np.random.default_rng(seed))
    assert got.tobytes() == want.tobytes()


def test_spread_is_uniform_in_the_disc() -> None:
    rng = np.random.default_rng(1)
    aim = view_direction(-120.0, 40.0)
    angles = np.array([_angle_deg(shot_directions(-120.0, 40.0, 0.0, 0.0, 1.0, 1, 0.0, rng), aim)[0] for _ in range(4000)])
    assert angles.max() <= 1.0 + 1e-9
    # Uniform in a disc: a quarter of the draws inside half the radius.
    assert np.mean(angles <= 0.5) == pytest.approx(0.25, abs=0.03)


def test_no_spread_fires_along_view_plus_punch() -> None:
    rng = np.random.default_rng(0)
    d = shot_directions(10.0, 0.0, 0.0, 0.0, 0.0, 1, 0.0, rng)
    assert np.allclose(d[0], view_direction(10.0, 0.0))
    kicked = shot_directions(10.0, 0.0, 2.0, 1.0, 0.0, 1, 0.0, rng)
    # Punch: pitch up, yaw to the right (clockwise seen from above).
    assert np.allclose(kicked[0], view_direction(9.0, 2.0))


def test_current_spread() -> None:
    spec = WEAPONS[R]
    w = np.full(4, int(R))
    cone = current_spread_deg(w, np.array([0.0, spec.move_speed_m_s, 0.0, 0.0]), np.array([True, True, False, True]), np.array([0, 0, 0, 1]))
    assert cone.tolist() == pytest.approx(
        [
            spec.spread_deg,
            spec.spread_deg + spec.moving_spread_deg,
            spec.spread_deg + spec.airborne_spread_deg,
            spec.spread_deg * spec.crouch_spread_factor,
        ]
    )
    assert TABLE.fire_interval_s.flags.writeable is False


def test_spread_of_one_player_is_the_array_formula_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    for w in range(1, TABLE.size):
        for speed in [0.0, -0.0, 1e-300, float(TABLE.move_speed_m_s[w]), 100.0, *rng.uniform(0.0, 12.0, 50).tolist()]:
            for on_ground in (True, False):
                for stance in (0, STANCE_CROUCHING):
                    one = current_spread_deg(w, speed, on_ground, stance)
                    arr = current_spread_deg(np.array([w]), np.array([speed]), np.array([on_ground]), np.array([stance]))
                    assert type(one) is np.float64 and one.tobytes() == arr[0].tobytes()
