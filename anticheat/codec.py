"""Events to and from plain msgpack-able lists, for replay files.

Each event becomes ``[tag, field0, field1, ...]`` in the dataclass's field order; nested claims,
enums and vectors are converted by per-class rules derived once from the type hints, so adding a
field to an event extends the format without hand-written code. Tags are part of the replay format:
never reuse or renumber one.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    KillEvent,
    MovementEvidence,
    SessionEvent,
    ShotResult,
    SpawnEvent,
)

EVENT_TAGS: dict[type, int] = {
    ShotResult: 1,
    KillEvent: 2,
    AimSample: 3,
    MovementEvidence: 4,
    FireEvidence: 5,
    ConnectionSample: 6,
    SpawnEvent: 7,
    Detection: 8,
    SessionEvent: 9,
}
TAG_EVENTS: dict[int, type] = {tag: cls for cls, tag in EVENT_TAGS.items()}


class CodecError(ValueError):
    """A record in a replay could not be turned back into an event."""


Conv = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _optional(conv: Conv) -> Conv:
    return lambda value: None if value is None else conv(value)


def _converters(hint: Any) -> tuple[Conv, Conv]:
    """(to_wire, from_wire) for one annotated field type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            enc, dec = _converters(args[0])
            return _optional(enc), _optional(dec)
        return _identity, _identity
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return (lambda v: v.value), hint
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        enc, dec = _class_codec(hint)
        return enc, dec
    if origin is tuple:
        return list, tuple
    if origin is Mapping or origin is dict or hint is Mapping:
        return dict, dict
    return _identity, _identity


_CACHE: dict[type, tuple[Conv, Conv]] = {}


def _class_codec(cls: type) -> tuple[Conv, Conv]:
    """Encoder/decoder of one dataclass as a list of its converted fields (cached)."""
    cached = _CACHE.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    encs, decs = zip(*(_converters(hints[f.name]) for f in fields), strict=True)
    # Most fields are plain numbers: only the few that need converting are touched per record,
    # which keeps replay decoding close to msgpack's own speed.
    enc_special = [(i, n, e) for i, (n, e) in enumerate(zip(names, encs, strict=True)) if e is not _identity]
    dec_special = [(i, d) for i, d in enumerate(decs) if d is not _identity]
    n_fields = len(fields)
    # Frozen dataclasses assign through object.__setattr__, which costs more than the rest of
    # decoding together; writing the slots directly builds the same object (no __post_init__ to skip).
    slot_setters = None
    if hasattr(cls, "__slots__") and not hasattr(cls, "__post_init__"):
        slot_setters = [cls.__dict__[n].__set__ for n in names]
    new = object.__new__
    getter = operator.attrgetter(*names) if n_fields > 1 else (lambda o: (getattr(o, names[0]),))

    def encode(obj: Any) -> list[Any]:
        out = list(getter(obj))
        for i, n, e in enc_special:
            out[i] = e(getattr(obj, n))
        return out

    def decode(values: list[Any]) -> Any:
        if len(values) > n_fields:
            raise CodecError(f"{cls.__name__}: {len(values)} fields, expected at most {n_fields}")
        # Older recordings may lack trailing fields added later; their defaults apply.
        for i, d in dec_special:
            if i < len(values) and values[i] is not None:
                values[i] = d(values[i])
        if slot_setters is None or len(values) != n_fields:
            return cls(*values)
        obj = new(cls)
        for setter, value in zip(slot_setters, values):
            setter(obj, value)
        return obj

    _CACHE[cls] = (encode, decode)
    return encode, decode


def encode_event(event: Any) -> list[Any]:
    """``[tag, *fields]`` for a detector event (see EVENT_TAGS)."""
    tag = EVENT_TAGS.get(type(event))
    if tag is None:
        raise TypeError(f"not a recordable event: {type(event).__name__}")
    return [tag, *_class_codec(type(event))[0](event)]


def decode_event(record: list[Any]) -> Any:
    """The event encoded by :func:`encode_event`; raises CodecError on a malformed record."""
    if not isinstance(record, (list, tuple)) or not record:
        raise CodecError("event record must be a non-empty list")
    cls = TAG_EVENTS.get(record[0]) if type(record[0]) is int else None
    if cls is None:
        raise CodecError(f"unknown event tag {record[0]!r}")
    try:
        return _class_codec(cls)[1](list(record[1:]))
    except (TypeError, ValueError) as exc:
        raise CodecError(f"bad {cls.__name__} record: {exc}") from exc
