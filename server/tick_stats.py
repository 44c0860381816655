"""Tick-time statistics: a bounded ring of recent tick durations with percentiles."""

from __future__ import annotations

from typing import Any

import numpy as np


PHASES = ("inputs", "shots", "detect", "record", "visibility", "snapshots")
"""The tick flow's phases (DESIGN.md), in order, as :meth:`TickStats.add_phases` takes them."""


class TickStats:
    """Durations (s) of the last ``window`` ticks, overrun count, and percentiles; the mean time
    of each phase of the tick flow, to show where a slow tick goes.

    An overrun is a tick whose processing took longer than the tick budget (1 / tick rate).
    """

    def __init__(self, budget_s: float, window: int = 4096) -> None:
        self.budget_s = budget_s
        self._ring = np.zeros(window, dtype=np.float64)
        self._n = 0
        self.overruns = 0
        self.ticks = 0
        self._phase_s = [0.0] * len(PHASES)
        self._phase_ticks = 0

    def add_phases(self, *durations_s: float) -> None:
        """Add one tick's time (s) per phase, in :data:`PHASES` order."""
        acc = self._phase_s
        for i, d in enumerate(durations_s):
            acc[i] += d
        self._phase_ticks += 1

    def add(self, duration_s: float) -> None:
        """Record one tick's processing time (s)."""
        self._ring[self._n % self._ring.size] = duration_s
        self._n += 1
        self.ticks += 1
        if duration_s > self.budget_s:
            self.overruns += 1

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of recorded tick times (s); 0 before any tick."""
        n = min(self._n, self._ring.size)
        return float(np.percentile(self._ring[:n], q)) if n else 0.0

    def summary(self) -> dict[str, Any]:
        """p50/p99/max in ms, and as fractions of the budget; overrun count; mean ms per phase."""
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
            "phase_mean_ms": {name: (t / self._phase_ticks * 1e3 if self._phase_ticks else 0.0)
                              for name, t in zip(PHASES, self._phase_s)},
        }
