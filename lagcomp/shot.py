"""The shot contract: what a client claims about a shot, and what the server decided.

A ``ShotResult`` is server truth with the client's claims kept beside it (DESIGN principle 1:
the server decides, claims are evidence). Detectors consume it inline and from replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

Vec3 = tuple[float, float, float]


class RewindDecision(str, Enum):
    """Why lag compensation rewound to the time it used (REFERENCES section 7)."""

    CLAIMED = "claimed"
    """The client's claimed view time was within tolerance of the latency estimate and was used."""
    ESTIMATE = "estimate"
    """The claim was outside the tolerance (or absent): the server's estimate was used instead."""
    MAX_UNLAG = "max_unlag"
    """The target was older than ``max_unlag`` and was clamped to it."""
    NOT_REWOUND = "not_rewound"
    """Lag compensation disabled for this shot: targets were taken at the current tick."""


@dataclass(frozen=True, slots=True)
class ShotClaim:
    """What the client says about one shot (all optional claims are evidence, never truth).

    Attributes:
        shooter: player slot. weapon: weapon id the client says it fired.
        yaw_deg, pitch_deg: view angles in the shot command (deg).
        view_time_s: the server time (s) the client says it was looking at when it fired.
        claimed_victim: slot the client says it hit, or None.
        claimed_hit_point: where the client says the bullet hit (m), or None.
        claimed_bone: bone id the client says it hit (0 when none).
        recoil_pitch_deg, recoil_yaw_deg: the view kick the client says it was under (deg).
        seq: the command sequence number that carried the shot.
        claimed_origin: where the client says the shot left from (m), or None when the protocol
            does not carry it. Nex-AC's "AFK ghost" check compares it with the shooter's
            authoritative position.
        view: (yaw, pitch) of the command that fired the shot (deg), or None when unknown; the
            shot's own angles should lie on the path from ``prev_view`` to it.
        prev_view: (yaw, pitch) of the command before (deg), or None when unknown.
        clock_s: the shooter's command clock when it fired (s, server-validated: the sum of its
            accepted command durations, held to real time by the timer check), which the
            weapon state judged the shot's timing on; None when unknown (recordings made before
            the field existed). Unlike ``time_s`` it is not squeezed when late commands arrive
            together.
    """

    shooter: int
    weapon: int
    yaw_deg: float
    pitch_deg: float
    view_time_s: float | None = None
    claimed_victim: int | None = None
    claimed_hit_point: Vec3 | None = None
    claimed_bone: int = 0
    recoil_pitch_deg: float = 0.0
    recoil_yaw_deg: float = 0.0
    seq: int = 0
    claimed_origin: Vec3 | None = None
    view: tuple[float, float] | None = None
    prev_view: tuple[float, float] | None = None
    clock_s: float | None = None


@dataclass(frozen=True, slots=True)
class ShotResult:
    """One registered ray (a shotgun shot gives one result per pellet).

    Attributes:
        shooter, tick, time_s (server time of registration, s), weapon, pellet (0-based index).
        origin: authoritative eye position of the shooter (m). direction: unit vector actually fired
            (view angles + server recoil + spread).
        rewind_time_s: the server time the targets were rewound to; rewind_decision: why;
            rewind_clamped: the target was older than the history and the oldest record was used.
        victim: slot hit, or None; victim_generation: the victim's generation at the rewound time.
        bone: hit location id (0 when no player was hit).
        hit_point: where the ray stopped (player hit point, wall impact, or end of range), m.
        distance_m: from origin to hit_point.
        blocked_by_wall: a wall stopped the ray before any player (also set when a player was along the
            ray behind that wall).
        victim_pos: the victim's rewound feet position (m) or None; victim_speed_m_s: its speed then.
        damage: hit points dealt (0 on a miss).
        claim: the client's claims for this shot.
        bait_hit: the ray touched a bait target (AimDetect) before any wall; baits never take damage
            and never stop a ray, so this is independent of ``victim``.
        first_contact: pellet 0 only. The server casts the shot's crosshair (view angles plus punch,
            without spread) and the previous command's crosshair (one command duration earlier);
            True when the crosshair is on a player now but was not on that player one command
            before, False when it already was, None when it is on nobody or was not probed (other
            pellets, no previous command of the same life). A shot fired exactly when the
            crosshair first touches a player, again and again, is a triggerbot's mark.
        claimed_victim_pos: pellet 0 of a shot whose claims name a victim and a hit point: that
            victim's feet (m) rewound to ``rewind_time_s``, whether or not the server's ray hit
            it, so the claimed hit point can be checked against where the claimed victim was;
            None otherwise.
        exposed: pellet 0 of a shot that hit a player: which of the victim's head, upper torso and
            lower torso (rewound with it) were in view from the shot's origin, as bits
            ``1 << bone id`` (a bone is in view when the segment from the eye to the centre of its
            capsule touches no wall); None otherwise, and in recordings made before the field
            existed. A target behind low cover shows its upper torso and head, not its lower torso.
    """

    shooter: int
    tick: int
    time_s: float
    weapon: int
    pellet: int
    origin: Vec3
    direction: Vec3
    rewind_time_s: float
    rewind_decision: RewindDecision
    rewind_clamped: bool
    victim: int | None
    victim_generation: int
    bone: int
    hit_point: Vec3
    distance_m: float
    blocked_by_wall: bool
    victim_pos: Vec3 | None
    victim_speed_m_s: float
    damage: float
    claim: ShotClaim
    bait_hit: bool = False
    first_contact: bool | None = None
    claimed_victim_pos: Vec3 | None = None
    exposed: int | None = None
