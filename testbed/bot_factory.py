"""Who plays: building each scenario bot's sans-IO client from its profile, skill and seed.

``honest`` is ``bots.honest.HonestBrain`` in a ``bots.client.BotClient``. Cheat profiles come from
the registry ``bots.profiles`` when it exists: ``make_bot(profile, name=, skill=, params=,
game_map=, geometry=, nav=, tick_rate_hz=, rng=)`` returns the client, and ``profile_names()``
(or a ``PROFILES`` mapping) lists them. Without the registry only ``honest`` is known, and a
scenario naming a cheat is refused with the profile named, never played as an honest bot (the
ground truth would be false).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType
from typing import Protocol

import numpy as np

from testbed.scenario import BotSpec, ScenarioError, thaw
from testbed.virtual import ClientEndpoint
from world.geometry import MapGeometry
from world.mapfile import GameMap

__all__ = ["HONEST", "BotFactory", "DefaultBotFactory", "profile_names"]

HONEST = "honest"


class BotFactory(Protocol):
    """Builds the sans-IO client of one scenario bot.

    Args: spec (who it is), game_map and geometry (what a real client ships with),
    tick_rate_hz (the server's rate), rng (its own generator, spawned from the match seed).
    """

    def __call__(
        self, spec: BotSpec, *, game_map: GameMap, geometry: MapGeometry, tick_rate_hz: int, rng: np.random.Generator
    ) -> ClientEndpoint: ...


def _registry() -> ModuleType | None:
    """``bots.profiles`` when it exists (an import error inside it is raised, not hidden)."""
    if importlib.util.find_spec("bots.profiles") is None:
        return None
    return importlib.import_module("bots.profiles")


def profile_names() -> tuple[str, ...]:
    """Names of the bot profiles available: ``honest`` plus the registry's cheat profiles."""
    registry = _registry()
    if registry is None:
        return (HONEST,)
    names = getattr(registry, "profile_names", None)
    if callable(names):
        return tuple(dict.fromkeys((HONEST, *names())))
    table = getattr(registry, "PROFILES", None)
    if isinstance(table, Mapping):
        return tuple(dict.fromkeys((HONEST, *table)))
    return (HONEST,)


class DefaultBotFactory:
    """Builds the bots of a match: ``honest`` here, cheats by ``bots.profiles.make_bot``.

    One instance per match: it caches the navigation graph of the match's map geometry.
    """

    def __init__(self) -> None:
        from bots.nav import NavCache

        self._nav = NavCache()

    def __call__(
        self, spec: BotSpec, *, game_map: GameMap, geometry: MapGeometry, tick_rate_hz: int, rng: np.random.Generator
    ) -> ClientEndpoint:
        try:
            if spec.profile == HONEST:
                return self._honest(spec, game_map, geometry, rng)
            make = getattr(_registry(), "make_bot", None)
            if make is None:
                raise ValueError("no cheat profiles are available (bots.profiles is missing)")
            return make(
                spec.profile,
                name=spec.name,
                skill=spec.skill,
                params=thaw(spec.params),
                game_map=game_map,
                geometry=geometry,
                nav=self._nav.get(geometry),
                tick_rate_hz=tick_rate_hz,
                rng=rng,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"bot {spec.name!r} (profile {spec.profile!r}): {exc}") from exc

    def _honest(self, spec: BotSpec, game_map: GameMap, geometry: MapGeometry, rng: np.random.Generator) -> ClientEndpoint:
        from bots.client import BotClient
        from bots.honest import HonestBrain
        from bots.skill import sample_skill

        if spec.params:
            raise ValueError(f"the honest profile takes no params, got {sorted(spec.params)}")
        skill_rng, client_rng = rng.spawn(2)
        nav = self._nav.get(geometry)
        brain = HonestBrain(sample_skill(skill_rng, spec.skill), nav=nav, geometry=geometry)
        return BotClient(spec.name, brain, game_map, client_rng, geometry=geometry)
