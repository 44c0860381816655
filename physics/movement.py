"""Quake/Source player movement, batched over player slots.

One call advances N players by one command each: stance from the CROUCH button, jump from the
ground, friction, ground or air acceleration towards the wish velocity, gravity, the floor at
z = 0 and sliding along walls. Units: meters, seconds, degrees. Constants: ``MovementConfig``.

Deliberate differences from Quake/Source (documented in ``MovementConfig``):

* air acceleration may turn the horizontal velocity but not raise its magnitude above the held
  weapon's ground speed (no bunny-hop speed gain), so horizontal speed never exceeds that speed;
* JUMP held jumps again on the landing tick (Source's ``sv_autobunnyhopping``); harmless because
  of the previous point;
* collision is 2D (walls are prisms from the floor up, the floor is flat, there are no ceilings),
  so vertical motion never collides and standing up is never blocked.

The functions are pure: they return new arrays and never modify their inputs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from math import cos, isfinite, radians, sin, sqrt

import numpy as np
import numpy.typing as npt

from physics.buttons import ALL_BUTTONS, Buttons
from physics.config import MovementConfig
from world.constants import STANCE_CROUCHING, STANCE_STANDING
from world.geometry import MapGeometry

log = logging.getLogger(__name__)

_DEFAULT_CONFIG = MovementConfig()

_EPS = 1e-12

_SCALAR_MAX_N = 16
"""``simulate`` runs batches of at most this many players through the scalar path (plain floats,
the same operations in the same order as the vectorised path, so the results are identical).
numpy's fixed per-call overhead (~200 us for the whole model) dominates small batches. Measured
without geometry cost (bot-like inputs with wall contacts): the scalar path takes ~20 us for one
player, ~40-60 us for 4 and ~105 us for 16, against 200-250 us for the vectorised path; they
break even around 24-32 players. Larger batches take the vectorised path."""

_JUMP = int(Buttons.JUMP)
_CROUCH = int(Buttons.CROUCH)
_WALK = int(Buttons.WALK)
_SPRINT = int(Buttons.SPRINT)
_NOT_BUTTONS = ~ALL_BUTTONS
_SMALL = 8
"""Arrays up to this size are validated through ``tolist`` (cheaper than numpy reductions)."""


def _all_finite(arr: np.ndarray) -> bool:
    """Every element of the float array is finite (neither NaN nor inf)."""
    if arr.size <= _SMALL:
        return all(map(isfinite, arr.reshape(-1).tolist()))
    return bool(np.isfinite(arr).all())


def _as_column(name: str, value: npt.ArrayLike, n: int, dtype: type = np.float64) -> np.ndarray:
    arr: np.ndarray = np.asarray(value, dtype=dtype)
    if arr.ndim == 0:
        arr = np.full(n, arr, dtype=dtype)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) or be a scalar, got {arr.shape}")
    return arr


@dataclass(frozen=True, slots=True)
class MoveCommands:
    """One movement command per player (structure of arrays, all of length N).

    Attributes:
        forward_move: (N,) in [-1, 1], positive forward along the yaw. Values outside are clipped.
        side_move: (N,) in [-1, 1], positive to the right of the yaw. Values outside are clipped;
            a diagonal (1, 1) is normalised to unit length, so it is not faster than straight.
        yaw_deg: (N,) view yaw (deg; 0 = +x, counter-clockwise), the wish direction's frame.
        pitch_deg: (N,) view pitch (deg); not used by movement, validated with the rest.
        buttons: (N,) ``Buttons`` bitmask; JUMP, CROUCH (held = crouched), WALK and SPRINT matter.
        dt_s: (N,) duration of the command (s), one client tick.

    Construction raises ValueError for NaN/inf, a non-positive duration, unknown button bits or
    mismatched shapes: a malformed command never reaches the simulation.
    """

    forward_move: np.ndarray
    side_move: np.ndarray
    yaw_deg: np.ndarray
    pitch_deg: np.ndarray
    buttons: np.ndarray
    dt_s: np.ndarray

    def __post_init__(self) -> None:
        first = np.asarray(self.forward_move)
        n = first.size if first.ndim else 1
        for name in ("forward_move", "side_move", "yaw_deg", "pitch_deg", "dt_s"):
            arr = _as_column(name, getattr(self, name), n)
            if not _all_finite(arr):
                raise ValueError(f"MoveCommands.{name} contains NaN or inf")
            object.__setattr__(self, name, arr)
        buttons = np.asarray(self.buttons)
        if buttons.ndim == 0:
            buttons = np.full(n, buttons)
        if buttons.shape != (n,) or buttons.dtype.kind not in "iub":
            raise ValueError(f"MoveCommands.buttons must be ({n},) integers, got {buttons.shape} {buttons.dtype}")
        buttons = buttons.astype(np.int64)
        # A negative value has (infinitely many) bits outside ALL_BUTTONS set too.
        if n <= _SMALL:
            unknown = any(b & _NOT_BUTTONS for b in buttons.tolist())
        else:
            unknown = bool((buttons & _NOT_BUTTONS).any())
        if unknown:
            raise ValueError("MoveCommands.buttons has unknown bits set")
        object.__setattr__(self, "buttons", buttons)
        if n <= _SMALL:
            positive = all(d > 0.0 for d in self.dt_s.tolist())
        else:
            positive = bool((self.dt_s > 0.0).all())
        if not positive:
            raise ValueError("MoveCommands.dt_s must be positive")

    @classmethod
    def single(
        cls,
        forward: float = 0.0,
        side: float = 0.0,
        yaw_deg: float = 0.0,
        buttons: int = 0,
        dt_s: float = 1.0 / 64.0,
        pitch_deg: float = 0.0,
    ) -> MoveCommands:
        """A batch of one command (what client-side prediction builds once per tick).

        Plain Python numbers that pass validation are stored directly; anything else, and every
        invalid command, goes through the full constructor (same checks, same errors).
        """
        if (
            isinstance(forward, float | int)
            and isinstance(side, float | int)
            and isinstance(yaw_deg, float | int)
            and isinstance(pitch_deg, float | int)
            and isinstance(dt_s, float | int)
            and isinstance(buttons, int)
        ):
            f, s, y, p, d, b = float(forward), float(side), float(yaw_deg), float(pitch_deg), float(dt_s), int(buttons)
            # A sum of finite numbers that is finite proves each finite (NaN and inf propagate);
            # an overflowing sum of finite numbers takes the slow path, which accepts it.
            if isfinite(f + s + y + p + d) and d > 0.0 and not b & _NOT_BUTTONS:
                cmd = object.__new__(cls)
                setattr_ = object.__setattr__
                setattr_(cmd, "forward_move", np.array([f]))
                setattr_(cmd, "side_move", np.array([s]))
                setattr_(cmd, "yaw_deg", np.array([y]))
                setattr_(cmd, "pitch_deg", np.array([p]))
                setattr_(cmd, "buttons", np.array([b], dtype=np.int64))
                setattr_(cmd, "dt_s", np.array([d]))
                return cmd
        return cls(
            forward_move=np.array([forward]),
            side_move=np.array([side]),
            yaw_deg=np.array([yaw_deg]),
            pitch_deg=np.array([pitch_deg]),
            buttons=np.array([int(buttons)]),
            dt_s=np.array([dt_s]),
        )

    def __len__(self) -> int:
        return int(self.forward_move.shape[0])

    def held(self, button: Buttons) -> np.ndarray:
        """(N,) bool: ``button`` is held in each command."""
        return (self.buttons & int(button)) != 0


@dataclass(frozen=True, slots=True)
class MoveResult:
    """State of N players after one command.

    Attributes:
        pos: (N, 3) feet position (m). vel: (N, 3) velocity (m/s).
        on_ground: (N,) bool. stance: (N,) int8 (0 standing, 1 crouching).
        crouch_pressed: (N,) bool, the stance went from standing to crouching this command (a
            crouch *press*, what the crouch-cancel mechanic and the C-bug detector need).
        touched_wall: (N,) bool, the player's move was stopped or deflected by a wall.
    """

    pos: np.ndarray
    vel: np.ndarray
    on_ground: np.ndarray
    stance: np.ndarray
    crouch_pressed: np.ndarray
    touched_wall: np.ndarray


def ground_speed_cap(weapon_speed_m_s: np.ndarray | float, config: MovementConfig) -> np.ndarray:
    """Largest horizontal speed (m/s) a player holding a weapon of ``weapon_speed_m_s`` can ever
    reach: the weapon speed capped by ``max_speed_m_s``, times the sprint factor when it exceeds 1.
    """
    base = np.minimum(np.asarray(weapon_speed_m_s, dtype=np.float64), config.max_speed_m_s)
    return base * max(1.0, config.sprint_factor)


def max_displacement(
    duration_s: np.ndarray | float,
    config: MovementConfig,
    weapon_speed_m_s: np.ndarray | float,
    prev_speed_m_s: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Largest legal horizontal displacement (m) within ``duration_s`` seconds, whatever the inputs.

    A player's horizontal speed never exceeds ``max(prev_speed_m_s, ground_speed_cap(weapon))``:
    on the ground it is clamped to the weapon's speed, in the air it can only turn (with the default
    ``air_speed_cap``) and walls only remove speed. Arrays broadcast.
    """
    speed = np.maximum(np.asarray(prev_speed_m_s, dtype=np.float64), ground_speed_cap(weapon_speed_m_s, config))
    return speed * np.asarray(duration_s, dtype=np.float64)


