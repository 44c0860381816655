"""Cheats on the netcode: backtrack and fake lag.

* ``backtrack`` (:class:`Backtrack`): lag compensation rewinds targets to the view time a shot
  claims, so the cheat claims an older one: ``back_s`` (150-400 ms by default) before its real
  view time, within the snapshot buffer (and the server's ``max_unlag``). The human aims at where
  the target was that long ago (the world model's past frames, ``client.world``), and for each
  shot the cheat searches the buffered past for the moment whose record the crosshair ray
  intersects (``ClientView.claim_shot`` at older view times), claiming that time; when none
  does, it claims the engagement's own back time anyway. While the human engages a target the
  cheat also fires whenever the crosshair lies on one of those past records (the "trail").
* ``fake_lag`` (:class:`FakeLag`): holds every outgoing datagram for ``hold_s`` (100-300 ms by
  default), then releases them in one burst, over and over; it otherwise plays honestly. Its
  shots arrive late with old view times, and its position jumps for everyone else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.params import check_positive, check_range
from bots.cheats.targeting import (
    bone_column,
    bone_point,
    command_eye,
    direction_angles,
    punch_at_fire,
    wrap,
)
from bots.perception import Intent, Perception, SeenEntity
from bots.world_model import ShotClaim
from physics.buttons import Buttons
from server.protocol import Shot

__all__ = ["Backtrack", "BacktrackParams", "FakeLag", "FakeLagParams"]

_CHEST = bone_column("upper_torso")
_FIRE = int(Buttons.FIRE)


@dataclass(frozen=True, slots=True)
class BacktrackParams:
    """Backtrack.

    Attributes:
        back_s: (min, max) how much older (s) than the real view time the claimed view time is;
            drawn per engagement for the aim, searched per shot for the claim.
        search_step_s: resolution (s) of the per-shot search through the past.
        aim_at_past: the human aims at the target's past position (else at the present one).
        trail_fire: while engaging, also pull the trigger when the crosshair ray lies on one of
            ``trail_samples`` past records of the window (shooting the "backtrack trail").
        trail_samples: past view times tried per tick for ``trail_fire``, spread over ``back_s``.
    """

    back_s: tuple[float, float] = (0.15, 0.40)
    search_step_s: float = 1.0 / 64.0
    aim_at_past: bool = True
    trail_fire: bool = True
    trail_samples: int = 4

    def __post_init__(self) -> None:
        check_range("BacktrackParams", "back_s", *self.back_s, allow_zero=False)
        if self.back_s[1] > 1.0:
            raise ValueError(f"BacktrackParams.back_s must stay within 1 s (sv_maxunlag), got {self.back_s!r}")
        check_positive("BacktrackParams", "search_step_s", self.search_step_s)
        if self.trail_samples < 1:
            raise ValueError(f"BacktrackParams.trail_samples must be >= 1, got {self.trail_samples!r}")


class Backtrack(CheatHooks):
    """``backtrack``: claims view times ``back_s`` older than the real one, aimed accordingly."""

    name = "backtrack"

    def __init__(self, params: BacktrackParams = BacktrackParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._engaged: int | None = None
        self._back = params.back_s[0]
        self.last_back_s: float | None = None
        """How far back (s) the last shot's claimed view time was."""

    def _past(self, slot: int, view_time_s: float) -> SeenEntity | None:
        client = self.client
        if client is None:
            return None
        past = client.world.interpolate(view_time_s)
        for e in past.seen():
            if e.slot == slot:
                return e
        return None

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive or honest.aim_target is None:
            self._engaged = None
            return honest
        if honest.aim_target != self._engaged:
            self._engaged = honest.aim_target
            self._back = float(rng.uniform(*self.params.back_s))
        out = honest
        now = next((e for e in p.entities if e.slot == honest.aim_target), None)
        then = self._past(honest.aim_target, p.view_time_s - self._back)
        if self.params.aim_at_past and now is not None and then is not None and then.alive:
            # Shift the human's aim by the angle between where the target is and where it was.
            eye = command_eye(p, honest.buttons, self.dt_s)
            y1, p1, _ = direction_angles(eye, bone_point(now, _CHEST))
            y0, p0, _ = direction_angles(eye, bone_point(then, _CHEST))
            out = replace(honest, yaw_deg=wrap(honest.yaw_deg + wrap(y0 - y1)),
                          pitch_deg=min(max(honest.pitch_deg + (p0 - p1), -89.0), 89.0))
        if self.params.trail_fire and not out.buttons & _FIRE and self.fire_ready(p) and self._on_trail(p, out):
            out = replace(out, buttons=out.buttons | _FIRE)
        return out

    def _on_trail(self, p: Perception, aim: Intent) -> bool:
        """Does the crosshair ray of ``aim`` meet a record of the back window?"""
        client = self.client
        if client is None or not p.weapon:
            return False
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        lo, hi = self.params.back_s
        n = self.params.trail_samples
        for k in range(n):
            back = lo + (hi - lo) * (k / (n - 1) if n > 1 else 0.5)
            if p.view_time_s - back < 0.0:
                break
            if client.claim_shot(aim.yaw_deg, aim.pitch_deg, p.weapon, p.view_time_s - back, punch).victim is not None:
                return True
        return False

    def _search(self, shot: Shot, backs: list[float], punch: tuple[float, float]) -> tuple[float, ShotClaim]:
        """The first back time (s) of ``backs`` whose past record the shot's ray hits, with the
        claim; else the engagement's own back time and its (missing) claim."""
        client = self.client
        assert client is not None
        for b in backs:
            vt = shot.view_time_s - b
            if vt < 0.0:
                continue
            claim = client.claim_shot(shot.yaw_deg, shot.pitch_deg, shot.weapon, vt, punch)
            if claim.victim is not None:
                return b, claim
        b = self._back
        return b, client.claim_shot(shot.yaw_deg, shot.pitch_deg, shot.weapon, max(shot.view_time_s - b, 0.0), punch)

    def edit_shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        client = self.client
        if not shots or client is None:
            return shots
        lo, hi = self.params.back_s
        step = self.params.search_step_s
        backs = [self._back] + [b for b in np.arange(lo, hi + 1e-9, step).tolist() if abs(b - self._back) > 1e-9]
        punch = punch_at_fire(p.punch_pitch_deg, p.punch_yaw_deg, p.weapon, self.dt_s)
        out = []
        for shot in shots:
            back, claim = self._search(shot, backs, punch)
            self.last_back_s = back
            out.append(shot._replace(view_time_s=max(shot.view_time_s - back, 0.0), claimed_victim=claim.victim,
                                     claimed_hit_point=claim.point, claimed_bone=claim.bone))
        return out


