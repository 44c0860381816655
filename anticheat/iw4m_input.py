"""IW4MAdmin's input-forgery limits: Recoil (no-recoil) and Button (hit without an attack press).

Pure functions over the session's :class:`~anticheat.iw4m_profile.HitStats`; both are session
measures (a no-recoil or packet-forging client shows itself within one session).
"""

from __future__ import annotations

from anticheat.iw4m_finding import Finding, Level, Scope
from anticheat.iw4m_profile import HitStats
from anticheat.iw4m_thresholds import IW4MConfig

__all__ = ["button_finding", "recoil_finding"]


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
