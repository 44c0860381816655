"""Aim samples: every applied command becomes an ``AimSample``, enriched with the nearest visible
enemy by angle and the nearest enemy sent to the player but out of its sight (found for a batch
of rounds at once by the compiled ``aim_candidates`` and ``aim_gather``, each round seeing the
others where the earlier rounds left them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

import numpy as np

from anticheat.events import AimSample
from physics.weapon_state import WeaponState
from server.input_kernel import aim_candidates, aim_gather
from server.phantoms import Phantoms
from server.tick_commands import Round, TickCommands
from world.constants import (
    CROUCHING_CHEST_M,
    CROUCHING_EYE_M,
    STANDING_CHEST_M,
    STANDING_EYE_M,
)
from world.state import WorldState

CHEST_M = np.array([STANDING_CHEST_M, CROUCHING_CHEST_M])
"""Chest height above the feet (m) by stance: where the target angle is measured to."""
EYE_M = np.array([STANDING_EYE_M, CROUCHING_EYE_M])
"""Eye height above the feet (m) by stance."""
_AIM_FIELDS = (
    "player", "tick", "time_s", "seq", "yaw_deg", "pitch_deg", "recoil_pitch_deg", "recoil_yaw_deg",
    "server_punch_pitch_deg", "server_punch_yaw_deg", "buttons", "weapon", "weapon_switch", "stance", "on_ground",
    "speed_m_s", "target", "target_angle_deg", "target_distance_m", "hidden_target", "hidden_angle_deg",
    "phantom", "phantom_angle_deg", "view_time_s", "crosshair_target", "fire_ready",
)
if tuple(f.name for f in fields(AimSample)) != _AIM_FIELDS or hasattr(AimSample, "__post_init__"):  # pragma: no cover
    raise AssertionError("AimSample changed: update server.aim_samples.append_aim_samples and _aim_sample")


_T = TypeVar("_T")


def _slot_setter_constructor(cls: type[_T], names: tuple[str, ...]) -> Callable[..., _T]:
    """A function of ``names`` (positional) building a ``cls``, a frozen slotted dataclass without
    ``__post_init__``, equal to ``cls(*values)``. A frozen dataclass's ``__init__`` stores each field
    through ``object.__setattr__``; storing through the slot descriptors directly halves the cost,
    which matters for the ~190 AimSamples of every 128 Hz tick."""
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
    body = "".join(f"    _set_{n}(obj, {n})\n" for n in names)
    exec(f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n", namespace)
    make: Callable[..., _T] = namespace["make"]
    return make


_aim_sample = _slot_setter_constructor(AimSample, _AIM_FIELDS)


def aim_kernels(
    w: WorldState, visible: np.ndarray, slots: np.ndarray, stops: np.ndarray, moved: np.ndarray, cos_sin: np.ndarray,
    offset: int, row_pos: np.ndarray, row_stance: np.ndarray, row_vel: np.ndarray, row_ground: np.ndarray,
    in_sight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(floats, ints, on_ground) of ``aim_gather`` for viewers ``slots`` in rounds ending at
    ``stops`` (their cos and sin from column ``offset`` of ``cos_sin``), the ``moved`` rows'
    players at their ``row_*`` state from their round on (``aim_candidates``); the world ``w`` as
    it is before the first round, ``visible`` and ``in_sight`` the culler's (viewer, target)
    matrices (``in_sight`` None: ``visible``, so no target counts as hidden).

    floats (4, k): speed (m/s), target angle (deg), target distance (m), hidden target angle
    (deg); ints (3, k): target slot, stance, hidden target slot (-1 none)."""
    k = len(slots)
    cap = w.pos.shape[0]
    cos = np.empty(k * cap)
    dist = np.empty(k * cap)
    target = np.empty(k * cap, dtype=np.intp)
    hidden = np.empty(k * cap, dtype=bool)
    counts = np.empty(k, dtype=np.intp)
    n = aim_candidates(slots, stops, moved, cos_sin, offset, w.pos, w.stance, row_pos, row_stance, EYE_M,
                       CHEST_M, visible, visible if in_sight is None else in_sight, w.alive, w.active, cos, dist,
                       target, hidden, counts)
    floats = np.empty((4, k))
    ints = np.empty((3, k), dtype=np.int64)
    ground = np.empty(k, dtype=bool)
    aim_gather(np.degrees(np.arccos(cos[:n])), dist, target, hidden, counts, slots, moved, w.vel, w.on_ground,
               w.stance, row_vel, row_ground, row_stance, floats, ints, ground)
    return floats, ints, ground


def append_aim_samples(
    round_: Round, commands: TickCommands, wpn: WeaponState, tick: int, now_s: float, events: list[Any],
    phantoms: Phantoms | None = None, world: WorldState | None = None, view_s: np.ndarray | None = None,
    crosshair: tuple[list[int | None], list[bool]] | None = None,
) -> None:
    """The round's AimSamples (server time ``now_s``, s) onto ``events``, each also kept as its
    session's ``last_aim``; with ``phantoms`` and ``world`` (the round applied), each names the
    phantom the player's client was drawing and the angle from its view to it: at ``view_s``
    (the round's rewind times, s), or where the phantoms are now if None. ``crosshair``: per
    command, its probed crosshair target and weapon readiness (``probe_crosshairs``), else None."""
    a, b = round_.start, round_.stop
    slots = commands.slots[a:b]
    if phantoms is not None and world is not None and (view_s is not None or phantoms.shown.any()):
        eye = world.pos[slots].copy()
        eye[:, 2] += EYE_M[world.stance[slots]]
        phantom, phantom_angle = phantoms.aim(slots, eye, commands.cos_sin[:, :, a:b], view_s)
    else:
        phantom, phantom_angle = [None] * (b - a), [180.0] * (b - a)
    speed, angle, distance, hidden_angle, target_slot, stance, hidden_slot, on_ground = (
        column[a:b] for column in commands.aim
    )
    if crosshair is None:
        on, ready = [None] * (b - a), [None] * (b - a)
    else:
        on, ready = crosshair
    make = _aim_sample
    # Column lists, not a list per row: every list is a container the garbage collector
    # counts, and a tick makes ~190 samples.
    c = commands
    for (session, seq, yaw, pitch, rp, ry, buttons, switch, pp, py, sp, ang, dst, tgt, held, st, ground, hid,
         hang, ph, phang, vt, xt, fr) in zip(
        round_.sessions, c.seq[a:b], c.view_yaw[a:b], c.view_pitch[a:b], c.recoil_pitch[a:b], c.recoil_yaw[a:b],
        c.buttons[a:b], c.switch[a:b], wpn.punch_pitch_deg[slots].tolist(), wpn.punch_yaw_deg[slots].tolist(),
        speed, angle, distance, target_slot, wpn.weapon[slots].tolist(), stance, on_ground, hidden_slot,
        hidden_angle, phantom, phantom_angle, c.view_time[a:b], on, ready, strict=True,
    ):
        sample = make(
            session.slot, tick, now_s, seq, yaw, pitch, rp, ry, pp, py, buttons, held, switch, st, ground, sp,
            tgt if tgt >= 0 else None, ang, dst, hid if hid >= 0 else None, hang, ph, phang, vt, xt, fr,
        )
        session.last_aim = sample
        events.append(sample)
