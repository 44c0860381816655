"""Compiled kernels of :mod:`physics.movement`: ``simulate`` and ``max_horizontal_speed``.

The kernels mirror the vectorised numpy model operation by operation: the same products and sums
in the same order (IEEE double arithmetic without fast-math is then identical), numpy's
minimum / maximum / clip semantics (on a tie ``minimum(a, b)`` and ``maximum(a, b)`` return b,
which only matters for the sign of a zero), only the branch ``np.where`` would select, and the
same libm functions (sin, cos and hypot are the C library's, as numpy's are). Wall sliding runs
the compiled sweep of :mod:`world.sweep_kernel`, the one ``MapGeometry.sweep`` uses, so a
player's move does not depend on the batch it is simulated in.

Why compiled: every bot predicts its own move each tick and the server simulates and bounds every
player's command; in Python floats one player's move cost tens of microseconds, and numpy's fixed
cost per call was larger still for the few players of a call; here a move costs about one.

Buttons and stances arrive in ``flags`` (see :func:`config_table`) rather than as module
constants, so the compiled cache can never hold stale values.
"""

# min / max are written as conditional expressions on purpose: "a if a < b else b" keeps
# np.minimum's choice on ties (the second operand), which fixes the sign of a zero result.
# ruff: noqa: FURB136

from __future__ import annotations

import math

import numba
import numpy as np

from physics.buttons import Buttons
from physics.config import MovementConfig
from world.constants import STANCE_CROUCHING, STANCE_STANDING
from world.sweep_kernel import SweepTables, circle_blocked, sweep

EPS = 1e-12

# simulate_sequence's refusals (negative, so that a count of wedged players is a success) and
# check_block's verdicts.
BAD_SLOT, BAD_SPEED, NOT_FINITE = -1, -2, -3
BLOCK_OK, BLOCK_NOT_FINITE, BLOCK_DT, BLOCK_BUTTONS = 0, 1, 2, 3
_INT64_LIMIT = 9.223372036854775808e18
"""Speeds and wish magnitudes at or below this count as zero (the vectorised model's _EPS)."""

_JUMP, _CROUCH, _WALK, _SPRINT, _CROUCHING, _STANDING, _SLIDES, _AIR_CAP = range(8)
_MAX_SPEED, _WALK_F, _SPRINT_F, _CROUCH_F, _STOP, _FRICTION, _ACCEL, _ACCEL_MIN, _AIR_ACCEL, _AIR_WISH, _JUMP_SPEED, \
    _GRAVITY, _MIN_MOVE = range(13)


def config_table(cfg: MovementConfig) -> tuple[np.ndarray, np.ndarray]:
    """(floats, flags) of ``cfg`` for the kernels: the float constants, and the button masks,
    stance ids, slide iterations and the air speed cap as integers."""
    floats = np.array([
        cfg.max_speed_m_s, cfg.walk_factor, cfg.sprint_factor, cfg.crouch_factor, cfg.stop_speed_m_s, cfg.friction,
        cfg.accelerate, cfg.accel_scale_min_m_s, cfg.air_accelerate, cfg.air_max_wish_speed_m_s, cfg.jump_speed_m_s,
        cfg.gravity_m_s2, cfg.min_move_m,
    ], dtype=np.float64)  # fmt: skip
    flags = np.array([
        int(Buttons.JUMP), int(Buttons.CROUCH), int(Buttons.WALK), int(Buttons.SPRINT), STANCE_CROUCHING,
        STANCE_STANDING, cfg.max_slide_iterations, int(bool(cfg.air_speed_cap)),
    ], dtype=np.int64)  # fmt: skip
    return floats, flags


