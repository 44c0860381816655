"""Hidden targets (sent, not in sight) on every AimSample, their replay format, and the wallhack
detector that reads them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from anticheat.codec import decode_event, encode_event
from anticheat.detectors.wallhack import WallhackConfig, WallhackDetector
from anticheat.events import AimSample, Detection, SpawnEvent
from anticheat.skip import SkipBook, SkipConfig
from server.aim_samples import CHEST_M, EYE_M, aim_kernels
from world.state import WorldLimits, WorldState, view_direction

DT = 1.0 / 64.0


def _random_world(rng: np.random.Generator, cap: int) -> WorldState:
    w = WorldState(WorldLimits(max_players=cap))
    w.pos[:] = rng.uniform(-60.0, 60.0, (cap, 3)) * np.array([1.0, 1.0, 0.05])
    w.stance[:] = rng.integers(0, 2, cap)
    w.vel[:] = rng.normal(0.0, 4.0, (cap, 3))
    w.yaw[:] = rng.uniform(-180.0, 180.0, cap)
    w.pitch[:] = rng.uniform(-89.0, 89.0, cap)
    w.alive[:] = rng.random(cap) < 0.8
    w.active[:] = rng.random(cap) < 0.9
    return w


def test_the_hidden_target_is_the_nearest_sent_enemy_out_of_sight_as_numpy_finds_it() -> None:
    """The compiled kernels' hidden target against a plain numpy reference: the smallest angle
    among sent, alive, active others that are not in sight; none (-1, 180 deg) without one."""
    rng = np.random.default_rng(3)
    cap = 64
    seen_none = False
    for _ in range(20):
        w = _random_world(rng, cap)
        visible = rng.random((cap, cap)) < 0.6
        in_sight = visible & (rng.random((cap, cap)) < 0.5)
        clear = rng.random(cap) < 0.3  # viewers who see everything they are sent
        in_sight[clear] = visible[clear]
        slots = rng.permutation(cap)[: rng.integers(1, 40)].astype(np.intp)
        seen_none |= bool(clear[slots].any())
        k = len(slots)
        rad = np.radians(np.stack((w.yaw[slots], w.pitch[slots])))
        args = (w, visible, slots, np.array([k]), np.zeros(k, bool), np.stack((np.cos(rad), np.sin(rad))), 0,
                np.zeros((k, 3)), np.zeros(k, np.int8), np.zeros((k, 3)), np.zeros(k, bool))
        floats, ints, _ = aim_kernels(*args, in_sight)

        eye = w.pos[slots].copy()
        eye[:, 2] += EYE_M[w.stance[slots]]
        chest = w.pos.copy()
        chest[:, 2] += CHEST_M[w.stance]
        to_t = chest[None, :, :] - eye[:, None, :]
        dist = np.linalg.norm(to_t, axis=2)
        cosang = np.einsum("kj,knj->kn", view_direction(w.yaw[slots], w.pitch[slots]), to_t) / np.maximum(dist, 1e-9)
        angle = np.degrees(np.arccos(np.clip(cosang, -1.0, 1.0)))
        hidden = visible[slots] & ~in_sight[slots] & w.alive[None, :] & w.active[None, :]
        hidden[np.arange(k), slots] = False
        angle = np.where(hidden, angle, np.inf)
        best = np.argmin(angle, axis=1)
        has = np.isfinite(angle[np.arange(k), best])
        assert np.array_equal(ints[2], np.where(has, best, -1))
        np.testing.assert_allclose(floats[3], np.where(has, angle[np.arange(k), best], 180.0), rtol=1e-12, atol=1e-9)
        assert has.any() and not has[clear[slots]].any()
        # Without an in-sight matrix nothing is hidden, and the other columns do not change.
        plain_f, plain_i, _ = aim_kernels(*args)
        assert (plain_i[2] == -1).all() and (plain_f[3] == 180.0).all()
        assert plain_f[:3].tobytes() == floats[:3].tobytes() and plain_i[:2].tobytes() == ints[:2].tobytes()
    assert seen_none


def _sample(t: float, yaw: float, *, hidden: int | None = None, hidden_deg: float = 180.0, player: int = 0,
            target: int | None = None, target_deg: float = 180.0) -> AimSample:
    tick = round(t / DT)
    return AimSample(player, tick, t, tick, yaw, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0, True, 0.0, target, target_deg,
                     10.0 if target is not None else 0.0, hidden, hidden_deg)


def test_codec_round_trips_the_hidden_fields_and_decodes_records_from_before_them() -> None:
    sample = _sample(1.0, 10.0, hidden=3, hidden_deg=2.5, target=4, target_deg=7.0)
    record = encode_event(sample)
    assert record[-7:-2] == [3, 2.5, None, 180.0, None]
    assert decode_event(record) == sample
    assert decode_event(encode_event(_sample(1.0, 10.0))) == _sample(1.0, 10.0)
    old = record[:-7]  # an AimSample as recorded before the hidden (phantom, view time, crosshair) fields existed
    decoded = decode_event(old)
    assert decoded.hidden_target is None and decoded.hidden_angle_deg == 180.0 and decoded.view_time_s is None
    assert dataclasses.replace(decoded, hidden_target=3, hidden_angle_deg=2.5) == sample
    timed = dataclasses.replace(sample, view_time_s=0.875)
    assert decode_event(encode_event(timed)) == timed


def _skip() -> SkipBook:
    return SkipBook(SkipConfig(require_connection=False))


def _feed(det: WallhackDetector, samples: list[AimSample | SpawnEvent]) -> list[Detection]:
    skip = _skip()
    out: list[Detection] = []
    for s in samples:
        out.extend(det.on_aim(s, skip) if isinstance(s, AimSample) else det.on_spawn(s, skip))
    return out


def _episodes(n: int, make: object, gap_s: float = 1.0) -> list[AimSample | SpawnEvent]:
    """``n`` episodes of 0.3 s (20 samples), each from ``make(i, j)`` -> (view yaw, hidden deg),
    the hidden enemy a different slot each time, a second of nothing between them."""
    out: list[AimSample | SpawnEvent] = []
    t = 0.0
    for i in range(n):
        for j in range(20):
            yaw, deg = make(i, j)  # type: ignore[operator]
            out.append(_sample(t, yaw, hidden=1 + i % 3, hidden_deg=deg))
            t += DT
        out.append(_sample(t, 0.0))
        t += gap_s
    return out


def test_following_a_moving_enemy_behind_a_wall_alarms() -> None:
    """The view turns 25 deg onto a hidden enemy in 0.15 s, then turns on with him (he runs
    across behind the wall) keeping the crosshair within a degree: every episode positive."""
    det = WallhackDetector()

    def chase(i: int, j: int) -> tuple[float, float]:
        if j < 10:
            return 2.5 * j, 25.0 - 2.45 * j
        return 25.0 + 1.0 * (j - 10), 0.5

    out = _feed(det, _episodes(40, chase))
    assert len(out) >= 1
    d = out[0]
    assert d.detector == "wallhack" and d.kind == "hidden_tracking" and d.player == 0
    assert d.evidence["positive_episodes"] == d.evidence["episodes"] <= det.expected_episodes(1.0) + 1
    assert d.evidence["hidden_target"] in (1, 2, 3) and d.evidence["threshold"] == det.h
    assert det.scores(0)["llr"] >= 1.0


def test_holding_a_static_angle_an_enemy_walks_into_does_not_alarm() -> None:
    """Pre-aiming a corner: the view never moves; the hidden enemy's angle falls to nothing as he
    comes to the corner. Not an arrival (the player did not turn) and not tracking."""
    det = WallhackDetector()
    out = _feed(det, _episodes(500, lambda i, j: (30.0, max(0.2, 20.0 - 1.2 * j))))
    assert out == [] and det.episodes_judged == 500 and det.episodes_positive == 0
    assert det.scores(0)["llr"] == 0.0


def test_tracking_visible_enemies_and_turning_past_hidden_ones_does_not_alarm() -> None:
    det = WallhackDetector()
    # Tracking a visible enemy: no hidden target, nothing judged.
    visible = [_sample(j * DT, 0.5 * j, target=2, target_deg=0.4) for j in range(2000)]
    assert _feed(det, visible) == [] and det.episodes_judged == 0
    # Turning across a hidden enemy without stopping on him: he passes the crosshair once.
    sweep = _episodes(500, lambda i, j: (3.0 * j, abs(30.0 - 3.0 * j) + 0.1))
    assert _feed(det, sweep) == [] and det.episodes_positive == 0


def test_an_honest_rate_of_positive_episodes_stays_below_the_threshold() -> None:
    """Episodes positive at the configured honest rate theta0 for far more than an hour's
    episodes: the statistic climbs and falls but does not reach h (the ARL is millions)."""
    det = WallhackDetector()
    cfg = det.config
    rng = np.random.default_rng(1)
    n = int(2 * cfg.episodes_per_hour)
    positive = rng.random(n) < cfg.theta0

    def make(i: int, j: int) -> tuple[float, float]:
        if positive[i]:
            return (2.5 * j, 25.0 - 2.45 * j) if j < 10 else (25.0 + (j - 10), 0.5)
        return 30.0, 35.0
    assert _feed(det, _episodes(n, make)) == []
    assert det.episodes_positive == positive.sum() and 0.0 < det.scores(0)["llr"] < 1.0


def test_a_respawn_ends_the_episode_and_the_config_checks_its_rates() -> None:
    det = WallhackDetector()
    skip = _skip()
    for j in range(14):
        det.on_aim(_sample(j * DT, 2.5 * min(j, 9), hidden=1, hidden_deg=max(0.5, 25.0 - 2.45 * j)), skip)
    assert det.on_spawn(SpawnEvent(0, 14, 14 * DT), skip) == () and det.episodes_judged == 1
    assert det.episodes_positive == 1
    for bad in ({"theta0": 0.5, "theta1": 0.4}, {"min_samples": 1}, {"false_alarm_player_hours": 0.0}):
        try:
            WallhackConfig(**bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_a_virtual_match_carries_hidden_targets_and_flags_no_honest_player(tmp_path: Path) -> None:
    """End to end on corridors: the samples name hidden enemies (sent, never in sight at the
    viewer's last refresh), and no honest player gets a wallhack detection."""
    from bots.profiles import profile_names
    from server.recording import ReplayReader
    from testbed.match import run_virtual
    from testbed.scenario import load_scenario

    (tmp_path / "wh.toml").write_text(
        'map = "corridors"\nduration_s = 25.0\ntick_rate_hz = 64\nseed = 113\n'
        '[[bots]]\ncount = 3\nprofile = "honest"\nping_ms = 60.0\n'
        '[[bots]]\ncount = 1\nprofile = "wallhack"\nping_ms = 60.0\nname_prefix = "wh"\n'
    )
    result = run_virtual(load_scenario(tmp_path / "wh.toml", profiles=profile_names()),
                         replay_path=tmp_path / "wh.replay")
    honest = {p.slot for p in result.players if p.profile == "honest"}
    hidden = 0
    for frame in ReplayReader(tmp_path / "wh.replay").frames():
        for e in frame.events:
            if isinstance(e, AimSample) and e.hidden_target is not None:
                hidden += 1
                assert e.hidden_target != e.player and 0.0 <= e.hidden_angle_deg <= 180.0
            elif isinstance(e, Detection) and e.detector == "wallhack":
                assert e.player not in honest
    assert hidden > 0
