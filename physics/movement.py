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

import functools
import logging
from dataclasses import dataclass
from math import isfinite

import numpy as np
import numpy.typing as npt

from physics import movement_kernel
from physics.buttons import ALL_BUTTONS, Buttons
from physics.config import MovementConfig
from world.constants import STANCE_CROUCHING, STANCE_STANDING
from world.geometry import MapGeometry

log = logging.getLogger(__name__)

_DEFAULT_CONFIG = MovementConfig()

_EPS = movement_kernel.EPS

_NOT_BUTTONS = ~ALL_BUTTONS
_NOT_BUTTONS_INT = int(_NOT_BUTTONS)
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
    def from_block(cls, block: np.ndarray) -> MoveCommands:
        """N commands from a (6, N) float64 block whose rows are dt_s, forward_move, side_move,
        yaw_deg, pitch_deg and buttons (a server's command columns).

        The same checks as the constructor, made over the whole block at once (a handful of
        numpy calls instead of one per column and check): the server builds one per round of
        commands every tick. Raises ValueError for a malformed block."""
        if block.ndim != 2 or block.shape[0] != 6 or block.dtype != np.float64:
            raise ValueError(f"MoveCommands block must be (6, N) float64, got {block.shape} {block.dtype}")
        buttons = np.empty(block.shape[1], dtype=np.int64)
        status = movement_kernel.check_block(block, _NOT_BUTTONS_INT, buttons)
        if status == movement_kernel.BLOCK_NOT_FINITE:
            raise ValueError("MoveCommands block contains NaN or inf")
        if status == movement_kernel.BLOCK_DT:
            raise ValueError("MoveCommands.dt_s must be positive")
        # A float that is not a whole number is no bitmask.
        if status == movement_kernel.BLOCK_BUTTONS:
            raise ValueError("MoveCommands.buttons has unknown bits set or is not integral")
        cmd = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(cmd, "dt_s", block[0])
        setattr_(cmd, "forward_move", block[1])
        setattr_(cmd, "side_move", block[2])
        setattr_(cmd, "yaw_deg", block[3])
        setattr_(cmd, "pitch_deg", block[4])
        setattr_(cmd, "buttons", buttons)
        return cmd

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

    Players run one by one through a compiled kernel (``physics.movement_kernel``) that performs
    the same operations in the same order as the vectorised numpy model, so the result does not
    depend on the batch; the numpy model is the fallback on a platform whose float primitives
    differ (``_KERNEL_EXACT``).

    Raises ValueError for mismatched shapes or non-finite state.
    """
    cfg = config or _DEFAULT_CONFIG
    state = _checked_state(pos, vel, on_ground, stance, weapon_speed_m_s, len(cmd))
    if _KERNEL_EXACT:
        return _simulate_kernel(*state, cmd, geometry, cfg)
    return _simulate_vector(*state, cmd, geometry, cfg)


def simulate_sequence(
    slots: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    on_ground: np.ndarray,
    stance: np.ndarray,
    cmd: MoveCommands,
    weapon_speed_m_s: np.ndarray,
    geometry: MapGeometry,
    config: MovementConfig | None = None,
) -> tuple[MoveResult, np.ndarray, np.ndarray, np.ndarray]:
    """Advance players by any number of commands each; pure (inputs are not modified).

    Row i of ``cmd`` moves player ``slots[i]`` from the state its previous row left, its first
    row from the player's row of the per-slot state ``pos`` (S, 3), ``vel`` (S, 3), ``on_ground``
    (S,) bool and ``stance`` (S,) int8 (a world's arrays). The same as :func:`simulate` called
    with each player's rows one after the other (a server's rounds of commands), in one call.
    ``weapon_speed_m_s``: (N,) per row.

    Returns the rows' results and the (pos, vel, on_ground) each row started from.
    Raises ValueError for a slot outside the state, mismatched shapes or non-finite state.
    """
    cfg = config or _DEFAULT_CONFIG
    n = len(cmd)
    rows = np.asarray(slots, dtype=np.intp)
    if rows.shape != (n,):
        raise ValueError(f"slots must have shape ({n},), got {rows.shape}")
    wspeed = _as_column("weapon_speed_m_s", weapon_speed_m_s, n)
    if not _KERNEL_EXACT:
        return _simulate_sequence_vector(rows, pos, vel, on_ground, stance, cmd, wspeed, geometry, cfg)
    c = np.ascontiguousarray
    start_pos, start_vel, start_ground, *out, wedged = movement_kernel.simulate_sequence(
        rows, c(pos, dtype=np.float64), c(vel, dtype=np.float64), c(on_ground, dtype=bool), c(stance, dtype=np.int8),
        wspeed, c(cmd.forward_move), c(cmd.side_move), c(cmd.yaw_deg), c(cmd.buttons), c(cmd.dt_s),
        *_config_table(cfg), *geometry.sweep_args,
    )  # fmt: skip
    if wedged < 0:
        _refuse_sequence(wedged)
    if wedged:
        log.warning("slide move ended inside a wall for %d players; kept their start positions", wedged)
    return MoveResult(*out), start_pos, start_vel, start_ground


def _refuse_sequence(status: int) -> None:
    """Raise simulate_sequence's error for a refusal status of its kernel."""
    if status == movement_kernel.BAD_SLOT:
        raise ValueError("slots must be rows of the state")
    if status == movement_kernel.BAD_SPEED:
        raise ValueError("weapon_speed_m_s must be finite and non-negative")
    # What simulate checks of each round's starting state.
    raise ValueError("pos/vel contain NaN or inf")


