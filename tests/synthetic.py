"""Synthetic detector events shared by the tests."""

from __future__ import annotations

import dataclasses

from anticheat.events import AimSample, RewindDecision, ShotClaim, ShotResult


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


def make_aim(seq: int, *, player: int = 1, t: float | None = None, yaw: float = 0.0, pitch: float = 0.0,
             reported: tuple[float, float] = (0.0, 0.0), server: tuple[float, float] = (0.0, 0.0),
             weapon: int = 2, buttons: int = 0) -> AimSample:
    """One applied command at 64 Hz (``t`` defaults to seq / 64 s): view angles, the recoil the
    client reported and the punch the server simulated (pitch, yaw; deg)."""
    return AimSample(
        player=player, tick=seq, time_s=seq / 64.0 if t is None else t, seq=seq, yaw_deg=yaw, pitch_deg=pitch,
        recoil_pitch_deg=reported[0], recoil_yaw_deg=reported[1], server_punch_pitch_deg=server[0],
        server_punch_yaw_deg=server[1], buttons=buttons, weapon=weapon, weapon_switch=0, stance=0,
        on_ground=True, speed_m_s=0.0, target=None, target_angle_deg=180.0, target_distance_m=0.0,
    )


def _contact_cmd(seq: int, on: int | None, *, fire: bool = False) -> AimSample:
    return dataclasses.replace(make_aim(seq, buttons=int(fire)), crosshair_target=on, fire_ready=True)


def contact_samples(pattern: str, start: int = 1, distance_m: float = 10.0) -> list[AimSample]:
    """Per character a crosshair contact: off the player, then onto it; 'T' fires on the contact,
    '.' does not fire at all."""
    out: list[AimSample] = []
    seq = start
    for c in pattern:
        out.append(dataclasses.replace(_contact_cmd(seq, None), target_distance_m=distance_m))
        out.append(dataclasses.replace(_contact_cmd(seq + 1, 5, fire=c == "T"), target_distance_m=distance_m))
        out.append(dataclasses.replace(_contact_cmd(seq + 2, 5), target_distance_m=distance_m))
        seq += 3
    return out


def delayed_contact_samples(delays: list[int | None], start: int = 1, distance_m: float = 10.0) -> list[AimSample]:
    """Per delay a crosshair contact: off the player, then onto it for ``delay`` commands more with
    FIRE on the last (delay 0: on the entry command); None: on it for three commands, no FIRE."""
    out: list[AimSample] = []
    seq = start
    for delay in delays:
        out.append(dataclasses.replace(_contact_cmd(seq, None), target_distance_m=distance_m))
        seq += 1
        on = 3 if delay is None else delay + 1
        for k in range(on):
            fire = delay is not None and k == delay
            out.append(dataclasses.replace(_contact_cmd(seq, 5, fire=fire), target_distance_m=distance_m))
            seq += 1
    return out
