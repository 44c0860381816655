"""Threshold Random Walk against Wald's formulas, exact operating characteristics and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anticheat.detectors.trw import (
    Decision,
    ThresholdRandomWalk,
    expected_sample_sizes,
    expected_step,
    log_steps,
    operating_characteristics,
    wald_thresholds,
)

THETA0 = 0.058
THETA1 = 0.836
ROWS = (0.05, 0.01, 0.005, 0.001)


@pytest.mark.parametrize("a", ROWS)
def test_thresholds_are_walds(a: float) -> None:
    th = wald_thresholds(a, a)
    assert th.upper == pytest.approx((1 - a) / a)
    assert th.lower == pytest.approx(a / (1 - a))
    assert th.log_upper == pytest.approx(math.log((1 - a) / a))
    assert th.log_lower == pytest.approx(-th.log_upper)


def test_published_row_threshold_values() -> None:
    assert wald_thresholds(0.05, 0.05).upper == pytest.approx(19.0)
    assert wald_thresholds(0.001, 0.001).upper == pytest.approx(999.0)
    assert wald_thresholds(0.01, 0.05).lower == pytest.approx(0.05 / 0.99)


def test_steps_and_expected_sizes_match_hand_computation() -> None:
    up, down = log_steps(THETA0, THETA1)
    assert up == pytest.approx(math.log(0.836 / 0.058))
    assert down == pytest.approx(math.log(0.164 / 0.942))
    e1 = 0.836 * up + 0.164 * down
    e0 = 0.058 * up + 0.942 * down
    assert expected_step(THETA1, THETA0, THETA1) == pytest.approx(e1)
    ln_a = math.log(0.999 / 0.001)
    n1, n0 = expected_sample_sizes(THETA0, THETA1, 0.001, 0.001)
    assert n1 == pytest.approx((0.999 * ln_a - 0.001 * ln_a) / e1)
    assert n0 == pytest.approx((0.001 * ln_a - 0.999 * ln_a) / e0)


def test_walk_decisions_and_stickiness() -> None:
    w = ThresholdRandomWalk(THETA0, THETA1, 0.001, 0.001)
    # ln A = 6.907 and one positive adds 2.668: the third positive decides, not the second.
    assert w.observe(True) is Decision.PENDING
    assert w.observe(True) is Decision.PENDING
    assert w.observe(True) is Decision.CHEATER
    assert w.observations == 3
    assert w.likelihood_ratio >= 999.0
    assert w.observe(False) is Decision.CHEATER  # sticky
    assert w.observations == 3
    w.reset()
    assert (w.decision, w.log_lr, w.observations) == (Decision.PENDING, 0.0, 0)
    for _ in range(3):
        w.observe(False)
    assert w.observe(False) is Decision.HONEST  # 4 x -1.748 = -6.99 <= -6.907


def test_invalid_parameters_rejected() -> None:
    with pytest.raises(ValueError):
        ThresholdRandomWalk(0.8, 0.2, 0.01, 0.01)
    with pytest.raises(ValueError):
        ThresholdRandomWalk(0.0, 0.8, 0.01, 0.01)
    with pytest.raises(ValueError):
        wald_thresholds(0.6, 0.5)


def _simulate(theta: float, a: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised walks: (decision +1 cheater / -1 honest, observations used)."""
    up, down = log_steps(THETA0, THETA1)
    th = wald_thresholds(a, a)
    llr = np.zeros(n)
    dec = np.zeros(n, dtype=np.int8)
    used = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        pos = rng.random(active.size) < theta
        llr[active] += np.where(pos, up, down)
        used[active] += 1
        hi = llr[active] >= th.log_upper
        lo = llr[active] <= th.log_lower
        dec[active[hi]] = 1
        dec[active[lo]] = -1
        active = active[~(hi | lo)]
    return dec, used


