"""The input phase's compiled kernels: the tick's command records as columns, a round's
movement into the world, and each aim sample's nearest sent target and nearest sent target out of
sight (``server.inputs``,
``server.aim_samples``). Their arithmetic is numpy's, bit for bit, so replays stay identical."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def command_columns(
    words: np.ndarray, halves: np.ndarray, order: np.ndarray, numbers: np.ndarray, claimed: np.ndarray,
    yaw: np.ndarray, rad: np.ndarray, ints: np.ndarray, floats: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Row i of the tick's commands from record ``order[i]`` of ``words``/``halves``
    (``proto.command_arrays``): ``numbers`` (6, N) duration_s, forward, side, yaw_deg, pitch_deg,
    buttons; ``claimed`` (N, 3); ``yaw`` (N,) the view yaw wrapped to [-180, 180) (deg); ``rad``
    (2, N) that yaw and the pitch in radians; ``ints`` (3, N) seq, buttons, weapon_switch;
    ``floats`` (4, N) yaw_deg, pitch_deg, recoil_pitch_deg, recoil_yaw_deg as sent. The wrap and
    the radians are numpy's expressions, which give the same bits compiled (x * (pi / 180) is
    how numpy's radians computes)."""
    to_rad = math.pi / 180.0
    for i in range(order.shape[0]):
        r = order[i]
        for k in range(5):
            numbers[k, i] = words[r, 2 + k]
        numbers[5, i] = float(halves[r, 14])
        for k in range(3):
            claimed[i, k] = words[r, 10 + k]
        y = (words[r, 5] + 180.0) % 360.0 - 180.0
        yaw[i] = y
        rad[0, i] = y * to_rad
        rad[1, i] = words[r, 6] * to_rad
        ints[0, i] = halves[r, 0]
        ints[1, i] = halves[r, 14]
        ints[2, i] = halves[r, 15]
        floats[0, i] = words[r, 5]
        floats[1, i] = words[r, 6]
        floats[2, i] = words[r, 8]
        floats[3, i] = words[r, 9]