@numba.njit(cache=True, nogil=True)
def _wish(
    fwd: float, side: float, yaw_deg: float, buttons: int, weapon_speed: float, cfg: np.ndarray, flags: np.ndarray
) -> tuple[float, float, float, float]:  # pragma: no cover - compiled
    """The numpy model's ``_wish``: wish direction (unit or zero), wish speed and ground speed
    clamp (m/s) of one command."""
    fwd = fwd if fwd > -1.0 else -1.0
    fwd = fwd if fwd < 1.0 else 1.0
    side = side if side > -1.0 else -1.0
    side = side if side < 1.0 else 1.0
    yaw = math.radians(yaw_deg)
    cy, sy = math.cos(yaw), math.sin(yaw)
    wx = fwd * cy + side * sy
    wy = fwd * sy - side * cy
    mag = math.hypot(fwd, side)
    if mag > EPS:
        wdx = wx / mag
        wdy = wy / mag
    else:  # zero, with the sign numpy's (w / 1.0) * False gives
        wdx = wx * 0.0
        wdy = wy * 0.0
    max_speed = cfg[_MAX_SPEED]
    base = weapon_speed if weapon_speed < max_speed else max_speed
    crouched = (buttons & flags[_CROUCH]) != 0
    walking = (buttons & flags[_WALK]) != 0
    sprinting = (buttons & flags[_SPRINT]) != 0 and not walking and not crouched
    factor = 1.0
    if walking:
        factor = cfg[_WALK_F]
    if sprinting:
        factor = cfg[_SPRINT_F]
    if crouched:
        factor = cfg[_CROUCH_F] if cfg[_CROUCH_F] < factor else factor
    wishspeed = (mag if mag < 1.0 else 1.0) * base * factor
    sprint_clamp = cfg[_SPRINT_F] if cfg[_SPRINT_F] > 1.0 else 1.0
    return wdx, wdy, wishspeed, base * (sprint_clamp if sprinting else 1.0)


@numba.njit(cache=True, nogil=True)
def _friction(vx: float, vy: float, dt: float, cfg: np.ndarray) -> tuple[float, float]:  # pragma: no cover - compiled
    """The numpy model's ``_friction`` of one velocity."""
    speed = math.hypot(vx, vy)
    stop = cfg[_STOP]
    control = speed if speed > stop else stop
    new = speed - control * cfg[_FRICTION] * dt
    new = new if new > 0.0 else 0.0
    scale = new / speed if speed > EPS else 0.0
    return vx * scale, vy * scale


