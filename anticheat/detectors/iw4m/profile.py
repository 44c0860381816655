"""Hit statistics of one player over a session or a lifetime, exportable as a plain dict.

The same class holds both scopes: the session copy starts empty at connect, the lifetime copy is
imported from storage and keeps growing. Every field is a count or a running mean keyed by hit
location, so the size is fixed whatever the number of hits (bounded state).

The exported dict holds only ints, floats and strings (JSON and SQLite friendly):
``{"version": 1, "hits": int, "kills": int, "bones": {"<bone id>": count},
"offsets": {"<bone id>": [count, mean_deg]}, "snap_hits": int, "snap_mean": float,
"max_strain": float, "recoil_hits": int, "recoil_mean": float, "button_no_fire": int,
"chest_cusum": float, "headshot_cusum": float}``. ``chest_cusum`` and ``headshot_cusum``
(log-likelihood-ratio units) were added after version 1 was fixed: a profile without them reads
as 0.0, so older profiles still load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from anticheat.detectors.iw4m.finding import LOCATION_NAME

__all__ = ["PROFILE_VERSION", "HitStats", "VALID_BONES"]

PROFILE_VERSION = 1
VALID_BONES: frozenset[int] = frozenset(LOCATION_NAME)


class HitStats:
    """Counts and running means of one player's analysed hits."""

    __slots__ = (
        "hits",
        "kills",
        "bones",
        "offset_n",
        "offset_mean",
        "snap_hits",
        "snap_mean",
        "max_strain",
        "recoil_hits",
        "recoil_mean",
        "button_no_fire",
        "chest_cusum",
        "headshot_cusum",
    )

    def __init__(self) -> None:
        self.hits = 0
        self.kills = 0
        self.bones: dict[int, int] = {}
        self.offset_n: dict[int, int] = {}
        self.offset_mean: dict[int, float] = {}
        self.snap_hits = 0
        self.snap_mean = 0.0
        self.max_strain = 0.0
        self.recoil_hits = 0
        self.recoil_mean = 0.0
        self.button_no_fire = 0
        # Page's CUSUM of the Chest test over torso hits (see ``iw4m.chest``): a statistic, not a count.
        self.chest_cusum = 0.0
        self.headshot_cusum = 0.0

    # ------------------------------------------------------------------ updates

    def add_hit(self, bone: int) -> None:
        """Count a hit on ``bone`` (callers pass ids from :data:`VALID_BONES` only)."""
        self.hits += 1
        self.bones[bone] = self.bones.get(bone, 0) + 1

    def add_offset(self, bone: int, offset_deg: float) -> None:
        """Fold one hit's offset into the running mean of its location."""
        n = self.offset_n.get(bone, 0) + 1
        mean = self.offset_mean.get(bone, 0.0)
        self.offset_n[bone] = n
        self.offset_mean[bone] = mean + (offset_deg - mean) / n

    def add_snap(self, snap_deg: float) -> None:
        """Fold one snap hit into the running mean."""
        self.snap_hits += 1
        self.snap_mean += (snap_deg - self.snap_mean) / self.snap_hits

    def add_recoil(self, recoil_deg: float) -> None:
        """Fold one hit's mean reported recoil into the running mean."""
        self.recoil_hits += 1
        self.recoil_mean += (recoil_deg - self.recoil_mean) / self.recoil_hits

    # ------------------------------------------------------------------ figures

    def count(self, bone: int) -> int:
        """Hits on ``bone``."""
        return self.bones.get(bone, 0)

    def offset_hits(self) -> int:
        """Hits that had an offset measured."""
        return sum(self.offset_n.values())

    def weighted_offset(self) -> float:
        """Mean offset (deg) over all locations, each location's mean weighted by its hits."""
        total = self.offset_hits()
        if total == 0:
            return 0.0
        return sum(self.offset_mean[b] * n for b, n in self.offset_n.items()) / total

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict export (see the module docstring)."""
        return {
            "version": PROFILE_VERSION,
            "hits": self.hits,
            "kills": self.kills,
            "bones": {str(b): n for b, n in sorted(self.bones.items())},
            "offsets": {str(b): [self.offset_n[b], self.offset_mean[b]] for b in sorted(self.offset_n)},
            "snap_hits": self.snap_hits,
            "snap_mean": self.snap_mean,
            "max_strain": self.max_strain,
            "recoil_hits": self.recoil_hits,
            "recoil_mean": self.recoil_mean,
            "button_no_fire": self.button_no_fire,
            "chest_cusum": self.chest_cusum,
            "headshot_cusum": self.headshot_cusum,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HitStats:
        """Rebuild from :meth:`to_dict` output; raises ValueError on anything malformed."""
        if not isinstance(data, Mapping):
            raise ValueError("profile must be a mapping")
        if data.get("version") != PROFILE_VERSION:
            raise ValueError(f"unsupported profile version {data.get('version')!r}")
        out = cls()
        out.hits = _count(data, "hits")
        out.kills = _count(data, "kills")
        out.snap_hits = _count(data, "snap_hits")
        out.snap_mean = _real(data, "snap_mean")
        out.max_strain = _real(data, "max_strain")
        out.recoil_hits = _count(data, "recoil_hits")
        out.recoil_mean = _real(data, "recoil_mean")
        out.button_no_fire = _count(data, "button_no_fire")
        out.chest_cusum = _real(data, "chest_cusum")
        out.headshot_cusum = _real(data, "headshot_cusum")
        bones = data.get("bones", {})
        if not isinstance(bones, Mapping):
            raise ValueError("bones must be a mapping")
        for key, n in bones.items():
            bone = _bone(key)
            out.bones[bone] = _count({"n": n}, "n")
        offsets = data.get("offsets", {})
        if not isinstance(offsets, Mapping):
            raise ValueError("offsets must be a mapping")
        for key, pair in offsets.items():
            bone = _bone(key)
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"offsets[{key!r}] must be [count, mean]")
            out.offset_n[bone] = _count({"n": pair[0]}, "n")
            out.offset_mean[bone] = _real({"m": pair[1]}, "m")
        if sum(out.bones.values()) != out.hits:
            raise ValueError("bones do not add up to hits")
        return out


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a non-negative int, got {value!r}")
    return value


def _real(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a finite non-negative number, got {value!r}")
    return float(value)


def _bone(key: object) -> int:
    try:
        bone = int(str(key))
    except ValueError:
        raise ValueError(f"bad bone id {key!r}") from None
    if bone not in VALID_BONES:
        raise ValueError(f"unknown bone id {bone}")
    return bone
