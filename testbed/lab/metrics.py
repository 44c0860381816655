"""Statistics of the lab, with intervals: proportions, event rates, ROC curves, time to detect.

Pure functions of numbers (no database). Every interval is exact rather than asymptotic, because
the interesting corners are the small ones: a cheat caught 40 times out of 40, zero honest false
alarms in 300 player-hours. Units: times in seconds (``*_s``), exposures in hours (``*_h``),
rates in events per hour of exposure unless the name says otherwise (``per_100h``).

* ``proportion``: k successes out of n, Clopper-Pearson interval (beta quantiles).
* ``rate``: events per hour of exposure, Garwood (exact Poisson, chi-square quantiles) interval.
* ``roc``: ROC curve and AUC of a score separating positives from negatives (scikit-learn).
* ``time_to_detect``: Kaplan-Meier estimate of the time to first detection, with players who were
  never detected censored at the end of their play (scipy.stats.ecdf on CensoredData).
* ``detected_within``: the fraction detected by a deadline, among players whose outcome at the
  deadline is known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

__all__ = [
    "Proportion",
    "Rate",
    "Roc",
    "TimeToDetect",
    "detected_within",
    "proportion",
    "rate",
    "roc",
    "threshold_for_fpr",
    "time_to_detect",
    "tpr_at_fpr",
]

_TIME_TOLERANCE_S = 1e-3
"""A detection this far (s) past the end of play is rounding, not a bug (clamped to the end): the
corpus stores ``play_s`` of detections and decisions rounded to the millisecond."""


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return 1.0 - confidence


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# --- proportions ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proportion:
    """k successes out of n trials with a two-sided exact (Clopper-Pearson) interval.

    Attributes:
        k, n: counts (0 <= k <= n).
        estimate: k / n (a fraction in [0, 1]), or None when n == 0.
        low, high: interval bounds (fractions); (0.0, 1.0) when n == 0 (nothing is known).
        confidence: the interval's coverage (e.g. 0.95).
    """

    k: int
    n: int
    estimate: float | None
    low: float
    high: float
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        """``{"k", "n", "estimate", "low", "high"}`` (fractions; estimate None when n == 0)."""
        return {"k": self.k, "n": self.n, "estimate": self.estimate, "low": self.low, "high": self.high}


def proportion(k: int, n: int, confidence: float = 0.95) -> Proportion:
    """``k`` out of ``n`` with the Clopper-Pearson interval at ``confidence``.

    Bounds are beta quantiles: ``low = Beta(alpha/2; k, n-k+1)``, ``high = Beta(1-alpha/2; k+1, n-k)``,
    with ``low = 0`` at k = 0 and ``high = 1`` at k = n. n = 0 gives estimate None and the
    uninformative interval (0, 1) rather than NaN, so the result stays JSON-able.
    """
    alpha = _check_confidence(confidence)
    k, n = int(k), int(n)
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Proportion(0, 0, None, 0.0, 1.0, confidence)
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Proportion(k, n, k / n, low, high, confidence)


# --- rates ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rate:
    """A count of events over an exposure, with an exact Poisson (Garwood) interval.

    Attributes:
        count: events.
        exposure_h: exposure (hours, e.g. player-hours).
        per_hour: count / exposure_h (events per hour), None when the exposure is 0.
        low, high: interval bounds (events per hour); high is None when the exposure is 0
            (unbounded).
        confidence: the interval's coverage.
    """

    count: int
    exposure_h: float
    per_hour: float | None
    low: float
    high: float | None
    confidence: float = 0.95

    def per_100h(self) -> tuple[float | None, float, float | None]:
        """``(estimate, low, high)`` in events per 100 hours of exposure."""
        def scale(x: float | None) -> float | None:
            return None if x is None else 100.0 * x
        return scale(self.per_hour), 100.0 * self.low, scale(self.high)

    def to_json(self) -> dict[str, Any]:
        """``{"count", "exposure_h", "per_hour", "low", "high"}`` (events per hour)."""
        return {"count": self.count, "exposure_h": self.exposure_h, "per_hour": self.per_hour,
                "low": self.low, "high": self.high}


def rate(count: int, exposure_h: float, confidence: float = 0.95) -> Rate:
    """``count`` events in ``exposure_h`` hours, with the Garwood interval at ``confidence``.

    The bounds on the expected count are ``chi2(alpha/2; 2k) / 2`` and ``chi2(1-alpha/2; 2k+2) / 2``
    (lower bound 0 at k = 0), divided by the exposure. With 0 events in T hours the upper bound
    is ``-ln(alpha/2) / T`` (3.689 / T at 95 %).
    """
    alpha = _check_confidence(confidence)
    count = int(count)
    exposure_h = float(exposure_h)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not (math.isfinite(exposure_h) and exposure_h >= 0.0):
        raise ValueError(f"exposure_h must be a finite number >= 0, got {exposure_h!r}")
    if exposure_h == 0.0:
        return Rate(count, 0.0, None, 0.0, None, confidence)
    low = 0.0 if count == 0 else float(stats.chi2.ppf(alpha / 2, 2 * count)) / 2
    high = float(stats.chi2.ppf(1 - alpha / 2, 2 * count + 2)) / 2
    return Rate(count, exposure_h, count / exposure_h, low / exposure_h, high / exposure_h, confidence)


# --- ROC ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Roc:
    """An ROC curve: a player is flagged when its score is >= a threshold.

    Attributes:
        fpr, tpr: false / true positive fractions at each threshold, from (0, 0) to (1, 1), every
            distinct score kept (no points dropped, so ``tpr_at_fpr`` is exact). Empty when the
            curve is undefined (no positives or no negatives).
        thresholds: the score thresholds (decreasing; the first is +inf: nobody flagged).
        auc: area under the curve (probability a random positive outscores a random negative,
            ties counted half), None when undefined.
        n_pos, n_neg: number of positive / negative scores.
    """

    fpr: NDArray[np.float64]
    tpr: NDArray[np.float64]
    thresholds: NDArray[np.float64]
    auc: float | None
    n_pos: int
    n_neg: int

    def to_json(self, max_points: int = 200) -> dict[str, Any]:
        """``{"auc", "n_pos", "n_neg", "fpr", "tpr", "thresholds"}`` with the curve thinned to at
        most ``max_points`` points (collinear points first, then evenly by index; both ends kept).
        The infinite first threshold becomes None (JSON has no infinity)."""
        idx = _thin(self.fpr, self.tpr, max_points)
        return {
            "auc": self.auc, "n_pos": self.n_pos, "n_neg": self.n_neg,
            "fpr": [float(x) for x in self.fpr[idx]],
            "tpr": [float(x) for x in self.tpr[idx]],
            "thresholds": [_finite_or_none(float(x)) for x in self.thresholds[idx]],
        }


def _thin(fpr: NDArray[np.float64], tpr: NDArray[np.float64], max_points: int) -> NDArray[np.intp]:
    n = len(fpr)
    if n <= 2:
        return np.arange(n)
    # A point collinear with its neighbours changes nothing on a plot (sklearn's drop_intermediate rule).
    keep = np.r_[True, (np.abs(np.diff(fpr, 2)) > 1e-12) | (np.abs(np.diff(tpr, 2)) > 1e-12), True]
    idx = np.flatnonzero(keep)
    if len(idx) > max_points:
        idx = idx[np.unique(np.round(np.linspace(0, len(idx) - 1, max(max_points, 2))).astype(np.intp))]
    return idx


def roc(pos_scores: Sequence[float] | NDArray[np.float64], neg_scores: Sequence[float] | NDArray[np.float64]) -> Roc:
    """The ROC curve of scores ``pos_scores`` (should be high) against ``neg_scores`` (should be low).

    Without positives or without negatives the curve and the AUC are undefined: empty arrays and
    ``auc`` None.
    """
    pos = np.asarray(pos_scores, dtype=np.float64).ravel()
    neg = np.asarray(neg_scores, dtype=np.float64).ravel()
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(neg))):
        raise ValueError("scores must be finite")
    if len(pos) == 0 or len(neg) == 0:
        empty = np.zeros(0, dtype=np.float64)
        return Roc(empty, empty.copy(), empty.copy(), None, len(pos), len(neg))
    y = np.r_[np.ones(len(pos), dtype=np.int8), np.zeros(len(neg), dtype=np.int8)]
    s = np.r_[pos, neg]
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    return Roc(fpr.astype(np.float64), tpr.astype(np.float64), thresholds.astype(np.float64),
               float(roc_auc_score(y, s)), len(pos), len(neg))


def _best_index(curve: Roc, fpr: float) -> int | None:
    if curve.auc is None or len(curve.fpr) == 0:
        return None
    ok = np.flatnonzero(curve.fpr <= fpr + 1e-12)
    # fpr[0] == 0 always, so ok is never empty; among equal tpr prefer the lowest fpr.
    best = ok[np.lexsort((curve.fpr[ok], -curve.tpr[ok]))[0]]
    return int(best)


def tpr_at_fpr(curve: Roc, fpr: float) -> float | None:
    """The highest true positive fraction reachable with a false positive fraction <= ``fpr``
    (a plain threshold, no randomisation), or None when the curve is undefined."""
    i = _best_index(curve, fpr)
    return None if i is None else float(curve.tpr[i])


def threshold_for_fpr(curve: Roc, fpr: float) -> float | None:
    """The score threshold (flag when score >= it) reaching ``tpr_at_fpr(curve, fpr)`` at the
    lowest false positive fraction; +inf when only "flag nobody" keeps within ``fpr``; None when the
    curve is undefined."""
    i = _best_index(curve, fpr)
    return None if i is None else float(curve.thresholds[i])


# --- time to detect -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeToDetect:
    """Kaplan-Meier estimate of the time from connect to the first detection (seconds).

    A player never detected is right-censored at the end of its play: it says "not within its
    exposure", not "never".

    Attributes:
        n: players. detected: players detected during their play. censored: n - detected.
        median_s, p90_s: the time (s) by which 50 % / 90 % of players are estimated detected;
            None when the curve never reaches that fraction during follow-up.
        times_s, fraction: the step curve: ``fraction[i]`` is the estimated fraction detected by
            ``times_s[i]`` and stays so until ``times_s[i+1]``; only the times where it changes
            are listed, plus the end of follow-up (the longest exposure) as the last point. Before
            ``times_s[0]`` the fraction is 0.
    """

    n: int
    detected: int
    censored: int
    median_s: float | None
    p90_s: float | None
    times_s: tuple[float, ...]
    fraction: tuple[float, ...]

    def fraction_at(self, t_s: float) -> float:
        """The estimated fraction detected by ``t_s`` seconds (0 before the first detection)."""
        i = int(np.searchsorted(np.asarray(self.times_s), t_s, side="right")) - 1
        return 0.0 if i < 0 else self.fraction[i]

    def to_json(self) -> dict[str, Any]:
        """``{"n", "detected", "censored", "median_s", "p90_s", "times_s", "fraction"}``."""
        return {"n": self.n, "detected": self.detected, "censored": self.censored, "median_s": self.median_s,
                "p90_s": self.p90_s, "times_s": list(self.times_s), "fraction": list(self.fraction)}


def _checked_times(first_s: Sequence[float | None], exposure_s: Sequence[float]) -> tuple[
        NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    if len(first_s) != len(exposure_s):
        raise ValueError(f"first_s and exposure_s differ in length ({len(first_s)} != {len(exposure_s)})")
    exposure = np.asarray(exposure_s, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(exposure) & (exposure >= 0.0)):
        raise ValueError("exposure_s must be finite and >= 0")
    detected = np.array([t is not None for t in first_s], dtype=bool)
    first = np.array([np.nan if t is None else float(t) for t in first_s], dtype=np.float64)
    bad = detected & ~(np.isfinite(first) & (first >= 0.0))
    if np.any(bad):
        raise ValueError(f"detection times must be finite and >= 0 (player {int(np.flatnonzero(bad)[0])})")
    late = detected & (first > exposure + _TIME_TOLERANCE_S)
    if np.any(late):
        i = int(np.flatnonzero(late)[0])
        raise ValueError(f"player {i} detected at {first[i]} s, after the end of its play at {exposure[i]} s")
    first = np.where(detected, np.minimum(first, exposure), np.nan)
    return first, detected, exposure


def time_to_detect(first_s: Sequence[float | None], exposure_s: Sequence[float]) -> TimeToDetect:
    """Kaplan-Meier time to first detection.

    Args:
        first_s: per player, the time of its first detection (s since its connect), None if never.
        exposure_s: per player, how long it played (s since its connect).

    Raises:
        ValueError: a detection after the end of the player's play (a bug in whoever produced the
            numbers; up to 1 ms is accepted as rounding), or mismatched lengths.
    """
    first, detected, exposure = _checked_times(first_s, exposure_s)
    n = len(exposure)
    k = int(detected.sum())
    if k == 0:
        end = float(exposure.max()) if n else None
        return TimeToDetect(n, 0, n, None, None, () if end is None else (end,), () if end is None else (0.0,))
    km = stats.ecdf(stats.CensoredData(uncensored=first[detected], right=exposure[~detected]))
    times = np.asarray(km.cdf.quantiles, dtype=np.float64)
    cdf = np.asarray(km.cdf.probabilities, dtype=np.float64)
    change = np.r_[cdf[0] > 0.0, np.diff(cdf) != 0.0]
    change[-1] = True
    times, cdf = times[change], cdf[change]
    end = float(exposure.max())
    if end > times[-1]:
        # A detected player's follow-up ends at its exposure, past its detection time.
        times, cdf = np.r_[times, end], np.r_[cdf, cdf[-1]]

    def quantile(q: float) -> float | None:
        # The KM median convention: the first time the estimated fraction reaches q.
        hit = np.flatnonzero(cdf >= q - 1e-12)
        return None if len(hit) == 0 else float(times[hit[0]])

    return TimeToDetect(n, k, n - k, quantile(0.5), quantile(0.9),
                        tuple(float(t) for t in times), tuple(float(c) for c in cdf))


def detected_within(first_s: Sequence[float | None], exposure_s: Sequence[float], deadline_s: float,
                    confidence: float = 0.95) -> Proportion:
    """The fraction of players detected within ``deadline_s`` seconds of their connect.

    Counted (the denominator): players detected by the deadline, and players who played at least
    ``deadline_s`` (detected later or never). A player who left before the deadline without being
    detected is censored before it: whether it would have been caught in time is unknown, so it
    is excluded rather than counted as a miss. The interval is Clopper-Pearson.
    """
    first, detected, exposure = _checked_times(first_s, exposure_s)
    in_time = detected & (first <= deadline_s)
    known = in_time | (exposure >= deadline_s)
    return proportion(int(in_time.sum()), int(known.sum()), confidence)
