"""IW4MAdmin's hit-location ratio detections: Bone (headshot and single-bone share) and Chest.

Pure functions of a :class:`HitStats` and the config. Bone looks at the headshot ratio first
((head + neck) / hits) and only when that is within limits at the largest single-bone share, so one
hit never yields two Bone findings of one scope; with ``bone_statistic = "cusum"`` (the default)
the headshot half is :mod:`anticheat.detectors.iw4m.headshot`'s CUSUM instead, and only the
largest-bone share is tested here. Chest compares upper- to lower-torso hits (see
``IW4MConfig`` for why that ratio).
"""

from __future__ import annotations

from anticheat.detector import over_limit
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.thresholds import IW4MConfig, ratio_threshold
from world.hitbox import Bone

__all__ = [
    "bone_finding",
    "bone_score",
    "chest_finding",
    "chest_score",
    "chest_thresholds",
    "headshot_thresholds",
    "max_bone_thresholds",
]

_HEAD = int(Bone.HEAD)
_NECK = int(Bone.NECK)
_UPPER = int(Bone.UPPER_TORSO)
_LOWER = int(Bone.LOWER_TORSO)


def _limits(
    hits: int, cfg: IW4MConfig, name: str, span: tuple[int, int], with_margin: bool
) -> tuple[float, float]:
    """(flag, ban) limits of the ratio whose config fields start with ``name``."""
    z = cfg.margin_z if with_margin else 0.0
    mean, sd_low, sd_high = (getattr(cfg, f"{name}_{k}") for k in ("mean", "sd_low", "sd_high"))
    return (
        ratio_threshold(hits, mean, sd_low, sd_high, getattr(cfg, f"{name}_flag_sd"), *span, z),
        ratio_threshold(hits, mean, sd_low, sd_high, getattr(cfg, f"{name}_ban_sd"), *span, z),
    )


def _bone_hits(hits: int, cfg: IW4MConfig) -> int:
    """The sample size the Bone limits are read at: past ``bone_cap_hits`` they no longer tighten."""
    return min(hits, cfg.bone_cap_hits) if cfg.bone_cap_hits > 0 else hits


def headshot_thresholds(hits: int, cfg: IW4MConfig, with_margin: bool = True) -> tuple[float, float]:
    """(flag, ban) limits of the headshot ratio at ``hits`` hits."""
    span = (cfg.bone_lerp_low_hits, cfg.bone_lerp_high_hits)
    return _limits(_bone_hits(hits, cfg), cfg, "headshot", span, with_margin)


def max_bone_thresholds(hits: int, cfg: IW4MConfig, with_margin: bool = True) -> tuple[float, float]:
    """(flag, ban) limits of the largest single-bone share at ``hits`` hits."""
    span = (cfg.bone_lerp_low_hits, cfg.bone_lerp_high_hits)
    return _limits(_bone_hits(hits, cfg), cfg, "max_bone", span, with_margin)


def chest_thresholds(upper_hits: int, cfg: IW4MConfig, with_margin: bool = True) -> tuple[float, float]:
    """(flag, ban) limits of the upper/lower torso ratio at ``upper_hits`` upper-torso hits."""
    return _limits(upper_hits, cfg, "chest", (cfg.chest_lerp_low_hits, cfg.chest_lerp_high_hits), with_margin)


def bone_finding(stats: HitStats, cfg: IW4MConfig, scope: Scope) -> Finding | None:
    """The Bone finding of ``stats`` if its kills suffice and a ratio is over its flag limit (the
    headshot ratio only with ``bone_statistic = "ratio"``: otherwise that half is a CUSUM, see
    :mod:`anticheat.detectors.iw4m.headshot`)."""
    min_kills = cfg.bone_min_kills if scope is Scope.SESSION else cfg.lifetime_bone_min_kills
    hits = stats.hits
    if stats.kills < min_kills or hits <= 0:
        return None
    if cfg.bone_statistic == "ratio":
        headshot = (stats.count(_HEAD) + stats.count(_NECK)) / hits
        flag, ban = headshot_thresholds(hits, cfg)
        if headshot > flag:
            level, limit = (Level.BAN, ban) if headshot > ban else (Level.FLAG, flag)
            return Finding("Bone", level, scope, headshot, limit, hits, _HEAD)
    # Ties go to the lowest bone id, so the choice does not depend on dict order.
    bone, count = min(stats.bones.items(), key=lambda kv: (-kv[1], kv[0]))
    share = count / hits
    flag, ban = max_bone_thresholds(hits, cfg)
    if share > flag:
        level, limit = (Level.BAN, ban) if share > ban else (Level.FLAG, flag)
        return Finding("Bone", level, scope, share, limit, hits, bone)
    return None


def bone_score(stats: HitStats, cfg: IW4MConfig, scope: Scope) -> float:
    """The largest single-bone share (and with ``bone_statistic = "ratio"`` the headshot ratio),
    against its flag limit (>= 1.0 exactly when :func:`bone_finding` finds); 0.0 while the kills do
    not suffice."""
    min_kills = cfg.bone_min_kills if scope is Scope.SESSION else cfg.lifetime_bone_min_kills
    hits = stats.hits
    if stats.kills < min_kills or hits <= 0:
        return 0.0
    share = over_limit(max(stats.bones.values()) / hits, max_bone_thresholds(hits, cfg)[0])
    if cfg.bone_statistic != "ratio":
        return share
    headshot = (stats.count(_HEAD) + stats.count(_NECK)) / hits
    return max(over_limit(headshot, headshot_thresholds(hits, cfg)[0]), share)


def chest_finding(stats: HitStats, cfg: IW4MConfig, scope: Scope) -> Finding | None:
    """The Chest finding of ``stats`` if it has enough upper-torso hits and a high upper/lower ratio."""
    upper = stats.count(_UPPER)
    min_hits = cfg.chest_min_hits if scope is Scope.SESSION else cfg.lifetime_chest_min_hits
    if upper < min_hits or upper <= 0:
        return None
    # No lower-torso hit at all: divide by one, a finite stand-in that is still the most extreme case.
    ratio = upper / max(1, stats.count(_LOWER))
    flag, ban = chest_thresholds(upper, cfg)
    if ratio <= flag:
        return None
    if ratio > ban and upper >= cfg.chest_ban_min_hits:
        return Finding("Chest", Level.BAN, scope, ratio, ban, upper, _UPPER)
    return Finding("Chest", Level.FLAG, scope, ratio, flag, upper, _UPPER)


def chest_score(stats: HitStats, cfg: IW4MConfig, scope: Scope) -> float:
    """The upper/lower torso ratio against its flag limit (>= 1.0 exactly when
    :func:`chest_finding` finds); 0.0 below the upper-torso hits it needs."""
    upper = stats.count(_UPPER)
    min_hits = cfg.chest_min_hits if scope is Scope.SESSION else cfg.lifetime_chest_min_hits
    if upper < min_hits or upper <= 0:
        return 0.0
    return over_limit(upper / max(1, stats.count(_LOWER)), chest_thresholds(upper, cfg)[0])
