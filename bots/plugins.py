"""How other packages plug things into Referee: ``module:callable`` references, entry points, and
the immutable name registry that :mod:`bots.aim_models` and :mod:`bots.registry` build on.

Anything pluggable (a bot profile, an aim model) is added without any change to Referee:

* **by entry point**, in the adding package's ``pyproject.toml`` (group ``referee.profiles`` for
  profiles, ``referee.aim_models`` for aim models); the registries read every group once per
  process and skip, with a warning, an entry point that does not load;
* **by reference**, with nothing installed: ``"mypkg.module:callable"`` wherever a registered
  name goes (the module must be importable, e.g. on ``PYTHONPATH``).

Only the standard library is imported here, so every registry may sit on top of this module.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

__all__ = ["NamedRegistry", "entry_point_origin", "entry_points", "is_reference", "load_reference"]

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


def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
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


def entry_point_origin(ep: importlib.metadata.EntryPoint) -> str:
    """Where an entry point comes from, for log and error messages: its name, target, package
    and group."""
    dist = getattr(ep, "dist", None)
    package = f" of {dist.name}" if dist is not None and getattr(dist, "name", None) else ""
    return f"entry point {ep.name!r} = {ep.value!r}{package} (group {ep.group})"


class NamedRegistry(Mapping[str, T], Generic[T]):
    """An immutable name -> T mapping that also resolves ``module:callable`` references.

    Subclasses set ``_what`` (the kind of thing, for messages) and implement :meth:`resolve`.

    Args: items: the registered things by name; builtin: which names ship with Referee.
    """

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
        """The thing registered as ``name`` or made from a ``module:callable`` reference."""
        raise NotImplementedError

    def _unknown(self, name: str) -> ValueError:
        return ValueError(f"unknown {self._what} {name!r} (known: {', '.join(self._items)}; "
                          "or a 'module:callable' reference)")
