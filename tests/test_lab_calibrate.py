"""The sanction policy's kind weights from a corpus's detections, computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from anticheat.suite import resolve_configs
from anticheat.tolerances import load_overrides
from testbed.cli import main
from testbed.lab.calibrate import calibrate, kind_weights_toml, posterior
from testbed.lab.metrics import rate
from testbed.lab.store import open_store


def _corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "corpus"
    store = open_store(directory)
    con = store.con
    # 10 honest player-hours and 2 cheating ones.
    con.execute("INSERT INTO players (match_id, name, profile, cheat, play_s) VALUES "
                "(0, 'h1', 'honest', false, 18000), (0, 'h2', 'honest', false, 18000), "
                "(0, 'c1', 'speedhack', true, 7200)")
    rows = [("h1", "movement", "timer")] + [("c1", "movement", "speed")] * 20 + [("c1", "movement", "timer")] * 4
    rows += [("h2", "connection", "desync")]
    for name, detector, kind in rows:
        con.execute("INSERT INTO detections (match_id, run, name, time_s, play_s, detector, kind, value, severity, "
                    "reason, evidence) VALUES (0, 'base', ?, 1, 1, ?, ?, 1, 1, '', '{}')", [name, detector, kind])
    store.close()
    return directory


def test_weights_are_posteriors_of_the_conservative_likelihood_ratio(tmp_path: Path) -> None:
    store = open_store(_corpus(tmp_path), read_only=True)
    try:
        kinds = {k.kind: k for k in calibrate(store, "base", prior=0.02)}
    finally:
        store.close()
    assert set(kinds) == {"movement.speed", "movement.timer"}  # link kinds never weigh as cheating
    speed = kinds["movement.speed"]
    assert (speed.honest, speed.cheat) == (0, 20)
    assert speed.honest_h == pytest.approx(10.0) and speed.cheat_h == pytest.approx(2.0)
    # 0 honest events in 10 h: upper bound 3.689 / 10 per hour; 20 in 2 h: Garwood lower bound.
    assert speed.honest_high == pytest.approx(3.6889 / 10, rel=1e-4)
    assert speed.cheat_low == pytest.approx(rate(20, 2.0).low)
    assert speed.lr == pytest.approx(speed.cheat_low / speed.honest_high)
    assert speed.weight == pytest.approx(posterior(speed.lr, 0.02))
    timer = kinds["movement.timer"]
    assert timer.weight < speed.weight  # an honest player produced it once
    assert posterior(1.0, 0.02) == pytest.approx(0.02)


def test_the_written_file_is_a_tolerance_file_the_policy_takes(tmp_path: Path) -> None:
    directory = _corpus(tmp_path)
    out = tmp_path / "sanctions.toml"
    assert main(["lab", "calibrate", str(directory), "--out", str(out)]) == 0
    weights = dict(resolve_configs(load_overrides(out))["sanctions"].kind_weights)
    assert set(weights) == {"movement.speed", "movement.timer"}
    store = open_store(directory, read_only=True)
    try:
        text = kind_weights_toml(calibrate(store))
    finally:
        store.close()
    assert text.startswith("[sanctions]\nkind_weights = [")
    assert main(["lab", "calibrate", str(directory), "--run", "nope"]) == 1