def _wish(
    cmd: MoveCommands, weapon_speed: np.ndarray, crouched: np.ndarray, config: MovementConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wish direction (N, 2) unit or zero, wish speed (N,) m/s, and ground speed clamp (N,) m/s."""
    fwd = np.clip(cmd.forward_move, -1.0, 1.0)
    side = np.clip(cmd.side_move, -1.0, 1.0)
    yaw = np.radians(cmd.yaw_deg)
    cy, sy = np.cos(yaw), np.sin(yaw)
    # Forward is (cos, sin); right is forward rotated clockwise: (sin, -cos).
    wx = fwd * cy + side * sy
    wy = fwd * sy - side * cy
    mag = np.hypot(fwd, side)
    safe = np.where(mag > _EPS, mag, 1.0)
    wishdir = np.stack([wx / safe, wy / safe], axis=1) * (mag > _EPS)[:, None]
    base = np.minimum(weapon_speed, config.max_speed_m_s)
    walking = cmd.held(Buttons.WALK)
    sprinting = cmd.held(Buttons.SPRINT) & ~walking & ~crouched
    factor = np.ones(len(cmd))
    factor = np.where(walking, config.walk_factor, factor)
    factor = np.where(sprinting, config.sprint_factor, factor)
    factor = np.where(crouched, np.minimum(config.crouch_factor, factor), factor)
    wishspeed = np.minimum(mag, 1.0) * base * factor
    clamp = base * np.where(sprinting, max(1.0, config.sprint_factor), 1.0)
    return wishdir, wishspeed, clamp


def _friction(vh: np.ndarray, dt: np.ndarray, config: MovementConfig) -> np.ndarray:
    """Quake ground friction on (N, 2) velocities; returns new velocities."""
    speed = np.hypot(vh[:, 0], vh[:, 1])
    control = np.maximum(speed, config.stop_speed_m_s)
    new = np.maximum(speed - control * config.friction * dt, 0.0)
    scale = np.where(speed > _EPS, new / np.where(speed > _EPS, speed, 1.0), 0.0)
    return vh * scale[:, None]


def _accel_amount(
    grounded: np.ndarray, wishspeed: np.ndarray, dt: np.ndarray, config: MovementConfig
) -> np.ndarray:
    """Most speed (m/s) acceleration may add this command: ``accel * scale * dt`` with scale the
    wish speed (air) or ``max(accel_scale_min_m_s, wish speed)`` (ground, CS:GO)."""
    ground = config.accelerate * np.maximum(config.accel_scale_min_m_s, wishspeed)
    return np.where(grounded, ground, config.air_accelerate * wishspeed) * dt


def _accelerate(vh: np.ndarray, wishdir: np.ndarray, cap_speed: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Quake accelerate: add up to ``amount`` (m/s) along wishdir, but only while the speed along
    wishdir is below ``cap_speed`` (the wish speed on the ground, the air cap in air)."""
    current = np.einsum("ij,ij->i", vh, wishdir)
    add = np.maximum(cap_speed - current, 0.0)
    return vh + wishdir * np.minimum(amount, add)[:, None]


def _limit_speed(vh: np.ndarray, limit: np.ndarray) -> np.ndarray:
    speed = np.hypot(vh[:, 0], vh[:, 1])
    over = speed > limit
    scale = np.where(over, limit / np.where(over, speed, 1.0), 1.0)
    return vh * scale[:, None]


def _clip_against(vec: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """Remove the component of (K, 2) ``vec`` pointing into the surface with outward ``normal``."""
    into = np.minimum(np.einsum("ij,ij->i", vec, normal), 0.0)
    return vec - normal * into[:, None]


def _slide(
    geometry: MapGeometry, start: np.ndarray, disp: np.ndarray, vel: np.ndarray, config: MovementConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quake ``PM_SlideMove`` in 2D: sweep, clip the remaining motion and the velocity against the
    contact normal, sweep again, at most ``max_slide_iterations`` times.

    Returns (end (N, 2), velocity (N, 2), touched (N,) bool).
    """
    pos = start.copy()
    rem = disp.copy()
    v = vel.copy()
    prev_n = np.zeros_like(start)
    touched = np.zeros(len(start), dtype=bool)
    todo = np.flatnonzero(np.hypot(rem[:, 0], rem[:, 1]) > config.min_move_m)
    for _ in range(config.max_slide_iterations):
        if not todo.size:
            break
        res = geometry.sweep(pos[todo], pos[todo] + rem[todo])
        pos[todo] = res.end
        hit = np.asarray(res.hit, dtype=bool)
        rem[todo[~hit]] = 0.0
        rows = todo[hit]
        if not rows.size:
            break
        touched[rows] = True
        normal = np.asarray(res.normal)[hit]
        left = rem[rows] * (1.0 - np.asarray(res.fraction)[hit])[:, None]
        left = _clip_against(left, normal)
        vr = _clip_against(v[rows], normal)
        # In 2D two different walls meet in a corner, not a crease to slide along: motion that
        # still points into the previous wall after clipping against this one is stuck.
        stuck = (np.einsum("ij,ij->i", left, prev_n[rows]) < -_EPS) | (
            np.einsum("ij,ij->i", vr, prev_n[rows]) < -_EPS
        )
        left[stuck] = 0.0
        vr[stuck] = 0.0
        v[rows] = vr
        rem[rows] = left
        prev_n[rows] = normal
        todo = rows[np.hypot(left[:, 0], left[:, 1]) > config.min_move_m]
    moved = np.flatnonzero(touched & np.any(pos != start, axis=1))
    if moved.size:
        # The geometry guarantees sweep ends outside walls; re-checking the players that touched
        # one costs a batched query and turns a geometry bug into a stopped player instead of one
        # inside a wall. A sweep without contact ends exactly at its target, which it swept.
        bad = np.asarray(geometry.circle_blocked(pos[moved]), dtype=bool)
        if bad.any():
            rows = moved[bad]
            log.warning("slide move ended inside a wall for %d players; kept their start positions", rows.size)
            pos[rows] = start[rows]
            v[rows] = 0.0
            touched[rows] = True
    return pos, v, touched


def simulate(
    pos: npt.ArrayLike,
    vel: npt.ArrayLike,
    on_ground: npt.ArrayLike,
    stance: npt.ArrayLike,
    cmd: MoveCommands,
    weapon_speed_m_s: np.ndarray | float,
    geometry: MapGeometry,
    config: MovementConfig | None = None,
) -> MoveResult:
    """Advance N players by one command each; pure (inputs are not modified).

    Args:
        pos: (N, 3) feet positions (m), each outside every wall. vel: (N, 3) velocities (m/s).
        on_ground: (N,) bool. stance: (N,) 0 standing / 1 crouching (before the command).
        cmd: the N commands (durations in ``cmd.dt_s``, s).
        weapon_speed_m_s: (N,) or scalar, ``WeaponSpec.move_speed_m_s`` of the held weapons.
        geometry: map collision (``world.geometry.MapGeometry``).
        config: movement constants (default CS2).

    Small batches (N <= ``_SCALAR_MAX_N``, e.g. a bot's prediction of its own command) run
    through a scalar path in plain floats that performs the same operations in the same order as
    the vectorised path, so the result does not depend on the batch size.

    Raises ValueError for mismatched shapes or non-finite state.
    """
    cfg = config or _DEFAULT_CONFIG
    n = len(cmd)
    if 0 < n <= _SCALAR_MAX_N and _SCALAR_EXACT:
        return _simulate_scalar(*_scalar_state(pos, vel, on_ground, stance, weapon_speed_m_s, n), cmd, geometry, cfg)
    return _simulate_vector(*_checked_state(pos, vel, on_ground, stance, weapon_speed_m_s, n), cmd, geometry, cfg)


def _checked_state(
    pos: npt.ArrayLike,
    vel: npt.ArrayLike,
    on_ground: npt.ArrayLike,
    stance: npt.ArrayLike,
    weapon_speed_m_s: np.ndarray | float,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``simulate``'s inputs as (pos (N, 3), vel (N, 3), on_ground (N,) bool, stance (N,) int8,
    weapon speed (N,) float64) arrays; raises ValueError for bad shapes or values."""
    p = np.asarray(pos, dtype=np.float64)
    v = np.asarray(vel, dtype=np.float64)
    if p.shape != (n, 3) or v.shape != (n, 3):
        raise ValueError(f"pos and vel must have shape ({n}, 3), got {p.shape} and {v.shape}")
    if not (_all_finite(p) and _all_finite(v)):
        raise ValueError("pos/vel contain NaN or inf")
    ground = _as_column("on_ground", on_ground, n, bool)
    old_stance = _as_column("stance", stance, n, np.int8)
    wspeed = _as_column("weapon_speed_m_s", weapon_speed_m_s, n)
    if not np.isfinite(wspeed).all() or (wspeed < 0.0).any():
        raise ValueError("weapon_speed_m_s must be finite and non-negative")
    return p, v, ground, old_stance, wspeed


def _scalar_state(
    pos: npt.ArrayLike,
    vel: npt.ArrayLike,
    on_ground: npt.ArrayLike,
    stance: npt.ArrayLike,
    weapon_speed_m_s: np.ndarray | float,
    n: int,
) -> tuple[list[list[float]], list[list[float]], list[bool], list[int], list[float]]:
    """``_checked_state`` (same conversions, checks and errors, in the same order) for the scalar
    path: the rows as Python lists."""
    p = np.asarray(pos, dtype=np.float64)
    v = np.asarray(vel, dtype=np.float64)
    if p.shape != (n, 3) or v.shape != (n, 3):
        raise ValueError(f"pos and vel must have shape ({n}, 3), got {p.shape} and {v.shape}")
    pl: list[list[float]] = p.tolist()
    vl: list[list[float]] = v.tolist()
    # A finite sum proves every term finite (NaN and inf propagate); only an overflowing sum of
    # finite values needs the element-wise test.
    if not isfinite(sum(map(sum, pl)) + sum(map(sum, vl))) and not all(
        isfinite(x) for row in pl + vl for x in row
    ):
        raise ValueError("pos/vel contain NaN or inf")
    ground: list[bool] = _as_column("on_ground", on_ground, n, bool).tolist()
    old_stance: list[int] = _as_column("stance", stance, n, np.int8).tolist()
    if isinstance(weapon_speed_m_s, float | int):
        wspeed = [float(weapon_speed_m_s)] * n
    else:
        wspeed = _as_column("weapon_speed_m_s", weapon_speed_m_s, n).tolist()
    if not all(isfinite(w) and w >= 0.0 for w in wspeed):
        raise ValueError("weapon_speed_m_s must be finite and non-negative")
    return pl, vl, ground, old_stance, wspeed


def _simulate_vector(
    p: np.ndarray,
    v: np.ndarray,
    ground: np.ndarray,
    old_stance: np.ndarray,
    wspeed: np.ndarray,
    cmd: MoveCommands,
    geometry: MapGeometry,
    cfg: MovementConfig,
) -> MoveResult:
    """``simulate`` for any N in numpy arrays (inputs already checked by ``_checked_state``)."""
    n = len(cmd)
    dt = cmd.dt_s

    crouched = cmd.held(Buttons.CROUCH)
    new_stance = np.where(crouched, STANCE_CROUCHING, STANCE_STANDING).astype(np.int8)
    crouch_pressed = crouched & (old_stance == STANCE_STANDING)

    wishdir, wishspeed, clamp = _wish(cmd, wspeed, crouched, cfg)

    jump = ground & cmd.held(Buttons.JUMP)
    grounded = ground & ~jump
    air = ~grounded

    vh = v[:, :2]
    speed_before = np.hypot(vh[:, 0], vh[:, 1])
    # Ground: friction, accelerate towards the wish speed, clamp to the weapon's speed (Source's
    # WalkMove clamps to m_flMaxSpeed after accelerating).
    vg = _friction(vh, dt, cfg)
    vg = _accelerate(vg, wishdir, wishspeed, _accel_amount(np.ones(n, dtype=bool), wishspeed, dt, cfg))
    vg = _limit_speed(vg, clamp)
    # Air: no friction; the "room left" test uses the air cap, the amount the full wish speed.
    air_amount = _accel_amount(np.zeros(n, dtype=bool), wishspeed, dt, cfg)
    va = _accelerate(vh, wishdir, np.minimum(wishspeed, cfg.air_max_wish_speed_m_s), air_amount)
    if cfg.air_speed_cap:
        va = _limit_speed(va, np.maximum(speed_before, clamp))
    vh_new = np.where(grounded[:, None], vg, va)

    # Vertical: exact for constant gravity (average of the velocities before and after).
    vz0 = np.where(jump, cfg.jump_speed_m_s, np.where(grounded, 0.0, v[:, 2]))
    vz1 = np.where(air, vz0 - cfg.gravity_m_s2 * dt, 0.0)
    z1 = np.where(air, p[:, 2] + 0.5 * (vz0 + vz1) * dt, 0.0)
    landed = air & (z1 <= 0.0)
    z1 = np.where(landed, 0.0, z1)
    vz1 = np.where(landed, 0.0, vz1)
    new_ground = grounded | landed

    end_h, vh_final, touched = _slide(geometry, p[:, :2], vh_new * dt[:, None], vh_new, cfg)
    new_pos = np.column_stack([end_h, z1])
    new_vel = np.column_stack([vh_final, vz1])
    return MoveResult(
        pos=new_pos,
        vel=new_vel,
        on_ground=new_ground,
        stance=new_stance,
        crouch_pressed=crouch_pressed,
        touched_wall=touched,
    )


# ------------------------------------------------------------------------------ scalar path
#
# The scalar path mirrors the vectorised one operation by operation: the same products and sums
# in the same order (IEEE double arithmetic is then identical), numpy's minimum/maximum/clip
# semantics (on a tie minimum(a, b) and maximum(a, b) return b, which only matters for the sign of
# a zero), only the branch np.where would select, and the same libm functions. NumPy's hypot is
# the C library's, which is not always correctly rounded and differs from ``math.hypot`` in the
# last bit for ~0.5 % of inputs; ``_hypot`` is glibc's algorithm (2.35+, without FMA). The module
# checks at import that ``_hypot``, sin/cos/radians and the 2-term dot product agree bit for bit
# with numpy on this platform and disables the scalar path (``_SCALAR_EXACT``) otherwise.

_HYPOT_EPS = 2.0**-54
_HYPOT_LARGE = 2.0**511
_HYPOT_TINY = 2.0**-511
_HYPOT_SCALE = 2.0**-600


def _hypot_kernel(ax: float, ay: float) -> float:
    h = sqrt(ax * ax + ay * ay)
    if h <= 2.0 * ay:
        delta = h - ay
        t1 = ax * (2.0 * delta - ax)
        t2 = (delta - 2.0 * (ax - ay)) * delta
    else:
        delta = h - ax
        t1 = 2.0 * delta * (ax - 2.0 * ay)
        t2 = (4.0 * delta - ay) * ay + delta * delta
    return h - (t1 + t2) / (2.0 * h)


def _hypot(x: float, y: float) -> float:
    """``np.hypot`` of two finite floats, bit for bit (glibc's ``hypot``, sysdeps/ieee754/dbl-64)."""
    x = abs(x)
    y = abs(y)
    if x < y:
        x, y = y, x
    if y <= x * _HYPOT_EPS:
        return x + y
    if x > _HYPOT_LARGE:
        return _hypot_kernel(x * _HYPOT_SCALE, y * _HYPOT_SCALE) / _HYPOT_SCALE
    if y < _HYPOT_TINY:
        return _hypot_kernel(x / _HYPOT_SCALE, y / _HYPOT_SCALE) * _HYPOT_SCALE
    return _hypot_kernel(x, y)


def _scalar_matches_numpy() -> bool:
    """Whether the scalar path's primitives reproduce numpy's bit for bit on this platform."""
    rng = np.random.default_rng(20240611)
    k = 1024
    xy = rng.normal(0.0, 5.0, (k, 2))
    xy[: k // 8] *= rng.uniform(0.0, 1e-6, (k // 8, 1))
    xy[k // 8 : k // 4, 1] *= 1e-9
    xy[k // 4 : k // 4 + 32] *= 1e-160
    xy[k // 4 + 32 : k // 4 + 64] *= 1e160
    xy[k // 4 + 64 : k // 4 + 96, 0] = 0.0
    hyp = np.hypot(xy[:, 0], xy[:, 1]).tolist()
    if any(_hypot(a, b) != h for (a, b), h in zip(xy.tolist(), hyp)):
        return False
    deg = rng.uniform(-720.0, 720.0, k)
    rad = np.radians(deg)
    if rad.tolist() != [radians(d) for d in deg.tolist()]:
        return False
    r = rad.tolist()
    if np.cos(rad).tolist() != [cos(a) for a in r] or np.sin(rad).tolist() != [sin(a) for a in r]:
        return False
    other = rng.normal(0.0, 5.0, (k, 2))
    dots = np.einsum("ij,ij->i", xy, other).tolist()
    return dots == [a0 * b0 + a1 * b1 for (a0, a1), (b0, b1) in zip(xy.tolist(), other.tolist())]


_SCALAR_EXACT = _scalar_matches_numpy()
if not _SCALAR_EXACT:  # pragma: no cover - depends on the platform's libm and numpy build
    log.info("scalar movement path disabled: its float primitives differ from numpy's here")


def _simulate_scalar(
    p: list[list[float]],
    v: list[list[float]],
    ground: list[bool],
    old_stance: list[int],
    wspeed: list[float],
    cmd: MoveCommands,
    geometry: MapGeometry,
    cfg: MovementConfig,
) -> MoveResult:
    """``simulate`` for small N in Python floats (inputs from ``_scalar_state``); identical
    results to ``_simulate_vector``."""
    hypot = _hypot
    eps = _EPS
    max_speed = cfg.max_speed_m_s
    walk_factor, sprint_factor, crouch_factor = cfg.walk_factor, cfg.sprint_factor, cfg.crouch_factor
    sprint_clamp = max(1.0, sprint_factor)
    stop_speed, friction = cfg.stop_speed_m_s, cfg.friction
    accelerate, accel_min, air_accelerate = cfg.accelerate, cfg.accel_scale_min_m_s, cfg.air_accelerate
    air_max_wish, air_speed_cap = cfg.air_max_wish_speed_m_s, cfg.air_speed_cap
    jump_speed, gravity = cfg.jump_speed_m_s, cfg.gravity_m_s2

    start_x: list[float] = []
    start_y: list[float] = []
    disp_x: list[float] = []
    disp_y: list[float] = []
    vel_x: list[float] = []
    vel_y: list[float] = []
    out_z: list[float] = []
    out_vz: list[float] = []
    out_ground: list[bool] = []
    out_stance: list[int] = []
    out_pressed: list[bool] = []
    for (px, py, pz), (vx, vy, vz), on_ground, stance, weapon_speed, fwd, side, yaw_deg, buttons, dt in zip(
        p,
        v,
        ground,
        old_stance,
        wspeed,
        cmd.forward_move.tolist(),
        cmd.side_move.tolist(),
        cmd.yaw_deg.tolist(),
        cmd.buttons.tolist(),
        cmd.dt_s.tolist(),
    ):
        crouched = (buttons & _CROUCH) != 0
        out_stance.append(STANCE_CROUCHING if crouched else STANCE_STANDING)
        out_pressed.append(crouched and stance == STANCE_STANDING)

        # _wish
        fwd = fwd if fwd > -1.0 else -1.0  # noqa: FURB136
        fwd = fwd if fwd < 1.0 else 1.0  # noqa: FURB136
        side = side if side > -1.0 else -1.0  # noqa: FURB136
        side = side if side < 1.0 else 1.0  # noqa: FURB136
        yaw = radians(yaw_deg)
        cy, sy = cos(yaw), sin(yaw)
        wx = fwd * cy + side * sy
        wy = fwd * sy - side * cy
        mag = hypot(fwd, side)
        if mag > eps:
            wdx = wx / mag
            wdy = wy / mag
        else:  # zero, with the sign numpy's (w / 1.0) * False gives
            wdx = wx * 0.0
            wdy = wy * 0.0
        base = weapon_speed if weapon_speed < max_speed else max_speed  # noqa: FURB136
        walking = (buttons & _WALK) != 0
        sprinting = (buttons & _SPRINT) != 0 and not walking and not crouched
        factor = 1.0
        if walking:
            factor = walk_factor
        if sprinting:
            factor = sprint_factor
        if crouched:
            factor = crouch_factor if crouch_factor < factor else factor  # noqa: FURB136
        wishspeed = (mag if mag < 1.0 else 1.0) * base * factor  # noqa: FURB136
        clamp = base * (sprint_clamp if sprinting else 1.0)

        jump = on_ground and (buttons & _JUMP) != 0
        grounded = on_ground and not jump

        if grounded:
            # _friction
            speed = hypot(vx, vy)
            control = speed if speed > stop_speed else stop_speed  # noqa: FURB136
            new = speed - control * friction * dt
            new = new if new > 0.0 else 0.0  # noqa: FURB136
            scale = new / speed if speed > eps else 0.0
            hx = vx * scale
            hy = vy * scale
            # _accelerate with the ground amount, capped at the wish speed
            amount = accelerate * (accel_min if accel_min > wishspeed else wishspeed) * dt  # noqa: FURB136
            add = wishspeed - (hx * wdx + hy * wdy)
            add = add if add > 0.0 else 0.0  # noqa: FURB136
            step = amount if amount < add else add  # noqa: FURB136
            hx = hx + wdx * step
            hy = hy + wdy * step
            limit: float | None = clamp
        else:
            amount = air_accelerate * wishspeed * dt
            cap = wishspeed if wishspeed < air_max_wish else air_max_wish  # noqa: FURB136
            add = cap - (vx * wdx + vy * wdy)
            add = add if add > 0.0 else 0.0  # noqa: FURB136
            step = amount if amount < add else add  # noqa: FURB136
            hx = vx + wdx * step
            hy = vy + wdy * step
            if air_speed_cap:
                before = hypot(vx, vy)
                limit = before if before > clamp else clamp  # noqa: FURB136
            else:
                limit = None
        if limit is not None:
            # _limit_speed (the scale is 1.0 unless over the limit; v * 1.0 == v bit for bit)
            speed = hypot(hx, hy)
            if speed > limit:
                scale = limit / speed
                hx = hx * scale
                hy = hy * scale

        if jump:
            vz0 = jump_speed
        elif grounded:
            vz0 = 0.0
        else:
            vz0 = vz
        if grounded:
            vz1 = 0.0
            z1 = 0.0
            new_ground = True
        else:
            vz1 = vz0 - gravity * dt
            z1 = pz + 0.5 * (vz0 + vz1) * dt
            new_ground = z1 <= 0.0
            if new_ground:
                z1 = 0.0
                vz1 = 0.0
        out_z.append(z1)
        out_vz.append(vz1)
        out_ground.append(new_ground)
        start_x.append(px)
        start_y.append(py)
        disp_x.append(hx * dt)
        disp_y.append(hy * dt)
        vel_x.append(hx)
        vel_y.append(hy)

    end_x, end_y, touched = _slide_scalar(geometry, start_x, start_y, disp_x, disp_y, vel_x, vel_y, cfg)
    # Lists of Python bools make bool arrays.
    return MoveResult(
        pos=np.array([[x, y, z] for x, y, z in zip(end_x, end_y, out_z)]),
        vel=np.array([[x, y, z] for x, y, z in zip(vel_x, vel_y, out_vz)]),
        on_ground=np.array(out_ground),
        stance=np.array(out_stance, dtype=np.int8),
        crouch_pressed=np.array(out_pressed),
        touched_wall=np.array(touched),
    )


def _slide_scalar(
    geometry: MapGeometry,
    start_x: list[float],
    start_y: list[float],
    rem_x: list[float],
    rem_y: list[float],
    v_x: list[float],
    v_y: list[float],
    config: MovementConfig,
) -> tuple[list[float], list[float], list[bool]]:
    """``_slide`` in Python floats (same sweeps, same arithmetic); updates ``rem_*`` and ``v_*``
    in place and returns (end x, end y, touched)."""
    hypot = _hypot
    eps = _EPS
    min_move = config.min_move_m
    n = len(start_x)
    pos_x = list(start_x)
    pos_y = list(start_y)
    prev_x = [0.0] * n
    prev_y = [0.0] * n
    touched = [False] * n
    todo = [i for i in range(n) if hypot(rem_x[i], rem_y[i]) > min_move]
    for _ in range(config.max_slide_iterations):
        if not todo:
            break
        p0 = [[pos_x[i], pos_y[i]] for i in todo]
        p1 = [[pos_x[i] + rem_x[i], pos_y[i] + rem_y[i]] for i in todo]
        res = geometry.sweep(np.array(p0), np.array(p1))
        ends = res.end.tolist()
        hits = res.hit.tolist()
        normals = res.normal.tolist()
        fractions = res.fraction.tolist()
        rows = []
        for j, i in enumerate(todo):
            pos_x[i], pos_y[i] = ends[j]
            if not hits[j]:
                rem_x[i] = 0.0
                rem_y[i] = 0.0
                continue
            touched[i] = True
            nx, ny = normals[j]
            keep = 1.0 - fractions[j]
            lx = rem_x[i] * keep
            ly = rem_y[i] * keep
            # _clip_against, for the remaining motion and the velocity
            into = lx * nx + ly * ny
            into = into if into < 0.0 else 0.0  # noqa: FURB136
            lx = lx - nx * into
            ly = ly - ny * into
            into = v_x[i] * nx + v_y[i] * ny
            into = into if into < 0.0 else 0.0  # noqa: FURB136
            wx = v_x[i] - nx * into
            wy = v_y[i] - ny * into
            # In 2D two different walls meet in a corner: see _slide.
            pnx, pny = prev_x[i], prev_y[i]
            if lx * pnx + ly * pny < -eps or wx * pnx + wy * pny < -eps:
                lx = ly = wx = wy = 0.0
            v_x[i] = wx
            v_y[i] = wy
            rem_x[i] = lx
            rem_y[i] = ly
            prev_x[i] = nx
            prev_y[i] = ny
            if hypot(lx, ly) > min_move:
                rows.append(i)
        todo = rows
    moved = [i for i in range(n) if touched[i] and (pos_x[i] != start_x[i] or pos_y[i] != start_y[i])]
    if moved:
        # See _slide: a re-check of the players that touched a wall.
        bad = np.asarray(geometry.circle_blocked(np.array([[pos_x[i], pos_y[i]] for i in moved])), dtype=bool).tolist()
        rows = [i for i, b in zip(moved, bad) if b]
        if rows:
            log.warning("slide move ended inside a wall for %d players; kept their start positions", len(rows))
            for i in rows:
                pos_x[i] = start_x[i]
                pos_y[i] = start_y[i]
                v_x[i] = 0.0
                v_y[i] = 0.0
                touched[i] = True
    return pos_x, pos_y, touched


def max_horizontal_speed(
    vel: npt.ArrayLike,
    on_ground: npt.ArrayLike,
    cmd: MoveCommands,
    weapon_speed_m_s: np.ndarray | float,
    config: MovementConfig | None = None,
) -> np.ndarray:
    """Largest horizontal speed (m/s) the model can produce for each command from ``vel`` (N, 2 or 3)
    and ``on_ground``, over every view yaw (the command's buttons, move magnitudes and duration are
    taken as given, the direction is free: Grim's "every possible movement").

    Exact, not sampled: with s the speed after friction, c the cosine between the velocity and the
    wish direction and a(c) = clip(cap - s c, 0, A) the speed added, |v|² = s² + 2 s c a(c) + a(c)²
    is piecewise increasing / concave / constant in c, so its maximum is at one of the candidates
    c in {-1, 0, 1, (cap - A)/s, cap/s}. Walls only remove speed, so this bounds every outcome.
    """
    cfg = config or _DEFAULT_CONFIG
    n = len(cmd)
    v = np.asarray(vel, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != n or v.shape[1] not in (2, 3):
        raise ValueError(f"vel must have shape ({n}, 2) or ({n}, 3), got {v.shape}")
    ground = _as_column("on_ground", on_ground, n, bool)
    wspeed = _as_column("weapon_speed_m_s", weapon_speed_m_s, n)
    dt = cmd.dt_s
    crouched = cmd.held(Buttons.CROUCH)
    _, wishspeed, clamp = _wish(cmd, wspeed, crouched, cfg)
    grounded = ground & ~cmd.held(Buttons.JUMP)

    vh = v[:, :2]
    speed_before = np.hypot(vh[:, 0], vh[:, 1])
    vf = np.where(grounded[:, None], _friction(vh, dt, cfg), vh)
    s = np.hypot(vf[:, 0], vf[:, 1])
    cap = np.where(grounded, wishspeed, np.minimum(wishspeed, cfg.air_max_wish_speed_m_s))
    amount = _accel_amount(grounded, wishspeed, dt, cfg)
    s_safe = np.where(s > _EPS, s, 1.0)
    cands = np.stack(
        [
            np.full(n, -1.0),
            np.zeros(n),
            np.ones(n),
            np.clip((cap - amount) / s_safe, -1.0, 1.0),
            np.clip(cap / s_safe, -1.0, 1.0),
        ],
        axis=1,
    )
    a = np.clip(cap[:, None] - s[:, None] * cands, 0.0, amount[:, None])
    sq = s[:, None] ** 2 + 2.0 * s[:, None] * cands * a + a * a
    best = np.sqrt(np.max(sq, axis=1))
    ground_limit = clamp
    air_limit = np.maximum(speed_before, clamp) if cfg.air_speed_cap else np.full(n, np.inf)
    return np.minimum(best, np.where(grounded, ground_limit, air_limit))