@numba.njit(cache=True, nogil=True)
def simulate_one(
    px: float, py: float, pz: float, vx: float, vy: float, vz: float, on_ground: bool, stance: int,
    weapon_speed: float, fwd: float, side: float, yaw_deg: float, buttons: int, dt: float,
    cfg: np.ndarray, flags: np.ndarray,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[float, float, float, float, float, float, bool, int, bool, bool, bool]:  # pragma: no cover - compiled
    """One player, one command: (x, y, z, vx, vy, vz, on ground, stance, crouch pressed, touched a
    wall, wedged). ``wedged``: the slide ended inside a wall (a geometry bug; the player was kept
    at its start and stopped)."""
    crouched = (buttons & flags[_CROUCH]) != 0
    new_stance = flags[_CROUCHING] if crouched else flags[_STANDING]
    pressed = crouched and stance == flags[_STANDING]
    wdx, wdy, wishspeed, clamp = _wish(fwd, side, yaw_deg, buttons, weapon_speed, cfg, flags)

    jump = on_ground and (buttons & flags[_JUMP]) != 0
    grounded = on_ground and not jump

    limited = True
    if grounded:
        hx, hy = _friction(vx, vy, dt, cfg)
        # _accelerate with the ground amount, capped at the wish speed
        accel_min = cfg[_ACCEL_MIN]
        amount = cfg[_ACCEL] * (accel_min if accel_min > wishspeed else wishspeed) * dt
        add = wishspeed - (hx * wdx + hy * wdy)
        add = add if add > 0.0 else 0.0
        step = amount if amount < add else add
        hx = hx + wdx * step
        hy = hy + wdy * step
        limit = clamp
    else:
        amount = cfg[_AIR_ACCEL] * wishspeed * dt
        air_wish = cfg[_AIR_WISH]
        cap = wishspeed if wishspeed < air_wish else air_wish
        add = cap - (vx * wdx + vy * wdy)
        add = add if add > 0.0 else 0.0
        step = amount if amount < add else add
        hx = vx + wdx * step
        hy = vy + wdy * step
        limit = 0.0
        if flags[_AIR_CAP]:
            before = math.hypot(vx, vy)
            limit = before if before > clamp else clamp
        else:
            limited = False
    if limited:
        # _limit_speed (the scale is 1.0 unless over the limit; v * 1.0 == v bit for bit)
        speed = math.hypot(hx, hy)
        if speed > limit:
            scale = limit / speed
            hx = hx * scale
            hy = hy * scale

    if jump:
        vz0 = cfg[_JUMP_SPEED]
    elif grounded:
        vz0 = 0.0
    else:
        vz0 = vz
    if grounded:
        vz1 = 0.0
        z1 = 0.0
        new_ground = True
    else:
        vz1 = vz0 - cfg[_GRAVITY] * dt
        z1 = pz + 0.5 * (vz0 + vz1) * dt
        new_ground = z1 <= 0.0
        if new_ground:
            z1 = 0.0
            vz1 = 0.0

    # _slide: sweep, clip the rest of the move and the velocity against the contact normal,
    # sweep again; motion still pointing into the previous wall after clipping is stuck in a
    # corner (in 2D two different walls meet in a corner, not a crease to slide along).
    min_move = cfg[_MIN_MOVE]
    x, y = px, py
    rem_x, rem_y = hx * dt, hy * dt
    prev_x = prev_y = 0.0
    touched = False
    active = math.hypot(rem_x, rem_y) > min_move
    for _ in range(flags[_SLIDES]):
        if not active:
            break
        ex, ey, t, hit, nx, ny = sweep(x, y, x + rem_x, y + rem_y, frame, gnx, gny, edges, cell_start, cell_edges,
                                       poly_first, cell_poly_start, cell_polys)
        x, y = ex, ey
        if not hit:
            break
        touched = True
        keep = 1.0 - t
        lx = rem_x * keep
        ly = rem_y * keep
        into = lx * nx + ly * ny
        into = into if into < 0.0 else 0.0
        lx = lx - nx * into
        ly = ly - ny * into
        into = hx * nx + hy * ny
        into = into if into < 0.0 else 0.0
        wx = hx - nx * into
        wy = hy - ny * into
        if lx * prev_x + ly * prev_y < -EPS or wx * prev_x + wy * prev_y < -EPS:
            lx = ly = wx = wy = 0.0
        hx, hy = wx, wy
        rem_x, rem_y = lx, ly
        prev_x, prev_y = nx, ny
        active = math.hypot(lx, ly) > min_move
    # The sweep guarantees ends outside walls; re-checking a move that touched one turns a
    # geometry bug into a stopped player instead of one inside a wall. A sweep without contact
    # ends exactly at its target, which it swept.
    wedged = touched and (x != px or y != py) and circle_blocked(
        x, y, frame[8], frame, gnx, gny, edges, cell_start, cell_edges, poly_first, cell_poly_start, cell_polys
    )
    if wedged:
        x, y = px, py
        hx = hy = 0.0
    return x, y, z1, hx, hy, vz1, new_ground, new_stance, pressed, touched, wedged


@numba.njit(cache=True, nogil=True)
def _move_outputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Uninitialised per-row results of N moves: pos (N, 3), vel (N, 3), on ground, stance (int8),
    crouch pressed, touched a wall."""
    return (np.empty((n, 3)), np.empty((n, 3)), np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int8),
            np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_))


@numba.njit(cache=True, nogil=True)
def simulate_rows(
    pos: np.ndarray, vel: np.ndarray, ground: np.ndarray, stance: np.ndarray, weapon_speed: np.ndarray,
    fwd: np.ndarray, side: np.ndarray, yaw_deg: np.ndarray, buttons: np.ndarray, dt: np.ndarray,
    cfg: np.ndarray, flags: np.ndarray,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """:func:`simulate_one` for each row: (pos (N, 3), vel (N, 3), on ground, stance (int8),
    crouch pressed, touched a wall, players wedged)."""
    n = pos.shape[0]
    out_pos, out_vel, out_ground, out_stance, out_pressed, out_touched = _move_outputs(n)
    wedged = 0
    for i in range(n):
        x, y, z, hx, hy, vz, g, st, pr, tw, wg = simulate_one(
            pos[i, 0], pos[i, 1], pos[i, 2], vel[i, 0], vel[i, 1], vel[i, 2], ground[i], stance[i], weapon_speed[i],
            fwd[i], side[i], yaw_deg[i], buttons[i], dt[i], cfg, flags,
            frame, gnx, gny, edges, cell_start, cell_edges, poly_first, cell_poly_start, cell_polys,
        )
        out_pos[i, 0], out_pos[i, 1], out_pos[i, 2] = x, y, z
        out_vel[i, 0], out_vel[i, 1], out_vel[i, 2] = hx, hy, vz
        out_ground[i], out_stance[i], out_pressed[i], out_touched[i] = g, st, pr, tw
        wedged += wg
    return out_pos, out_vel, out_ground, out_stance, out_pressed, out_touched, wedged


@numba.njit(cache=True, nogil=True)
def _no_sequence(
    status: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           np.ndarray, int]:  # pragma: no cover - compiled
    """simulate_sequence's answer when it refuses its input (empty arrays and the status)."""
    rows3 = np.empty((0, 3))
    flags = np.empty(0, dtype=np.bool_)
    return rows3, rows3, flags, rows3, rows3, flags, np.empty(0, dtype=np.int8), flags, flags, status


# One signature for any layout ('A'): the server's blocks are copies, column slices or fancy-indexed
# columns (C, A or F), and each layout would otherwise load its own specialisation in some tick.
@numba.njit(numba.int64(numba.float64[:, :], numba.int64, numba.int64[::1]), cache=True, nogil=True)
def check_block(block: np.ndarray, not_buttons: int, buttons: np.ndarray) -> int:  # pragma: no cover - compiled
    """``MoveCommands.from_block``'s checks of a (6, N) command block in one pass, in its order:
    BLOCK_NOT_FINITE for a NaN or inf anywhere, BLOCK_DT for a duration (row 0) that is not
    positive, BLOCK_BUTTONS for a button value (row 5) that is not a whole number or has a bit of
    ``not_buttons`` set; else BLOCK_OK, with the button values as integers in ``buttons``."""
    n = block.shape[1]
    for j in range(block.shape[0]):
        for i in range(n):
            if not math.isfinite(block[j, i]):
                return BLOCK_NOT_FINITE
    for i in range(n):
        if not block[0, i] > 0.0:
            return BLOCK_DT
    for i in range(n):
        x = block[5, i]
        if not (-_INT64_LIMIT <= x < _INT64_LIMIT):
            return BLOCK_BUTTONS
        b = np.int64(x)
        if (b & not_buttons) != 0 or np.float64(b) != x:
            return BLOCK_BUTTONS
        buttons[i] = b
    return BLOCK_OK


@numba.njit(cache=True, nogil=True)
def simulate_sequence(
    slots: np.ndarray, pos: np.ndarray, vel: np.ndarray, ground: np.ndarray, stance: np.ndarray,
    weapon_speed: np.ndarray, fwd: np.ndarray, side: np.ndarray, yaw_deg: np.ndarray, buttons: np.ndarray,
    dt: np.ndarray, cfg: np.ndarray, flags: np.ndarray,
    frame: np.ndarray, gnx: int, gny: int, edges: np.ndarray, cell_start: np.ndarray, cell_edges: np.ndarray,
    poly_first: np.ndarray, cell_poly_start: np.ndarray, cell_polys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           np.ndarray, int]:  # pragma: no cover - compiled
    """:func:`simulate_one` for each row in order, row i moving player ``slots[i]`` from where
    its previous row left it, its first row from the per-slot state ``pos[s], vel[s], ground[s],
    stance[s]``: (start pos (N, 3), start vel (N, 3), start on ground, pos (N, 3), vel (N, 3), on
    ground, stance (int8), crouch pressed, touched a wall, players wedged). Instead of the count of
    wedged players: BAD_SLOT for a slot outside ``[0, len(pos))`` or BAD_SPEED for a weapon speed
    that is not finite and non-negative, before anything moves; NOT_FINITE when a row would start
    from a non-finite position or velocity."""
    n = slots.shape[0]
    for i in range(n):
        if slots[i] < 0 or slots[i] >= pos.shape[0]:
            return _no_sequence(BAD_SLOT)
    for i in range(n):
        if not (math.isfinite(weapon_speed[i]) and weapon_speed[i] >= 0.0):
            return _no_sequence(BAD_SPEED)
    start_pos = np.empty((n, 3))
    start_vel = np.empty((n, 3))
    start_ground = np.empty(n, dtype=np.bool_)
    out_pos, out_vel, out_ground, out_stance, out_pressed, out_touched = _move_outputs(n)
    last = np.full(pos.shape[0], -1, dtype=np.int64)
    wedged = 0
    for i in range(n):
        s = slots[i]
        j = last[s]
        last[s] = i
        if j < 0:
            px, py, pz, vx, vy, vz = pos[s, 0], pos[s, 1], pos[s, 2], vel[s, 0], vel[s, 1], vel[s, 2]
            g, st = ground[s], stance[s]
        else:
            px, py, pz, vx, vy, vz = out_pos[j, 0], out_pos[j, 1], out_pos[j, 2], out_vel[j, 0], out_vel[j, 1], out_vel[j, 2]
            g, st = out_ground[j], out_stance[j]
        if not (math.isfinite(px) and math.isfinite(py) and math.isfinite(pz) and math.isfinite(vx)
                and math.isfinite(vy) and math.isfinite(vz)):
            return _no_sequence(NOT_FINITE)
        start_pos[i, 0], start_pos[i, 1], start_pos[i, 2] = px, py, pz
        start_vel[i, 0], start_vel[i, 1], start_vel[i, 2] = vx, vy, vz
        start_ground[i] = g
        x, y, z, hx, hy, hz, g1, st1, pr, tw, wg = simulate_one(
            px, py, pz, vx, vy, vz, g, st, weapon_speed[i], fwd[i], side[i], yaw_deg[i], buttons[i], dt[i], cfg, flags,
            frame, gnx, gny, edges, cell_start, cell_edges, poly_first, cell_poly_start, cell_polys,
        )
        out_pos[i, 0], out_pos[i, 1], out_pos[i, 2] = x, y, z
        out_vel[i, 0], out_vel[i, 1], out_vel[i, 2] = hx, hy, hz
        out_ground[i], out_stance[i], out_pressed[i], out_touched[i] = g1, st1, pr, tw
        wedged += wg
    return (start_pos, start_vel, start_ground, out_pos, out_vel, out_ground, out_stance, out_pressed, out_touched,
            wedged)


@numba.njit(cache=True, nogil=True)
def max_speeds(
    vel: np.ndarray, ground: np.ndarray, weapon_speed: np.ndarray, fwd: np.ndarray, side: np.ndarray,
    yaw_deg: np.ndarray, buttons: np.ndarray, dt: np.ndarray, cfg: np.ndarray, flags: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """The numpy model's ``max_horizontal_speed`` per row (finite inputs): the largest of
    |v|^2 = s^2 + 2 s c a + a^2 over the candidate cosines c, capped by the speed limits."""
    n = vel.shape[0]
    out = np.empty(n)
    for i in range(n):
        vx, vy, d, b = vel[i, 0], vel[i, 1], dt[i], buttons[i]
        _, _, wishspeed, clamp = _wish(fwd[i], side[i], yaw_deg[i], b, weapon_speed[i], cfg, flags)
        grounded = ground[i] and (b & flags[_JUMP]) == 0
        speed_before = math.hypot(vx, vy)
        if grounded:
            vx, vy = _friction(vx, vy, d, cfg)
        s = math.hypot(vx, vy)
        air_wish = cfg[_AIR_WISH]
        if grounded:
            cap = wishspeed
            accel_min = cfg[_ACCEL_MIN]
            amount = cfg[_ACCEL] * (accel_min if accel_min > wishspeed else wishspeed) * d
        else:
            cap = wishspeed if wishspeed < air_wish else air_wish
            amount = cfg[_AIR_ACCEL] * wishspeed * d
        s_safe = s if s > EPS else 1.0
        c4 = (cap - amount) / s_safe
        c4 = c4 if c4 > -1.0 else -1.0
        c4 = c4 if c4 < 1.0 else 1.0
        c5 = cap / s_safe
        c5 = c5 if c5 > -1.0 else -1.0
        c5 = c5 if c5 < 1.0 else 1.0
        best = -math.inf
        for c in (-1.0, 0.0, 1.0, c4, c5):
            a = cap - s * c
            a = a if a > 0.0 else 0.0
            a = a if a < amount else amount
            sq = s * s + 2.0 * s * c * a + a * a
            best = sq if sq > best else best
        best = math.sqrt(best)
        if grounded:
            limit = clamp
        elif flags[_AIR_CAP]:
            limit = speed_before if speed_before > clamp else clamp
        else:
            limit = math.inf
        out[i] = best if best < limit else limit
    return out


@numba.njit(cache=True, nogil=True)
def primitives(
    deg: np.ndarray, xy: np.ndarray, other: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The kernels' float primitives over arrays, to compare with numpy's: radians(deg), cos and
    sin of those, hypot of the rows of (N, 2) ``xy``, and the row-wise dot product with ``other``."""
    n = deg.shape[0]
    rad, cos, sin = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        rad[i] = math.radians(deg[i])
        cos[i] = math.cos(rad[i])
        sin[i] = math.sin(rad[i])
    m = xy.shape[0]
    hyp, dot = np.empty(m), np.empty(m)
    for i in range(m):
        hyp[i] = math.hypot(xy[i, 0], xy[i, 1])
        dot[i] = xy[i, 0] * other[i, 0] + xy[i, 1] * other[i, 1]
    return rad, cos, sin, hyp, dot


def warm_up() -> None:
    """Compile (or load from numba's cache) the entry points now, on a map without walls, so
    that the first command a server or a bot simulates does not wait for the compiler."""
    cfg, flags = config_table(MovementConfig())
    tables = SweepTables(
        frame=np.array([0.0, 0.0, 10.0, 10.0, 0.5, 0.5, 9.5, 9.5, 0.5, 10.0]), gnx=1, gny=1, edges=np.zeros((0, 13)),
        cell_start=np.zeros(2, dtype=np.int64), cell_edges=np.zeros(0, dtype=np.int64),
        poly_first=np.zeros(1, dtype=np.int64), cell_poly_start=np.zeros(2, dtype=np.int64),
        cell_polys=np.zeros(0, dtype=np.int64),
    ).args()  # fmt: skip
    simulate_one(5.0, 5.0, 0.0, 0.0, 0.0, 0.0, True, 0, 1.0, 1.0, 0.0, 0.0, 0, 0.01, cfg, flags, *tables)
    none = np.zeros(0)
    max_speeds(np.zeros((0, 3)), np.zeros(0, dtype=np.bool_), none, none, none, none, np.zeros(0, dtype=np.int64), none,
               cfg, flags)
    simulate_rows(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int8), none,
                  none, none, none, np.zeros(0, dtype=np.int64), none, cfg, flags, *tables)
    simulate_sequence(np.zeros(0, dtype=np.intp), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, dtype=np.bool_),
                      np.zeros(0, dtype=np.int8), none, none, none, none, np.zeros(0, dtype=np.int64), none, cfg, flags,
                      *tables)
