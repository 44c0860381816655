"""IW4MAdmin's aim-dynamics limits: Offset, Snap and Strain judged over a player's hit statistics.

Pure functions: the measures themselves are in :mod:`anticheat.detectors.iw4m.angles`, the running figures in
:class:`~anticheat.detectors.iw4m.profile.HitStats`; these decide which level, if any, they reach.
"""

from __future__ import annotations

from anticheat.detector import over_limit
from anticheat.detectors.iw4m.finding import Finding, Level, Scope
from anticheat.detectors.iw4m.profile import HitStats
from anticheat.detectors.iw4m.thresholds import IW4MConfig, max_offset_deg

__all__ = ["offset_findings", "offset_score", "snap_findings", "snap_score", "strain_finding", "strain_score"]


def offset_findings(session: HitStats, lifetime: HitStats, bone: int, cfg: IW4MConfig) -> list[Finding]:
    """Offset findings after a hit on ``bone`` had its offset folded into both scopes."""
    out: list[Finding] = []
    n = session.offset_hits()
    mean = session.weighted_offset()
    limit = max_offset_deg(n, cfg.offset_mu, cfg.offset_sigma, cfg.offset_sigmas)
    if mean > limit and n >= cfg.offset_ban_min_hits:
        out.append(Finding("Offset", Level.BAN, Scope.SESSION, mean, limit, n))
    elif mean > limit and n >= cfg.offset_flag_min_hits:
        out.append(Finding("Offset", Level.FLAG, Scope.SESSION, mean, limit, n))
    n_life = lifetime.offset_hits()
    life_mean = lifetime.weighted_offset()
    life_limit = max_offset_deg(n_life, cfg.offset_mu, cfg.offset_sigma, cfg.offset_sigmas)
    # IW4MAdmin's lifetime rule: the hit's own location must be well sampled, not just the total.
    if life_mean > life_limit and lifetime.offset_n.get(bone, 0) > cfg.lifetime_offset_min_location_hits:
        out.append(Finding("Offset", Level.BAN, Scope.LIFETIME, life_mean, life_limit, n_life))
    return out


def snap_findings(session: HitStats, lifetime: HitStats, cfg: IW4MConfig) -> list[Finding]:
    """Snap findings after a snap hit was folded into both scopes (lifetime judged on its own mean)."""
    out: list[Finding] = []
    for scope, stats, min_hits in (
        (Scope.SESSION, session, cfg.snap_min_hits),
        (Scope.LIFETIME, lifetime, cfg.lifetime_snap_min_hits),
    ):
        if stats.snap_hits < min_hits:
            continue
        if stats.snap_mean >= cfg.snap_ban:
            out.append(Finding("Snap", Level.BAN, scope, stats.snap_mean, cfg.snap_ban, stats.snap_hits))
        elif stats.snap_mean >= cfg.snap_flag:
            out.append(Finding("Snap", Level.FLAG, scope, stats.snap_mean, cfg.snap_flag, stats.snap_hits))
    return out


def strain_finding(strain: float, session_hits: int, cfg: IW4MConfig) -> Finding | None:
    """Strain finding of the strain after a hit (a ban also needs ``strain_ban_min_hits`` hits)."""
    if strain > cfg.strain_ban and session_hits >= cfg.strain_ban_min_hits:
        return Finding("Strain", Level.BAN, Scope.SESSION, strain, cfg.strain_ban, session_hits)
    if strain > cfg.strain_flag:
        return Finding("Strain", Level.FLAG, Scope.SESSION, strain, cfg.strain_flag, session_hits)
    return None


def offset_score(session: HitStats, lifetime: HitStats, cfg: IW4MConfig) -> float:
    """The mean offset against its limit, the larger of the session's (once it has the hits a
    flag or ban needs) and the lifetime's (once some location has more than
    ``lifetime_offset_min_location_hits`` hits). The lifetime rule asks that of the location
    just hit; asked of any location, the score may reach 1.0 before the next hit there is
    banned, never after it."""
    out = 0.0
    n = session.offset_hits()
    if n >= min(cfg.offset_flag_min_hits, cfg.offset_ban_min_hits):
        limit = max_offset_deg(n, cfg.offset_mu, cfg.offset_sigma, cfg.offset_sigmas)
        out = over_limit(session.weighted_offset(), limit)
    if lifetime.offset_n and max(lifetime.offset_n.values()) > cfg.lifetime_offset_min_location_hits:
        n_life = lifetime.offset_hits()
        limit = max_offset_deg(n_life, cfg.offset_mu, cfg.offset_sigma, cfg.offset_sigmas)
        out = max(out, over_limit(lifetime.weighted_offset(), limit))
    return out


def snap_score(session: HitStats, lifetime: HitStats, cfg: IW4MConfig) -> float:
    """The mean snap (deg per step) against the lower of the flag and ban limits, the larger of
    the two scopes that have their snap hits (>= 1.0 exactly when :func:`snap_findings` finds)."""
    limit = min(cfg.snap_flag, cfg.snap_ban)
    out = 0.0
    for stats, min_hits in ((session, cfg.snap_min_hits), (lifetime, cfg.lifetime_snap_min_hits)):
        if stats.snap_hits >= min_hits:
            out = max(out, over_limit(stats.snap_mean, limit))
    return out


def strain_score(session: HitStats, cfg: IW4MConfig) -> float:
    """The session's highest strain against the lower of the flag and ban limits (>= 1.0 once
    :func:`strain_finding` found; the strain decays between hits, its maximum does not)."""
    return over_limit(session.max_strain, min(cfg.strain_flag, cfg.strain_ban))
