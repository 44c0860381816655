"""Corpus builds: stored rows, resume after a kill, Ray against processes, re-runs and tuning.

One tiny spec (three 5 s matches, a speed hack among two honest bots) is built several ways; the
corpora must be equal row for row (wall times and the runner's name aside), since every match is
deterministic for its seed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from testbed.lab.corpus import CorpusMismatchError, build_corpus
from testbed.lab.rerun import rerun_corpus
from testbed.lab.spec import CorpusSpec, parse_spec
from testbed.lab.store import open_store

SPEC = """
name = "tiny"
duration_s = 5.0
maps = ["corridors"]
seed = 31000
honest_per_match = 2
cheaters_per_match = 1
honest_player_hours = 0.0
cheater_engagements = 3

[[links]]
name = "lan"
ping_ms = 30.0

[[links]]
name = "lossy"
ping_ms = 200.0
jitter_ms = 10.0
loss = 0.03

[[cheats]]
profile = "speedhack"
"""

TABLES = {
    "matches": "SELECT * EXCLUDE (wall_s, runner, finished_at) FROM matches ORDER BY ALL",
    "players": "SELECT * FROM players ORDER BY ALL",
    "streams": "SELECT match_id, codec, raw_bytes, md5(data) FROM streams ORDER BY ALL",
    "detections": "SELECT * FROM detections ORDER BY ALL",
    "decisions": "SELECT * FROM decisions ORDER BY ALL",
    "traces": "SELECT * FROM traces ORDER BY ALL",
}


def tiny() -> CorpusSpec:
    return parse_spec(tomllib.loads(SPEC), "<tiny>")


def dump(directory: Path) -> dict[str, list[tuple[Any, ...]]]:
    store = open_store(directory, read_only=True)
    try:
        return {name: store.con.execute(sql).fetchall() for name, sql in TABLES.items()}
    finally:
        store.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("uninterrupted")
    store = open_store(directory)
    try:
        report = build_corpus(tiny(), store, workers=2)
    finally:
        store.close()
    assert (report.played, report.skipped, report.total) == (3, 0, 3)
    return directory


def test_a_corpus_holds_labels_exposure_streams_and_detections(built: Path) -> None:
    rows = dump(built)
    assert len(rows["matches"]) == 3 and len(rows["streams"]) == 3
    store = open_store(built, read_only=True)
    try:
        players = store.con.execute("SELECT name, profile, cheat, blatant, link, play_s FROM players").fetchall()
        assert len(players) == 9
        assert {(p[1], p[2]) for p in players} == {("honest", False), ("speedhack", True)}
        assert all(4.0 < p[5] <= 5.0 for p in players)
        assert {p[4] for p in players} == {"lan", "lossy"}
        # The speed hack is caught in every match by the timer check; the honest bots are not.
        caught = store.con.execute(
            "SELECT DISTINCT d.match_id FROM detections d JOIN players p USING (match_id, name) "
            "WHERE p.cheat AND d.detector = 'movement'").fetchall()
        assert len(caught) == 3
        honest = store.con.execute(
            "SELECT count(*) FROM detections d JOIN players p USING (match_id, name) WHERE NOT p.cheat").fetchone()
        assert honest == (0,)
        # Each detection's statistic stands at or past 1.0 in the trace by the next sample.
        for mid, name, play_s, detector in store.con.execute(
                "SELECT match_id, name, play_s, detector FROM detections").fetchall():
            peak = store.con.execute(
                "SELECT max(value) FROM traces WHERE match_id = ? AND name = ? AND stat LIKE ? AND play_s <= ?",
                [mid, name, f"{detector}:%", play_s + 1.5]).fetchone()[0]
            assert peak is not None and peak >= 1.0, (mid, name, detector)
    finally:
        store.close()


def test_a_resumed_build_equals_an_uninterrupted_one(built: Path, tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        first = build_corpus(tiny(), store, workers=1, max_matches=1)
    finally:
        store.close()
    store = open_store(tmp_path)
    try:
        second = build_corpus(tiny(), store, workers=2)
        again = build_corpus(tiny(), store, workers=2)
    finally:
        store.close()
    assert (first.played, second.played, second.skipped, again.played) == (1, 2, 1, 0)
    assert dump(tmp_path) == dump(built)


def test_a_killed_build_resumes_where_it_stopped(built: Path, tmp_path: Path) -> None:
    spec_file = tmp_path / "tiny.toml"
    spec_file.write_text(SPEC)
    out = tmp_path / "corpus"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "-v", "lab", "corpus", str(spec_file), "--out",
                             str(out), "--jobs", "1"], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 240
    try:
        for line in proc.stderr:
            if "stored match" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    store = open_store(out)
    try:
        stored = store.done_match_ids()
        assert 1 <= len(stored) < 3
        report = build_corpus(tiny(), store, workers=1)
    finally:
        store.close()
    assert report.skipped == len(stored) and report.played == 3 - len(stored)
    assert dump(out) == dump(built)


def test_a_directory_keeps_its_spec(built: Path) -> None:
    store = open_store(built)
    try:
        with pytest.raises(CorpusMismatchError):
            build_corpus(tiny().with_seed(1), store, workers=1)
    finally:
        store.close()


def test_ray_on_a_local_cluster_equals_the_process_run(built: Path, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        store = open_store(tmp_path)
        try:
            report = build_corpus(tiny(), store, ray_address="auto")
            # Re-runs go to Ray tasks too, and find what the matches found.
            rerun_corpus(store, {"movement": {"cooldown_s": 10.0}}, "on-ray", ray=True)
            rows = {run: store.con.execute(
                "SELECT * EXCLUDE (run) FROM detections WHERE run = ? ORDER BY ALL", [run]).fetchall()
                for run in ("base", "on-ray")}
        finally:
            store.close()
    finally:
        ray.shutdown()
    assert report.runner == "ray" and report.played == 3
    assert rows["on-ray"] == rows["base"] and rows["base"]
    with_ray = dump(tmp_path)
    with_ray = {k: [r for r in v if "on-ray" not in r] for k, v in with_ray.items()}
    assert with_ray == dump(built)


def test_a_rerun_with_other_tolerances_changes_detections(built: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    store = open_store(copy)
    try:
        # Ten timer violations in 10 s before a detection: a 5 s match never gets there.
        assert rerun_corpus(store, {"movement": {"timer": {"count": 1000}}}, "lenient", workers=1) == 3
        base = store.con.execute("SELECT count(*) FROM detections WHERE run = 'base' AND kind = 'timer'").fetchone()[0]
        lenient = store.con.execute("SELECT count(*) FROM detections WHERE run = 'lenient' AND kind = 'timer'").fetchone()[0]
        assert base >= 3 and lenient == 0
        assert set(store.runs()) >= {"base", "lenient"}
    finally:
        store.close()


def test_a_tuned_toml_loads_and_reproduces_its_trial(built: Path, tmp_path: Path) -> None:
    import shutil

    from anticheat.suite import resolve_configs
    from anticheat.tolerances import load_overrides
    from testbed.lab.tune import search_space, to_toml, tune

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    store = open_store(copy)
    try:
        result = tune(store, target_per_hour=1.0, deadline_s=4.0, trials=4, workers=1, seed=3,
                      space=search_space(keys=["movement.timer.count", "movement.cooldown_s"]))
        assert result.baseline.eligible == 3 and result.baseline.detected == 3 and result.baseline.alarms == 0
        assert result.best is not None and result.front
        text = to_toml(result.best.overrides, "tuned")
        path = tmp_path / "tuned.toml"
        path.write_text(text)
        overrides = load_overrides(path)
        configs = resolve_configs(overrides)
        assert configs["movement"].timer.count == result.best.overrides["movement"]["timer"]["count"]
        rerun_corpus(store, overrides, "tuned", workers=1)
        caught = store.con.execute(
            "SELECT count(DISTINCT d.match_id) FROM detections d JOIN players p USING (match_id, name) "
            "WHERE d.run = 'tuned' AND p.cheat AND d.play_s <= 4.0").fetchone()[0]
        assert caught == result.best.detected
    finally:
        store.close()


def test_the_example_plugin_runs_in_the_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.lab.aggregate import summarize
    from testbed.lab.spec import load_spec

    root = Path(__file__).resolve().parents[1] / "examples" / "referee_example_plugin"
    monkeypatch.syspath_prepend(str(root))
    text = (root / "lab.toml").read_text().replace("duration_s = 120.0", "duration_s = 5.0")
    text = text.replace("honest_player_hours = 0.4", "honest_player_hours = 0.0").replace(
        "cheater_engagements = 2", "cheater_engagements = 1")
    (tmp_path / "lab.toml").write_text(text)
    spec = load_spec(tmp_path / "lab.toml")
    store = open_store(tmp_path / "corpus")
    try:
        assert build_corpus(spec, store, workers=1).played == 1
        rows = store.con.execute("SELECT profile, cheat FROM players ORDER BY name").fetchall()
        summary = summarize(store.con)
    finally:
        store.close()
    assert ("snap_after_delay", True) in rows and ("honest_overshoot", False) in rows
    assert [p["profile"] for p in summary["profiles"]] == ["snap_after_delay"]
    assert summary["honest"]["player_matches"] == 6


def test_the_lab_commands_on_a_corpus(built: Path, tmp_path: Path) -> None:
    import io
    import json
    import shutil

    import duckdb

    from testbed.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()

    copy = tmp_path / "corpus"
    shutil.copytree(built, copy)
    tuned = tmp_path / "tuned.toml"
    code, out, err = run("lab", "tune", str(copy), "--deadline", "4", "--target-fpr-per-hour", "1",
                         "--params", "movement.timer.count", "--trials", "2", "--jobs", "1", "--out", str(tuned))
    assert code == 0, err
    assert "Pareto front" in out and "movement.timer.count=" in out and "defaults: TPR@4s 3/3" in err
    assert "[movement.timer]" in tuned.read_text()
    code, out, err = run("lab", "rerun", str(copy), "--tolerances", str(tuned), "--run", "again", "--jobs", "1")
    assert code == 0 and "re-ran 3 matches as run 'again'" in out, err
    assert run("lab", "rerun", str(copy), "--tolerances", str(tuned), "--run", "base")[0] == 1
    code, out, err = run("lab", "report", str(copy), "--run", "tuned", "--compare", f"{copy}:base", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["summary"]["run"] == "tuned" and doc["compare"]["run"] == "base"
    assert doc["summary"]["corpus"]["cheater_engagements"] == 3 and doc["summary"]["tune"]["best"] is not None
    page = tmp_path / "r.html"
    assert run("lab", "report", str(copy), "--out", str(page))[0] == 0 and "speedhack" in page.read_text()
    code, out, err = run("lab", "report", str(copy), "--run", "nope")
    assert code == 1 and "no run 'nope'" in err
    assert run("lab", "export", str(copy), str(tmp_path / "pq"))[0] == 0
    assert duckdb.connect().execute(f"SELECT count(*) FROM '{tmp_path / 'pq' / 'players.parquet'}'").fetchone() == (9,)
    code, out, err = run("lab", "sql", str(copy), "SELECT count(*) AS n FROM matches")
    assert code == 0 and "3" in out
    code, out, err = run("lab", "sql", str(copy), "DROP TABLE matches")
    assert code == 1 and "SQL" in err
    code, _, err = run("lab", "report", str(tmp_path / "missing"))
    assert code == 1 and "no lab corpus here" in err


def test_compacting_keeps_every_row(built: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    store = open_store(copy)
    try:
        store.compact()
        assert store.done_match_ids() == {0, 1, 2}
    finally:
        store.close()
    assert dump(copy) == dump(built)


def test_the_command_logs_a_line_per_match_when_not_on_a_terminal(tmp_path: Path) -> None:
    import io

    from testbed.cli import main

    spec_file = tmp_path / "tiny.toml"
    spec_file.write_text(SPEC)
    err = io.StringIO()
    assert main(["lab", "corpus", str(spec_file), "--out", str(tmp_path / "c"), "--jobs", "1", "--max-matches", "2"],
                stdout=io.StringIO(), stderr=err) == 0
    lines = [line for line in err.getvalue().splitlines() if " stored: " in line]
    # A log file has no live bar: each stored match is a line of its own, counted up.
    assert [line.split(" stored: ")[1].split(",")[0] for line in lines] == ["1/3", "2/3"]