@numba.njit(cache=True, nogil=True)
def round_to_world(
    a: int, b: int, slots: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, alive: np.ndarray, pos: np.ndarray,
    vel: np.ndarray, ground: np.ndarray, stance: np.ndarray, pressed: np.ndarray, w_yaw: np.ndarray,
    w_pitch: np.ndarray, w_pos: np.ndarray, w_vel: np.ndarray, w_ground: np.ndarray, w_stance: np.ndarray,
    live: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Rows ``a:b`` of the tick's commands (one round: distinct slots) into the world: every row's
    view angles (deg), and the alive rows' simulated position, velocity (m, m/s), on-ground flag
    and stance. Writes the alive rows' indices into the round to ``live``; returns (alive rows,
    of them with a crouch press)."""
    n_live = 0
    n_pressed = 0
    for i in range(b - a):
        r = a + i
        s = slots[r]
        w_yaw[s] = yaw[r]
        w_pitch[s] = pitch[r]
        if alive[r]:
            live[n_live] = i
            n_live += 1
            for k in range(3):
                w_pos[s, k] = pos[r, k]
                w_vel[s, k] = vel[r, k]
            w_ground[s] = ground[r]
            w_stance[s] = stance[r]
            if pressed[r]:
                n_pressed += 1
    return n_live, n_pressed


@numba.njit(cache=True)
def aim_candidates(
    slots: np.ndarray, stops: np.ndarray, moved: np.ndarray, cos_sin: np.ndarray, offset: int, pos: np.ndarray,
    stance: np.ndarray, row_pos: np.ndarray, row_stance: np.ndarray, eye_m: np.ndarray, chest_m: np.ndarray,
    visible: np.ndarray, in_sight: np.ndarray, alive: np.ndarray, active: np.ndarray,
    cos_out: np.ndarray, dist_out: np.ndarray, target_out: np.ndarray, hidden_out: np.ndarray, counts: np.ndarray,
) -> int:
    """For each viewer ``slots[i]``, every visible (sent), alive, active other player in slot
    order: the clipped cosine of the angle between the view and the line from the eye to the
    player's chest, the eye-chest distance (m), and whether it is hidden (sent but not
    ``in_sight``). Rows go one after the other into the flat outputs, ``counts[i]`` each; returns
    the total. ``cos_sin[:, :, offset + i]``: cos and sin of viewer i's
    yaw and pitch (radians), numpy's (the view is ``world.state.view_direction``'s).

    The viewers come in rounds, round r ending before row ``stops[r]``, and each round sees the
    world as it leaves it: ``pos`` and ``stance`` (not modified) as they were before the first
    round, where each round's ``moved`` rows first put their player at ``row_pos``, ``row_stance``.

    The arithmetic is the numpy version's, bit for bit: the norm sums (x*x + y*y) + z*z as numpy's
    axis reduction does, and the dot product sums (x + z) + y as ``einsum`` does for three terms
    (its vector reduction); tests/test_server_core.py checks both against numpy."""
    pos = pos.copy()
    stance = stance.copy()
    n = 0
    cap = pos.shape[0]
    first = 0
    for stop in stops:
        for i in range(first, stop):
            if moved[i]:
                s = slots[i]
                pos[s, 0] = row_pos[i, 0]
                pos[s, 1] = row_pos[i, 1]
                pos[s, 2] = row_pos[i, 2]
                stance[s] = row_stance[i]
        for i in range(first, stop):
            s = slots[i]
            ex = pos[s, 0]
            ey = pos[s, 1]
            ez = pos[s, 2] + eye_m[stance[s]]
            col = offset + i
            cp = cos_sin[0, 1, col]
            vx = cp * cos_sin[0, 0, col]
            vy = cp * cos_sin[1, 0, col]
            vz = cos_sin[1, 1, col]
            start = n
            for t in range(cap):
                if t == s or not (visible[s, t] and alive[t] and active[t]):
                    continue
                x = pos[t, 0] - ex
                y = pos[t, 1] - ey
                z = (pos[t, 2] + chest_m[stance[t]]) - ez
                d = math.sqrt((x * x + y * y) + z * z)
                c = ((vx * x + vz * z) + vy * y) / max(d, 1e-9)
                if c < -1.0:
                    c = -1.0
                elif c > 1.0:
                    c = 1.0
                cos_out[n] = c
                dist_out[n] = d
                target_out[n] = t
                hidden_out[n] = not in_sight[s, t]
                n += 1
            counts[i] = n - start
        first = stop
    return n


@numba.njit(cache=True)
def aim_gather(
    angle: np.ndarray, dist: np.ndarray, target: np.ndarray, hidden: np.ndarray, counts: np.ndarray,
    slots: np.ndarray, moved: np.ndarray, vel: np.ndarray, ground: np.ndarray, stance: np.ndarray,
    row_vel: np.ndarray, row_ground: np.ndarray, row_stance: np.ndarray, floats: np.ndarray, ints: np.ndarray,
    on_ground: np.ndarray,
) -> None:
    """Per viewer i, the AimSample numbers but the weapon's: floats[:, i] horizontal speed, target
    angle (deg, 180 without a target), target distance (m, 0 without), hidden target angle (deg,
    180 without); ints[:, i] target slot (-1 none), stance, hidden target slot (-1 none);
    on_ground[i]. The viewer's state is its row's (``row_*``) where ``moved[i]``, else its slot's
    (``vel``, ``ground``, ``stance``).

    The target is the candidate with the smallest angle (the first of equals, as ``argmin``); none
    without candidates or with a NaN angle among them (``argmin`` would have picked the NaN). The
    hidden target is the same choice among the ``hidden`` candidates alone."""
    j = 0
    for i in range(counts.shape[0]):
        b = -1
        low = np.inf
        nan_seen = False
        hb = -1
        hlow = np.inf
        for _ in range(counts[i]):
            a = angle[j]
            if math.isnan(a):
                nan_seen = True
            else:
                if a < low:
                    low = a
                    b = j
                if hidden[j] and a < hlow:
                    hlow = a
                    hb = j
            j += 1
        s = slots[i]
        if moved[i]:
            floats[0, i] = math.hypot(row_vel[i, 0], row_vel[i, 1])
            ints[1, i] = row_stance[i]
            on_ground[i] = row_ground[i]
        else:
            floats[0, i] = math.hypot(vel[s, 0], vel[s, 1])
            ints[1, i] = stance[s]
            on_ground[i] = ground[s]
        if b < 0 or nan_seen:
            floats[1, i] = 180.0
            floats[2, i] = 0.0
            ints[0, i] = -1
        else:
            floats[1, i] = angle[b]
            floats[2, i] = dist[b]
            ints[0, i] = target[b]
        if hb < 0 or nan_seen:
            floats[3, i] = 180.0
            ints[2, i] = -1
        else:
            floats[3, i] = angle[hb]
            ints[2, i] = target[hb]
