"""``referee lab trigger-table``: the triggerbot detector's LOG_LR table and honest tail, measured.

The table, the CUSUM peaks, the tail fit and the threshold are checked on counts and shots small
enough to compute by hand; ``judge_shot`` against ``on_shot``; the command end to end on a one-
match corpus of honest bots and both triggerbot profiles.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anticheat.detectors import trigger
from anticheat.detectors.trigger import LOG_LR, TriggerConfig, TriggerDetector
from anticheat.events import ConnectionSample
from anticheat.skip import SkipBook
from testbed.cli import main
from testbed.lab.store import open_store
from testbed.lab.trigger_table import (
    BANDS,
    CATEGORIES,
    JudgedShot,
    corpus_judged_shots,
    cusum_runs,
    fit_tail,
    honest_peaks,
    log_lr_table,
    missing_bands,
    shot_counts,
    tail_grid,
    tail_points,
    threshold,
)
from tests.lab_corpora import build_tiny_corpus
from tests.synthetic import make_aim, make_shot
from world.weapons import WeaponId

# --- the table ------------------------------------------------------------------------------


def band_counts(per_band: dict[int, dict[int, int]]) -> np.ndarray:
    """(BANDS, CATEGORIES) counts from {band: {category: n}}."""
    c = np.zeros((BANDS, CATEGORIES), dtype=np.int64)
    for band, cats in per_band.items():
        for cat, n in cats.items():
            c[band, cat] = n
    return c


def tiny_counts() -> dict[str, np.ndarray]:
    every = range(BANDS)
    return {
        # The triggerbots: category 2 in band 0, 6 in band 1, 8 in band 3 (and none in band 2),
        # split over the two profiles: pooled over neighbours, bands 0 and 1 are (2, 6) half and
        # half, band 2 (6, 8) half and half, band 3 all 8.
        "triggerbot": band_counts({0: {2: 10}, 1: {6: 4}, 3: {8: 3}}),
        "triggerbot_no_bait": band_counts({1: {6: 6}, 3: {8: 7}}),
        # Honest, every band alike: low all off target, pro half off, half category 2: the highest
        # rates (1, 0, 0.5) renormalise to (2/3, 0, 1/3).
        "honest:low": band_counts({b: {0: 100} for b in every}),
        "honest:pro": band_counts({b: {0: 50, 2: 50} for b in every}),
        # A skill with no shots anywhere is left out (its rates are undefined).
        "honest:high": band_counts({}),
        # Other cheats count on neither side.
        "smooth_aimbot": band_counts({b: {5: 1000} for b in every}),
    }


def test_log_lr_table_by_hand() -> None:
    table = log_lr_table(tiny_counts())
    # Floored at 0.005 and renormalised: bands 0-2 hold 7 floored categories on both sides
    # (sum 1.035 each), so the ratio is the raw one: ln(0.005 / (2/3)) = -4.89,
    # ln(0.5 / (1/3)) = 0.41, ln(0.5 / 0.005) = 4.61, ln(0.005 / (1/3)) = -4.20.
    assert table[0] == (-4.89, 0.0, 0.41, 0.0, 0.0, 0.0, 4.61, 0.0, 0.0)
    assert table[1] == table[0]
    assert table[2] == (-4.89, 0.0, -4.2, 0.0, 0.0, 0.0, 4.61, 0.0, 4.61)
    # Band 3: the triggerbot side has 8 floored categories (sum 1.04), the honest 7 (1.035):
    # the renormalisation shows, e.g. ln(1 / 0.005 * 1.035 / 1.04) = 5.29 (not ln 200 = 5.30).
    assert table[3] == (-4.9, 0.0, -4.2, 0.0, 0.0, 0.0, 0.0, 0.0, 5.29)
    assert all(math.copysign(1.0, x) == 1.0 for row in table for x in row if x == 0.0)


def test_a_band_without_shots_is_an_error_or_a_row_of_zeros() -> None:
    counts = tiny_counts()
    counts["honest:low"][1] = 0
    counts["honest:pro"][1] = 0
    assert missing_bands(counts) == [(1, "honest")]
    with pytest.raises(ValueError, match="15-30 m: no honest shots"):
        log_lr_table(counts)
    table = log_lr_table(counts, allow_missing=True)
    assert table[1] == (0.0,) * CATEGORIES and table[0] == log_lr_table(tiny_counts())[0]
    # The triggerbots are pooled over neighbours: band 2 alone empty is still measured.
    assert missing_bands(tiny_counts()) == []
    no_bots = {k: v for k, v in tiny_counts().items() if not k.startswith("trigger")}
    assert missing_bands(no_bots) == [(b, "triggerbot") for b in range(BANDS)]


# --- the CUSUM and its tail -----------------------------------------------------------------


def shot(stratum: str, cat: int, t: float, *, name: str = "a", match: int = 0, session: int = 1) -> JudgedShot:
    return JudgedShot(stratum, match, name, session, t, 3, cat)


TABLE = tuple(tuple({0: -1.0, 2: 2.0, 6: 3.0}.get(c, 0.0) for c in range(CATEGORIES)) for _ in range(BANDS))


def test_honest_peaks_by_hand() -> None:
    shots = [
        # S: 2, 4, 3, 2, 1, 0, 0, 3, 2 -> peak 4
        *(shot("honest:low", c, float(i)) for i, c in enumerate([2, 2, 0, 0, 0, 0, 0, 6, 0])),
        # A reconnect starts afresh: 3 + 3, then 3 (not 9).
        shot("honest:pro", 6, 1.0, name="b"), shot("honest:pro", 6, 2.0, name="b"),
        shot("honest:pro", 6, 3.0, name="b", session=2),
        # The same name in another match is another player-match; misses alone peak at 0.
        shot("honest:pro", 0, 1.0, name="b", match=1),
        # Cheaters are not honest.
        *(shot("triggerbot", 6, float(i), name="c") for i in range(10)),
    ]
    assert honest_peaks(shots, TABLE) == {(0, "a"): 4.0, (0, "b"): 6.0, (1, "b"): 0.0}
    # With h, the statistic restarts at each alarm: 3, 6 (alarm) | 3, 6 (alarm) | ...
    runs = cusum_runs([s for s in shots if s.name == "c"], TABLE, h=5.0)
    assert runs[(0, "c")].alarms == (1.0, 3.0, 5.0, 7.0, 9.0) and runs[(0, "c")].peak == 6.0
    assert cusum_runs(shots, TABLE)[(0, "c")].alarms == ()


def test_fit_tail_gives_back_an_exact_exponential() -> None:
    # 2^(7-k) peaks in [k, k+1) for k = 0..6, one in [7, 8) and one at 20: 2^(8-x) reach x for
    # x = 0..7; per 4 player-hours, ln(2^(8-x) / 4) = 6 ln 2 - x ln 2. The outlier alone
    # reaches x = 8..20: those counts of 1 are off the line and left out.
    peaks = [k + 0.5 for k in range(7) for _ in range(2 ** (7 - k))] + [7.5, 20.0]
    hours = 4.0
    points = tail_points(peaks, hours, tail_grid(0.0))
    assert [(x, n) for x, n, _ in points] == [(float(x), 2 ** (8 - x)) for x in range(8)]
    a, b = fit_tail(peaks, hours, tail_grid(0.0))
    assert a == pytest.approx(6 * math.log(2)) and b == pytest.approx(math.log(2))
    # The default grid starts at 6: x = 6 and 7.
    assert fit_tail(peaks, hours) == pytest.approx((6 * math.log(2), math.log(2)))
    with pytest.raises(ValueError, match="grid points"):
        fit_tail([1.0, 30.0], 1.0)


def test_threshold_is_the_detectors() -> None:
    assert threshold(1.0, 0.5, math.exp(3.0)) == pytest.approx(8.0)
    assert threshold(trigger.TAIL_LOG_RATE, trigger.TAIL_SLOPE) == TriggerConfig().threshold
    assert threshold(trigger.TAIL_LOG_RATE, trigger.TAIL_SLOPE, 1e4) == TriggerConfig(false_alarm_player_hours=1e4).threshold


# --- judge_shot -----------------------------------------------------------------------------


def linked(rtt_ms: float = 60.0) -> SkipBook:
    book = SkipBook()
    book.record(ConnectionSample(player=1, time_s=0.0, rtt_ms=rtt_ms, jitter_ms=2.0, loss=0.0, since_update_s=0.0))
    return book


def test_judge_shot_is_on_shots_judgement() -> None:
    pistol, minigun = int(WeaponId.PISTOL), int(WeaponId.MINIGUN)
    prompt_s = trigger._WEAPON_INTERVAL_S[pistol]
    base = make_shot(weapon=pistol, t=1.0)

    def at(t: float, fc: bool | None, **kw: Any) -> Any:
        s = dataclasses.replace(base, time_s=t, first_contact=fc, victim=None if fc is None else 2, **kw)
        return dataclasses.replace(s, claim=dataclasses.replace(s.claim, seq=int(t * 64)))

    seq = [
        (at(1.0, None), (3, 0)),                       # off target, no aim sample: the last band
        (at(1.0 + prompt_s, True), (0, 1 + 1 + 2)),    # on, first contact, prompt; 10 m away
        (at(2.4, False), (0, 1 + 4)),                  # on, not first contact, follows an on shot
        (at(2.4 + prompt_s, True), (0, 1 + 1 + 2 + 4)),  # on, first contact, prompt, follows on
        (at(3.1, None, pellet=1), None),               # other pellets are not judged
        (at(3.2, None, bait_hit=True), None),          # a bait shot: AimDetect's
        (at(3.3, True, weapon=minigun), None),         # a skipped weapon (still the last shot)
        (at(4.5, True), (0, 1 + 1)),                   # > follow_s after it: follows nothing
    ]
    judge, live = TriggerDetector(), TriggerDetector()
    book = linked()
    statistic = peak = 0.0
    for s, expected in seq:
        aim = dataclasses.replace(make_aim(s.claim.seq), target=2, target_distance_m=10.0)
        if s.time_s != 1.0:
            judge.on_aim(aim, book)
            live.on_aim(aim, book)
        assert judge.judge_shot(s, book) == expected
        assert not live.on_shot(s, book)
        if expected is not None:
            statistic = max(0.0, statistic + LOG_LR[expected[0]][expected[1]])
            peak = max(peak, statistic)
    assert judge.skip_counts() == live.skip_counts() == {"bait": 1, "weapon": 1}
    assert peak > 0.0 and live.scores(1)["llr"] == pytest.approx(peak / TriggerConfig().threshold)
    # A bad link: not judged, but the shot still counts as the next one's previous.
    bad = TriggerDetector()
    assert bad.judge_shot(at(5.0, True), linked(rtt_ms=900.0)) is None
    assert bad.judge_shot(at(5.0 + prompt_s, True), book) == (3, 8)
    assert bad.skip_counts() == {"high_ping": 1}


# --- the command end to end -----------------------------------------------------------------

SPEC = """
name = "trigger-tiny"
duration_s = 40.0
maps = ["open"]
seed = 32000
honest_per_match = 4
cheaters_per_match = 2
honest_player_hours = 0.0
cheater_engagements = 1
skills = ["low", "average", "high", "pro"]

