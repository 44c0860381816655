"""Tolerances and constants of the movement model, its validation and the weapon mechanics.

Every field is named configuration (DESIGN principle 4) with its unit and the anchor its default
comes from. Counter-Strike 2 constants (REFERENCES section 8) are in Source units and converted
here with 1 u = 0.0254 m; the converted value is the default, the original is in the docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

SOURCE_UNIT_M = 0.0254
"""One Source (Counter-Strike) unit in meters (1 inch)."""


def _check_positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"{type(obj).__name__}.{name} must be a positive finite number, got {value!r}")


def _check_finite(obj: object) -> None:
    for f in fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{type(obj).__name__}.{f.name} must be finite, got {value!r}")


@dataclass(frozen=True, slots=True)
class MovementConfig:
    """Quake/Source movement constants (CS2 defaults, REFERENCES section 8, converted to meters).

    Attributes:
        accelerate: ground acceleration factor (1/s); each tick adds up to
            ``accelerate * wish_speed * dt`` m/s along the wish direction. CS2 ``sv_accelerate`` 5.5.
        friction: ground friction (1/s); speed drops by ``max(speed, stop_speed) * friction * dt``.
            CS2 ``sv_friction`` 5.2.
        stop_speed_m_s: below this speed friction acts as if the player moved at it, so a player
            comes to a full stop in finite time (m/s). CS2 ``sv_stopspeed`` 80 u/s = 2.032 m/s.
        max_speed_m_s: hard cap on any weapon's ground speed (m/s). CS2 ``sv_maxspeed`` 320 u/s.
        gravity_m_s2: downward acceleration (m/s²). CS2 ``sv_gravity`` 800 u/s² = 20.32 m/s².
        jump_speed_m_s: vertical speed given by a jump (m/s). CS2 301.99 u/s = 7.6705 m/s, so the
            apex is v²/2g = 1.448 m (CS: 57 u).
        accel_scale_min_m_s: ground acceleration is scaled by ``max(this, wish speed)`` instead of
            the wish speed alone (CS:GO's ``kAccelerationScale = MAX(250, wishspeed)``; 250 u/s =
            6.35 m/s). Without it a crouching player, whose wish speed (1.86 m/s) is below
            ``stop_speed_m_s``, would lose more to friction each tick than acceleration adds and
            could barely move (the classic Quake behaviour CS fixed this way).
        air_accelerate: air acceleration factor (1/s). CS2 ``sv_airaccelerate`` 12.
        air_max_wish_speed_m_s: in the air the wish speed is capped at this (m/s) for the
            "how much can still be added" test, which is what makes air strafing possible.
            CS2 ``sv_air_max_wishspeed`` 30 u/s = 0.762 m/s.
        walk_factor: wish speed factor while WALK is held (CS2 0.52 of the weapon speed).
        crouch_factor: wish speed factor while crouched (CS2 0.34 of the weapon speed); when both
            WALK and CROUCH are held the smaller factor (crouch) applies, as in CS.
        sprint_factor: wish speed factor while SPRINT is held standing and not walking. CS has no
            sprint (shift walks), so the default 1.0 makes SPRINT a no-op for movement; the button
            still exists because the C-bug detector weighs "crouch with sprint". A factor > 1 is
            honoured everywhere, including the speed envelope used by validation.
        max_slide_iterations: sweeps per tick when sliding along walls (Quake's
            ``PM_SlideMove`` uses 4 bumps): after each contact the remaining motion is clipped
            against the contact normal and swept again.
        min_move_m: a remaining displacement shorter than this (m) is not swept again; well below
            the 1 mm skin the geometry leaves at contacts.
        air_speed_cap: when True (default) air acceleration may turn the horizontal velocity but
            never raise its magnitude above ``max(speed before, weapon ground speed)``. This removes
            Quake's bunny-hop/strafe-jump speed gain on purpose: the horizontal speed of a player
            then never exceeds the held weapon's ground speed, which gives validation a tight,
            provable speed envelope. False restores the unbounded Quake air move (the envelope
            then only holds on the ground).
    """

    accelerate: float = 5.5
    friction: float = 5.2
    stop_speed_m_s: float = 80 * SOURCE_UNIT_M
    max_speed_m_s: float = 320 * SOURCE_UNIT_M
    gravity_m_s2: float = 800 * SOURCE_UNIT_M
    jump_speed_m_s: float = 301.99 * SOURCE_UNIT_M
    accel_scale_min_m_s: float = 250 * SOURCE_UNIT_M
    air_accelerate: float = 12.0
    air_max_wish_speed_m_s: float = 30 * SOURCE_UNIT_M
    walk_factor: float = 0.52
    crouch_factor: float = 0.34
    sprint_factor: float = 1.0
    max_slide_iterations: int = 4
    min_move_m: float = 1e-6
    air_speed_cap: bool = True

    def __post_init__(self) -> None:
        _check_finite(self)
        _check_positive(
            self,
            "accelerate",
            "stop_speed_m_s",
            "max_speed_m_s",
            "gravity_m_s2",
            "jump_speed_m_s",
            "accel_scale_min_m_s",
            "air_accelerate",
            "air_max_wish_speed_m_s",
            "walk_factor",
            "crouch_factor",
            "sprint_factor",
            "min_move_m",
        )
        if self.friction < 0.0:
            raise ValueError(f"MovementConfig.friction must be >= 0, got {self.friction!r}")
        if self.max_slide_iterations < 1:
            raise ValueError("MovementConfig.max_slide_iterations must be at least 1")

    @property
    def jump_apex_m(self) -> float:
        """Analytic apex height of a jump from the floor, v²/2g (m)."""
        return self.jump_speed_m_s**2 / (2.0 * self.gravity_m_s2)


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    """Tolerances of movement validation (claim vs authoritative simulation) and the timer check.

    Attributes:
        accept_m: a claimed position within this distance (m) of the authoritative one is
            accepted without correction. Grim's offset threshold is 0.001 blocks (~1 mm, a block
            is ~1 m); we use 0.05 m because claims travel as float32 (7.6e-6 m resolution at
            100 m, but the client also integrates in float32 in typical engines, so a few mm of
            honest drift per second are normal) and because a 5 cm error cannot be exploited
            (smaller than a tenth of the player's radius). Every deviation above it is corrected.
        teleport_m: claimed displacement (3D, m) from the previous authoritative position that is
            a teleport whatever the command. Nex-AC: 40 m (SA-MP units ~ meters).
        speed_tolerance: fraction above the model's maximum horizontal speed for the command
            before a claim is ``speed`` evidence. The article's 10 % jitter tolerance (section 4).
        wall_probe_height_m: height (m) at which the claimed path's centre line is tested against
            walls for ``wall_clip``; low enough that every wall (low cover is 1.20 m) blocks it.
        advantage_setback_m: Grim's accumulated advantage, in meters of horizontal displacement
            beyond the model's envelope summed over commands; reaching it yields ``speed``
            evidence and a setback even when every single command stayed within
            ``speed_tolerance``. Grim: setback at 1 (block ~ 1 m).
        advantage_cap_m: the advantage never exceeds this (m). Grim: cap 4.
        advantage_decay: the advantage is multiplied by this once per validated command
            (Grim: x0.999 per tick), so rare tiny excesses (float rounding) never add up.
        setback_ack_timeout_s: after a setback (or a respawn/teleport) the client keeps sending
            claims from its old position until the correction reaches it; those claims are
            corrected silently (no evidence) until the client acknowledges the correction or this
            long has passed (s). One second covers Source's ``sv_maxunlag`` worth of latency; a
            client that never acknowledges is judged again after it. Grim's users' top complaint
            (false flags after lag spikes and respawns) is what this avoids.
        timer_drift_allowance_s: the command-time balance may run this far ahead of the server
            clock before commands are dropped and ``timer`` evidence is emitted (s).
            Grim: 120 ms.
        timer_jitter_allowance: the allowance grows by this many times the player's measured
            interarrival jitter (RFC 3550's, s), up to ``timer_jitter_allowance_cap_s`` more. Delay
            jitter bunches honest commands: the balance runs ahead by the spread of the link's
            delays, which the fixed 120 ms (plus the 120 ms floor) covers on a steady link but
            not on a jittery one (wifi with 35 ms jitter ran 125 ms ahead three times in 10 s: a
            timer detection). A speed hack's excess grows without bound, so the extra slack delays
            its detection once, by slack / (clock rate - 1).
        timer_jitter_allowance_cap_s: the most the jitter adds to the allowance (s).
        timer_lag_floor_s: the balance is clamped from below at minus this (s): a player who was
            silent (lag spike) cannot bank the silent time and replay it later as a burst of
            extra commands. After a long silence a burst of at most
            ``timer_lag_floor_s + timer_drift_allowance_s`` seconds of commands is accepted.
            Grim clamps at its drift allowance too: 120 ms.
        timer_forgive_lag_burst: when True, the silence clamped away is owed to the player: the
            commands of a burst right after it are accepted up to that amount beyond the
            allowance, and they bring the balance back toward zero. An honest client catching up
            after a lag spike (or a starved process) only sends commands for time that passed;
            before, they were dropped silently, but the balance was left at the allowance's edge
            and an honest LAN player's next jitter made timer evidence (3 of 12 in a UDP match).
            Sustained over-rate (a speed hack) is flagged as soon as the debt is repaid.
        timer_forgive_window_s: the debt expires this long after the last clamp or repayment (s).
        timer_forgive_cap_s: at most this much clamped silence (s) is owed. Quake 3 accepts
            command times at most 1000 ms in the past.
        min_command_dt_s, max_command_dt_s: a command's duration (s) must lie in this range or the
            command is malformed. Quake 3 clamps a command to 200 ms (``msec > 200``); below 1 ms
            is no real frame.
    """

    accept_m: float = 0.05
    teleport_m: float = 40.0
    speed_tolerance: float = 0.10
    wall_probe_height_m: float = 0.05
    advantage_setback_m: float = 1.0
    advantage_cap_m: float = 4.0
    advantage_decay: float = 0.999
    setback_ack_timeout_s: float = 1.0
    timer_drift_allowance_s: float = 0.120
    timer_jitter_allowance: float = 4.0
    timer_jitter_allowance_cap_s: float = 0.2
    timer_lag_floor_s: float = 0.120
    timer_forgive_lag_burst: bool = True
    timer_forgive_window_s: float = 1.0
    timer_forgive_cap_s: float = 1.0
    min_command_dt_s: float = 0.001
    max_command_dt_s: float = 0.200

    def __post_init__(self) -> None:
        _check_finite(self)
        _check_positive(
            self,
            "accept_m",
            "teleport_m",
            "wall_probe_height_m",
            "advantage_setback_m",
            "advantage_cap_m",
            "setback_ack_timeout_s",
            "timer_drift_allowance_s",
            "min_command_dt_s",
            "max_command_dt_s",
        )
        if self.speed_tolerance < 0.0:
            raise ValueError("ValidationConfig.speed_tolerance must be >= 0")
        if not 0.0 < self.advantage_decay <= 1.0:
            raise ValueError("ValidationConfig.advantage_decay must be in (0, 1]")
        if self.advantage_cap_m < self.advantage_setback_m:
            raise ValueError("ValidationConfig.advantage_cap_m must be >= advantage_setback_m")
        if (self.timer_lag_floor_s < 0.0 or self.timer_forgive_window_s < 0.0 or self.timer_forgive_cap_s < 0.0
                or self.timer_jitter_allowance < 0.0 or self.timer_jitter_allowance_cap_s < 0.0):
            raise ValueError("ValidationConfig timer floor/forgiveness values must be >= 0")
        if self.min_command_dt_s > self.max_command_dt_s:
            raise ValueError("ValidationConfig.min_command_dt_s must be <= max_command_dt_s")


@dataclass(frozen=True, slots=True)
class WeaponConfig:
    """Weapon mechanics that are not per-weapon (the per-weapon table is ``world.weapons``).

    Attributes:
        deploy_s: time after a weapon switch before the new weapon may fire (s). CS deploy times
            run from ~0.25 s (pistols) to ~1 s (rifles, their draw animation); 0.4 s is a round
            middle value that makes switching cost something without dominating a duel.
        interval_epsilon_s: float slack (s) when comparing a shot interval with the allowed one,
            so that a shot at exactly the interval (computed as a difference of float times) is
            accepted. One microsecond is far below any tick.
        spray_gap_s: a shot continues the recoil pattern (consecutive shot index + 1) when it
            comes at most ``fire_interval_s + spray_gap_s`` after the previous shot of the same
            weapon; a longer pause (the trigger was released) restarts the pattern at its first
            entry, as do a weapon switch and a reload. Not tied to the punch recovering to zero:
            the built-in automatic weapons recover their first kicks within one interval, which
            would otherwise restart the spray on every shot. 0.1 s is about a human re-press.
    """

    deploy_s: float = 0.4
    interval_epsilon_s: float = 1e-6
    spray_gap_s: float = 0.1

    def __post_init__(self) -> None:
        _check_finite(self)
        if self.deploy_s < 0.0 or self.interval_epsilon_s < 0.0 or self.spray_gap_s < 0.0:
            raise ValueError("WeaponConfig.deploy_s, interval_epsilon_s and spray_gap_s must be >= 0")
