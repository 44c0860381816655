"""The Chest test as Page's CUSUM over torso hits (``IW4MConfig.chest_statistic = "cusum"``).

IW4MAdmin's Chest asks whether a player hits the upper torso too often against the lower one. Its
ratio test is re-run at every hit against limits that hold for one look, so over a long session
an honest player whose habit sits near a limit is flagged in the end. Here every torso hit is one
Bernoulli verdict (upper torso: positive) and Page's CUSUM accumulates their log likelihood ratio
of "a chest-aiming cheat" (share ``chest_theta1``) against "the highest honest share"
(``chest_theta0``). Its alarm threshold is set from an in-control average run length in torso hits
(:func:`anticheat.detectors.cusum.threshold_for_arl`), which with a player's hit rate reads as one
false alarm per N player-hours.

The statistic lives in the lifetime :class:`~anticheat.detectors.iw4m.profile.HitStats` (it is
persisted with the profile): the CUSUM recursion is monotone in its start, so a run carried over
from earlier sessions is never below one started at connect and the session needs no copy.

Only torso hits on a target whose upper and lower torso were both in view from the shooter's eye
count (``ShotResult.exposed``); a hit without that record (older replays) counts.
"""

from __future__ import annotations

from anticheat.detectors.cusum import CusumLimits, cusum_limits
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.thresholds import IW4MConfig
from world.hitbox import Bone

__all__ = ["chest_limits", "chest_observe", "chest_cusum_finding", "chest_cusum_score", "torso_in_view"]

_UPPER = int(Bone.UPPER_TORSO)
_LOWER = int(Bone.LOWER_TORSO)
_TORSO_BITS = (1 << _UPPER) | (1 << _LOWER)


def chest_limits(cfg: IW4MConfig) -> CusumLimits:
    """The limits of ``cfg``'s Chest CUSUM (``up`` per upper-torso hit, ``down`` per lower one)."""
    return cusum_limits(cfg.chest_theta0, cfg.chest_theta1, cfg.chest_flag_arl_hits, cfg.chest_ban_arl_hits)


def torso_in_view(exposed: int | None) -> bool:
    """Whether a hit's target showed both torso bones (``exposed``: bit ``1 << bone id`` per bone
    in view, None when not recorded, which counts as in view)."""
    return exposed is None or exposed & _TORSO_BITS == _TORSO_BITS


def chest_observe(stats: HitStats, bone: int, limits: CusumLimits) -> None:
    """Fold one hit on ``bone`` into the statistic (hits off the torso change nothing)."""
    if bone == _UPPER:
        stats.chest_cusum += limits.up
    elif bone == _LOWER:
        stats.chest_cusum = max(0.0, stats.chest_cusum + limits.down)


def chest_cusum_finding(stats: HitStats, limits: CusumLimits) -> Finding | None:
    """A lifetime Chest finding when the statistic is at a threshold (ban above flag); its value is
    the statistic, its hits the upper-torso hits."""
    s = stats.chest_cusum
    if s >= limits.ban:
        return Finding("Chest", Level.BAN, Scope.LIFETIME, s, limits.ban, stats.count(_UPPER), _UPPER)
    if s >= limits.flag:
        return Finding("Chest", Level.FLAG, Scope.LIFETIME, s, limits.flag, stats.count(_UPPER), _UPPER)
    return None


def chest_cusum_score(stats: HitStats, limits: CusumLimits) -> float:
    """The statistic over the flag threshold (>= 1.0 exactly when :func:`chest_cusum_finding` finds)."""
    return stats.chest_cusum / limits.flag