[[links]]
name = "lan"
ping_ms = 30.0

[[cheats]]
profile = "triggerbot"

[[cheats]]
profile = "triggerbot"
label = "triggerbot_no_bait"
[cheats.params]
include_hidden = false
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("trigger"), SPEC, "<trigger-tiny>")


def test_the_command_measures_the_corpus(corpus: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["lab", "trigger-table", str(corpus), "--tail-from", "0", "--json"], stdout=out, stderr=err) == 0
    got = json.loads(out.getvalue())
    store = open_store(corpus, read_only=True)
    try:
        shots = corpus_judged_shots(store)
        hours = store.con.execute("SELECT sum(play_s) / 3600 FROM players WHERE NOT cheat").fetchone()[0]
    finally:
        store.close()
    counts = shot_counts(shots)
    assert {s.stratum for s in shots} == {"honest:low", "honest:average", "honest:high", "honest:pro",
                                          "triggerbot", "triggerbot_no_bait"}
    assert got["shots"] == {k: v.tolist() for k, v in sorted(counts.items())}
    assert [tuple(r) for r in got["table"]] == list(log_lr_table(counts, allow_missing=True))
    assert got["missing_bands"] == [{"band": b, "side": s} for b, s in missing_bands(counts)]
    peaks = honest_peaks(shots, log_lr_table(counts, allow_missing=True))
    assert len(peaks) == got["honest_player_matches"] == 4
    a, b = fit_tail(peaks.values(), hours, tail_grid(0.0))
    assert (got["tail_log_rate"], got["tail_slope"]) == (round(a, 2), round(b, 3))
    assert got["h"] == pytest.approx(threshold(round(a, 2), round(b, 3)))
    assert got["current"]["h"] == pytest.approx(TriggerConfig().threshold)
    assert got["peak_max"] == pytest.approx(max(peaks.values()))
    assert sorted(t["profile"] for t in got["triggerbots"]) == ["triggerbot", "triggerbot_no_bait"]

    # The text report: 80 columns, and a snippet that is the measured constants as Python.
    out = io.StringIO()
    assert main(["lab", "trigger-table", str(corpus), "--tail-from", "0"], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "triggerbots' first alarm" in text and "TAIL_SLOPE b" in text
    code = text[text.index("LOG_LR: tuple"):]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - the command's own output
    assert [list(r) for r in namespace["LOG_LR"]] == got["table"]
    assert (namespace["TAIL_LOG_RATE"], namespace["TAIL_SLOPE"]) == (got["tail_log_rate"], got["tail_slope"])

    # Too little honest play for the default grid (x >= 6): a one-line error.
    err = io.StringIO()
    assert main(["lab", "trigger-table", str(corpus)], stdout=io.StringIO(), stderr=err) == 1
    assert "grid points" in err.getvalue()


def test_honest_corpora_join_the_tail_but_not_the_table(corpus: Path) -> None:
    out = io.StringIO()
    assert main(["lab", "trigger-table", str(corpus), "--tail-from", "0", "--json"], stdout=out, stderr=io.StringIO()) == 0
    alone = json.loads(out.getvalue())
    out = io.StringIO()
    # The same corpus again as the further honest corpus: each honest player-match twice, apart.
    assert main(["lab", "trigger-table", str(corpus), "--tail-from", "0", "--json", "--honest", str(corpus)],
                stdout=out, stderr=io.StringIO()) == 0
    both = json.loads(out.getvalue())
    assert both["table"] == alone["table"] and both["shots"] == alone["shots"]
    assert both["honest_player_matches"] == 2 * alone["honest_player_matches"]
    assert both["honest_hours"] == pytest.approx(2 * alone["honest_hours"], abs=2e-3)  # JSON keeps 3 decimals
    # Twice the player-matches over twice the hours: the same rate at every level; a level one
    # player-match reached alone (left out: the fit needs two) now has two.
    doubled = {t["x"]: t["n"] for t in both["tail"]}
    assert all(doubled[t["x"]] == 2 * t["n"] for t in alone["tail"])
    assert all(n == 2 for x, n in doubled.items() if x not in {t["x"] for t in alone["tail"]})
    assert all(t["per_hour"] == pytest.approx(a["per_hour"], rel=0.02) for t, a in zip(both["tail"], alone["tail"]))
    # The triggerbots are the main corpus's; under the shipped constants nothing about them moved.
    def current(m: dict[str, Any]) -> list[tuple[str, float | None]]:
        return [(t["name"], t["current_first_alarm_play_s"]) for t in m["triggerbots"]]

    assert current(both) == current(alone)
    assert both["current"]["honest_alarms"] == 2 * alone["current"]["honest_alarms"]
