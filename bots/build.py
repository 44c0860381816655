"""Building a bot from a profile: the profile named, resolved, its parameters checked, its client made.

Every function here takes a profile by name (a built-in or installed one, resolved through
:func:`bots.registry.default_registry`) or by ``"module:callable"`` reference;
:func:`make_bot` also takes a :class:`bots.profiles.ProfileSpec` itself.

:func:`make_bot` builds the sans-IO client exactly as the testbed builds an honest bot
(``testbed.bot_factory``: skill sampled from one child generator, the client given the other)
and puts the profile's hooks in it, so a cheater differs from an honest player only by its hooks.

Scenario parameters (``[bots.params]``) override the profile's dataclass: an unknown key is a
ValueError naming it, as is a value of the wrong type or out of range; so is an unknown profile.
``make_bot("mypkg.cheats:my_profile", ...)`` plays a custom profile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from bots.cheats import BuildContext, CheatHooks
from bots.cheats.params import build_params
from bots.client import BotClient, ClientConfig
from bots.hooks import ClientHooks
from bots.nav import NavGraph
from bots.profiles import ProfileSpec
from bots.registry import ProfileRegistry, default_registry
from bots.skill import Skill, SkillLevel, sample_skill
from world.geometry import MapGeometry
from world.mapfile import GameMap

__all__ = ["default_params", "ground_truth", "make_bot", "make_hooks", "resolve_params"]

log = logging.getLogger(__name__)


def _spec_of(profile: str | ProfileSpec, registry: ProfileRegistry | None = None) -> ProfileSpec:
    if isinstance(profile, ProfileSpec):
        return profile
    if not isinstance(profile, str):
        raise ValueError(f"unknown profile {profile!r}: expected a name or 'module:callable'")
    return (registry if registry is not None else default_registry()).resolve(profile)


def ground_truth(profile: str) -> str:
    """The ground-truth label of a bot of ``profile`` (a name or ``module:callable``): the profile's
    own name (ValueError if unknown)."""
    return _spec_of(profile).name


def default_params(profile: str) -> Any:
    """The profile's parameters with their defaults."""
    return _spec_of(profile).params()


def resolve_params(profile: str, params: Mapping[str, Any] | None = None) -> Any:
    """The profile's parameter dataclass with ``params`` overriding the defaults; ValueError
    naming the key for an unknown key or a bad value."""
    spec = _spec_of(profile)
    return build_params(spec.params, params, spec.name)


def make_hooks(profile: str, params: Mapping[str, Any] | None, ctx: BuildContext) -> ClientHooks:
    """The client hooks of ``profile`` alone (no brain, no client): for tests and tools."""
    spec = _spec_of(profile)
    return spec.hooks(build_params(spec.params, params, spec.name), ctx)


def make_bot(
    profile: str | ProfileSpec,
    *,
    name: str,
    skill: SkillLevel | str | Skill = SkillLevel.AVERAGE,
    params: Mapping[str, Any] | None = None,
    game_map: GameMap,
    geometry: MapGeometry | None = None,
    nav: NavGraph | None = None,
    tick_rate_hz: int = 64,
    rng: np.random.Generator,
    config: ClientConfig | None = None,
    registry: ProfileRegistry | None = None,
) -> BotClient:
    """A sans-IO client playing ``profile``.

    Args:
        profile: a profile name of ``registry``, a ``"module:callable"`` reference, or a
            :class:`ProfileSpec`. name: the player name.
        skill: a skill level (sampled per bot from ``rng``, as for honest bots) or a Skill.
        params: overrides of the profile's parameters (scenario ``[bots.params]``).
        game_map, geometry, nav: what the client ships (geometry and nav built when None;
            pass shared ones for many bots).
        tick_rate_hz: the server's tick rate (Hz). rng: the bot's own generator.
        config: client constants (default: ``ClientConfig`` at ``tick_rate_hz``).
        registry: where names are looked up (default: ``bots.registry.default_registry()``).
    Raises:
        ValueError: unknown profile, unknown parameter or bad parameter value.
    """
    spec = _spec_of(profile, registry)
    values = build_params(spec.params, params, spec.name)
    geometry = geometry if geometry is not None else MapGeometry(game_map)
    if nav is None:
        nav = NavGraph(geometry)
    skill_rng, client_rng = rng.spawn(2)
    sk = skill if isinstance(skill, Skill) else sample_skill(skill_rng, skill)
    brain = spec.brain(sk, nav, geometry, values)
    ctx = BuildContext(game_map=game_map, geometry=geometry, nav=nav, tick_rate_hz=int(tick_rate_hz))
    hooks = spec.hooks(values, ctx)
    if isinstance(hooks, CheatHooks):
        hooks.bind_brain(brain)
    cfg = config if config is not None else ClientConfig(default_tick_rate_hz=int(tick_rate_hz))
    log.debug("bot %s: profile %s, params %s", name, spec.name,
              {f.name: getattr(values, f.name) for f in fields(values)})
    return BotClient(name, brain, game_map, client_rng, config=cfg, hooks=hooks, geometry=geometry)