def _simulate_sequence_vector(
    rows: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    on_ground: np.ndarray,
    stance: np.ndarray,
    cmd: MoveCommands,
    wspeed: np.ndarray,
    geometry: MapGeometry,
    cfg: MovementConfig,
) -> tuple[MoveResult, np.ndarray, np.ndarray, np.ndarray]:
    """``simulate_sequence`` through :func:`simulate`, one row at a time."""
    n = len(cmd)
    if n and (rows.min() < 0 or rows.max() >= len(pos)):
        _refuse_sequence(movement_kernel.BAD_SLOT)
    if not np.isfinite(wspeed).all() or (wspeed < 0.0).any():
        _refuse_sequence(movement_kernel.BAD_SPEED)
    state = (np.array(pos, dtype=np.float64), np.array(vel, dtype=np.float64), np.array(on_ground, dtype=bool),
             np.array(stance, dtype=np.int8))
    start = (np.empty((n, 3)), np.empty((n, 3)), np.empty(n, dtype=bool))
    out = (np.empty((n, 3)), np.empty((n, 3)), np.empty(n, dtype=bool), np.empty(n, dtype=np.int8),
           np.empty(n, dtype=bool), np.empty(n, dtype=bool))
    for i, s in enumerate(rows.tolist()):
        for have, arr in zip(start, state[:3], strict=True):
            have[i] = arr[s]
        one = MoveCommands(cmd.forward_move[i : i + 1], cmd.side_move[i : i + 1], cmd.yaw_deg[i : i + 1],
                           cmd.pitch_deg[i : i + 1], cmd.buttons[i : i + 1], cmd.dt_s[i : i + 1])
        r = simulate(state[0][s : s + 1], state[1][s : s + 1], state[2][s : s + 1], state[3][s : s + 1], one,
                     wspeed[i : i + 1], geometry, cfg)
        for arr, value in zip(out, (r.pos, r.vel, r.on_ground, r.stance, r.crouch_pressed, r.touched_wall), strict=True):
            arr[i] = value[0]
        for arr, value in zip(state, (r.pos, r.vel, r.on_ground, r.stance), strict=True):
            arr[s] = value[0]
    return MoveResult(*out), *start


