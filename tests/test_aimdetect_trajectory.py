"""The aim-trajectory features: compiled kernel against its reference, and the shapes they tell apart."""

from __future__ import annotations

import numpy as np
import pytest

from anticheat.detectors.aimdetect.trajectory import (
    TRAJECTORY_NAMES,
    trajectory_features,
    trajectory_features_reference,
)

DT = 1 / 64


def _named(values: np.ndarray) -> dict[str, float]:
    return dict(zip(TRAJECTORY_NAMES, values.tolist()))


def test_kernel_matches_reference_on_random_rings() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 97))
        times = np.sort(rng.uniform(0, 1.5, n))
        targets = rng.choice([-1.0, 2.0, 5.0], n, p=[0.2, 0.6, 0.2])
        angles = rng.uniform(0, 40, n)
        end = float(rng.uniform(0.5, 1.6))
        got = trajectory_features(times, targets, angles, end, 2)
        want = trajectory_features_reference(times, targets, angles, end, 2)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _approach(angles: np.ndarray, hold: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    series = np.concatenate([angles, np.full(hold, angles[-1])])
    times = np.arange(len(series)) * DT
    return times, np.full(len(series), 7.0), series


def test_fractional_pull_peaks_at_the_start_and_follows_the_remaining_angle() -> None:
    # An aimbot closing 30 % of what remains each tick, from 20 deg.
    angles = 20.0 * 0.7 ** np.arange(25)
    t, tg, a = _approach(angles)
    f = _named(trajectory_features(t, tg, a, float(t[-1]), 7))
    assert f["flick_amplitude_deg"] == pytest.approx(20.0)
    assert f["peak_speed_fraction"] < 0.2
    assert f["speed_angle_correlation"] > 0.99
    assert f["lock_fraction"] == pytest.approx(1.0)


def test_minimum_jerk_flick_peaks_mid_way() -> None:
    s = np.linspace(0, 1, 30)
    progress = 10 * s**3 - 15 * s**4 + 6 * s**5
    angles = 20.0 * (1 - progress) + 0.5
    t, tg, a = _approach(angles)
    f = _named(trajectory_features(t, tg, a, float(t[-1]), 7))
    assert 0.35 < f["peak_speed_fraction"] < 0.75  # the flick ends at 15 % of its amplitude
    assert f["speed_angle_correlation"] < 0.2
    assert 1.3 < f["peak_to_mean_speed"] < 1.9  # minimum jerk: 1.875 over the whole flick


def test_victim_never_nearest_gives_no_tracking() -> None:
    t = np.arange(40) * DT
    f = _named(trajectory_features(t, np.full(40, 3.0), np.full(40, 2.0), float(t[-1]), 7))
    assert f["tracking_error_deg"] == 30.0 and f["segment_s"] == 0.0 and f["lock_fraction"] == 0.0
    empty = np.zeros(0)
    assert _named(trajectory_features(empty, empty, empty, 1.0, 7))["tracking_error_deg"] == 30.0
