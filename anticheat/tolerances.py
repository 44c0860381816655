"""Detector tolerances from TOML: load override tables and apply them to frozen config dataclasses.

Every detector holds a frozen config dataclass whose defaults come from the anchors (DESIGN
principle 4). An operator file overrides some fields, one TOML table per detector, named for the
detector::

    [skip]
    max_ping_ms = 400.0
    skipped_weapons = [7]

    [sanctions]
    auto_apply_max = "MONITOR"

``apply_overrides`` builds a new config with ``dataclasses.replace``, so the dataclass's own
``__post_init__`` validation still runs. Before that every value is checked against the field's
type hint, because a typo or a wrong type in a config file must fail loudly, naming the section and
the key, instead of silently keeping a default or smuggling a string into a float.

Conversions from TOML values (TOML has no null, so ``X | None`` fields accept only ``X``):

- ``float``: TOML float or integer, must be finite (``nan``/``inf`` are valid TOML but never a
  valid tolerance).
- ``int``: TOML integer (a float is refused even when integral: it is most likely a unit mistake).
- ``bool``: TOML boolean only (never 0/1).
- ``str``; ``Enum``: member name (case-insensitive) or value.
- ``tuple[X, ...]``, ``tuple[X, Y]``, ``frozenset[X]``, ``list[X]``: TOML arrays, elementwise.
- a nested config dataclass: a sub-table (``[section.field]``), applied recursively.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ToleranceError", "apply_all", "apply_overrides", "load_overrides", "searched"]

_C = TypeVar("_C")


def searched(default: Any, low: float, high: float) -> Any:
    """A config field whose default is ``default`` and that tolerance search (``referee lab
    tune``) varies within [low, high] (the field's own unit): the detector's decision thresholds
    declare their range this way, and only they are searched by default."""
    if not low <= default <= high:
        raise ValueError(f"search range [{low}, {high}] must hold the default {default}")
    return dataclasses.field(default=default, metadata={"search": (low, high)})


class ToleranceError(ValueError):
    """A tolerance file or override table is invalid; the message names the section and the key."""


def load_overrides(source: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Parse TOML override tables.

    Args:
        source: TOML text (``str``), or a path (``pathlib.Path`` / any ``os.PathLike``) to read.
            A plain string is always treated as text, never as a file name, so that a missing file
            cannot silently parse as an empty override set.

    Returns:
        ``{section: {key: value}}``, one entry per top-level table.

    Raises:
        ToleranceError: unreadable file, invalid TOML, or a top-level key that is not a table.
    """
    if isinstance(source, os.PathLike):
        where = os.fspath(source)
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise ToleranceError(f"cannot read tolerance file {where!r}: {exc}") from exc
    else:
        where = "<text>"
        text = source
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ToleranceError(f"invalid TOML in {where}: {exc}") from exc
    out: dict[str, dict[str, Any]] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ToleranceError(
                f"{where}: top-level key {section!r} must be a table like [{section}], got {type(table).__name__}"
            )
        out[section] = table
    return out


def apply_overrides(config: _C, overrides: Mapping[str, Any], section: str = "") -> _C:
    """Return a copy of the frozen dataclass ``config`` with ``overrides`` applied.

    Args:
        config: a dataclass instance (the detector's current or default config).
        overrides: ``{field name: TOML value}``.
        section: the TOML section, used only in error messages (defaults to the class name).

    Raises:
        ToleranceError: unknown key, wrong type, non-finite number, or a value the dataclass's own
            validation refuses; the message names ``[section] key``.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"apply_overrides needs a dataclass instance, got {type(config).__name__}")
    cls = type(config)
    where = section or cls.__name__
    if not overrides:
        return config
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(config) if f.init}
    changes: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key not in known:
            raise ToleranceError(f"[{where}] unknown key {key!r}; known keys: {', '.join(sorted(known))}")
        label = f"[{where}] {key}"
        hint = hints[key]
        current = getattr(config, key)
        if dataclasses.is_dataclass(current) and not isinstance(current, type) and isinstance(raw, dict):
            changes[key] = apply_overrides(current, raw, f"{where}.{key}")
        else:
            changes[key] = _convert(raw, hint, label)
    try:
        return dataclasses.replace(config, **changes)
    except (ValueError, TypeError) as exc:
        raise ToleranceError(f"[{where}] rejected by {cls.__name__}: {exc}") from exc


def apply_all(configs: Mapping[str, _C], overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, _C]:
    """Apply every section of ``overrides`` to the config of the same name.

    Args:
        configs: ``{section (detector name): config instance}``.
        overrides: what ``load_overrides`` returned.

    Returns:
        A new mapping with every config, overridden where a section exists.

    Raises:
        ToleranceError: a section names no known config (a typo in a section name must not pass).
    """
    unknown = sorted(set(overrides) - set(configs))
    if unknown:
        raise ToleranceError(f"unknown section(s) {unknown}; known sections: {', '.join(sorted(configs))}")
    return {name: apply_overrides(cfg, overrides.get(name, {}), name) for name, cfg in configs.items()}


def _convert(value: Any, hint: Any, label: str) -> Any:
    """Check ``value`` (decoded TOML) against the type ``hint`` and convert it."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        errors: list[str] = []
        # Try the most specific first so that ``int | float`` keeps an int an int.
        for member in members:
            try:
                return _convert(value, member, label)
            except ToleranceError as exc:
                errors.append(str(exc))
        raise ToleranceError(f"{label}: {value!r} matches none of {hint}")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ToleranceError(f"{label}: {value!r} is not one of {list(args)}")
    if origin in (tuple, frozenset, list, set) or hint in (tuple, frozenset, list, set):
        return _convert_collection(value, hint, origin or hint, args, label)
    if isinstance(hint, type):
        return _convert_scalar(value, hint, label)
    raise ToleranceError(f"{label}: fields of type {hint} cannot be set from TOML")


def _convert_collection(value: Any, hint: Any, origin: Any, args: tuple[Any, ...], label: str) -> Any:
    if not isinstance(value, list):
        raise ToleranceError(f"{label}: expected an array for {hint}, got {type(value).__name__} {value!r}")
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            raise ToleranceError(f"{label}: expected an array of {len(args)} items for {hint}, got {len(value)}")
        return tuple(_convert(v, a, f"{label}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
    item = args[0] if args else Any
    items = [_convert(v, item, f"{label}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        return tuple(items)
    if origin is frozenset:
        return frozenset(items)
    if origin is set:
        return set(items)
    return items


def _convert_scalar(value: Any, hint: type, label: str) -> Any:
    if issubclass(hint, Enum):
        return _convert_enum(value, hint, label)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ToleranceError(f"{label}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ToleranceError(f"{label}: expected an integer, got {type(value).__name__} {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                raise ToleranceError(f"{label}: must be a finite number, got {value!r}")
            return number
        raise ToleranceError(f"{label}: expected a number, got {type(value).__name__} {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ToleranceError(f"{label}: expected a string, got {type(value).__name__} {value!r}")
    raise ToleranceError(f"{label}: fields of type {hint.__name__} cannot be set from TOML")


def _convert_enum(value: Any, hint: type[Enum], label: str) -> Enum:
    if isinstance(value, str):
        by_name = {m.name.lower(): m for m in hint}
        member = by_name.get(value.lower())
        if member is not None:
            return member
    if not isinstance(value, bool):
        for member in hint:
            if member.value == value:
                return member
    names = ", ".join(m.name for m in hint)
    raise ToleranceError(f"{label}: {value!r} is not a {hint.__name__} (one of {names})")
