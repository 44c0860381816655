"""Contact-to-shot delays measured on a corpus: the trigger detector's ``DELAY_LLR`` and its honest
peaks (``referee lab delays``).

Every stream is walked as the live detector sees it (``ConnectionSample`` into the ``SkipBook``,
each ``AimSample`` through a ``DelayTracker``, a skipped link's pulls left out); each trigger pull
(a contact's first shot, or a pull off target) is counted per stratum (``honest:<skill>`` or the
cheat profile's label), range band and delay range. The table: per band and delay range, the
share of pulls in the range for a delayed triggerbot (``CHEAT_SHARE``: a bot set to a delay in
the range fires there on every contact it shoots, less a margin for commands the server's rewind
and the bot's own view disagree on; fixed, so that no bot of ours sets it) against the honest
skill that has the most there. The
bank of CUSUMs (one per delay range) is then run over every player-match: honest peaks (the
highest of the bank; their tail sets the threshold) and each triggerbot's time to reach it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anticheat.detectors.trigger import DELAY_LLR, range_band
from anticheat.detectors.trigger_delays import DELAY_RANGES, DelayTracker, in_ranges
from anticheat.events import AimSample, ConnectionSample, SessionEvent
from anticheat.skip import SkipBook
from testbed.lab.store import LabStore
from testbed.lab.stream_map import map_streams, stream_events
from testbed.lab.takes import player_strata
from testbed.lab.trigger_table import BANDS, HONEST_PREFIX

__all__ = ["CHEAT_SHARE", "DelayMeasurement", "PlayerFirstFires", "corpus_first_fires", "delay_counts",
           "delay_llr_table", "measure_delays", "stream_first_fires"]

CHEAT_SHARE = 0.9
"""The share of a delayed triggerbot's first shots in its delay range (the alternative hypothesis)."""

HONEST_FLOOR = 0.03
"""The honest share is taken as at least this: a band with few honest first shots in a range must
not make a large ratio."""

CHEAT_PREFIX = "triggerbot"
"""Strata whose alarm times are reported: the triggerbot profile and its labelled variants."""


def stream_first_fires(events: Iterable[object]) -> Iterator[tuple[str, float, int, int | None]]:
    """``(name, time_s, band, delay_commands)`` of every judged trigger pull of an event stream
    (delay None: off target)."""
    skip = SkipBook()
    names: dict[int, str] = {}
    trackers: dict[int, DelayTracker] = {}
    for event in events:
        if isinstance(event, AimSample):
            if event.fire_ready is None:
                continue
            tracker = trackers.get(event.player)
            if tracker is None:
                tracker = trackers[event.player] = DelayTracker()
            first = tracker.feed(event)
            if first is not None and skip.player_reason(first.player) is None:
                yield names.get(first.player, ""), first.time_s, range_band(first.distance_m), first.delay_commands
        elif isinstance(event, ConnectionSample):
            skip.record(event)
        elif isinstance(event, SessionEvent):
            trackers.pop(event.player, None)
            if event.kind == "connect":
                names[event.player] = event.name


def _match_first_fires(job: tuple[int, str, bytes]) -> list[tuple[str, float, int, int | None]]:
    return list(stream_first_fires(stream_events(*job)))


@dataclass(frozen=True, slots=True)
class PlayerFirstFires:
    """One player-match's trigger pulls: its stratum, play time (s) and (time since join s, band,
    delay in commands or None off target) in order."""

    stratum: str
    match_id: int
    name: str
    play_s: float
    rows: tuple[tuple[float, int, int | None], ...]


def corpus_first_fires(store: LabStore, *, jobs: int = 1,
                       on_match: Callable[[int, int], object] | None = None) -> list[PlayerFirstFires]:
    """Every labelled player-match's trigger pulls (players without any included)."""
    info = player_strata(store)
    rows: dict[tuple[int, str], list[tuple[float, int, int | None]]] = {key: [] for key in info}
    for match_id, found in map_streams(store, _match_first_fires, jobs=jobs, on_match=on_match):
        for name, time_s, band, delay in found:
            key = (match_id, name)
            if key in info:
                rows[key].append((time_s - info[key][1], band, delay))
    return [PlayerFirstFires(info[k][0], k[0], k[1], info[k][2], tuple(r)) for k, r in sorted(rows.items())]


