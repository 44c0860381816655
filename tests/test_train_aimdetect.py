"""AimDetect training rows: every kill by an honest bot or an aim cheat, labelled by ground truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from anticheat.detectors.aimdetect.features import FEATURE_NAMES
from anticheat.events import (
    AimSample,
    KillEvent,
    SessionEvent,
    SpawnEvent,
)
from server.recording import ReplayWriter
from testbed.train_aimdetect import AIM_CHEATS, kill_rows, training_scenario
from tests.synthetic import make_shot


def _aim(player: int, t: float, yaw: float) -> AimSample:
    return AimSample(player, round(t * 64), t, round(t * 64), yaw, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0,
                     True, 0.0, None, 180.0, 0.0)


def test_kill_rows_label_kills_by_the_killers_ground_truth(tmp_path: Path) -> None:
    path = tmp_path / "t.replay"
    with ReplayWriter(path, {"seed": 1}) as w:
        w.write_tick(1, 1 / 64, [SessionEvent(0, 1, 1 / 64, "connect", "honest-1"),
                                 SessionEvent(1, 1, 1 / 64, "connect", "lock-1"),
                                 SessionEvent(2, 1, 1 / 64, "connect", "speed-1"),
                                 SpawnEvent(0, 1, 1 / 64), SpawnEvent(1, 1, 1 / 64), SpawnEvent(2, 1, 1 / 64)])
        t = 1.0
        for killer, victim in ((0, 1), (1, 0), (2, 0), (1, 2)):
            for k in range(8):
                w.write_tick(round((t + k / 64) * 64), t + k / 64, [_aim(killer, t + k / 64, 2.0 * k * k)])
            w.write_tick(round((t + 0.2) * 64), t + 0.2, [make_shot(killer, victim, t + 0.2, round((t + 0.2) * 64)),
                                                          KillEvent(killer, victim, round((t + 0.2) * 64), t + 0.2,
                                                                    1, 2, 10.0, 0, True)])
            t += 1.0
    labels = {"honest-1": "honest", "lock-1": "lock_aimbot", "speed-1": "speedhack"}
    rows, ys = kill_rows(path, labels)
    # The speed hacker's kill is neither honest nor aimbot aim: left out.
    assert ys == [0, 1, 1]
    assert all(r.shape == (len(FEATURE_NAMES),) and np.all(np.isfinite(r)) for r in rows)
    # The killer's flick before each kill shows up as cursor acceleration.
    assert all(r[list(FEATURE_NAMES).index("cursor_accel_deg_s2")] > 0 for r in rows)


def test_training_scenario_has_every_aim_cheat_and_honest_bots() -> None:
    scenario = training_scenario(7, 30.0, "corridors", honest=4, per_cheat=1)
    profiles = [p.profile for p in scenario.players()]
    assert profiles.count("honest") == 4
    assert set(AIM_CHEATS) <= set(profiles)
    assert scenario.seed == 7 and scenario.duration_s == 30.0
