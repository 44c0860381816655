"""Crosshair-entry opportunities measured on a corpus: the trigger detector's ``TAKE_LLR`` and its
honest peaks (``referee lab takes``).

Every stream is walked as the live detector sees it (``ConnectionSample`` into the ``SkipBook``,
each ``AimSample`` through a ``TakeTracker``, a skipped link's opportunities left out); each
opportunity is counted per stratum (``honest:<skill>`` or the cheat profile) and range band. The
table: per band, the triggerbots' take rate pooled and the highest honest skill's; the log-ratio
of taken and not taken. The CUSUM of ``TAKE_LLR`` (or of the measured table) is then run over
every player-match: honest peaks (their tail sets the threshold) and each triggerbot's time to
reach the threshold. Recordings made before the probe (no ``fire_ready``) give no opportunities.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anticheat.detectors.trigger import TAKE_LLR, range_band
from anticheat.detectors.trigger_takes import TakeTracker
from anticheat.events import AimSample, ConnectionSample, SessionEvent
from anticheat.skip import SkipBook
from testbed.lab.store import LabStore
from testbed.lab.stream_map import map_streams, stream_events
from testbed.lab.trigger_table import BANDS, HONEST_PREFIX, RATE_FLOOR, TRIGGERBOT_PROFILES

__all__ = ["TakeMeasurement", "corpus_opportunities", "measure_takes", "player_strata", "stream_opportunities", "take_table"]


def stream_opportunities(events: Iterable[object]) -> Iterator[tuple[str, float, int, bool]]:
    """``(name, time_s, band, taken)`` of every judged opportunity of an event stream."""
    skip = SkipBook()
    names: dict[int, str] = {}
    trackers: dict[int, TakeTracker] = {}
    for event in events:
        if isinstance(event, AimSample):
            if event.fire_ready is None:
                continue
            tracker = trackers.get(event.player)
            if tracker is None:
                tracker = trackers[event.player] = TakeTracker()
            for opp in tracker.feed(event):
                if skip.player_reason(opp.player) is None:
                    yield names.get(opp.player, ""), opp.time_s, range_band(opp.distance_m), opp.taken
        elif isinstance(event, ConnectionSample):
            skip.record(event)
        elif isinstance(event, SessionEvent):
            trackers.pop(event.player, None)
            if event.kind == "connect":
                names[event.player] = event.name


def _match_opportunities(job: tuple[int, str, bytes]) -> list[tuple[str, float, int, bool]]:
    return list(stream_opportunities(stream_events(*job)))


@dataclass(frozen=True, slots=True)
class PlayerOpportunities:
    """One player-match's opportunities: its stratum, play time (s) and (time since join s, band,
    taken) in order."""

    stratum: str
    match_id: int
    name: str
    play_s: float
    rows: tuple[tuple[float, int, bool], ...]


def player_strata(store: LabStore) -> dict[tuple[int, str], tuple[str, float, float]]:
    """Per (match, player name): the stratum (``honest:<skill>`` or the cheat profile's label), the
    join time (s) and the play time (s)."""
    return {(int(m), str(n)): (str(p) if c else HONEST_PREFIX + str(s), float(j or 0.0), float(pl or 0.0))
            for m, n, p, c, s, j, pl in
            store.con.execute("SELECT match_id, name, profile, cheat, skill, join_s, play_s FROM players").fetchall()}


def corpus_opportunities(store: LabStore, *, jobs: int = 1,
                         on_match: Callable[[int, int], object] | None = None) -> list[PlayerOpportunities]:
    """Every labelled player-match's opportunities (players without any included)."""
    info = player_strata(store)
    rows: dict[tuple[int, str], list[tuple[float, int, bool]]] = {key: [] for key in info}
    for match_id, found in map_streams(store, _match_opportunities, jobs=jobs, on_match=on_match):
        for name, time_s, band, taken in found:
            key = (match_id, name)
            if key in info:
                rows[key].append((time_s - info[key][1], band, taken))
    return [PlayerOpportunities(info[k][0], k[0], k[1], info[k][2], tuple(r)) for k, r in sorted(rows.items())]


def take_table(players: Sequence[PlayerOpportunities]) -> dict[str, np.ndarray]:
    """Per stratum, (BANDS, 2) counts: opportunities and taken per band."""
    out: dict[str, np.ndarray] = {}
    for p in players:
        counts = out.setdefault(p.stratum, np.zeros((BANDS, 2), dtype=np.int64))
        for _, band, taken in p.rows:
            counts[band, 0] += 1
            counts[band, 1] += taken
    return out


def llr_table(counts: dict[str, np.ndarray], triggerbots: Sequence[str] = TRIGGERBOT_PROFILES
              ) -> tuple[tuple[float, float], ...] | None:
    """Per band (ln((1 - t) / (1 - h)), ln(t / h)): t the triggerbots' pooled take rate, h the
    highest honest skill's, both kept within [RATE_FLOOR, 1 - RATE_FLOOR] (a few contacts must not
    make an infinite ratio); None when a band lacks either side."""
    out = []
    for band in range(BANDS):
        trig = sum((counts[s][band] for s in triggerbots if s in counts), np.zeros(2, dtype=np.int64))
        honest = [c[band] for s, c in counts.items() if s.startswith(HONEST_PREFIX) and c[band, 0]]
        if not trig[0] or not honest:
            return None
        t = min(max(trig[1] / trig[0], RATE_FLOOR), 1.0 - RATE_FLOOR)
        h = min(max(max(c[1] / c[0] for c in honest), RATE_FLOOR), 1.0 - RATE_FLOOR)
        out.append((round(math.log((1 - t) / (1 - h)), 2), round(math.log(t / h), 2)))
    return tuple(out)


def _run(rows: Sequence[tuple[float, int, bool]], table: Sequence[Sequence[float]],
         threshold: float) -> tuple[float, float | None]:
    """(peak, first time s it reached ``threshold`` or None) of one player's CUSUM."""
    s = peak = 0.0
    first = None
    for t, band, taken in rows:
        s = max(0.0, s + table[band][int(taken)])
        peak = max(peak, s)
        if first is None and s >= threshold:
            first = t
    return peak, first


@dataclass(frozen=True, slots=True)
class TakeMeasurement:
    """``measure_takes``'s result.

    Attributes:
        counts: per stratum, (BANDS, 2) opportunities and taken. measured: the table ``llr_table``
            gives (None: a band lacks data). table: the table the CUSUM ran with (``TAKE_LLR``).
        threshold: the CUSUM's alarm level. honest_hours, honest_peaks: honest play (h) and each
            honest player-match's peak. triggerbots: (stratum, match, name, first alarm s or None).
    """

    counts: dict[str, np.ndarray]
    measured: tuple[tuple[float, float], ...] | None
    table: tuple[tuple[float, float], ...]
    threshold: float
    honest_hours: float
    honest_peaks: tuple[float, ...]
    triggerbots: tuple[tuple[str, int, str, float | None], ...]

    def to_json(self) -> dict[str, Any]:
        return {"counts": {k: v.tolist() for k, v in self.counts.items()}, "measured": self.measured,
                "table": self.table, "threshold": self.threshold, "honest_hours": self.honest_hours,
                "honest_peaks": list(self.honest_peaks), "triggerbots": [list(t) for t in self.triggerbots]}


def measure_takes(players: Sequence[PlayerOpportunities], threshold: float,
                  table: tuple[tuple[float, float], ...] = TAKE_LLR,
                  triggerbots: Sequence[str] = TRIGGERBOT_PROFILES) -> TakeMeasurement:
    """The take table, honest peaks and triggerbot alarm times of ``players`` under ``table``."""
    counts = take_table(players)
    peaks, trig = [], []
    hours = 0.0
    for p in players:
        peak, first = _run(p.rows, table, threshold)
        if p.stratum.startswith(HONEST_PREFIX):
            peaks.append(peak)
            hours += p.play_s / 3600.0
        elif p.stratum in triggerbots:
            trig.append((p.stratum, p.match_id, p.name, first))
    return TakeMeasurement(counts, llr_table(counts, triggerbots), table, threshold, hours,
                           tuple(sorted(peaks, reverse=True)), tuple(trig))