def test_simulation_agrees_with_the_walk_class() -> None:
    rng = np.random.default_rng(7)
    dec, used = _simulate(0.5, 0.01, 200, rng)
    rng = np.random.default_rng(7)
    walks = [ThresholdRandomWalk(THETA0, THETA1, 0.01, 0.01) for _ in range(200)]
    # Same draws in the same order: a walk consumes the column of its step while pending.
    pending = list(range(200))
    while pending:
        draws = rng.random(len(pending)) < 0.5
        pending = [i for i, d in zip(pending, draws, strict=True) if walks[i].observe(bool(d)) is Decision.PENDING]
    assert [1 if w.decision is Decision.CHEATER else -1 for w in walks] == dec.tolist()
    assert [w.observations for w in walks] == used.tolist()


@pytest.mark.parametrize("a", ROWS)
def test_monte_carlo_error_rates_and_sample_sizes(a: float) -> None:
    rng = np.random.default_rng(20160614)
    n = 40_000
    dec1, n1 = _simulate(THETA1, a, n, rng)
    dec0, n0 = _simulate(THETA0, a, n, rng)
    fn = float(np.mean(dec1 == -1))
    fp = float(np.mean(dec0 == 1))
    # Wald's bounds hold whatever the overshoot; 3 binomial sd of slack for sampling noise.
    fp_bound = a / (1 - a)
    assert fp <= fp_bound + 3 * math.sqrt(fp_bound / n)
    assert fn <= fp_bound + 3 * math.sqrt(fp_bound / n)

    exact1 = operating_characteristics(THETA1, THETA0, THETA1, a, a)
    exact0 = operating_characteristics(THETA0, THETA0, THETA1, a, a)
    assert exact1.unresolved < 1e-9 and exact0.unresolved < 1e-9
    # The simulation reproduces the exact figures within sampling error.
    assert n1.mean() == pytest.approx(exact1.mean_n, rel=0.02)
    assert n0.mean() == pytest.approx(exact0.mean_n, rel=0.02)
    assert fp == pytest.approx(exact0.p_cheater, abs=4 * math.sqrt(exact0.p_cheater / n) + 1e-4)
    assert fn == pytest.approx(exact1.p_honest, abs=4 * math.sqrt(exact1.p_honest / n) + 1e-4)

    # Wald's E[N] neglects the overshoot, so it is a lower estimate; with the realised error rates,
    # the overshoot bounded by one step brackets the true mean (Wald's identity E[S_N] = E[N] E[z]).
    wald1, wald0 = expected_sample_sizes(THETA0, THETA1, a, a)
    up, down = log_steps(THETA0, THETA1)
    th = wald_thresholds(a, a)
    e1 = expected_step(THETA1, THETA0, THETA1)
    e0 = expected_step(THETA0, THETA0, THETA1)
    b1, a0 = exact1.p_honest, exact0.p_cheater
    lo1 = ((1 - b1) * th.log_upper + b1 * (th.log_lower + down)) / e1
    hi1 = ((1 - b1) * (th.log_upper + up) + b1 * th.log_lower) / e1
    lo0 = (a0 * th.log_upper + (1 - a0) * th.log_lower) / e0
    hi0 = (a0 * (th.log_upper + up) + (1 - a0) * (th.log_lower + down)) / e0
    assert lo1 <= exact1.mean_n <= hi1
    assert lo0 <= exact0.mean_n <= hi0
    assert wald1 <= exact1.mean_n * 1.02 and wald0 <= exact0.mean_n * 1.02
    if a <= 0.005:
        # Where ln A is large against one step, Wald's figure is close (within ~30 %).
        assert wald1 == pytest.approx(exact1.mean_n, rel=0.30)
        assert wald0 == pytest.approx(exact0.mean_n, rel=0.30)


def test_protective_row_exact_false_positive_rate() -> None:
    # The figures AimDetect's config docstring relies on.
    assert operating_characteristics(THETA0, THETA0, THETA1, 0.001, 0.001).p_cheater == pytest.approx(3.35e-4, rel=0.01)
    assert operating_characteristics(THETA0, THETA0, THETA1, 0.005, 0.005).p_cheater == pytest.approx(3.94e-3, rel=0.01)
    assert operating_characteristics(THETA1, THETA0, THETA1, 0.001, 0.001).mean_n == pytest.approx(4.18, abs=0.01)
