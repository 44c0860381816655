"""The registry of aim models: the built-in one plus whatever other packages add.

An aim model is a :class:`bots.aim.AimModel` (the human motor model that plans each flick,
correction and look turn). A profile whose parameters have an ``aim_model`` field (``honest``
has one) names its model here. Other packages add models without any change to Referee
(:mod:`bots.plugins`):

* **by entry point**, in the adding package's ``pyproject.toml``::

      [project.entry-points."referee.aim_models"]
      overshoot = "mypkg.aim:Overshoot"                      # -> a callable returning an AimModel

* **by reference**: ``"mypkg.aim:Overshoot"`` wherever an aim model name goes. The reference is
  called with no arguments (an ``AimModel`` instance is taken as it is, shared by every bot).

:func:`default_aim_models` is the built-in model plus every entry point of the installed packages,
read once per process (a pure function of what is installed). A broken entry point (import error,
wrong type, a name taken) is logged once and skipped, never fatal. Registries are immutable;
:meth:`AimModelRegistry.with_models` returns a new one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from bots.aim import AimModel, MinimumJerkFitts
from bots.plugins import NamedRegistry, entry_point_origin, entry_points, is_reference, load_reference

__all__ = [
    "AIM_MODEL_GROUP",
    "BUILTIN_AIM_MODEL",
    "AimModelFactory",
    "AimModelRegistry",
    "builtin_aim_models",
    "default_aim_models",
]

log = logging.getLogger(__name__)

AIM_MODEL_GROUP = "referee.aim_models"
"""Entry point group of aim models."""
BUILTIN_AIM_MODEL = "minimum_jerk_fitts"
"""Name of the built-in aim model (``bots.aim.MinimumJerkFitts``)."""

AimModelFactory = Callable[[], AimModel]
"""Makes one aim model (called once per bot, so a model may keep per-bot state)."""


def _as_aim_factory(obj: Any, where: str) -> AimModelFactory:
    """A factory of aim models from what an entry point or reference names: a class or callable
    making one (checked by calling it once), or an instance (then shared by every bot)."""
    if not isinstance(obj, type) and isinstance(obj, AimModel):
        model = obj
        return lambda: model
    if not callable(obj):
        raise ValueError(f"{where} is a {type(obj).__name__}, neither an AimModel nor a callable returning one")
    factory: Callable[[], Any] = obj
    _make_model(factory, where)
    return _checked_factory(factory, where)


def _make_model(factory: Callable[[], Any], where: str) -> AimModel:
    try:
        model = factory()
    except Exception as exc:  # noqa: BLE001 - the user's callable; reported with the reference
        raise ValueError(f"{where} raised {type(exc).__name__}: {exc}") from exc
    if isinstance(model, type) or not isinstance(model, AimModel):
        raise ValueError(f"{where} returned {type(model).__name__}, expected an AimModel "
                         "(an object with plan(request, skill, rng))")
    return model


def _checked_factory(factory: Callable[[], Any], where: str) -> AimModelFactory:
    return functools.partial(_make_model, factory, where)


class AimModelRegistry(NamedRegistry[AimModelFactory]):
    """Aim model factories by name (immutable); ``minimum_jerk_fitts`` is the built-in model."""

    __slots__ = ()
    _what = "aim model"

    def with_models(self, models: Mapping[str, AimModelFactory]) -> AimModelRegistry:
        """A new registry with ``models`` (name -> factory) added; a name already registered, an
        empty one or one with a ``:`` is a ValueError."""
        for name in models:
            if not isinstance(name, str) or not name.strip() or ":" in name:
                raise ValueError(f"an aim model name must be a non-empty string without ':', got {name!r}")
            if name in self._items:
                raise ValueError(f"aim model {name!r} is already registered; give yours another name")
        return AimModelRegistry({**self._items, **models}, self._builtin)

    def resolve(self, name: str) -> AimModelFactory:
        """The factory registered as ``name``, or made from a ``"module:callable"`` reference
        (a class or callable returning an AimModel, checked by calling it once).

        Raises:
            ValueError: an unknown name, or a reference that does not give an aim model (naming it).
        """
        if not isinstance(name, str):
            raise ValueError(f"unknown aim model {name!r}: expected a name or a 'module:callable' reference")
        factory = self._items.get(name)
        if factory is not None:
            return factory
        if not is_reference(name):
            raise self._unknown(name)
        return _as_aim_factory(load_reference(name, "aim model"), f"aim model reference {name!r}")

    def create(self, name: str) -> AimModel:
        """A new aim model of ``name`` (a registered name or a reference); ValueError as resolve."""
        factory = self.resolve(name)
        model = factory()
        if isinstance(model, type) or not isinstance(model, AimModel):
            raise ValueError(f"aim model {name!r} made {type(model).__name__}, expected an AimModel")
        return model


def builtin_aim_models() -> AimModelRegistry:
    """The aim models shipped with Referee."""
    return AimModelRegistry({BUILTIN_AIM_MODEL: MinimumJerkFitts}, (BUILTIN_AIM_MODEL,))


@functools.cache
def default_aim_models() -> AimModelRegistry:
    """The built-in aim model plus every installed ``referee.aim_models`` entry point.

    Cached: it is a pure function of the installed packages (call
    ``default_aim_models.cache_clear()`` after installing one in a running process). Each entry
    point loads to a class or callable making an AimModel (or an AimModel instance, then shared
    by every bot). Broken entry points are logged once and skipped.
    """
    registry = builtin_aim_models()
    for ep in entry_points(AIM_MODEL_GROUP):
        where = entry_point_origin(ep)
        try:
            registry = registry.with_models({ep.name: _as_aim_factory(ep.load(), where)})
        except Exception as exc:  # noqa: BLE001 - a broken plugin must never stop the tools
            log.warning("skipping %s: %s: %s", where, type(exc).__name__, exc)
    return registry