def simulate_one(
    pos: tuple[float, float, float],
    vel: tuple[float, float, float],
    on_ground: bool,
    stance: int,
    cmd: MoveCommands,
    weapon_speed_m_s: float,
    geometry: MapGeometry,
    config: MovementConfig | None = None,
) -> tuple[tuple[float, float, float], tuple[float, float, float], bool, int, bool]:
    """:func:`simulate` of one player given as plain numbers (a client predicting its own
    command): (pos, vel, on_ground, stance, crouch_pressed) after the one command of ``cmd``.

    Raises ValueError for a batch of another size or non-finite state.
    """
    if len(cmd) != 1:
        raise ValueError(f"simulate_one takes a batch of one command, got {len(cmd)}")
    px, py, pz = pos
    vx, vy, vz = vel
    # A finite sum proves every term finite (NaN and inf propagate); only an overflowing sum of
    # finite values needs the element-wise test.
    if not isfinite(px + py + pz + vx + vy + vz) and not all(map(isfinite, (px, py, pz, vx, vy, vz))):
        raise ValueError("pos/vel contain NaN or inf")
    if not (isfinite(weapon_speed_m_s) and weapon_speed_m_s >= 0.0):
        raise ValueError("weapon_speed_m_s must be finite and non-negative")
    cfg = config or _DEFAULT_CONFIG
    if not _KERNEL_EXACT:
        r = simulate([pos], [vel], [on_ground], [stance], cmd, weapon_speed_m_s, geometry, cfg)
        p, v = r.pos[0].tolist(), r.vel[0].tolist()
        return (p[0], p[1], p[2]), (v[0], v[1], v[2]), bool(r.on_ground[0]), int(r.stance[0]), bool(r.crouch_pressed[0])
    x, y, z, hx, hy, hz, ground, new_stance, pressed, _, wedged = movement_kernel.simulate_one(
        float(px), float(py), float(pz), float(vx), float(vy), float(vz), bool(on_ground), int(stance),
        float(weapon_speed_m_s), cmd.forward_move.item(), cmd.side_move.item(), cmd.yaw_deg.item(),
        cmd.buttons.item(), cmd.dt_s.item(), *_config_table(cfg), *geometry.sweep_args,
    )  # fmt: skip
    if wedged:
        log.warning("slide move ended inside a wall for %d players; kept their start positions", 1)
    return (x, y, z), (hx, hy, hz), ground, new_stance, pressed


@functools.lru_cache(maxsize=16)
def _config_table(cfg: MovementConfig) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's tables of ``cfg`` (a frozen config: equal configs share them)."""
    return movement_kernel.config_table(cfg)


def _simulate_kernel(
    p: np.ndarray,
    v: np.ndarray,
    ground: np.ndarray,
    old_stance: np.ndarray,
    wspeed: np.ndarray,
    cmd: MoveCommands,
    geometry: MapGeometry,
    cfg: MovementConfig,
) -> MoveResult:
    """``simulate`` through the compiled kernel (inputs already checked by ``_checked_state``)."""
    c = np.ascontiguousarray
    pos, vel, on_ground, stance, pressed, touched, wedged = movement_kernel.simulate_rows(
        c(p), c(v), c(ground), c(old_stance), c(wspeed), c(cmd.forward_move), c(cmd.side_move), c(cmd.yaw_deg),
        c(cmd.buttons), c(cmd.dt_s), *_config_table(cfg), *geometry.sweep_args,
    )  # fmt: skip
    if wedged:
        log.warning("slide move ended inside a wall for %d players; kept their start positions", wedged)
    return MoveResult(
        pos=pos, vel=vel, on_ground=on_ground, stance=stance, crouch_pressed=pressed, touched_wall=touched
    )


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