def delay_counts(players: Sequence[PlayerFirstFires],
                 ranges: tuple[tuple[int, int], ...] = DELAY_RANGES) -> dict[str, np.ndarray]:
    """Per stratum, (BANDS, 2 + len(ranges)) counts per band: trigger pulls, those off target, then
    those in each delay range."""
    out: dict[str, np.ndarray] = {}
    for p in players:
        counts = out.setdefault(p.stratum, np.zeros((BANDS, 2 + len(ranges)), dtype=np.int64))
        for _, band, delay in p.rows:
            counts[band, 0] += 1
            counts[band, 1] += delay is None
            counts[band, 2:] += in_ranges(delay, ranges)
    return out


def delay_llr_table(counts: dict[str, np.ndarray], cheat_share: float = CHEAT_SHARE,
                    floor: float = HONEST_FLOOR) -> tuple[tuple[tuple[float, float], ...], ...] | None:
    """Per band, per delay range (ln((1 - q) / (1 - h)), ln(q / h)): q = ``cheat_share``, h the
    highest honest skill's share of trigger pulls in the range (at least ``floor``); None when a
    band has no honest trigger pulls."""
    out = []
    for band in range(BANDS):
        honest = [c[band] for s, c in counts.items() if s.startswith(HONEST_PREFIX) and c[band, 0]]
        if not honest:
            return None
        row = []
        for r in range(honest[0].shape[0] - 2):
            h = min(max(max(c[2 + r] / c[0] for c in honest), floor), cheat_share)
            row.append((round(math.log((1 - cheat_share) / (1 - h)), 2), round(math.log(cheat_share / h), 2)))
        out.append(tuple(row))
    return tuple(out)


def run_bank(rows: Sequence[tuple[float, int, int | None]], table: Sequence[Sequence[Sequence[float]]],
             threshold: float, ranges: tuple[tuple[int, int], ...] = DELAY_RANGES) -> tuple[float, float | None]:
    """(peak, first time s any CUSUM of the bank reached ``threshold`` or None) of one player."""
    s = [0.0] * len(ranges)
    peak = 0.0
    first = None
    for t, band, delay in rows:
        for r, inside in enumerate(in_ranges(delay, ranges)):
            s[r] = max(0.0, s[r] + table[band][r][int(inside)])
            peak = max(peak, s[r])
            if first is None and s[r] >= threshold:
                first = t
    return peak, first


@dataclass(frozen=True, slots=True)
class DelayMeasurement:
    """``measure_delays``'s result.

    Attributes:
        counts: per stratum, (BANDS, 2 + ranges) trigger pulls, those off target, and those per
            delay range.
        measured: the table ``delay_llr_table`` gives (None: a band lacks data). table: the table
            the bank ran with (``DELAY_LLR``). threshold: its alarm level. honest_hours,
            honest_peaks: honest play (h) and each honest player-match's highest peak.
            triggerbots: (stratum, match, name, first alarm s since join or None).
    """

    counts: dict[str, np.ndarray]
    measured: tuple[tuple[tuple[float, float], ...], ...] | None
    table: tuple[tuple[tuple[float, float], ...], ...]
    threshold: float
    honest_hours: float
    honest_peaks: tuple[float, ...]
    triggerbots: tuple[tuple[str, int, str, float | None], ...]

    def to_json(self) -> dict[str, Any]:
        return {"counts": {k: v.tolist() for k, v in self.counts.items()}, "measured": self.measured,
                "table": self.table, "threshold": self.threshold, "honest_hours": self.honest_hours,
                "honest_peaks": list(self.honest_peaks), "triggerbots": [list(t) for t in self.triggerbots]}


def measure_delays(players: Sequence[PlayerFirstFires], threshold: float,
                   table: tuple[tuple[tuple[float, float], ...], ...] = DELAY_LLR,
                   ranges: tuple[tuple[int, int], ...] = DELAY_RANGES) -> DelayMeasurement:
    """The delay table, honest peaks and triggerbot alarm times of ``players`` under ``table``
    (one column per range of ``ranges``)."""
    counts = delay_counts(players, ranges)
    peaks, trig = [], []
    hours = 0.0
    for p in players:
        peak, first = run_bank(p.rows, table, threshold, ranges)
        if p.stratum.startswith(HONEST_PREFIX):
            peaks.append(peak)
            hours += p.play_s / 3600.0
        elif p.stratum.startswith(CHEAT_PREFIX):
            trig.append((p.stratum, p.match_id, p.name, first))
    return DelayMeasurement(counts, delay_llr_table(counts), table, threshold, hours,
                            tuple(sorted(peaks, reverse=True)), tuple(trig))