@dataclass(frozen=True, slots=True)
class FakeLagParams:
    """Fake lag.

    Attributes:
        hold_s: (min, max) how long (s) each hold lasts, drawn uniformly per hold.
        send_ticks: client ticks of normal sending between two holds (the burst goes out on the
            first of them).
    """

    hold_s: tuple[float, float] = (0.10, 0.30)
    send_ticks: int = 1

    def __post_init__(self) -> None:
        check_range("FakeLagParams", "hold_s", *self.hold_s, allow_zero=False)
        if self.send_ticks < 1:
            raise ValueError(f"FakeLagParams.send_ticks must be >= 1, got {self.send_ticks!r}")


class FakeLag(CheatHooks):
    """``fake_lag``: hold outgoing datagrams, release them in bursts."""

    name = "fake_lag"

    def __init__(self, params: FakeLagParams = FakeLagParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._hold_until: float | None = None
        self._sent = 0
        self.holds = 0
        """Holds started."""

    def hold_packet(self, now_s: float, rng: np.random.Generator) -> bool:
        if self._hold_until is None:
            self._hold_until = now_s + float(rng.uniform(*self.params.hold_s))
            self._sent = 0
            self.holds += 1
        if now_s < self._hold_until - 1e-9:
            return True
        self._sent += 1
        if self._sent >= self.params.send_ticks:
            self._hold_until = None
        return False
