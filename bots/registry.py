"""The registry of bot profiles: the built-ins plus whatever other packages add.

A bot profile is a :class:`bots.profiles.ProfileSpec` (a cheat, or an honest variant with
``cheat=False``). Other packages add profiles without any change to Referee (:mod:`bots.plugins`;
aim models are registered alike in :mod:`bots.aim_models`):

* **by entry point**, in the adding package's ``pyproject.toml``::

      [project.entry-points."referee.profiles"]
      snap_after_delay = "mypkg.profiles:snap_after_delay"   # -> a ProfileSpec, or a callable
                                                             #    returning one (no arguments)

  Installed, the profile is a name like any built-in one (``profile = "snap_after_delay"`` in a
  scenario).
* **by reference**, with nothing installed: ``"mypkg.profiles:snap_after_delay"`` wherever a
  profile name goes (the module must be importable, e.g. on ``PYTHONPATH``). The reference is
  called with no arguments (a ``ProfileSpec`` instance is taken as it is).

The ground-truth label of a bot is its spec's ``name``, however the profile was named. A
reference returning a spec whose name is already registered for a different spec is refused, so a
label always means one profile.

:func:`default_registry` is the built-ins plus every entry point of the installed packages, read
once per process (a pure function of what is installed). A broken entry point (import error,
wrong type, a name taken) is logged once and skipped, never fatal. Registries are immutable;
:meth:`ProfileRegistry.with_profiles` returns a new one. Building a bot from a profile name:
:mod:`bots.build`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from bots.plugins import NamedRegistry, entry_point_origin, entry_points, is_reference, load_reference
from bots.profiles import PROFILES, ProfileSpec

__all__ = [
    "PROFILE_GROUP",
    "ProfileRegistry",
    "builtin_registry",
    "default_registry",
]

log = logging.getLogger(__name__)

PROFILE_GROUP = "referee.profiles"
"""Entry point group of bot profiles."""


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


class ProfileRegistry(NamedRegistry[ProfileSpec]):
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


# ----------------------------------------------------------------------------- defaults


def builtin_registry() -> ProfileRegistry:
    """The profiles shipped with Referee (``bots.profiles.PROFILES``)."""
    return ProfileRegistry(PROFILES.values(), builtin=PROFILES)


@functools.cache
def default_registry() -> ProfileRegistry:
    """The built-in profiles plus every installed ``referee.profiles`` entry point.

    Cached: it is a pure function of the installed packages (call ``default_registry.cache_clear()``
    after installing one in a running process). Each entry point loads to a ProfileSpec or to a
    callable returning one; the profile is registered under the spec's ``name`` (a different
    entry point name is logged). Broken entry points are logged once and skipped.
    """
    registry = builtin_registry()
    for ep in entry_points(PROFILE_GROUP):
        where = entry_point_origin(ep)
        try:
            spec = _as_spec(ep.load(), where)
            if spec.name != ep.name:
                log.warning("%s makes a profile named %r; it is registered under that name", where, spec.name)
            registry = registry.with_profiles(spec)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must never stop the tools
            log.warning("skipping %s: %s: %s", where, type(exc).__name__, exc)
    return registry
