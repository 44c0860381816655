"""Who plays: building each scenario bot's sans-IO client from its profile, skill and seed.

Every bot, ``honest`` included, is built by ``bots.build.make_bot`` from the profile a
registry (``bots.registry``; by default the built-ins plus the installed packages' entry points)
resolves for the scenario's profile reference: a registered name or a ``"module:callable"``
reference. An unknown profile is refused with the bot and the profile named, never played as an
honest bot (the ground truth would be false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from testbed.scenario import BotSpec, Scenario, ScenarioError, thaw
from testbed.virtual import ClientEndpoint
from world.geometry import MapGeometry
from world.mapfile import GameMap

if TYPE_CHECKING:
    from bots.nav import NavGraph
    from bots.profiles import ProfileSpec
    from bots.registry import ProfileRegistry

__all__ = ["HONEST", "BotFactory", "DefaultBotFactory", "profile_names", "scenario_profiles"]

HONEST = "honest"


class BotFactory(Protocol):
    """Builds the sans-IO client of one scenario bot.

    Args: spec (who it is), game_map and geometry (what a real client ships with),
    tick_rate_hz (the server's rate), rng (its own generator, spawned from the match seed).
    """

    def __call__(
        self, spec: BotSpec, *, game_map: GameMap, geometry: MapGeometry, tick_rate_hz: int, rng: np.random.Generator
    ) -> ClientEndpoint: ...


def profile_names() -> tuple[str, ...]:
    """Names of the registered bot profiles: the built-ins (``honest`` first) and those of the
    installed packages. Scenarios may also name a profile by ``"module:callable"``: validate them
    against ``bots.registry.default_registry()`` itself to accept those."""
    from bots.registry import default_registry

    return default_registry().names()


def scenario_profiles(scenario: Scenario, registry: ProfileRegistry | None = None) -> Mapping[str, ProfileSpec]:
    """Ground-truth label -> profile of every bot of ``scenario``: registered profiles and those
    its groups name by ``module:callable`` reference (under the spec's name). ValueError for a
    profile ``registry`` (default: ``bots.registry.default_registry()``) cannot resolve."""
    from bots.registry import default_registry

    reg = registry if registry is not None else default_registry()
    return {bot.profile: reg.resolve(bot.reference) for bot in scenario.players()}


class DefaultBotFactory:
    """Builds the bots of a match through a profile registry.

    One instance per match: it caches the navigation graph of the match's map geometry.

    Args:
        registry: resolves the bots' profiles (default: ``bots.registry.default_registry()``).
    """

    def __init__(self, registry: ProfileRegistry | None = None) -> None:
        from bots.nav import NavCache
        from bots.registry import default_registry

        self.registry: ProfileRegistry = registry if registry is not None else default_registry()
        self._nav = NavCache()

    def nav(self, geometry: MapGeometry) -> NavGraph:
        """The navigation graph of ``geometry`` (built once per geometry, then shared by the bots)."""
        return self._nav.get(geometry)

    def __call__(
        self, spec: BotSpec, *, game_map: GameMap, geometry: MapGeometry, tick_rate_hz: int, rng: np.random.Generator
    ) -> ClientEndpoint:
        from bots.client import ClientConfig
        from bots.build import make_bot

        try:
            profile = self.registry.resolve(spec.reference)
            # Honest bots have always started at the client's default tick rate until ACCEPT
            # (cheats at the server's): kept, so that replays of existing scenarios do not change
            # and honest variants differ from ``honest`` by their brain alone.
            config = None if profile.cheat else ClientConfig()
            return make_bot(
                profile,
                name=spec.name,
                skill=spec.skill,
                params=thaw(spec.params),
                game_map=game_map,
                geometry=geometry,
                nav=self.nav(geometry),
                tick_rate_hz=tick_rate_hz,
                rng=rng,
                config=config,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"bot {spec.name!r} (profile {spec.reference!r}): {exc}") from exc
