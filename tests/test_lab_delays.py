"""``referee lab delays``: first shots on contacts per stratum, band and delay range; the table;
the bank's honest peaks and alarm times.

The table and the bank are checked against hand-computed values; the command end to end on a
one-match corpus where a triggerbot with an 80 ms delay plays among honest players: its first shots
sit at 5 commands, theirs on arrival.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from anticheat.detectors.trigger import TriggerConfig
from testbed.cli import main
from testbed.lab.delays import PlayerFirstFires, delay_counts, delay_llr_table, measure_delays, run_bank
from tests.lab_corpora import build_tiny_corpus, one_cheat_spec

RANGES = ((2, 4), (5, 7), (5, 10))


def test_counts_and_table_by_hand() -> None:
    # Delay None: a pull off target, in no range.
    rows = tuple((float(i), 0, d) for i, d in enumerate([0, 0, 1, 3, 6, 9, None, 0, 1, 20]))
    honest = PlayerFirstFires("honest:pro", 0, "h", 3600.0, rows)
    bot = PlayerFirstFires("triggerbot_80ms", 0, "c", 600.0, tuple((float(i), 0, 6) for i in range(4)))
    counts = delay_counts([honest, bot], RANGES)
    # Pulls, off target, then per range.
    assert counts["honest:pro"][0].tolist() == [10, 1, 1, 1, 2]
    assert counts["triggerbot_80ms"][0].tolist() == [4, 0, 0, 4, 4]
    # Bands without honest first shots: no table.
    assert delay_llr_table(counts) is None
    for band in range(1, 4):
        counts["honest:pro"][band] = [10, 5, 1, 0, 2]
    table = delay_llr_table(counts, cheat_share=0.9, floor=0.03)
    assert table is not None
    # Band 0, range 2-4: h = 0.1; range 5-10: h = 0.2. Band 1, range 5-7: h floored at 0.03.
    assert table[0][0] == (round(math.log(0.1 / 0.9), 2), round(math.log(0.9 / 0.1), 2))
    assert table[0][2] == (round(math.log(0.1 / 0.8), 2), round(math.log(0.9 / 0.2), 2))
    assert table[1][1] == (round(math.log(0.1 / 0.97), 2), round(math.log(0.9 / 0.03), 2))


def test_the_bank_alarms_on_the_first_range_to_reach_the_threshold() -> None:
    table = (((-2.0, 1.0), (-2.0, 3.0), (-2.0, 2.0)),) * 4
    rows = [(float(t), 0, 6) for t in range(10)]
    peak, first = run_bank(rows, table, 8.0, RANGES)
    # 5-7 climbs by 3 a shot: 9 at the third (t = 2); the peak is the highest ever (30).
    assert first == 2.0 and peak == 30.0
    # One shot outside between them resets nothing but costs 2.
    peak, first = run_bank([(0.0, 0, 6), (1.0, 0, 0), (2.0, 0, 6), (3.0, 0, 6)], table, 8.0, RANGES)
    assert first is None and peak == 7.0
    m = measure_delays([PlayerFirstFires("honest:low", 0, "h", 1800.0, tuple(rows[:2])),
                        PlayerFirstFires("triggerbot_80ms", 0, "c", 600.0, tuple(rows))], 8.0, table, RANGES)
    assert m.honest_hours == 0.5 and m.honest_peaks == (6.0,)
    assert m.triggerbots == (("triggerbot_80ms", 0, "c", 2.0),)


SPEC = one_cheat_spec("delays-tiny", 32300, "triggerbot", duration_s=120.0, map_name="open",
                      label="triggerbot_80ms", params="delay_s = 0.08")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("delays"), SPEC, "<delays-tiny>")


def test_the_command_tabulates_the_corpus(corpus: Path) -> None:
    out = io.StringIO()
    assert main(["lab", "delays", str(corpus), "--json"], stdout=out, stderr=io.StringIO()) == 0
    got = json.loads(out.getvalue())
    ranges = [tuple(r) for r in got["ranges"]]
    bot = np.array(got["counts"]["triggerbot_80ms"]).sum(axis=0)
    honest = sum(np.array(v).sum(axis=0) for k, v in got["counts"].items() if k.startswith("honest:"))
    assert bot[0] >= 5 and honest[0] >= 20
    r57 = 2 + ranges.index((5, 7))
    # The bot's first shots sit 5-7 commands into the contact; honest players' mostly do not.
    assert bot[r57] / bot[0] > 0.7 > 0.2 > honest[r57] / honest[0]
    assert got["threshold"] == TriggerConfig().delay_threshold
    out = io.StringIO()
    assert main(["lab", "delays", str(corpus)], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert "tb_80ms" in text and "off" in text and max(len(line) for line in text.splitlines()) <= 80


def test_a_missing_corpus_is_a_one_line_error(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main(["lab", "delays", str(tmp_path / "none")], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue().count("\n") == 1
