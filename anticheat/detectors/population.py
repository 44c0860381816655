"""Population outliers: a player's metric z-scored against the other players (k-sigma).

The architecture article (REFERENCES section 4) flags a player whose accuracy is more than 3
standard deviations above the population's. We score each player against the *other* players
(leave-one-out mean and sample sd), so a blatant cheater cannot hide by inflating the very
spread he is measured against; with 8 players, one extreme value among them can never reach
z = 3 when it is included (the largest possible z of one of n values is (n - 1) / sqrt(n)).

``outliers`` is a pure function over ``{player: {metric: value}}``; ``PopulationDetector`` counts
per-player shots, hits and headshots from events and turns outliers into Detections when the
pipeline asks (at intervals or at match end).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import Detection, KillEvent, ShotResult
from anticheat.skip import SkipBook
from anticheat.tolerances import searched
from world.hitbox import Bone

__all__ = ["Outlier", "PopulationConfig", "PopulationDetector", "leave_one_out_z", "outliers"]

HEADSHOT_BONES = frozenset({int(Bone.HEAD), int(Bone.NECK)})
"""IW4MAdmin counts head and neck together as headshots."""

_OWN_METRICS = ("hit_ratio", "headshot_ratio")
"""The metrics ``PopulationDetector.metrics`` computes from its own counts."""


@dataclass(frozen=True, slots=True)
class PopulationConfig:
    """Population-outlier tolerances.

    Attributes:
        k_sigma: flag z above this (article: 3).
        min_players: fewer players with a finite value of a metric: no verdict on it (5).
        lower_is_suspicious: metrics where a *low* value is the suspicious side (z is negated),
            e.g. time to kill.
        sd_floor: (metric, smallest sd) pairs; metrics absent here give no verdict when the other
            players' sd is 0 (a lone deviation from identical values is not evidence of cheating;
            a floor says how much spread is natural).
        min_shots: a player's hit ratio is only computed from this many registered rays (30).
        min_hits: ... and headshot ratio from this many hits (15, IW4MAdmin's minimum kills).
        severity: of a population Detection (weak alone: good players exist).
    """

    k_sigma: float = searched(3.0, 2.0, 6.0)
    min_players: int = 5
    lower_is_suspicious: frozenset[str] = frozenset({"time_to_kill_s"})
    sd_floor: tuple[tuple[str, float], ...] = ()
    min_shots: int = 30
    min_hits: int = 15
    severity: float = 0.3


@dataclass(frozen=True, slots=True)
class Outlier:
    """One player's metric beyond k sigma of the others.

    Attributes: player, metric, value, others_mean, others_sd (the sd used, floored), z
        (signed so that positive is the suspicious side), others (how many other players).
    """

    player: int
    metric: str
    value: float
    others_mean: float
    others_sd: float
    z: float
    others: int


def leave_one_out_z(values: np.ndarray, sd_floor: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each value: (z against the others, others' mean, others' sample sd (floored)).

    Two passes over an n x n masked matrix, O(n^2): populations are a server's players, and the
    one-pass closed form loses the sd of identical values to rounding (sqrt of the cancellation
    error), which would turn "no spread" into an enormous z. An sd below 1e-9 of the mean's
    magnitude (or of 1) counts as 0. z is nan where the sd is 0 and no floor is given. Needs n >= 3.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 3:
        raise ValueError("leave-one-out z needs at least 3 values")
    others = ~np.eye(n, dtype=bool)
    grid = np.broadcast_to(x, (n, n))
    others_mean = np.sum(grid, axis=1, where=others) / (n - 1)
    dev = grid - others_mean[:, None]
    others_sd = np.sqrt(np.sum(dev * dev, axis=1, where=others) / (n - 2))
    tiny = 1e-9 * np.maximum(np.abs(others_mean), 1.0)
    others_sd = np.where(others_sd <= tiny, 0.0, others_sd)
    sd = np.maximum(others_sd, sd_floor)
    safe = np.where(sd > 0.0, sd, 1.0)
    z = np.where(sd > 0.0, (x - others_mean) / safe, np.nan)
    return z, others_mean, sd


def outliers(
    metrics: Mapping[int, Mapping[str, float]], config: PopulationConfig | None = None,
) -> list[Outlier]:
    """Every (player, metric) more than ``k_sigma`` above the other players, most extreme first.

    Players lacking a metric (or with a non-finite value) are left out of that metric's
    population. A metric with fewer than ``min_players`` players gives no verdict.
    """
    cfg = config or PopulationConfig()
    names = sorted({name for per in metrics.values() for name in per})
    found: list[Outlier] = []
    for name in names:
        table = _metric_z(metrics, name, cfg)
        if table is None:
            continue
        players, vals, z, mean, sd = table
        for i, p in enumerate(players):
            zi = z[i]
            if math.isfinite(zi) and zi > cfg.k_sigma:
                found.append(Outlier(p, name, float(vals[i]), float(mean[i]), float(sd[i]), float(zi),
                                     len(players) - 1))
    found.sort(key=lambda o: (-o.z, o.player, o.metric))
    return found


def _metric_z(
    metrics: Mapping[int, Mapping[str, float]], name: str, cfg: PopulationConfig,
) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """For metric ``name``: (players with a finite value, ascending; their values; their z signed
    so that positive is the suspicious side; the others' mean; the sd used), or None when too
    few players have it."""
    players = sorted(p for p, per in metrics.items() if name in per and math.isfinite(per[name]))
    if len(players) < max(cfg.min_players, 3):
        return None
    vals = np.array([metrics[p][name] for p in players], dtype=np.float64)
    z, mean, sd = leave_one_out_z(vals, dict(cfg.sd_floor).get(name, 0.0))
    if name in cfg.lower_is_suspicious:
        z = -z
    return players, vals, z, mean, sd


class PopulationDetector(Detector):
    """Counts per-player accuracy from events; ``evaluate`` compares players when asked.

    Counters per player are a fixed handful of integers (bounded). Shots are counted per ray
    (every pellet); a ray that hit a player is a hit; hits on head or neck are headshots.
    """

    name = "population"

    def __init__(self, config: PopulationConfig | None = None) -> None:
        self.config = config or PopulationConfig()
        self._shots: Counter[int] = Counter()
        self._hits: Counter[int] = Counter()
        self._heads: Counter[int] = Counter()
        self._kills: Counter[int] = Counter()
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Shots not counted, per skip reason."""
        return dict(self.skipped)

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        reason = skip.shot_reason(shot.shooter, shot.victim, shot.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return NO_DETECTIONS
        self._shots[shot.shooter] += 1
        if shot.victim is not None:
            self._hits[shot.shooter] += 1
            if shot.bone in HEADSHOT_BONES:
                self._heads[shot.shooter] += 1
        return NO_DETECTIONS

    def on_kill(self, kill: KillEvent, skip: SkipBook) -> Sequence[Detection]:
        self._kills[kill.killer] += 1
        return NO_DETECTIONS

    def reset_player(self, player: int) -> None:
        for c in (self._shots, self._hits, self._heads, self._kills):
            c.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``hit_ratio`` and ``headshot_ratio``: the player's z against the other players (the
        z ``evaluate`` judges, signed so that positive is the suspicious side), over
        ``k_sigma`` (unitless; negative below the others' mean). 0.0 while the player lacks the
        metric's shots or hits, fewer than ``min_players`` have it, or the others do not
        spread. Only this detector's own metrics: ``evaluate``'s ``extra`` ones come from
        elsewhere. Current values (the counts are cumulative and only asked for on demand);
        O(players^2) in numpy, once per metric."""
        if player not in self._shots:
            return NO_SCORES
        table = self.metrics()
        own = table.get(player, {})
        out: dict[str, float] = {}
        for name in _OWN_METRICS:
            value = 0.0
            if name in own:
                found = _metric_z(table, name, self.config)
                if found is not None:
                    zi = float(found[2][found[0].index(player)])
                    if math.isfinite(zi):
                        value = over_limit(zi, self.config.k_sigma)
            out[name] = value
        return out

    def metrics(self) -> dict[int, dict[str, float]]:
        """Per player: ``hit_ratio`` (>= min_shots rays) and ``headshot_ratio`` (>= min_hits hits)."""
        cfg = self.config
        out: dict[int, dict[str, float]] = {}
        for p, shots in self._shots.items():
            per: dict[str, float] = {}
            if shots >= cfg.min_shots:
                per["hit_ratio"] = self._hits[p] / shots
            if self._hits[p] >= cfg.min_hits:
                per["headshot_ratio"] = self._heads[p] / self._hits[p]
            if per:
                out[p] = per
        return out

    def evaluate(self, tick: int, time_s: float,
                 extra: Mapping[int, Mapping[str, float]] | None = None) -> list[Detection]:
        """Detections for the current outliers; ``extra`` adds metrics computed elsewhere
        (e.g. ``aim_score`` from AimStats, ``time_to_kill_s`` from AimDetect's features)."""
        table = self.metrics()
        for p, per in (extra or {}).items():
            table.setdefault(p, {}).update(per)
        return [
            Detection(
                player=o.player, tick=tick, time_s=time_s, detector=self.name, kind=f"outlier_{o.metric}",
                value=o.z, severity=self.config.severity,
                reason=f"Outlier-{o.metric}-{o.z:.2f}@{o.others + 1}",
                evidence={"metric": o.metric, "value": o.value, "others_mean": o.others_mean,
                          "others_sd": o.others_sd, "others": o.others},
            )
            for o in outliers(table, self.config)
        ]
