"""The plugin's profiles as ``bots.profiles.ProfileSpec`` (what the entry points name).

Each function returns an equal spec every time it is called (module-level hooks and brain
factories, no closures), so naming a profile both by entry point and by ``module:callable``
reference in one scenario is consistent.
"""

from __future__ import annotations

from typing import Any

from bots.aim import AimController
from bots.cheats import BuildContext
from bots.hooks import ClientHooks
from bots.honest import HonestBrain
from bots.nav import NavGraph
from bots.profiles import ProfileSpec
from bots.skill import Skill
from world.geometry import MapGeometry

from referee_example_plugin.overshoot import Overshoot, OvershootParams
from referee_example_plugin.snap import SnapAfterDelay, SnapAfterDelayParams

__all__ = ["honest_overshoot", "snap_after_delay"]


def _snap_hooks(params: SnapAfterDelayParams, ctx: BuildContext) -> ClientHooks:
    return SnapAfterDelay(params, ctx)


def _no_hooks(params: Any, ctx: BuildContext) -> ClientHooks:
    return ClientHooks()


def _overshoot_brain(skill: Skill, nav: NavGraph | None, geometry: MapGeometry, params: OvershootParams) -> HonestBrain:
    # The profile's parameters configure the aim model, so one model per bot is built here
    # (bots.profiles.AimModelBrain does the same for a model without parameters).
    return HonestBrain(skill, nav=nav, geometry=geometry, aim=AimController(skill, model=Overshoot(params)))


def snap_after_delay() -> ProfileSpec:
    """A cheat: snaps onto a head a human reaction time after it comes into view."""
    return ProfileSpec(
        name="snap_after_delay",
        description="waits a human reaction time after an enemy appears, then snaps onto its head in one tick",
        params=SnapAfterDelayParams,
        hooks=_snap_hooks,
        observed_by=("iw4m snap/bone", "aimstats snap rate", "aimdetect"),
        blatant=False,
    )


def honest_overshoot() -> ProfileSpec:
    """An honest player (not a cheat) whose flicks overshoot the target and come back."""
    return ProfileSpec(
        name="honest_overshoot",
        description="the honest brain with an aim model whose flicks overshoot, then correct",
        params=OvershootParams,
        hooks=_no_hooks,
        brain=_overshoot_brain,
        blatant=False,
        cheat=False,
    )
