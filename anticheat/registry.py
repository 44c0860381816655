"""The registry of detectors: the built-ins plus whatever other packages add.

A detector is added as a :class:`DetectorPlugin`: its name (also the name of its tolerance section
in a ``--tolerances`` file, and the ``detector`` of its Detections), its default configuration (a
frozen dataclass whose fields the tolerance file may override) and a factory building the detector
from a configuration. Other packages add detectors without any change to Referee:

* **by entry point**, in the adding package's ``pyproject.toml``::

      [project.entry-points."referee.detectors"]
      strafe = "mypkg.strafe:PLUGIN"       # a DetectorPlugin, or a callable returning one

  Installed, the detector runs in every pipeline built with the default registry: ``referee
  serve``, ``match``, ``replay --detect``, the lab's re-runs.
* **in code**: ``default_registry().with_detectors(plugin)`` passed to
  :func:`anticheat.suite.build_pipeline` (``registry=``).

:func:`anticheat.suite.default_registry` is the built-ins plus every entry point of the installed packages, read
once per process (a pure function of what is installed). A broken entry point (import error, wrong
type, a name taken) is logged and skipped, never fatal. Registries are immutable.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, is_dataclass
from typing import Any

from anticheat.detector import Detector

__all__ = ["DETECTOR_GROUP", "DetectorPlugin", "DetectorRegistry", "entry_point_plugins"]

log = logging.getLogger(__name__)

DETECTOR_GROUP = "referee.detectors"
"""Entry point group of detector plugins."""

RESERVED = frozenset({"skip", "sanctions", "aimdetect"})
"""Tolerance sections that are not plugins (AimDetect is built from its trained model)."""


@dataclass(frozen=True, slots=True)
class DetectorPlugin:
    """One detector as the suite builds it.

    Attributes:
        name: the detector's name and its tolerance section (lower case, ``[a-z0-9_]``).
        config: the default configuration (a frozen dataclass instance).
        build: the detector for a configuration of the same type.
    """

    name: str
    config: Any
    build: Callable[[Any], Detector]

    def __post_init__(self) -> None:
        if not self.name or not all(c.islower() or c.isdigit() or c == "_" for c in self.name):
            raise ValueError(f"detector name {self.name!r} must be lower-case letters, digits and '_'")
        if self.name in RESERVED:
            raise ValueError(f"detector name {self.name!r} is reserved")
        if not (is_dataclass(self.config) and not isinstance(self.config, type)):
            raise ValueError(f"detector {self.name!r}: config must be a dataclass instance")
        if not callable(self.build):
            raise ValueError(f"detector {self.name!r}: build must be callable")


class DetectorRegistry:
    """An immutable, ordered set of detector plugins with unique names."""

    def __init__(self, plugins: Iterable[DetectorPlugin] = ()) -> None:
        self._plugins: dict[str, DetectorPlugin] = {}
        for plugin in plugins:
            if plugin.name in self._plugins:
                raise ValueError(f"detector {plugin.name!r} is registered twice")
            self._plugins[plugin.name] = plugin

    def with_detectors(self, *plugins: DetectorPlugin) -> DetectorRegistry:
        """A new registry with ``plugins`` added after these (a name taken is an error)."""
        return DetectorRegistry([*self._plugins.values(), *plugins])

    def names(self) -> tuple[str, ...]:
        """Registered detector names, in build order."""
        return tuple(self._plugins)

    def __iter__(self) -> Iterator[DetectorPlugin]:
        return iter(tuple(self._plugins.values()))

    def __len__(self) -> int:
        return len(self._plugins)

    def __contains__(self, name: object) -> bool:
        return name in self._plugins


def _as_plugin(obj: Any, where: str) -> DetectorPlugin:
    if isinstance(obj, DetectorPlugin):
        return obj
    if not callable(obj):
        raise ValueError(f"{where} is a {type(obj).__name__}, neither a DetectorPlugin nor a callable returning one")
    made = obj()
    if not isinstance(made, DetectorPlugin):
        raise ValueError(f"{where}() returned a {type(made).__name__}, not a DetectorPlugin")
    return made


def entry_point_plugins(registry: DetectorRegistry) -> DetectorRegistry:
    """``registry`` plus every installed ``referee.detectors`` entry point that loads and whose
    name is free (the others are logged and skipped)."""
    out = registry
    for ep in sorted(importlib.metadata.entry_points(group=DETECTOR_GROUP), key=lambda e: e.name):
        where = f"entry point {ep.name!r} ({ep.value})"
        try:
            plugin = _as_plugin(ep.load(), where)
            out = out.with_detectors(plugin)
        except Exception as exc:  # a third party's broken plugin must not stop the server
            log.warning("detector plugin skipped: %s: %s", where, exc)
    return out

