"""IW4MAdmin's input-forgery limits: Recoil (no-recoil) and Button (hit without an attack press).

Pure functions over the session's :class:`~anticheat.detectors.iw4m.profile.HitStats`; both are session
measures (a no-recoil or packet-forging client shows itself within one session).
"""

from __future__ import annotations

import sys

from anticheat.detector import over_limit
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.thresholds import IW4MConfig

__all__ = ["button_finding", "button_score", "recoil_finding", "recoil_score"]


def recoil_finding(session: HitStats, cfg: IW4MConfig) -> Finding | None:
    """Ban when the mean reported recoil is zero over enough hits and more than a few kills."""
    if (
        session.recoil_hits >= cfg.recoil_min_hits
        and session.kills > cfg.recoil_min_kills
        and session.recoil_mean <= cfg.recoil_zero_tolerance_deg
    ):
        return Finding(
            "Recoil", Level.BAN, Scope.SESSION, session.recoil_mean, cfg.recoil_zero_tolerance_deg, session.hits
        )
    return None


def button_finding(session: HitStats, cfg: IW4MConfig) -> Finding | None:
    """Flag, then ban, as hits without a FIRE press accumulate (value: how many so far)."""
    n = session.button_no_fire
    if n >= cfg.button_ban_hits:
        return Finding("Button", Level.BAN, Scope.SESSION, float(n), float(cfg.button_ban_hits), session.hits)
    if n >= cfg.button_flag_hits:
        return Finding("Button", Level.FLAG, Scope.SESSION, float(n), float(cfg.button_flag_hits), session.hits)
    return None


def recoil_score(session: HitStats, cfg: IW4MConfig) -> float:
    """The zero tolerance against the mean reported recoil: low recoil is the suspicious side, so
    the ratio is inverted (>= 1.0 exactly when :func:`recoil_finding` finds). A mean of exactly
    zero is the largest finite float: no tolerance, however strict, clears it. 0.0 until the
    hits and kills the ban needs."""
    if session.recoil_hits < cfg.recoil_min_hits or session.kills <= cfg.recoil_min_kills:
        return 0.0
    if session.recoil_mean <= 0.0:
        return sys.float_info.max
    return over_limit(cfg.recoil_zero_tolerance_deg, session.recoil_mean)


def button_score(session: HitStats, cfg: IW4MConfig) -> float:
    """Hits without a FIRE press against the count that flags (or bans, if fewer)."""
    return over_limit(float(session.button_no_fire), float(min(cfg.button_flag_hits, cfg.button_ban_hits)))
