"""No-recoil: the recoil punch is removed perfectly and the reports claim there never was any.

``no_recoil`` (:class:`NoRecoil`): the human (the honest brain) is shown a perception without
recoil punch, so it neither pulls down nor judges its aim by the kick; the cheat then pulls the
sent view down by exactly the punch the next shot will fly with (pitch minus the punch, yaw plus
its sideways part), so every shot goes where the human aims. Every command reports a recoil
component of exactly zero (IW4MAdmin's Recoil check looks for that), although the weapon kicks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.targeting import aim_angles, punch_at_fire, remap_keys
from bots.perception import Intent, Perception
from server.protocol import Command

__all__ = ["NoRecoil", "NoRecoilParams"]


@dataclass(frozen=True, slots=True)
class NoRecoilParams:
    """No-recoil.

    Attributes:
        compensate: pull the view down by exactly the punch (the "no recoil" itself).
        zero_report: report a zero recoil component in every command.
    """

    compensate: bool = True
    zero_report: bool = True


class NoRecoil(CheatHooks):
    """``no_recoil``: perfect recoil compensation and a zero recoil report."""

    name = "no_recoil"

    def __init__(self, params: NoRecoilParams = NoRecoilParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._punch = (0.0, 0.0)

    def perceive(self, p: Perception) -> Perception:
        self._punch = (p.punch_pitch_deg, p.punch_yaw_deg)
        if not self.params.compensate or self._punch == (0.0, 0.0):
            return p
        return replace(p, punch_pitch_deg=0.0, punch_yaw_deg=0.0)

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not self.params.compensate or not p.alive:
            return honest
        punch = punch_at_fire(self._punch[0], self._punch[1], p.weapon, self.dt_s)
        if punch == (0.0, 0.0):
            return honest
        yaw, pitch = aim_angles(honest.yaw_deg, honest.pitch_deg, punch)
        fwd, side = remap_keys(honest, yaw)
        return replace(honest, yaw_deg=yaw, pitch_deg=pitch, forward=fwd, side=side)

    def command(self, cmd: Command, p: Perception) -> Command:
        if not self.params.zero_report:
            return cmd
        return cmd._replace(recoil_pitch_deg=0.0, recoil_yaw_deg=0.0)
