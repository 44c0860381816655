"""The built-in bot profiles: ``honest`` and every cheat profile, and what a profile is.

``PROFILES`` maps a profile name to its :class:`ProfileSpec`: its parameters (a frozen dataclass
with documented units and defaults), the factory of its cheat hooks (``bots.cheats``) and of the
brain it rides on (the honest brain of ``bots.honest``, or the ESP variant for ``wallhack``).
The mapping is read-only; nothing here keeps mutable global state.

``PROFILES`` holds the built-in profiles only. Profiles of other packages (entry point group
``referee.profiles``, or a ``"module:callable"`` reference returning a :class:`ProfileSpec`) are
found through :mod:`bots.registry`; a bot is built from a profile name by :mod:`bots.build`
(``make_bot("mypkg.cheats:my_profile", ...)`` plays a custom profile). A profile whose parameter
dataclass has an ``aim_model`` field (``honest`` has one) rides on an honest brain whose aim
controller plans with that registered aim model (``bots.aim.AimModel``, registered in
:mod:`bots.aim_models`); a profile can also fix its aim model in its ``brain`` with
:class:`AimModelBrain`.

=================  ====================================================================
profile            what it does (details: the module of ``bots.cheats`` named)
=================  ====================================================================
honest             the honest brain, no hooks
lock_aimbot        view locked exactly on the nearest visible enemy's head (aimbot)
rage_aimbot        lock with 180 deg flicks to a new target after every shot (aimbot)
smooth_aimbot      view pulled a fraction ``strength`` of the way per tick (aimbot)
silent_aim         human view angles, shot angles and claims forged (silent)
proaim             claims hits with the hit point far from the victim (silent)
triggerbot         FIRE exactly when the crosshair ray meets an enemy (trigger)
no_recoil          punch pulled down exactly, zero recoil reported (recoil)
speedhack          more commands than ticks (movement)
teleport           occasional claims of a far free spot (movement)
noclip             claims walking through walls (movement)
cbug               scripted crouch-cancel after every shot (fire)
rapid_fire         shots faster than the weapon allows (fire)
wallhack           sees and tracks every entity sent, bait included (esp)
backtrack          view times 150-400 ms older than the real one (netcode)
fake_lag           datagrams held 100-300 ms and released in bursts (netcode)
=================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, is_dataclass
from types import MappingProxyType
from typing import Any

from bots.aim import AimController, AimModel
from bots.aim_models import default_aim_models
from bots.cheats import (
    Backtrack,
    BacktrackParams,
    BuildContext,
    CBug,
    CBugParams,
    FakeLag,
    FakeLagParams,
    LockAimbot,
    LockParams,
    Noclip,
    NoclipParams,
    NoRecoil,
    NoRecoilParams,
    ProAim,
    ProAimParams,
    RageAimbot,
    RageParams,
    RapidFire,
    RapidFireParams,
    SilentAim,
    SilentAimParams,
    SmoothAimbot,
    SmoothParams,
    Speedhack,
    SpeedhackParams,
    Teleport,
    TeleportParams,
    Triggerbot,
    TriggerbotParams,
    Wallhack,
    WallhackParams,
    esp_brain,
)
from bots.honest import HonestBrain
from bots.hooks import ClientHooks
from bots.nav import NavGraph
from bots.skill import Skill
from world.geometry import MapGeometry

__all__ = [
    "HONEST",
    "PROFILES",
    "AimModelBrain",
    "BrainFactory",
    "HonestParams",
    "HookFactory",
    "ProfileSpec",
    "honest_brain",
    "profile_names",
]

HONEST = "honest"

HookFactory = Callable[[Any, BuildContext], ClientHooks]
"""(profile parameters, build context) -> the client hooks."""
BrainFactory = Callable[[Skill, NavGraph | None, MapGeometry, Any], HonestBrain]
"""(sampled skill, navigation graph, map geometry, profile parameters) -> the brain."""


@dataclass(frozen=True, slots=True)
class HonestParams:
    """Parameters of the honest profile.

    Attributes:
        aim_model: the aim model (``bots.aim.AimModel``) the hand plans its movements with: a
            registered name (``bots.aim_models.default_aim_models``) or a ``"module:callable"``
            reference; ``""`` is the built-in minimum-jerk / Fitts' law model.
    """

    aim_model: str = ""

    def __post_init__(self) -> None:
        if self.aim_model:
            default_aim_models().resolve(self.aim_model)


def honest_brain(skill: Skill, nav: NavGraph | None, geometry: MapGeometry, params: Any) -> HonestBrain:
    """The honest brain, as an honest bot has it; with the aim model named by the parameters'
    ``aim_model`` field when they have one and it is not empty."""
    name = getattr(params, "aim_model", "")
    if not name:
        return HonestBrain(skill, nav=nav, geometry=geometry)
    model = default_aim_models().create(name)
    return HonestBrain(skill, nav=nav, geometry=geometry, aim=AimController(skill, model=model))


@dataclass(frozen=True, slots=True)
class AimModelBrain:
    """A brain factory (``ProfileSpec.brain``): the honest brain whose aim controller plans with a
    model made by ``aim_model`` (called with no arguments once per bot, so a model may keep state).

    A frozen dataclass rather than a closure so that two specs built alike compare equal.
    """

    aim_model: Callable[[], AimModel]

    def __call__(self, skill: Skill, nav: NavGraph | None, geometry: MapGeometry, params: Any) -> HonestBrain:
        model = self.aim_model()
        if not isinstance(model, AimModel):
            raise ValueError(f"{self.aim_model!r} made {type(model).__name__}, which has no plan(request, skill, rng)")
        return HonestBrain(skill, nav=nav, geometry=geometry, aim=AimController(skill, model=model))


def _wallhack_brain(skill: Skill, nav: NavGraph | None, geometry: MapGeometry, params: Any) -> HonestBrain:
    return esp_brain(skill, nav, geometry, include_hidden=params.include_hidden)


def _honest_hooks(params: Any, ctx: BuildContext) -> ClientHooks:
    return ClientHooks()


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    """One bot profile.

    Attributes:
        name: the profile name (the ground-truth label in scenarios and replays).
        description: one line on what the cheat does.
        params: frozen dataclass of its parameters (defaults = the profile as played).
        hooks: builds its client hooks from (parameters, build context).
        brain: builds the brain it rides on (default: the honest brain).
        observed_by: the detectors (``anticheat``) whose evidence this profile produces by what it
            does; documentation for reports, never used to tune the cheat.
        blatant: every use leaves server-checkable evidence (an impossible move, interval, angle,
            report or claim), so detectors are expected to flag it within a minute of play. The
            subtle profiles (humanised aimbot, ESP, triggerbot) look like a skilled human shot by
            shot and are caught, if at all, only statistically over longer play.
        cheat: ground truth: a cheater. False for ``honest`` and for honest variants (another
            human model, e.g. another aim model), which must then not be ``blatant`` either.

    Raises:
        ValueError: an empty name or one with a ``:`` (that spells a ``module:callable``
            reference), ``params`` not a dataclass, ``hooks`` or ``brain`` not callable, or an
            honest profile marked blatant.
    """

    name: str
    description: str
    params: type
    hooks: HookFactory
    brain: BrainFactory = honest_brain
    observed_by: tuple[str, ...] = ()
    blatant: bool = True
    cheat: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or ":" in self.name:
            raise ValueError(f"a profile name must be a non-empty string without ':', got {self.name!r}")
        if not (isinstance(self.params, type) and is_dataclass(self.params)):
            raise ValueError(f"profile {self.name!r}: params must be a dataclass type, got {self.params!r}")
        if not callable(self.hooks) or not callable(self.brain):
            raise ValueError(f"profile {self.name!r}: hooks and brain must be callables")
        if not self.cheat and self.blatant:
            raise ValueError(f"profile {self.name!r}: an honest profile (cheat=False) cannot be blatant")


def _spec(name: str, description: str, params: type, hooks: HookFactory, *, brain: BrainFactory = honest_brain,
          observed_by: tuple[str, ...] = (), blatant: bool = True, cheat: bool = True) -> tuple[str, ProfileSpec]:
    return name, ProfileSpec(name, description, params, hooks, brain, observed_by, blatant, cheat)


PROFILES: Mapping[str, ProfileSpec] = MappingProxyType(dict([
    _spec(HONEST, "the honest human-like brain, no hooks", HonestParams, _honest_hooks, blatant=False, cheat=False),
    _spec("lock_aimbot", "view locked exactly on the nearest visible enemy's head, fires when on it",
          LockParams, lambda p, c: LockAimbot(p, c),
          observed_by=("iw4m bone/snap/strain", "aimstats", "aimdetect + bait", "bustaim continuous")),
    _spec("rage_aimbot", "instant 180-degree flicks to a new target after every shot, continuous fire",
          RageParams, lambda p, c: RageAimbot(p, c),
          observed_by=("iw4m strain/snap/bone", "aimstats snap rate", "aimdetect + bait")),
    _spec("smooth_aimbot", "humanised aimbot: a fraction `strength` of the remaining angle per tick",
          SmoothParams, lambda p, c: SmoothAimbot(p, c),
          observed_by=("aimstats tracking/jitter", "iw4m bone", "aimdetect + bait"), blatant=False),
    _spec("silent_aim", "human view angles; the shot's angles and claims jump onto the target",
          SilentAimParams, lambda p, c: SilentAim(p, c),
          observed_by=("fire silent_aim_angles", "iw4m offset", "iw4m bone", "aimdetect + bait")),
    _spec("proaim", "claims hits with the hit point 20-200 m from the victim; rough aim",
          ProAimParams, lambda p, c: ProAim(p, c),
          observed_by=("bustaim proaim_teleport", "aimstats")),
    _spec("triggerbot", "fires exactly when the crosshair ray meets an enemy hitbox",
          TriggerbotParams, lambda p, c: Triggerbot(p, c),
          observed_by=("trigger on_target", "aimdetect (time to fire, bait)", "aimstats"), blatant=False),
    _spec("no_recoil", "recoil punch pulled down exactly; zero recoil reported",
          NoRecoilParams, lambda p, c: NoRecoil(p, c),
          observed_by=("recoil recoil_report", "iw4m recoil")),
    _spec("speedhack", "more commands than ticks (game clock 1.5x real time)",
          SpeedhackParams, lambda p, c: Speedhack(p, c),
          observed_by=("movement timer",)),
    _spec("teleport", "occasionally claims a free spot more than 40 m away",
          TeleportParams, lambda p, c: Teleport(p, c),
          observed_by=("movement teleport",)),
    _spec("noclip", "claims positions walking straight through walls",
          NoclipParams, lambda p, c: Noclip(p, c),
          observed_by=("movement wall_clip",)),
    _spec("cbug", "scripted crouch-cancel after every shot, firing at the shortened interval",
          CBugParams, lambda p, c: CBug(p, c),
          observed_by=("cbug", "fire auto_c")),
    _spec("rapid_fire", "shots faster than the weapon allows, plus extra shots per command",
          RapidFireParams, lambda p, c: RapidFire(p, c),
          observed_by=("fire rapid_fire",)),
    _spec("wallhack", "sees and tracks every entity the server sends, bait targets included",
          WallhackParams, lambda p, c: Wallhack(p, c), brain=_wallhack_brain,
          observed_by=("aimdetect bait", "aimstats (tracking hidden players)"), blatant=False),
    _spec("backtrack", "claims view times 150-400 ms older than its real one",
          BacktrackParams, lambda p, c: Backtrack(p, c),
          observed_by=("fire backtrack",)),
    _spec("fake_lag", "holds datagrams 100-300 ms, releases them in bursts",
          FakeLagParams, lambda p, c: FakeLag(p, c),
          observed_by=("fire backtrack (late shots)", "connection jitter")),
]))
"""Every built-in profile by name, ``honest`` first (read-only). Custom profiles too:
``bots.registry.default_registry()``."""


def profile_names() -> tuple[str, ...]:
    """Names of every built-in profile, ``honest`` included (first); with the installed packages'
    profiles: ``bots.registry.default_registry().names()``."""
    return tuple(PROFILES)
