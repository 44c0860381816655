"""Typed events the detectors consume, and the Detection they emit.

The server produces these inline; a replay file holds the same events framed, so the same
detector code runs live and offline (DESIGN principle 3). Shots and movement evidence are defined
by the layers that produce them and re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lagcomp.shot import RewindDecision, ShotClaim, ShotResult
from physics.buttons import Buttons
from physics.evidence import FireEvidence, FireKind, MovementEvidence, MovementKind

__all__ = [
    "AimSample",
    "Buttons",
    "ConnectionSample",
    "Detection",
    "Event",
    "FireEvidence",
    "FireKind",
    "KillEvent",
    "MovementEvidence",
    "MovementKind",
    "RewindDecision",
    "ShotClaim",
    "SessionEvent",
    "ShotResult",
    "SpawnEvent",
]


@dataclass(frozen=True, slots=True)
class AimSample:
    """One applied input command of one player, with the server's view of what it aimed at.

    Attributes:
        player, tick, time_s (server time the command was applied, s), seq (command sequence).
        yaw_deg, pitch_deg: view angles of the command (deg).
        recoil_pitch_deg, recoil_yaw_deg: the recoil component the client reported (deg); honest
            clients report the kick they are under, no-recoil cheats report zero.
        server_punch_pitch_deg, server_punch_yaw_deg: the kick the server simulated (deg).
        buttons: Buttons bitmask; weapon: held weapon id; weapon_switch: weapon id requested (0 none).
        stance: 0 standing / 1 crouching; on_ground; speed_m_s: horizontal speed after the move.
        target: nearest visible enemy by angle (slot) or None; target_angle_deg: angle between the
            view and that enemy's chest (deg); target_distance_m.
        hidden_target: the nearest enemy by angle among those the server sent this player but
            that are not in its line of sight (sent because they are about to appear; slot), or
            None; hidden_angle_deg: angle between the view and that enemy's chest (deg, 180
            without one: a number, not NaN, so samples compare equal after a replay round trip).
            Both default to "none" so events recorded before they existed still decode.
        phantom: the number of the player's phantom (``server.phantoms``: an entity record the
            server sends like an enemy player's, always out of the player's line of sight; each
            placement a new number), or None; phantom_angle_deg: angle between the view and its
            chest where the player's client drew it (at the command's rewind time; deg, 180
            without one). Defaults as for the hidden target.
        view_time_s: the server time the client was rendering when it sampled the command (s,
            the command's ``view_time_s``), None in recordings made before it was kept. Its
            advance between two commands is how long the client's frame took: a hitch shows.
        crosshair_target: the player the command's spread-free crosshair (view angles plus the
            server's punch before the command fired) met with the world rewound to the
            command's rewind time, as a shot of it would have (``server.crosshair_probe``; slot),
            or None: nobody, a wall first, or not probed (no visible enemy near the view).
        fire_ready: the held weapon would have accepted a shot at the command's clock (deployed,
            not reloading, a round loaded, the fire interval elapsed), before the command's own
            fire. Both None in recordings made before they were kept.
    """

    player: int
    tick: int
    time_s: float
    seq: int
    yaw_deg: float
    pitch_deg: float
    recoil_pitch_deg: float
    recoil_yaw_deg: float
    server_punch_pitch_deg: float
    server_punch_yaw_deg: float
    buttons: int
    weapon: int
    weapon_switch: int
    stance: int
    on_ground: bool
    speed_m_s: float
    target: int | None
    target_angle_deg: float
    target_distance_m: float
    hidden_target: int | None = None
    hidden_angle_deg: float = 180.0
    phantom: int | None = None
    phantom_angle_deg: float = 180.0
    view_time_s: float | None = None
    crosshair_target: int | None = None
    fire_ready: bool | None = None


@dataclass(frozen=True, slots=True)
class KillEvent:
    """A player's health reached zero from a shot.

    Attributes: killer, victim, tick, time_s (s), weapon, bone (the killing hit), distance_m,
        killer_stance, headshot.
    """

    killer: int
    victim: int
    tick: int
    time_s: float
    weapon: int
    bone: int
    distance_m: float
    killer_stance: int
    headshot: bool


@dataclass(frozen=True, slots=True)
class SpawnEvent:
    """A player (re)spawned: per-life state of detectors can reset.

    ``yaw_deg``/``pitch_deg``: the view the server set at the spawn (deg), which the client
    adopts about a round trip later; None in recordings made before it was recorded."""

    player: int
    tick: int
    time_s: float
    yaw_deg: float | None = None
    pitch_deg: float | None = None


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """A player took a slot (``connect``) or left it (``disconnect``).

    Slots are reused, so detector state is keyed by slot between a connect and the next
    disconnect; ``name`` is the stable player key the sanction policy and store use.
    """

    player: int
    tick: int
    time_s: float
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class ConnectionSample:
    """Connection quality of one player as measured by the server.

    Attributes: player, time_s, rtt_ms (smoothed round trip), jitter_ms, loss (0..1 fraction of
        packets lost), since_update_s (time since the last packet: paused / AFK), exempt (a bot or a
        player exempted by configuration), silences_ms (each gap between two of the player's
        packets' arrivals that exceeded the gap between their send times by at least the server's
        ``silence_min_s``, ended since the previous sample, ms: time the packets were held on the
        way; empty in recordings made before it existed), tick (the server tick of the
        sample; -1 in recordings made before it existed).
    """

    player: int
    time_s: float
    rtt_ms: float
    jitter_ms: float
    loss: float
    since_update_s: float
    exempt: bool = False
    silences_ms: tuple[float, ...] = ()
    tick: int = -1


Event = (
    ShotResult | KillEvent | AimSample | MovementEvidence | FireEvidence | ConnectionSample | SpawnEvent | SessionEvent
)


@dataclass(frozen=True, slots=True)
class Detection:
    """A detector's finding about one player.

    Attributes:
        player, tick, time_s (s): who and when.
        detector: detector name (``bustaim``, ``cbug``, ``iw4m``, ``aimstats``, ``aimdetect``,
            ``fire``, ``movement``). kind: what it found (``random_aim``, ``Strain``, ``speed``...).
        value: the measured value that crossed the threshold (unit depends on kind).
        severity: 0..1, how strongly this alone suggests cheating (the sanction policy weighs it).
        reason: human-readable reason, e.g. IW4MAdmin's ``Strain-1.39@136``.
        evidence: the figures behind it (numbers and strings only, so it serialises).
    """

    player: int
    tick: int
    time_s: float
    detector: str
    kind: str
    value: float
    severity: float
    reason: str
    evidence: Mapping[str, float | int | str] = field(default_factory=dict)
