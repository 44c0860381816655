"""Profile parameters: frozen dataclasses built from a scenario's ``[bots.params]`` table.

Every cheat profile has one frozen dataclass of parameters with documented units and defaults.
:func:`build_params` overrides those defaults from a plain mapping (TOML values) with
validation: an unknown key is a ValueError naming it, a value of the wrong type is a ValueError
naming the key and the expected type, and each dataclass checks its own ranges in
``__post_init__``.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from world.hitbox import Bone

__all__ = [
    "BONE_NAMES",
    "NoParams",
    "build_params",
    "check_bone",
    "check_fraction",
    "check_positive",
    "check_range",
]

P = TypeVar("P")

BONE_NAMES: tuple[str, ...] = tuple(b.name.lower() for b in Bone if b is not Bone.NONE)
"""Bone names a parameter may use ("head", "neck", "upper_torso", ...)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NoParams:
    """A profile without parameters."""


def check_positive(owner: str, name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise ValueError unless ``value`` is finite and > 0 (>= 0 with ``allow_zero``)."""
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{owner}.{name} must be finite and {bound}, got {value!r}")


def check_fraction(owner: str, name: str, value: float) -> None:
    """Raise ValueError unless ``value`` lies in [0, 1]."""
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{owner}.{name} must be in [0, 1], got {value!r}")


def check_range(owner: str, name: str, lo: float, hi: float, *, allow_zero: bool = True) -> None:
    """Raise ValueError unless ``0 <= lo <= hi`` (``0 < lo`` without ``allow_zero``), both finite."""
    check_positive(owner, name, lo, allow_zero=allow_zero)
    check_positive(owner, name, hi, allow_zero=allow_zero)
    if lo > hi:
        raise ValueError(f"{owner}.{name}: the minimum {lo!r} exceeds the maximum {hi!r}")


def check_bone(owner: str, name: str, value: str) -> None:
    """Raise ValueError unless ``value`` names a bone (see :data:`BONE_NAMES`)."""
    if value not in BONE_NAMES:
        raise ValueError(f"{owner}.{name} must be one of {', '.join(BONE_NAMES)}, got {value!r}")


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the annotated type ``hint`` (float, int, bool, str or a tuple)."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"parameter {key!r} expects a list of {len(args)} values, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(key, v, args[0]) for v in value)
        if len(value) != len(args):
            raise ValueError(f"parameter {key!r} expects {len(args)} values, got {len(value)}")
        return tuple(_coerce(key, v, a) for v, a in zip(value, args, strict=True))
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"parameter {key!r} expects true or false, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"parameter {key!r} expects a number, got {value!r}")
        out = float(value)
        if not math.isfinite(out):
            raise ValueError(f"parameter {key!r} must be finite, got {value!r}")
        return out
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"parameter {key!r} expects an integer, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"parameter {key!r} expects a string, got {value!r}")
        return value
    raise TypeError(f"parameter {key!r} has an unsupported type {hint!r}")  # a bug in a dataclass


def build_params(cls: type[P], values: Mapping[str, Any] | None, profile: str) -> P:
    """An instance of the frozen dataclass ``cls`` with ``values`` overriding its defaults.

    Raises ValueError naming the key for an unknown key or a value of the wrong type, and
    whatever the dataclass's own validation raises for a value out of range.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    values = dict(values or {})
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(k for k in values if k not in known)
    if unknown:
        listing = ", ".join(known) if known else "none"
        raise ValueError(f"unknown parameter {unknown[0]!r} for profile {profile!r} (known: {listing})")
    kwargs = {k: _coerce(k, v, hints[k]) for k, v in values.items()}
    return cls(**kwargs)
