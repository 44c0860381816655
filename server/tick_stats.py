"""Tick-time statistics: a bounded ring of recent tick durations with percentiles."""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np


PHASES = ("inputs", "shots", "detect", "record", "visibility", "snapshots")
"""The tick flow's phases (DESIGN.md), in order, as :meth:`TickStats.add_phases` takes them."""

BUCKET_BOUNDS_S = (0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0065, 0.0078125, 0.01, 0.0125,
                   0.015625, 0.02, 0.03, 0.05, 0.1, 0.25)
"""Upper bounds (s) of the tick-duration histogram's buckets (a last one, +Inf, is implied).
They include both tick budgets (1/128 s and 1/64 s), so a histogram reads "ticks within the
budget" exactly; the server's own budget is added when it is another."""


class TickStats:
    """Durations (s) of the last ``window`` ticks, overrun count, and percentiles; the mean time
    of each phase of the tick flow, to show where a slow tick goes.

    An overrun is a tick whose processing took longer than the tick budget (1 / tick rate).
    Each tick's CPU time (the server thread's own) is kept beside its wall time: on a host that
    takes the CPU away (other processes, a shared VM), wall percentiles far above the CPU ones
    say the machine, not the server's work, made those ticks slow.
    """

    def __init__(self, budget_s: float, window: int = 4096) -> None:
        self.budget_s = budget_s
        self._ring = np.zeros(window, dtype=np.float64)
        self._cpu = np.zeros(window, dtype=np.float64)
        self._n = 0
        self.overruns = 0
        self.ticks = 0
        self._phase_s = [0.0] * len(PHASES)
        self._phase_ticks = 0
        self.bucket_bounds_s: tuple[float, ...] = tuple(sorted({*BUCKET_BOUNDS_S, budget_s}))
        """The histogram's upper bounds (s), ascending, +Inf excluded."""
        # Every tick since the start, per bucket (not cumulative; the last is +Inf), counted as the
        # tick ends: a bisect over a short tuple, so a scrape never has to go through the ring.
        self._buckets = [0] * (len(self.bucket_bounds_s) + 1)
        self.total_s = 0.0
        """Sum of every tick's wall time (s) since the start."""

    def add_phases(self, *durations_s: float) -> None:
        """Add one tick's time (s) per phase, in :data:`PHASES` order."""
        acc = self._phase_s
        for i, d in enumerate(durations_s):
            acc[i] += d
        self._phase_ticks += 1

    def add(self, duration_s: float, cpu_s: float = math.nan) -> None:
        """Record one tick's processing time (s, wall clock) and the CPU time (s) the server
        thread spent on it (NaN: not measured)."""
        at = self._n % self._ring.size
        self._ring[at] = duration_s
        self._cpu[at] = cpu_s
        self._n += 1
        self.ticks += 1
        if duration_s > self.budget_s:
            self.overruns += 1
        # bisect_left: a duration equal to a bound belongs to that bound's bucket (le, as Prometheus).
        self._buckets[bisect.bisect_left(self.bucket_bounds_s, duration_s)] += 1
        self.total_s += duration_s

    def histogram(self) -> tuple[list[tuple[float, int]], float]:
        """Every tick since the start as a cumulative histogram: ``([(upper bound s, ticks at or
        under it), ..., (inf, all ticks)], sum of the ticks' wall times s)``."""
        out: list[tuple[float, int]] = []
        total = 0
        for bound, n in zip((*self.bucket_bounds_s, math.inf), self._buckets):
            total += n
            out.append((bound, total))
        return out, self.total_s

    def phase_totals_s(self) -> dict[str, float]:
        """Total wall time (s) spent in each phase of :data:`PHASES` since the start."""
        return dict(zip(PHASES, self._phase_s))

    def durations_s(self) -> np.ndarray:
        """The recorded ticks' wall times (s), oldest first (the last ``window`` ticks)."""
        n = min(self._n, self._ring.size)
        if self._n <= self._ring.size:
            return self._ring[:n].copy()
        at = self._n % self._ring.size
        return np.concatenate([self._ring[at:], self._ring[:at]])

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of recorded tick times (s); 0 before any tick."""
        n = min(self._n, self._ring.size)
        return float(np.percentile(self._ring[:n], q)) if n else 0.0

    def cpu_percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of the ticks' CPU times (s) among those measured; 0 before any."""
        cpu = self._cpu[: min(self._n, self._cpu.size)]
        cpu = cpu[~np.isnan(cpu)]
        return float(np.percentile(cpu, q)) if cpu.size else 0.0

    def summary(self) -> dict[str, Any]:
        """p50/p99/max in ms, and as fractions of the budget; the same percentiles of CPU time
        (ms); overrun count; mean ms per phase."""
        n = min(self._n, self._ring.size)
        mx = float(self._ring[:n].max()) if n else 0.0
        p50, p99 = self.percentile(50), self.percentile(99)
        return {
            "ticks": self.ticks,
            "overruns": self.overruns,
            "p50_ms": p50 * 1e3,
            "p99_ms": p99 * 1e3,
            "max_ms": mx * 1e3,
            "p50_budget": p50 / self.budget_s,
            "p99_budget": p99 / self.budget_s,
            "cpu_p50_ms": self.cpu_percentile(50) * 1e3,
            "cpu_p99_ms": self.cpu_percentile(99) * 1e3,
            "phase_mean_ms": {name: (t / self._phase_ticks * 1e3 if self._phase_ticks else 0.0)
                              for name, t in zip(PHASES, self._phase_s)},
        }