def _kernel_matches_numpy() -> bool:
    """Whether the kernel's float primitives (radians, sin, cos, hypot, the 2-term dot product)
    reproduce numpy's bit for bit on this platform."""
    rng = np.random.default_rng(20240611)
    k = 1024
    xy = rng.normal(0.0, 5.0, (k, 2))
    xy[: k // 8] *= rng.uniform(0.0, 1e-6, (k // 8, 1))
    xy[k // 8 : k // 4, 1] *= 1e-9
    xy[k // 4 : k // 4 + 32] *= 1e-160
    xy[k // 4 + 32 : k // 4 + 64] *= 1e160
    xy[k // 4 + 64 : k // 4 + 96, 0] = 0.0
    deg = rng.uniform(-720.0, 720.0, k)
    other = rng.normal(0.0, 5.0, (k, 2))
    rad = np.radians(deg)
    want = (rad, np.cos(rad), np.sin(rad), np.hypot(xy[:, 0], xy[:, 1]), np.einsum("ij,ij->i", xy, other))
    got = movement_kernel.primitives(deg, xy, other)
    return all(a.tobytes() == b.tobytes() for a, b in zip(want, got, strict=True))


_KERNEL_EXACT = _kernel_matches_numpy()
if _KERNEL_EXACT:
    movement_kernel.warm_up()
else:  # pragma: no cover - depends on the platform's libm and numpy build
    log.info("movement kernel disabled: its float primitives differ from numpy's here")


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
    v, ground, wspeed = _checked_speed_inputs(vel, on_ground, cmd, weapon_speed_m_s)
    if _KERNEL_EXACT and _all_finite(v) and _all_finite(wspeed):
        # The same operations row by row in the compiled kernel (the numpy code below is its
        # reference; non-finite rows take it, where numpy's NaN propagation rules apply).
        return movement_kernel.max_speeds(*_speed_kernel_args(v, ground, wspeed, cmd, cfg))
    return _max_horizontal_speed_numpy(v, ground, wspeed, cmd, cfg)


def _checked_speed_inputs(
    vel: npt.ArrayLike, on_ground: npt.ArrayLike, cmd: MoveCommands, weapon_speed_m_s: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vel (N, 2|3), on_ground (N,), weapon speed (N,)) as :func:`max_horizontal_speed` takes
    them; ValueError on a wrong shape."""
    n = len(cmd)
    v = np.asarray(vel, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != n or v.shape[1] not in (2, 3):
        raise ValueError(f"vel must have shape ({n}, 2) or ({n}, 3), got {v.shape}")
    return v, _as_column("on_ground", on_ground, n, bool), _as_column("weapon_speed_m_s", weapon_speed_m_s, n)


def max_speed_kernel_args(
    vel: npt.ArrayLike,
    on_ground: npt.ArrayLike,
    cmd: MoveCommands,
    weapon_speed_m_s: np.ndarray | float,
    config: MovementConfig | None = None,
) -> tuple[np.ndarray, ...] | None:
    """The arguments of ``movement_kernel.max_speeds`` for :func:`max_horizontal_speed` of the same
    arguments (checked as it checks them, raising its ValueErrors; contiguous), for a caller
    that computes the speeds inside its own compiled pass; None where the kernel does not match
    numpy on this platform. The kernel's values equal :func:`max_horizontal_speed`'s only where
    ``vel`` (every column) and the weapon speeds (m/s) are finite: the caller checks that and
    calls :func:`max_horizontal_speed` otherwise."""
    cfg = config or _DEFAULT_CONFIG
    v, ground, wspeed = _checked_speed_inputs(vel, on_ground, cmd, weapon_speed_m_s)
    if not _KERNEL_EXACT:
        return None  # pragma: no cover - depends on the platform's libm and numpy build
    return _speed_kernel_args(v, ground, wspeed, cmd, cfg)


def _speed_kernel_args(
    v: np.ndarray, ground: np.ndarray, wspeed: np.ndarray, cmd: MoveCommands, cfg: MovementConfig
) -> tuple[np.ndarray, ...]:
    """``movement_kernel.max_speeds``' arguments from checked inputs (contiguous)."""
    c = np.ascontiguousarray
    return (
        c(v), c(ground), c(wspeed), c(cmd.forward_move), c(cmd.side_move), c(cmd.yaw_deg), c(cmd.buttons),
        c(cmd.dt_s), *_config_table(cfg),
    )  # fmt: skip


def _max_horizontal_speed_numpy(
    v: np.ndarray, ground: np.ndarray, wspeed: np.ndarray, cmd: MoveCommands, cfg: MovementConfig
) -> np.ndarray:
    """:func:`max_horizontal_speed` of checked inputs in numpy arrays."""
    n = len(cmd)
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
