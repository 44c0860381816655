"""Public registries of bot profiles and aim models: the built-ins plus whatever other packages add.

A bot profile is a :class:`bots.profiles.ProfileSpec` (a cheat, or an honest variant with
``cheat=False``); an aim model is a :class:`bots.aim.AimModel` (the human motor model that plans
each flick, correction and look turn). Neither needs any change to Referee to be added:

* **by entry point**, in the adding package's ``pyproject.toml``::

      [project.entry-points."referee.profiles"]
      snap_after_delay = "mypkg.profiles:snap_after_delay"   # -> a ProfileSpec, or a callable
                                                             #    returning one (no arguments)
      [project.entry-points."referee.aim_models"]
      overshoot = "mypkg.aim:Overshoot"                      # -> a callable returning an AimModel

  Installed, the profile is a name like any built-in one (``profile = "snap_after_delay"`` in a
  scenario); the aim model a name for a profile's ``aim_model`` parameter.
* **by reference**, with nothing installed: ``"mypkg.profiles:snap_after_delay"`` wherever a profile
  or aim model name goes (the module must be importable, e.g. on ``PYTHONPATH``). The reference is
  called with no arguments (a ``ProfileSpec`` or ``AimModel`` instance is taken as it is).

The ground-truth label of a bot is its spec's ``name``, however the profile was named. A
reference returning a spec whose name is already registered for a different spec is refused, so a
label always means one profile.

:func:`default_registry` and :func:`default_aim_models` are the built-ins plus every entry point of
the installed packages, read once per process (a pure function of what is installed). A broken
entry point (import error, wrong type, a name taken) is logged once and skipped, never fatal.
Registries are immutable; :meth:`ProfileRegistry.with_profiles` returns a new one.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from bots.aim import AimModel, MinimumJerkFitts
from bots.profiles import PROFILES, ProfileSpec

__all__ = [
    "AIM_MODEL_GROUP",
    "BUILTIN_AIM_MODEL",
    "PROFILE_GROUP",
    "AimModelFactory",
    "AimModelRegistry",
    "ProfileRegistry",
    "builtin_aim_models",
    "builtin_registry",
    "default_aim_models",
    "default_registry",
    "is_reference",
    "load_reference",
]

log = logging.getLogger(__name__)

PROFILE_GROUP = "referee.profiles"
"""Entry point group of bot profiles."""
AIM_MODEL_GROUP = "referee.aim_models"
"""Entry point group of aim models."""
BUILTIN_AIM_MODEL = "minimum_jerk_fitts"
"""Name of the built-in aim model (``bots.aim.MinimumJerkFitts``)."""

AimModelFactory = Callable[[], AimModel]
"""Makes one aim model (called once per bot, so a model may keep per-bot state)."""

T = TypeVar("T")


def is_reference(name: str) -> bool:
    """True when ``name`` is spelled as a ``"module:callable"`` reference."""
    module, sep, attr = name.partition(":")
    return bool(sep and module.strip() and attr.strip())


def load_reference(ref: str, what: str = "object") -> Any:
    """The object a ``"module:attribute"`` reference names (``attribute`` may be dotted).

    Raises:
        ValueError: naming the reference, when it is malformed, its module does not import or
            the attribute is missing; ``what`` names the kind of thing in the message.
    """
    module_name, sep, attr = ref.partition(":")
    if not is_reference(ref):
        raise ValueError(f"{what} reference {ref!r} is not of the form 'module:callable'")
    try:
        obj: Any = importlib.import_module(module_name.strip())
    except Exception as exc:  # noqa: BLE001 - any error of the user's module is a bad reference
        raise ValueError(f"{what} reference {ref!r}: cannot import {module_name.strip()!r}: "
                         f"{type(exc).__name__}: {exc}") from exc
    for part in attr.strip().split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{what} reference {ref!r}: {module_name.strip()!r} has no attribute {attr.strip()!r}") from None
    return obj


def _as_spec(obj: Any, where: str) -> ProfileSpec:
    """``obj`` if it is a ProfileSpec, else what calling it with no arguments returns (a spec)."""
    if isinstance(obj, ProfileSpec):
        return obj
    if not callable(obj):
        raise ValueError(f"{where} is a {type(obj).__name__}, neither a ProfileSpec nor a callable returning one")
    try:
        spec = obj()
    except Exception as exc:  # noqa: BLE001 - the user's callable; reported with the reference
        raise ValueError(f"{where} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(spec, ProfileSpec):
        raise ValueError(f"{where} returned {type(spec).__name__}, expected a bots.profiles.ProfileSpec")
    return spec


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


class _Registry(Mapping[str, T], Generic[T]):
    """An immutable name -> T mapping that also resolves ``module:callable`` references."""

    __slots__ = ("_builtin", "_items")
    _what = "item"

    def __init__(self, items: Mapping[str, T], builtin: Iterable[str] = ()) -> None:
        self._items: Mapping[str, T] = MappingProxyType(dict(items))
        self._builtin: frozenset[str] = frozenset(builtin)

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        """A registered name, or a ``module:callable`` reference that resolves."""
        if not isinstance(name, str):
            return False
        if name in self._items:
            return True
        if not is_reference(name):
            return False
        try:
            self.resolve(name)
        except ValueError:
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._items)})"

    def names(self) -> tuple[str, ...]:
        """Registered names, built-ins first, in registration order."""
        return tuple(self._items)

    def is_builtin(self, name: str) -> bool:
        """True for a name shipped with Referee."""
        return name in self._builtin

    def resolve(self, name: str) -> Any:  # narrowed by the subclasses
        raise NotImplementedError

    def _unknown(self, name: str) -> ValueError:
        return ValueError(f"unknown {self._what} {name!r} (known: {', '.join(self._items)}; "
                          "or a 'module:callable' reference)")


class ProfileRegistry(_Registry[ProfileSpec]):
    """Bot profiles by name (immutable). Iterating gives the names, ``honest`` first.

    Args: specs: the profiles (each under its ``name``); builtin: which of them ship with
    Referee. Duplicate names are a ValueError.
    """

    __slots__ = ()
    _what = "profile"

    def __init__(self, specs: Iterable[ProfileSpec] = (), *, builtin: Iterable[str] = ()) -> None:
        items: dict[str, ProfileSpec] = {}
        for spec in specs:
            if not isinstance(spec, ProfileSpec):
                raise ValueError(f"expected a bots.profiles.ProfileSpec, got {type(spec).__name__}")
            if spec.name in items:
                raise ValueError(f"profile {spec.name!r} is registered twice")
            items[spec.name] = spec
        super().__init__(items, builtin)

    def with_profiles(self, *specs: ProfileSpec) -> ProfileRegistry:
        """A new registry with ``specs`` added. A name already registered (a built-in one above
        all) is a ValueError: a label must mean one profile."""
        for spec in specs:
            if isinstance(spec, ProfileSpec) and spec.name in self._items:
                kind = "built-in" if spec.name in self._builtin else "registered"
                raise ValueError(f"profile {spec.name!r} is already a {kind} profile; give yours another name")
        return ProfileRegistry((*self._items.values(), *specs), builtin=self._builtin)

    def resolve(self, name: str) -> ProfileSpec:
        """The profile registered as ``name``, or the one a ``"module:callable"`` reference makes
        (the callable is called with no arguments and must return a ProfileSpec).

        Raises:
            ValueError: an unknown name; for a reference, naming it: the module does not import,
                the attribute is missing, the call fails or returns something else, or the spec's
                name is registered for another profile.
        """
        if not isinstance(name, str):
            raise ValueError(f"unknown profile {name!r}: expected a name or a 'module:callable' reference")
        spec = self._items.get(name)
        if spec is not None:
            return spec
        if not is_reference(name):
            raise self._unknown(name)
        spec = _as_spec(load_reference(name, "profile"), f"profile reference {name!r}")
        known = self._items.get(spec.name)
        if known is not None and known != spec:
            raise ValueError(f"profile reference {name!r} returns a profile named {spec.name!r}, which is "
                             "already registered as another profile; give it its own name")
        return spec


class AimModelRegistry(_Registry[AimModelFactory]):
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


# ----------------------------------------------------------------------------- defaults


def builtin_registry() -> ProfileRegistry:
    """The profiles shipped with Referee (``bots.profiles.PROFILES``)."""
    return ProfileRegistry(PROFILES.values(), builtin=PROFILES)


def builtin_aim_models() -> AimModelRegistry:
    """The aim models shipped with Referee."""
    return AimModelRegistry({BUILTIN_AIM_MODEL: MinimumJerkFitts}, (BUILTIN_AIM_MODEL,))


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, each (name, target) once even when a distribution is found
    twice on the path (an editable install plus its source folder)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for ep in importlib.metadata.entry_points(group=group):
        key = (ep.name, ep.value)
        if key not in seen:
            seen.add(key)
            out.append(ep)
    return out


def _origin(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    package = f" of {dist.name}" if dist is not None and getattr(dist, "name", None) else ""
    return f"entry point {ep.name!r} = {ep.value!r}{package} (group {ep.group})"


@functools.cache
def default_registry() -> ProfileRegistry:
    """The built-in profiles plus every installed ``referee.profiles`` entry point.

    Cached: it is a pure function of the installed packages (call ``default_registry.cache_clear()``
    after installing one in a running process). Each entry point loads to a ProfileSpec or to a
    callable returning one; the profile is registered under the spec's ``name`` (a different
    entry point name is logged). Broken entry points are logged once and skipped.
    """
    registry = builtin_registry()
    for ep in _entry_points(PROFILE_GROUP):
        where = _origin(ep)
        try:
            spec = _as_spec(ep.load(), where)
            if spec.name != ep.name:
                log.warning("%s makes a profile named %r; it is registered under that name", where, spec.name)
            registry = registry.with_profiles(spec)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must never stop the tools
            log.warning("skipping %s: %s: %s", where, type(exc).__name__, exc)
    return registry


@functools.cache
def default_aim_models() -> AimModelRegistry:
    """The built-in aim model plus every installed ``referee.aim_models`` entry point (cached and
    forgiving as :func:`default_registry`). Each entry point loads to a class or callable making
    an AimModel (or an AimModel instance, then shared by every bot)."""
    registry = builtin_aim_models()
    for ep in _entry_points(AIM_MODEL_GROUP):
        where = _origin(ep)
        try:
            registry = registry.with_models({ep.name: _as_aim_factory(ep.load(), where)})
        except Exception as exc:  # noqa: BLE001 - a broken plugin must never stop the tools
            log.warning("skipping %s: %s: %s", where, type(exc).__name__, exc)
    return registry
