"""The aim trajectory before a kill: how the crosshair came onto the victim and stayed there.

AimDetect's original eight features (``features``) look at outcomes: hits, ratios, peak
acceleration. A humanised aimbot can keep those human while its path to the target is not: it
closes a fixed fraction of the remaining angle every tick, so its angular speed is largest at the
start of the approach and falls with the remaining angle, and once on the target it tracks it with
an error no hand holds. A human flick is planned as one or more bell-shaped sub-movements (peak
speed near the middle, corrections at the end) and then tracks with a lag. The features below
measure that from the server's own view of the player's aim: every applied command's angle to the
nearest visible enemy (``AimSample.target_angle_deg``), kept in a ring of the last samples.

All angles are degrees, times seconds. The ``segment`` is the run of samples, ending at the kill,
in which the victim was the killer's nearest visible enemy; the ``flick`` is the part of the
segment from its largest angle until the angle first falls below 15 % of that (or 1 deg).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["TRAJECTORY_NAMES", "trajectory_features", "trajectory_features_reference"]

TRAJECTORY_NAMES: tuple[str, ...] = (
    "lock_fraction",
    "tracking_error_deg",
    "flick_amplitude_deg",
    "flick_duration_s",
    "peak_speed_fraction",
    "peak_to_mean_speed",
    "speed_angle_correlation",
    "segment_s",
    "angle_at_kill_deg",
)
"""lock_fraction: share of the samples of the last ``lock_window_s`` with the victim nearest and
within ``lock_angle_deg``; tracking_error_deg: median angle to the victim over the last
``track_window_s`` (``no_track_deg`` when the victim was not nearest then); flick_amplitude_deg,
flick_duration_s: the flick's largest angle and its length; peak_speed_fraction: where in the
flick the angular speed peaked (0 start, 1 end; a bell-shaped human flick peaks near 0.5);
peak_to_mean_speed: the flick's peak over its mean angular speed; speed_angle_correlation:
correlation of the angular speed with the remaining angle along the flick (near 1 when each step
closes a fixed fraction of what remains); segment_s: the segment's length; angle_at_kill_deg."""

LOCK_WINDOW_S = 0.5
LOCK_ANGLE_DEG = 1.5
TRACK_WINDOW_S = 0.25
NO_TRACK_DEG = 30.0
FLICK_END_FRACTION = 0.15
FLICK_END_MIN_DEG = 1.0
MIN_DT_S = 1.0 / 64.0


def trajectory_features(times: np.ndarray, targets: np.ndarray, angles: np.ndarray, end_s: float,
                        victim: int) -> np.ndarray:
    """The nine ``TRAJECTORY_NAMES`` features (float64) of the samples (time s, nearest enemy slot
    or -1, angle to it deg) in time order, up to ``end_s`` (the kill, s), for ``victim``."""
    return _trajectory_kernel(times, targets, angles, end_s, victim)


@numba.njit(cache=True, nogil=True)
def _trajectory_kernel(times: np.ndarray, targets: np.ndarray, angles: np.ndarray, end_s: float,
                       victim: int) -> np.ndarray:  # pragma: no cover - compiled
    out = np.zeros(9)
    n = 0
    while n < times.shape[0] and times[n] <= end_s + 1e-9:
        n += 1
    if n == 0:
        out[1] = NO_TRACK_DEG
        return out
    last_n = 0
    locked = 0
    track = np.empty(n)
    m = 0
    for i in range(n):
        if times[i] >= end_s - LOCK_WINDOW_S:
            last_n += 1
            if targets[i] == victim and angles[i] < LOCK_ANGLE_DEG:
                locked += 1
        if times[i] >= end_s - TRACK_WINDOW_S and targets[i] == victim:
            track[m] = angles[i]
            m += 1
    out[0] = locked / last_n if last_n > 0 else 0.0
    out[1] = np.median(track[:m]) if m > 0 else NO_TRACK_DEG
    out[8] = angles[n - 1]
    start = n
    while start > 0 and targets[start - 1] == victim:
        start -= 1
    if start == n:
        return out
    out[7] = times[n - 1] - times[start]
    if n - start < 3:
        return out
    top = start
    for i in range(start, n):
        if angles[i] > angles[top]:
            top = i
    amp = angles[top]
    out[2] = amp
    floor = max(FLICK_END_FRACTION * amp, FLICK_END_MIN_DEG)
    stop = n - 1
    for i in range(top, n):
        if angles[i] < floor:
            stop = i
            break
    out[3] = times[stop] - times[top]
    k = stop - top
    if k < 2:
        return out
    speeds = np.empty(k)
    best = 0
    for j in range(k):
        dt = times[top + j + 1] - times[top + j]
        if dt < MIN_DT_S:
            dt = MIN_DT_S
        speeds[j] = (angles[top + j] - angles[top + j + 1]) / dt
        if speeds[j] > speeds[best]:
            best = j
    out[4] = (best + 0.5) / k
    mean = speeds.mean()
    out[5] = speeds[best] / mean if mean > 1e-6 else 0.0
    remaining = angles[top:stop]
    sd_v = speeds.std()
    sd_a = remaining.std()
    if sd_v > 0.0 and sd_a > 0.0:
        out[6] = ((speeds - mean) * (remaining - remaining.mean())).mean() / (sd_v * sd_a)
    return out


def trajectory_features_reference(times: np.ndarray, targets: np.ndarray, angles: np.ndarray, end_s: float,
                                  victim: int) -> np.ndarray:
    """Plain numpy statement of :func:`trajectory_features` (the kernel is held to it by a test)."""
    keep = times <= end_s + 1e-9
    t, tg, a = times[keep], targets[keep], angles[keep]
    out = np.zeros(9)
    if len(t) == 0:
        out[1] = NO_TRACK_DEG
        return out
    last = t >= end_s - LOCK_WINDOW_S
    out[0] = float(np.mean((tg[last] == victim) & (a[last] < LOCK_ANGLE_DEG))) if last.any() else 0.0
    tracked = (t >= end_s - TRACK_WINDOW_S) & (tg == victim)
    out[1] = float(np.median(a[tracked])) if tracked.any() else NO_TRACK_DEG
    out[8] = a[-1]
    off = np.nonzero(tg != victim)[0]
    start = int(off[-1]) + 1 if len(off) else 0
    if start == len(t):
        return out
    out[7] = t[-1] - t[start]
    if len(t) - start < 3:
        return out
    seg_t, seg_a = t[start:], a[start:]
    top = int(np.argmax(seg_a))
    amp = seg_a[top]
    out[2] = amp
    below = np.nonzero(seg_a[top:] < max(FLICK_END_FRACTION * amp, FLICK_END_MIN_DEG))[0]
    stop = top + (int(below[0]) if len(below) else len(seg_a) - 1 - top)
    out[3] = seg_t[stop] - seg_t[top]
    if stop - top < 2:
        return out
    dt = np.maximum(np.diff(seg_t[top:stop + 1]), MIN_DT_S)
    speeds = -np.diff(seg_a[top:stop + 1]) / dt
    best = int(np.argmax(speeds))
    out[4] = (best + 0.5) / len(speeds)
    mean = speeds.mean()
    out[5] = speeds[best] / mean if mean > 1e-6 else 0.0
    remaining = seg_a[top:stop]
    if speeds.std() > 0.0 and remaining.std() > 0.0:
        out[6] = float(np.mean((speeds - mean) * (remaining - remaining.mean())) / (speeds.std() * remaining.std()))
    return out
