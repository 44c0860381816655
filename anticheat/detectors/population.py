"""Population context: how far a player's accuracy stands from the other players' (z-scores).

The architecture article (REFERENCES section 4) flags a player whose accuracy is more than 3
standard deviations above the population's. We score each player against the *other* players
(leave-one-out mean and sample sd), so a blatant cheater cannot hide by inflating the very
spread he is measured against; with 8 players, one extreme value among them can never reach
z = 3 when it is included (the largest possible z of one of n values is (n - 1) / sqrt(n)).

The z-scores are context for the operator (the admin page and the lab's score traces show them),
never a detection: on the held-out lab corpora (heldout3-5, 280 honest player-matches of 600 s)
40 honest player-matches reached hit-ratio z >= 3 and 12 headshot-ratio z >= 3, while 15 of
84 cheating ones reached either. Good players are outliers in a 12-player server; the
per-player detectors with false-alarm rates set per player-hour carry the verdicts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import Detection, ShotResult
from anticheat.skip import SkipBook
from world.hitbox import Bone

__all__ = ["PopulationConfig", "PopulationDetector", "leave_one_out_z"]

HEADSHOT_BONES = frozenset({int(Bone.HEAD), int(Bone.NECK)})
"""IW4MAdmin counts head and neck together as headshots."""

_OWN_METRICS = ("hit_ratio", "headshot_ratio")
"""The metrics ``PopulationDetector.metrics`` computes from its own counts."""


@dataclass(frozen=True, slots=True)
class PopulationConfig:
    """How the population z-scores are computed.

    Attributes:
        k_sigma: the z a score of 1.0 stands for (article: 3).
        min_players: fewer players with a finite value of a metric: no score on it (5).
        sd_floor: (metric, smallest sd) pairs; metrics absent here score 0 when the other
            players' sd is 0 (a lone deviation from identical values says nothing; a floor
            says how much spread is natural).
        min_shots: a player's hit ratio is only computed from this many registered rays (30).
        min_hits: ... and headshot ratio from this many hits (15, IW4MAdmin's minimum kills).
    """

    k_sigma: float = 3.0
    min_players: int = 5
    sd_floor: tuple[tuple[str, float], ...] = ()
    min_shots: int = 30
    min_hits: int = 15


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


def _metric_z(
    metrics: Mapping[int, Mapping[str, float]], name: str, cfg: PopulationConfig,
) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """For metric ``name``: (players with a finite value, ascending; their values; their z; the
    others' mean; the sd used), or None when too few players have it."""
    players = sorted(p for p, per in metrics.items() if name in per and math.isfinite(per[name]))
    if len(players) < max(cfg.min_players, 3):
        return None
    vals = np.array([metrics[p][name] for p in players], dtype=np.float64)
    z, mean, sd = leave_one_out_z(vals, dict(cfg.sd_floor).get(name, 0.0))
    return players, vals, z, mean, sd


class PopulationDetector(Detector):
    """Counts per-player accuracy from events; ``scores`` compares players when asked (no detections).

    Counters per player are a fixed handful of integers (bounded). Shots are counted per ray
    (every pellet); a ray that hit a player is a hit; hits on head or neck are headshots.
    """

    name = "population"

    def __init__(self, config: PopulationConfig | None = None) -> None:
        self.config = config or PopulationConfig()
        self._shots: Counter[int] = Counter()
        self._hits: Counter[int] = Counter()
        self._heads: Counter[int] = Counter()
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

    def reset_player(self, player: int) -> None:
        for c in (self._shots, self._hits, self._heads):
            c.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``hit_ratio`` and ``headshot_ratio``: the player's z against the other players, over
        ``k_sigma`` (unitless; negative below the others' mean). 0.0 while the player lacks the
        metric's shots or hits, fewer than ``min_players`` have it, or the others do not
        spread. Current values (the counts are cumulative and only asked for on demand);
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
