"""testbed.lab.metrics against hand-computed and published values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from testbed.lab.metrics import (
    detected_within,
    proportion,
    rate,
    roc,
    threshold_for_fpr,
    time_to_detect,
    tpr_at_fpr,
)

# --- Clopper-Pearson -------------------------------------------------------------------------


def test_clopper_pearson_zero_successes_has_closed_form_upper_bound() -> None:
    p = proportion(0, 10)
    assert p.estimate == 0.0 and p.low == 0.0
    assert p.high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    assert p.high == pytest.approx(0.3085, abs=1e-4)


def test_clopper_pearson_all_successes_mirrors_zero() -> None:
    p = proportion(10, 10)
    assert p.estimate == 1.0 and p.high == 1.0
    assert p.low == pytest.approx(0.025 ** (1 / 10), abs=1e-12)


def test_clopper_pearson_half_matches_published_interval() -> None:
    p = proportion(5, 10)
    assert p.estimate == 0.5
    assert (p.low, p.high) == (pytest.approx(0.1871, abs=1e-4), pytest.approx(0.8129, abs=1e-4))


def test_clopper_pearson_other_confidence() -> None:
    # k=0: upper = 1 - (alpha/2)^(1/n); at 90 %: 1 - 0.05^(1/20).
    assert proportion(0, 20, confidence=0.90).high == pytest.approx(1 - 0.05 ** (1 / 20), abs=1e-12)


def test_proportion_of_nothing_is_uninformative_and_json_able() -> None:
    p = proportion(0, 0)
    assert (p.estimate, p.low, p.high) == (None, 0.0, 1.0)
    assert json.loads(json.dumps(p.to_json())) == {"k": 0, "n": 0, "estimate": None, "low": 0.0, "high": 1.0}


@pytest.mark.parametrize(("k", "n"), [(-1, 3), (4, 3), (0, -1)])
def test_proportion_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        proportion(k, n)


# --- Garwood ----------------------------------------------------------------------------------


def test_garwood_zero_events_upper_bound_is_minus_log_alpha_half() -> None:
    r = rate(0, 300.0)
    assert r.per_hour == 0.0 and r.low == 0.0
    assert r.high == pytest.approx(-math.log(0.025) / 300, rel=1e-9)
    assert r.high * 300 == pytest.approx(3.689, abs=1e-3)
    assert r.per_100h() == (0.0, 0.0, pytest.approx(100 * 3.68888 / 300, rel=1e-5))


def test_garwood_published_table_values() -> None:
    # Garwood (1936) 95 % limits on a Poisson mean: x=1 -> (0.0253, 5.572), x=5 -> (1.624, 11.668).
    r1 = rate(1, 1.0)
    assert (r1.low, r1.high) == (pytest.approx(0.0253, abs=1e-4), pytest.approx(5.5716, abs=1e-4))
    r5 = rate(5, 10.0)
    assert r5.per_hour == 0.5
    assert (r5.low * 10, r5.high * 10) == (pytest.approx(1.6235, abs=1e-4), pytest.approx(11.6683, abs=1e-4))


def test_rate_without_exposure_is_unbounded() -> None:
    r = rate(0, 0.0)
    assert (r.per_hour, r.low, r.high) == (None, 0.0, None)
    assert json.dumps(r.to_json())
    with pytest.raises(ValueError):
        rate(1, -1.0)


# --- ROC --------------------------------------------------------------------------------------

POS = [0.9, 0.8, 0.4]
NEG = [0.7, 0.3, 0.2, 0.4]


def test_roc_auc_by_hand() -> None:
    # Pairs won by each positive: 0.9 -> 4, 0.8 -> 4, 0.4 -> 2 + a tie (0.5) = 10.5 of 12.
    c = roc(POS, NEG)
    assert c.auc == pytest.approx(10.5 / 12)
    assert (c.n_pos, c.n_neg) == (3, 4)
    # Thresholds inf, 0.9, 0.8, 0.7, 0.4, 0.3, 0.2 (flag when score >= threshold).
    np.testing.assert_allclose(c.fpr, [0, 0, 0, 1 / 4, 2 / 4, 3 / 4, 1])
    np.testing.assert_allclose(c.tpr, [0, 1 / 3, 2 / 3, 2 / 3, 1, 1, 1])
    assert math.isinf(c.thresholds[0])
    np.testing.assert_allclose(c.thresholds[1:], [0.9, 0.8, 0.7, 0.4, 0.3, 0.2])


def test_tpr_and_threshold_at_fpr() -> None:
    c = roc(POS, NEG)
    assert tpr_at_fpr(c, 0.0) == pytest.approx(2 / 3)
    assert threshold_for_fpr(c, 0.0) == 0.8
    # 0.25 allows the 0.7 threshold, which gains nothing: the cheaper 0.8 is the answer.
    assert tpr_at_fpr(c, 0.25) == pytest.approx(2 / 3)
    assert threshold_for_fpr(c, 0.25) == 0.8
    assert tpr_at_fpr(c, 0.5) == 1.0
    assert threshold_for_fpr(c, 0.5) == 0.4


def test_roc_perfect_separation_and_ties() -> None:
    assert roc([2.0, 3.0], [0.0, 1.0]).auc == 1.0
    assert roc([1.0, 1.0], [1.0]).auc == 0.5


@pytest.mark.parametrize(("pos", "neg"), [([], [0.1, 0.2]), ([0.3], [])])
def test_roc_degenerate_has_no_auc(pos: list[float], neg: list[float]) -> None:
    c = roc(pos, neg)
    assert c.auc is None and len(c.fpr) == 0
    assert tpr_at_fpr(c, 0.01) is None and threshold_for_fpr(c, 0.01) is None
    assert c.to_json() == {"auc": None, "n_pos": len(pos), "n_neg": len(neg), "fpr": [], "tpr": [], "thresholds": []}


def test_roc_json_is_thinned_but_keeps_the_ends() -> None:
    rng = np.random.default_rng(1)
    c = roc(rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000))
    j = c.to_json(max_points=200)
    assert len(j["fpr"]) <= 200 and len(j["fpr"]) == len(j["tpr"]) == len(j["thresholds"])
    assert (j["fpr"][0], j["tpr"][0], j["thresholds"][0]) == (0.0, 0.0, None)
    assert (j["fpr"][-1], j["tpr"][-1]) == (1.0, 1.0)
    assert json.loads(json.dumps(j, allow_nan=False)) == j


def test_roc_json_drops_collinear_points() -> None:
    # Distinct scores, all positives first: (0,0) -> (0,1) -> (1,1) with the middle points collinear.
    j = roc([5.0, 4.0, 3.0], [2.0, 1.0, 0.0]).to_json()
    assert list(zip(j["fpr"], j["tpr"], strict=True)) == [(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)]


# --- Kaplan-Meier -----------------------------------------------------------------------------

# Seven players: detected at 2, 4, 4, 7 s; censored (undetected) at 3, 5, 9 s of play.
FIRST = [2.0, None, 4.0, 4.0, None, 7.0, None]
EXPOSURE = [8.0, 3.0, 4.0, 6.0, 5.0, 7.5, 9.0]


def test_kaplan_meier_by_hand() -> None:
    # At risk / events: t=2: 7/1 -> S = 6/7; t=3 censored; t=4: 5/2 -> S = 6/7 * 3/5 = 18/35;
    # t=5 censored; t=7: 2/1 -> S = 9/35; t=9 censored (end of follow-up).
    t = time_to_detect(FIRST, EXPOSURE)
    assert (t.n, t.detected, t.censored) == (7, 4, 3)
    assert t.times_s == (2.0, 4.0, 7.0, 9.0)
    np.testing.assert_allclose(t.fraction, [1 / 7, 17 / 35, 26 / 35, 26 / 35])
    assert t.median_s == 7.0  # 17/35 < 0.5 at 4 s
    assert t.p90_s is None  # the curve stops at 26/35
    assert t.fraction_at(1.0) == 0.0 and t.fraction_at(4.5) == pytest.approx(17 / 35)
    assert json.loads(json.dumps(t.to_json()))["times_s"] == [2.0, 4.0, 7.0, 9.0]


def test_kaplan_meier_without_censoring_is_the_empirical_cdf() -> None:
    t = time_to_detect([float(i) for i in range(1, 11)], [20.0] * 10)
    assert t.median_s == 5.0 and t.p90_s == 9.0
    assert t.times_s[-1] == 20.0 and t.fraction[-1] == 1.0  # follow-up ran on to 20 s


def test_kaplan_meier_ties_count_the_detection_before_the_censoring() -> None:
    t = time_to_detect([5.0, None, None], [6.0, 5.0, 10.0])
    assert t.fraction[0] == pytest.approx(1 / 3)


def test_time_to_detect_nobody_detected_and_nobody_at_all() -> None:
    t = time_to_detect([None, None], [30.0, 60.0])
    assert (t.detected, t.median_s, t.p90_s, t.times_s, t.fraction) == (0, None, None, (60.0,), (0.0,))
    e = time_to_detect([], [])
    assert (e.n, e.times_s) == (0, ())


def test_detection_after_the_end_of_play_is_a_bug() -> None:
    with pytest.raises(ValueError, match="after the end"):
        time_to_detect([10.0], [5.0])
    with pytest.raises(ValueError):
        detected_within([10.0], [5.0], 30.0)
    with pytest.raises(ValueError):
        time_to_detect([1.0], [5.0, 6.0])
    # Millisecond rounding at the disconnect tick is not a bug; more than that is.
    assert time_to_detect([5.0005], [5.0]).median_s == 5.0
    with pytest.raises(ValueError):
        time_to_detect([5.002], [5.0])


def test_detected_within_excludes_players_censored_before_the_deadline() -> None:
    # Deadline 5 s: detected by it: 2, 4, 4 (3 players). Undetected at 3 s of play: excluded
    # (left before the deadline). Counted misses: undetected at 5 s (played the whole deadline),
    # detected at 7 s, undetected at 9 s. 3 of 6.
    p = detected_within(FIRST, EXPOSURE, 5.0)
    assert (p.k, p.n) == (3, 6)
    # Deadline 3 s: 2 is in; 4-s players with 4 and 6 s of play count as misses, so does everyone
    # who played >= 3 s: all 7 counted, 1 caught.
    assert (detected_within(FIRST, EXPOSURE, 3.0).k, detected_within(FIRST, EXPOSURE, 3.0).n) == (1, 7)
    # Deadline 100 s: only the detected are known: 4 of 4.
    assert (detected_within(FIRST, EXPOSURE, 100.0).k, detected_within(FIRST, EXPOSURE, 100.0).n) == (4, 4)
