"""Named configuration of lag compensation: history, rewind policy and hit registration.

Every tolerance is a field of a frozen dataclass with its unit and its anchor (REFERENCES
section 7, Source engine lag compensation) documented beside it. Units: seconds, meters, hertz.
``from_mapping`` builds each from a decoded TOML table and refuses unknown keys, so a typo in a
config file fails loudly instead of silently keeping a default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

SOURCE_UNIT_M = 0.0254
"""One Source engine unit (inch) in meters."""

_T = TypeVar("_T")


def _from_mapping(cls: type[_T], data: Mapping[str, Any]) -> _T:
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {unknown} (known: {sorted(known)})")
    return cls(**dict(data))


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


MAX_HISTORY_S = 10.0
"""Longest history kept (s): the ring holds a record per tick per player, and no rewind reaches
back further than a second or two (Source's sv_maxunlag caps at 1 s). 10 s at 256 Hz for 200
players is ~60 MB; a longer setting is a typo, not a need."""


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """Size of the per-tick history ring buffer.

    Attributes:
        tick_rate_hz: server ticks per second (Hz); one record per tick. Default 64 (CS2's tick).
        length_s: seconds of history kept (s). Source keeps at least 1 s (``sv_maxunlag`` 1.0);
            shorter values are refused because rewinds up to ``max_unlag_s`` must find records.
        teleport_jump_m: a horizontal move between two consecutive records longer than this (m)
            is treated as a discontinuity and never interpolated across, even if the generation
            did not change. Source stops interpolating at a 2D jump of 64 units (1.6256 m); at 64 Hz
            no legal movement comes close (10 m/s is 0.16 m per tick).
    """

    tick_rate_hz: float = 64.0
    length_s: float = 1.0
    teleport_jump_m: float = 64 * SOURCE_UNIT_M

    def __post_init__(self) -> None:
        _positive("tick_rate_hz", self.tick_rate_hz)
        _positive("teleport_jump_m", self.teleport_jump_m)
        if not (math.isfinite(self.length_s) and 1.0 <= self.length_s <= MAX_HISTORY_S):
            raise ValueError(f"length_s must be in [1, {MAX_HISTORY_S:g}] s (Source keeps >= 1 s), got {self.length_s!r}")

    @property
    def capacity(self) -> int:
        """Records kept: ceil(length_s * tick_rate_hz) + 1, so ``length_s`` is fully spanned."""
        return math.ceil(self.length_s * self.tick_rate_hz - 1e-9) + 1

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> HistoryConfig:
        """Build from a decoded TOML table; unknown keys raise ValueError."""
        return _from_mapping(cls, data)


@dataclass(frozen=True, slots=True)
class RewindPolicy:
    """How far back a shot's targets are rewound (REFERENCES section 7, Source engine).

    Attributes:
        interp_delay_s: the client's interpolation delay (s): it renders others this far in the past.
            Source's default ``cl_interp`` is 0.100 s.
        claim_tolerance_s: a client's claimed view time is trusted only within this distance (s)
            of the server's estimate; otherwise the estimate is used. Source: +/- 0.200 s.
        max_unlag_s: never rewind further back than this (s). Source ``sv_maxunlag`` 1.0 s;
            Overwatch uses 0.250 s.
        enabled: False turns lag compensation off: targets are taken at the current time.
    """

    interp_delay_s: float = 0.100
    claim_tolerance_s: float = 0.200
    max_unlag_s: float = 1.0
    enabled: bool = True

    def __post_init__(self) -> None:
        _non_negative("interp_delay_s", self.interp_delay_s)
        _non_negative("claim_tolerance_s", self.claim_tolerance_s)
        _non_negative("max_unlag_s", self.max_unlag_s)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RewindPolicy:
        """Build from a decoded TOML table; unknown keys raise ValueError."""
        return _from_mapping(cls, data)


@dataclass(frozen=True, slots=True)
class HitregConfig:
    """Batched hit registration knobs (none changes a result, only speed, except where noted).

    Attributes:
        chunk_shots: no effect since the line test became one compiled pass (no block arrays);
            kept, like ``narrow_chunk_pairs``, because configuration files and replay headers name it.
        narrow_chunk_pairs: no effect since the bone test became one compiled pass over the
            pairs (no block arrays); kept because configuration files and the config recorded in
            replay headers name it.
        broad_margin_m: extra radius (m) added to the body bounds in the broad phases so that
            float rounding can never drop a real hit. 1 cm is far above rounding at map scale (<1 km).
    """

    chunk_shots: int = 256
    narrow_chunk_pairs: int = 512
    broad_margin_m: float = 0.01

    def __post_init__(self) -> None:
        if self.chunk_shots < 1:
            raise ValueError(f"chunk_shots must be at least 1, got {self.chunk_shots!r}")
        if self.narrow_chunk_pairs < 1:
            raise ValueError(f"narrow_chunk_pairs must be at least 1, got {self.narrow_chunk_pairs!r}")
        _non_negative("broad_margin_m", self.broad_margin_m)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> HitregConfig:
        """Build from a decoded TOML table; unknown keys raise ValueError."""
        return _from_mapping(cls, data)


@dataclass(frozen=True, slots=True)
class LagCompConfig:
    """All lag compensation configuration (the ``[lagcomp]`` table: ``history``, ``policy``, ``hitreg``)."""

    history: HistoryConfig = field(default_factory=HistoryConfig)
    policy: RewindPolicy = field(default_factory=RewindPolicy)
    hitreg: HitregConfig = field(default_factory=HitregConfig)

    def __post_init__(self) -> None:
        if self.policy.enabled and self.policy.max_unlag_s > self.history.length_s:
            raise ValueError(
                f"policy.max_unlag_s ({self.policy.max_unlag_s} s) exceeds history.length_s "
                f"({self.history.length_s} s): rewinds would be clamped to the oldest record"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LagCompConfig:
        """Build from a decoded TOML table with optional sub-tables; unknown keys raise ValueError."""
        unknown = sorted(set(data) - {"history", "policy", "hitreg"})
        if unknown:
            raise ValueError(f"LagCompConfig: unknown keys {unknown} (known: history, policy, hitreg)")
        return cls(
            history=HistoryConfig.from_mapping(data.get("history", {})),
            policy=RewindPolicy.from_mapping(data.get("policy", {})),
            hitreg=HitregConfig.from_mapping(data.get("hitreg", {})),
        )
