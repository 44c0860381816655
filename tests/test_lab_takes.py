"""``referee lab takes``: crosshair contacts per stratum and band, the table, honest peaks.

The stream walk is checked on a hand-built stream (skipped links, a reconnect, samples from before
the probe); the command end to end on a one-match corpus where a triggerbot plays among honest
players: it takes its contacts, they mostly do not.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from anticheat.detectors.trigger import TAKE_LLR, TriggerConfig
from anticheat.events import ConnectionSample, SessionEvent
from testbed.cli import main
from testbed.lab.takes import PlayerOpportunities, measure_takes, stream_opportunities
from tests.lab_corpora import build_tiny_corpus, one_cheat_spec
from tests.synthetic import contact_samples


def test_the_stream_walk_judges_as_the_detector_does() -> None:
    def conn(player: int, rtt_ms: float, t: float) -> ConnectionSample:
        return ConnectionSample(player=player, time_s=t, rtt_ms=rtt_ms, jitter_ms=2.0, loss=0.0, since_update_s=0.0)

    first = contact_samples("T.", start=1)  # seq 1-6, times up to 0.1 s
    skipped = contact_samples("TT", start=7)
    after = contact_samples("T", start=13)
    old = [dataclasses.replace(s, fire_ready=None) for s in contact_samples("T", start=16)]
    events = [SessionEvent(1, 0, 0.0, "connect", "alice"), conn(1, 60.0, 0.0), *first,
              conn(1, 900.0, 0.1), *skipped, conn(1, 60.0, 0.2), *after,
              SessionEvent(1, 20, 0.25, "connect", "bob"), *old]
    rows = list(stream_opportunities(events))
    assert [(name, taken) for name, _, _, taken in rows] == [("alice", True), ("alice", False), ("alice", True)]
    assert all(band == 0 for _, _, band, _ in rows)  # 10 m


def test_measure_runs_the_cusum_per_player() -> None:
    h = TriggerConfig().takes_threshold
    honest = PlayerOpportunities("honest:pro", 0, "h", 3600.0, tuple((float(i), 0, i % 5 == 0) for i in range(500)))
    bot = PlayerOpportunities("triggerbot", 0, "c", 600.0, tuple((float(i), 0, True) for i in range(50)))
    m = measure_takes([honest, bot], h)
    assert m.honest_hours == 1.0 and m.honest_peaks[0] < h
    need = -(-h // TAKE_LLR[0][1])
    assert m.triggerbots == (("triggerbot", 0, "c", need - 1.0),)
    assert m.counts["triggerbot"][0].tolist() == [50, 50] and m.counts["honest:pro"][0].tolist() == [500, 100]
    assert m.measured is None  # bands 1-3 have no contacts


SPEC = one_cheat_spec("takes-tiny", 32200, "triggerbot", duration_s=90.0, map_name="corridors")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("takes"), SPEC, "<takes-tiny>")


def test_the_command_tabulates_the_corpus(corpus: Path) -> None:
    out = io.StringIO()
    assert main(["lab", "takes", str(corpus), "--json"], stdout=out, stderr=io.StringIO()) == 0
    got = json.loads(out.getvalue())
    counts = {k: sum(band[0] for band in v) for k, v in got["counts"].items()}
    taken = {k: sum(band[1] for band in v) for k, v in got["counts"].items()}
    assert counts["triggerbot"] >= 5
    honest = sum(counts[k] for k in counts if k.startswith("honest:"))
    honest_taken = sum(taken[k] for k in taken if k.startswith("honest:"))
    # The triggerbot takes most of its contacts; honest players let most pass.
    assert taken["triggerbot"] / counts["triggerbot"] > 0.7 > 0.4 > honest_taken / honest
    assert got["threshold"] == TriggerConfig().takes_threshold
    out = io.StringIO()
    assert main(["lab", "takes", str(corpus)], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert "triggerbot" in text and max(len(line) for line in text.splitlines()) <= 80


def test_a_corpus_from_before_the_probe_is_a_one_line_error(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["lab", "takes", str(tmp_path / "none")], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue().count("\n") == 1
