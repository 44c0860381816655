"""Page's CUSUM: the run lengths it promises are the ones it delivers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anticheat.detectors.cusum import BernoulliCusum, average_run_length, llr_steps, threshold_for_arl


def test_symmetric_steps_two_up_to_alarm_match_the_hand_solution() -> None:
    # theta0 = 1 - theta1 makes the steps +c and -c; with h = 2c the chain is {0, c}:
    # L0 = 1 + t L1 + (1 - t) L0 and L1 = 1 + (1 - t) L0 give L0 = (1 + t) / t^2.
    theta0, theta1 = 0.25, 0.75
    up, down = llr_steps(theta0, theta1)
    assert up == pytest.approx(-down)
    for t in (0.25, 0.5, 0.75):
        assert average_run_length(t, theta0, theta1, 2 * up) == pytest.approx((1 + t) / t**2, rel=1e-9)


def test_one_step_threshold_alarms_at_the_first_positive() -> None:
    # h equal to one positive step: the run length is geometric with mean 1 / t.
    up, _ = llr_steps(0.1, 0.6)
    assert average_run_length(0.1, 0.1, 0.6, up) == pytest.approx(10.0, rel=1e-9)
    assert average_run_length(0.0, 0.1, 0.6, up) == math.inf


def _simulated_run_lengths(theta: float, cusum: BernoulliCusum, runs: int, rng: np.random.Generator) -> np.ndarray:
    lengths = np.empty(runs)
    for i in range(runs):
        cusum.reset()
        n = 0
        while True:
            n += 1
            if cusum.observe(bool(rng.random() < theta)):
                break
        lengths[i] = n
    return lengths


@pytest.mark.parametrize(("theta0", "theta1", "arl"), [(0.06, 0.6, 300.0), (0.2, 0.7, 150.0)])
def test_in_control_run_length_matches_the_markov_chain(theta0: float, theta1: float, arl: float) -> None:
    h = threshold_for_arl(theta0, theta1, arl)
    theory = average_run_length(theta0, theta0, theta1, h)
    # S moves on the lattice of two steps, so the ARL is a step function of h: the threshold is the
    # smallest that keeps at least the promise.
    assert theory >= arl
    assert average_run_length(theta0, theta0, theta1, h * 0.999) < arl
    lengths = _simulated_run_lengths(theta0, BernoulliCusum(theta0, theta1, h), 3000, np.random.default_rng(7))
    se = lengths.std(ddof=1) / math.sqrt(len(lengths))
    assert abs(lengths.mean() - theory) < 3.5 * se


def test_out_of_control_run_length_matches_too() -> None:
    theta0, theta1 = 0.06, 0.6
    h = threshold_for_arl(theta0, theta1, 5000.0)
    theory = average_run_length(theta1, theta0, theta1, h)
    lengths = _simulated_run_lengths(theta1, BernoulliCusum(theta0, theta1, h), 3000, np.random.default_rng(8))
    se = lengths.std(ddof=1) / math.sqrt(len(lengths))
    assert abs(lengths.mean() - theory) < 3.5 * se
    assert theory < 15  # a cheater at theta1 is caught within a handful of kills


def test_threshold_grows_with_the_promised_run_length() -> None:
    hs = [threshold_for_arl(0.06, 0.6, arl) for arl in (100.0, 1e3, 1e4, 1e5)]
    assert hs == sorted(hs) and hs[0] < hs[-1]
    # Roughly ln(ARL): each decade adds a similar amount.
    gaps = np.diff(hs)
    assert gaps.max() < 1.6 * gaps.min()


def test_statistic_restarts_after_an_alarm_and_floors_at_zero() -> None:
    c = BernoulliCusum(0.1, 0.6, h=3.0)
    assert not c.observe(False) and c.statistic == 0.0
    up = math.log(0.6 / 0.1)
    assert not c.observe(True) and c.statistic == pytest.approx(up)
    assert c.observe(True)  # 2 * 1.79 >= 3
    assert c.statistic == 0.0 and c.alarms == 1 and c.peak >= 3.0
    assert (c.observations, c.positives) == (3, 2)
    c.restart()
    assert (c.observations, c.positives, c.alarms) == (0, 0, 1)


def test_bad_thetas_are_refused() -> None:
    with pytest.raises(ValueError):
        llr_steps(0.6, 0.5)
    with pytest.raises(ValueError):
        BernoulliCusum(0.1, 0.6, h=0.0)
