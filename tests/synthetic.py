"""Synthetic detector events shared by the tests."""

from __future__ import annotations

from anticheat.events import RewindDecision, ShotClaim, ShotResult


def make_shot(shooter: int = 1, victim: int | None = 2, t: float = 1.0, tick: int = 64, weapon: int = 1) -> ShotResult:
    """A shot from 10 m at a player standing in the open: a head hit when ``victim`` is set."""
    return ShotResult(
        shooter=shooter,
        tick=tick,
        time_s=t,
        weapon=weapon,
        pellet=0,
        origin=(0.0, 0.0, 1.6),
        direction=(1.0, 0.0, 0.0),
        rewind_time_s=t - 0.1,
        rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False,
        victim=victim,
        victim_generation=0,
        bone=2 if victim is not None else 0,
        hit_point=(10.0, 0.0, 1.6),
        distance_m=10.0,
        blocked_by_wall=False,
        victim_pos=(10.0, 0.0, 0.0) if victim is not None else None,
        victim_speed_m_s=3.0,
        damage=30.0 if victim is not None else 0.0,
        claim=ShotClaim(shooter=shooter, weapon=weapon, yaw_deg=0.0, pitch_deg=0.0),
    )
