"""The triggerbot detector's constants, measured on a corpus: ``LOG_LR`` and the honest peak tail.

``anticheat.detectors.trigger`` adds ``LOG_LR[band][category]`` per judged shot to a per-player
Page CUSUM and alarms at h = (TAIL_LOG_RATE + ln F) / TAIL_SLOPE, F the false-alarm rate in honest
player-hours. Both come from a corpus built with the current honest aim model; this module
re-measures them, so a change of the aim model is followed by one command (``referee lab
trigger-table DIR``) rather than a lost script.

1. Every stream is walked as the live pipeline feeds it (``ConnectionSample`` into the
   ``SkipBook`` first, ``AimSample`` to ``on_aim``, pellet-0 shots to ``judge_shot``, the
   detector reset on connect and disconnect): each judged shot gives (band, category).
2. ``log_lr_table``: the triggerbots' category rates per band, pooled over the band and its
   neighbours; the honest rates, per category the highest of the honest skills' rates in that
   band, renormalised; both floored at ``RATE_FLOOR`` and renormalised again (so each row of
   rates is a distribution; the floored entries end a little under the floor);
   LOG_LR = ln(trigger / honest), rounded to 2 decimals.
3. ``honest_peaks``: each honest player-match's CUSUM peak under a table; ``fit_tail``: a
   least-squares line through ln(player-matches with peak >= x per honest player-hour) over the
   grid points where at least 2 player-matches reach x; ``threshold``: h for F player-hours.

Times are seconds; ``play_s`` is seconds since the player's own (latest) connect, the clock the
corpus's detections are read on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anticheat.detectors import trigger
from anticheat.detectors.trigger import LOG_LR, RANGE_BANDS_M, TriggerDetector
from anticheat.events import AimSample, ConnectionSample, SessionEvent, ShotResult
from anticheat.skip import SkipBook
from testbed.lab.store import LabStore
from testbed.lab.stream_map import map_streams, stream_events

__all__ = [
    "BANDS", "CATEGORIES", "RATE_FLOOR", "TAIL_FROM", "TAIL_GRID", "TRIGGERBOT_PROFILES", "Cusum",
    "JudgedShot", "TriggerMeasurement", "band_label", "corpus_judged_shots", "cusum_runs", "evaluate",
    "fit_tail", "honest_peaks", "log_lr_table", "measure", "missing_bands", "print_measurement",
    "shot_counts", "snippet", "stream_judged_shots", "tail_grid", "tail_points", "threshold",
]

BANDS = len(RANGE_BANDS_M) + 1
"""Rows of ``LOG_LR``: the range bands."""
CATEGORIES = 9
"""Columns of ``LOG_LR``: off target, then 1 + first_contact + 2 prompt + 4 follows_on."""
RATE_FLOOR = 0.005
"""Least rate of a category (rare categories: a few shots must not make an infinite ratio)."""
TRIGGERBOT_PROFILES: tuple[str, ...] = ("triggerbot", "triggerbot_no_bait")
"""The profiles whose shots are the triggerbot side of the ratio."""
TAIL_FROM = 6.0
"""The lowest peak level the tail is fitted at: below it the count is not yet in its exponential
tail (the fit behind the current constants used x = 6..14)."""


def tail_grid(start: float = TAIL_FROM, step: float = 1.0, n: int = 200) -> tuple[float, ...]:
    """The peak levels x = start, start + step, ... (``n`` of them) the tail may be fitted at;
    ``tail_points`` keeps those that at least 2 honest player-matches reach."""
    return tuple(start + i * step for i in range(n))


TAIL_GRID = tail_grid()
"""The default grid: x = 6, 7, 8, ... (while at least 2 honest player-matches reach x)."""
HONEST_PREFIX = "honest:"

EXTRA_MATCH_OFFSET = 1_000_000
"""Added to the match ids of each further corpus (times its position) so player-matches stay apart."""


@dataclass(frozen=True, slots=True)
class JudgedShot:
    """One judged pellet-0 shot.

    Attributes:
        stratum: ``honest:<skill>`` or the cheater's profile name. match_id, name: the player-match.
        session: the player's connect count in the match (1 for the first; the detector starts
            afresh on each). play_s: seconds since that connect. band, category: of ``LOG_LR``.
    """

    stratum: str
    match_id: int
    name: str
    session: int
    play_s: float
    band: int
    category: int


def stream_judged_shots(events: Iterable[object]) -> Iterator[tuple[str, int, float, int, int]]:
    """``(name, session, play_s, band, category)`` of every judged shot of an event stream, in
    order, the detector fed as the live pipeline feeds it (default ``SkipConfig`` and
    ``TriggerConfig``)."""
    skip = SkipBook()
    detector = TriggerDetector()
    names: dict[int, str] = {}
    joins: dict[int, float] = {}
    sessions: dict[str, int] = {}
    for event in events:
        if isinstance(event, AimSample):
            detector.on_aim(event, skip)
        elif isinstance(event, ConnectionSample):
            skip.record(event)
        elif isinstance(event, ShotResult):
            judged = detector.judge_shot(event, skip)
            if judged is not None:
                name = names.get(event.shooter, "")
                yield (name, sessions.get(name, 0), event.time_s - joins.get(event.shooter, 0.0), *judged)
        elif isinstance(event, SessionEvent):
            # As the pipeline: a connect resets the slot's detector state; a disconnect resets it
            # and forgets the slot's link.
            detector.reset_player(event.player)
            if event.kind == "connect":
                names[event.player] = event.name
                joins[event.player] = event.time_s
                sessions[event.name] = sessions.get(event.name, 0) + 1
            elif event.kind == "disconnect":
                skip.forget(event.player)
                names.pop(event.player, None)
                joins.pop(event.player, None)


def _match_shots(job: tuple[int, str, bytes]) -> list[tuple[str, int, float, int, int]]:
    """One stream's judged shots (runs in a worker process when ``jobs`` > 1)."""
    return list(stream_judged_shots(stream_events(*job)))


def _strata(store: LabStore) -> dict[tuple[int, str], str]:
    return {(int(m), str(n)): (str(p) if c else f"{HONEST_PREFIX}{s}") for m, n, p, c, s in
            store.con.execute("SELECT match_id, name, profile, cheat, skill FROM players").fetchall()}


def corpus_judged_shots(store: LabStore, *, jobs: int = 1,
                        on_match: Callable[[int, int], object] | None = None) -> list[JudgedShot]:
    """Every judged shot of the corpus in ``store`` by a labelled player, in stream order per
    match. ``jobs`` > 1 decodes streams in that many worker processes; ``on_match(done, total)``
    is called after each stream."""
    strata = _strata(store)
    out: list[JudgedShot] = []
    for match_id, rows in map_streams(store, _match_shots, jobs=jobs, on_match=on_match):
        for name, session, play_s, band, category in rows:
            stratum = strata.get((match_id, name))
            if stratum is not None:
                out.append(JudgedShot(stratum, match_id, name, session, play_s, band, category))
    return out


# --- the table ------------------------------------------------------------------------------


def shot_counts(shots: Iterable[JudgedShot]) -> dict[str, np.ndarray]:
    """Per stratum, the number of judged shots per (band, category): int arrays (BANDS, CATEGORIES)."""
    counts: dict[str, np.ndarray] = {}
    for s in shots:
        c = counts.get(s.stratum)
        if c is None:
            c = counts[s.stratum] = np.zeros((BANDS, CATEGORIES), dtype=np.int64)
        c[s.band, s.category] += 1
    return counts


def _floored(rates: np.ndarray, floor: float) -> np.ndarray:
    r = np.maximum(rates, floor)
    return r / r.sum()


def missing_bands(counts: Mapping[str, Any], triggerbots: Sequence[str] = TRIGGERBOT_PROFILES) -> list[tuple[int, str]]:
    """``(band, side)`` of the rows ``log_lr_table`` cannot measure: ``triggerbot`` when the band
    and its neighbours hold no triggerbot shot, ``honest`` when the band holds no honest shot."""
    trig = sum((np.asarray(counts[p], dtype=float) for p in triggerbots if p in counts),
               np.zeros((BANDS, CATEGORIES)))
    honest = sum((np.asarray(c, dtype=float) for k, c in counts.items() if k.startswith(HONEST_PREFIX)),
                 np.zeros((BANDS, CATEGORIES)))
    out = []
    for b in range(BANDS):
        if trig[max(0, b - 1):b + 2].sum() <= 0:
            out.append((b, "triggerbot"))
        if honest[b].sum() <= 0:
            out.append((b, "honest"))
    return out


def log_lr_table(counts: Mapping[str, Any], *, triggerbots: Sequence[str] = TRIGGERBOT_PROFILES,
                 floor: float = RATE_FLOOR, allow_missing: bool = False) -> tuple[tuple[float, ...], ...]:
    """``LOG_LR`` from per-stratum shot counts (stratum -> (BANDS, CATEGORIES) counts).

    Per band b: the triggerbots' (``triggerbots``, pooled) counts over bands b-1..b+1 as rates;
    the honest rates, per category the highest of the ``honest:*`` strata's rates in band b (a
    stratum without shots in b is left out), renormalised to sum 1; each floored at ``floor`` and
    renormalised; ln(trigger / honest), rounded to 2 decimals. A band without triggerbot or
    without honest shots (``missing_bands``): ValueError, or with ``allow_missing`` a row of
    zeros (no evidence either way; a small corpus's table, not one to ship).
    """
    trig = sum((np.asarray(counts[p], dtype=float) for p in triggerbots if p in counts),
               np.zeros((BANDS, CATEGORIES)))
    honest = [np.asarray(c, dtype=float) for k, c in sorted(counts.items()) if k.startswith(HONEST_PREFIX)]
    rows: list[tuple[float, ...]] = []
    for b in range(BANDS):
        pooled = trig[max(0, b - 1):b + 2].sum(axis=0)
        rates = [h[b] / h[b].sum() for h in honest if h[b].sum() > 0]
        if pooled.sum() <= 0 or not rates:
            if allow_missing:
                rows.append((0.0,) * CATEGORIES)
                continue
            raise ValueError(f"band {band_label(b)}: no {'triggerbot' if pooled.sum() <= 0 else 'honest'} shots")
        top = np.max(rates, axis=0)
        t = _floored(pooled / pooled.sum(), floor)
        h = _floored(top / top.sum(), floor)
        rows.append(tuple(round(float(x), 2) + 0.0 for x in np.log(t / h)))
    return tuple(rows)


def band_label(band: int) -> str:
    """``<15 m``, ``15-30 m``, ... ``>=50 m`` for a row of ``LOG_LR``."""
    edges = RANGE_BANDS_M
    if band == 0:
        return f"<{edges[0]:g} m"
    if band >= len(edges):
        return f">={edges[-1]:g} m"
    return f"{edges[band - 1]:g}-{edges[band]:g} m"


# --- the CUSUM and its honest tail ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cusum:
    """One player-match's CUSUM: its peak (log-LR units) and the ``play_s`` of each alarm."""

    peak: float
    alarms: tuple[float, ...]


def cusum_runs(shots: Iterable[JudgedShot], table: Sequence[Sequence[float]],
               h: float = math.inf) -> dict[tuple[int, str], Cusum]:
    """Per (match_id, name), Page's CUSUM S = max(0, S + table[band][category]) over its shots in
    order, restarting at 0 on an alarm (S >= h) and on a new session, as the detector does."""
    state: dict[tuple[int, str], list[Any]] = {}
    for s in shots:
        key = (s.match_id, s.name)
        st = state.get(key)
        if st is None:
            st = state[key] = [0.0, 0.0, [], s.session]
        if st[3] != s.session:
            st[0], st[3] = 0.0, s.session
        st[0] = max(0.0, st[0] + table[s.band][s.category])
        st[1] = max(st[1], st[0])
        if st[0] >= h:
            st[2].append(s.play_s)
            st[0] = 0.0
    return {k: Cusum(v[1], tuple(v[2])) for k, v in state.items()}


def honest_peaks(shots: Iterable[JudgedShot], table: Sequence[Sequence[float]]) -> dict[tuple[int, str], float]:
    """Each honest player-match's CUSUM peak under ``table`` (no alarm restarts: the peak is the
    highest the statistic climbs)."""
    return {k: c.peak for k, c in cusum_runs((s for s in shots if s.stratum.startswith(HONEST_PREFIX)), table).items()}


def tail_points(peaks: Iterable[float], honest_hours: float,
                xs: Iterable[float] = TAIL_GRID) -> list[tuple[float, int, float]]:
    """``(x, n, n / honest_hours)`` for each grid level x that at least 2 peaks reach (peak >= x)."""
    values = np.asarray(list(peaks), dtype=float)
    out = []
    for x in xs:
        n = int((values >= x).sum())
        if n >= 2:
            out.append((float(x), n, n / honest_hours))
    return out


def fit_tail(peaks: Iterable[float], honest_hours: float, xs: Iterable[float] = TAIL_GRID) -> tuple[float, float]:
    """``(a, b)`` of the least-squares line ln(player-matches with peak >= x per honest player-hour)
    = a - b x over the grid points of ``tail_points``. ValueError with fewer than 2 points or a
    tail that does not fall (b <= 0)."""
    points = tail_points(peaks, honest_hours, xs)
    if len(points) < 2:
        raise ValueError(f"the honest peak tail has {len(points)} grid points with >= 2 player-matches; need 2")
    x = np.array([p[0] for p in points])
    y = np.log(np.array([p[2] for p in points]))
    slope, intercept = np.polyfit(x, y, 1)
    if not slope < 0.0:
        raise ValueError(f"the honest peak tail does not fall over x = {x[0]:g}..{x[-1]:g}")
    return float(intercept), float(-slope)


def threshold(a: float, b: float, false_alarm_player_hours: float = 1000.0) -> float:
    """h = (a + ln F) / b: the peak level reached once per F honest player-hours (as
    ``TriggerConfig.threshold``)."""
    return (a + math.log(false_alarm_player_hours)) / b


# --- the measurement ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TriggerMeasurement:
    """``measure``'s result; ``current_*`` are the constants in ``anticheat.detectors.trigger``.

    Attributes:
        counts: judged shots per stratum, (BANDS, CATEGORIES). table: the measured ``LOG_LR``.
        honest_player_matches, honest_hours: the exposure the tail is per.
        tail: (x, n, rate) of the new table's fit; log_rate, slope: its a, b rounded as pasted
            (2 and 3 decimals); h: the threshold at ``false_alarm_player_hours`` from those.
        peak_max, current_peak_max: the highest honest peak under the new and current table.
        honest_alarms, current_honest_alarms: honest alarms with the new (table, h) and the current.
        triggerbots: (match_id, name, profile, first alarm play_s under the new constants or None,
            the same under the current constants).
        missing: ``missing_bands``: rows left at zero for want of shots (the table is not one to ship).
    """

    counts: dict[str, np.ndarray]
    table: tuple[tuple[float, ...], ...]
    honest_player_matches: int
    honest_hours: float
    tail: list[tuple[float, int, float]]
    log_rate: float
    slope: float
    h: float
    false_alarm_player_hours: float
    peak_max: float
    current_peak_max: float
    current_h: float
    honest_alarms: int
    current_honest_alarms: int
    triggerbots: list[tuple[int, str, str, float | None, float | None]]
    missing: list[tuple[int, str]]

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        return {
            "table": [list(r) for r in self.table], "current_table": [list(r) for r in LOG_LR],
            "shots": {k: v.tolist() for k, v in sorted(self.counts.items())},
            "honest_player_matches": self.honest_player_matches, "honest_hours": round(self.honest_hours, 3),
            "tail": [{"x": x, "n": n, "per_hour": r} for x, n, r in self.tail],
            "tail_log_rate": self.log_rate, "tail_slope": self.slope, "h": self.h,
            "current": {"tail_log_rate": trigger.TAIL_LOG_RATE, "tail_slope": trigger.TAIL_SLOPE,
                        "h": self.current_h, "peak_max": self.current_peak_max,
                        "honest_alarms": self.current_honest_alarms},
            "false_alarm_player_hours": self.false_alarm_player_hours, "peak_max": self.peak_max,
            "honest_alarms": self.honest_alarms,
            "missing_bands": [{"band": b, "side": side} for b, side in self.missing],
            "triggerbots": [{"match_id": m, "name": n, "profile": p, "first_alarm_play_s": new,
                             "current_first_alarm_play_s": cur} for m, n, p, new, cur in self.triggerbots],
        }


def measure(store: LabStore, *, jobs: int = 1, false_alarm_player_hours: float = 1000.0,
            xs: Iterable[float] = TAIL_GRID, on_match: Callable[[int, int], object] | None = None,
            honest_stores: Sequence[LabStore] = ()) -> TriggerMeasurement:
    """Measure ``LOG_LR`` and the honest tail on the corpus in ``store``, and what they (and the
    current constants) do: honest peaks and alarms, each triggerbot's first alarm.

    ``honest_stores``: more corpora whose honest players join the tail and the honest alarms
    (not the table): long honest sessions show the peaks that ten-minute matches cannot."""
    shots = corpus_judged_shots(store, jobs=jobs, on_match=on_match)
    n_honest, seconds = store.con.execute(
        "SELECT count(*), coalesce(sum(play_s), 0) FROM players WHERE NOT cheat").fetchone()
    extra: list[JudgedShot] = []
    for k, other in enumerate(honest_stores, start=1):
        # Match ids restart in every corpus: shift each one's out of the others' way.
        offset = k * EXTRA_MATCH_OFFSET
        extra += [JudgedShot(s.stratum, s.match_id + offset, s.name, s.session, s.play_s, s.band, s.category)
                  for s in corpus_judged_shots(other, jobs=jobs, on_match=on_match)
                  if s.stratum.startswith(HONEST_PREFIX)]
        n, sec = other.con.execute("SELECT count(*), coalesce(sum(play_s), 0) FROM players WHERE NOT cheat").fetchone()
        n_honest, seconds = n_honest + n, seconds + sec
    bots = sorted((int(m), str(n), str(p)) for m, n, p in store.con.execute(
        "SELECT match_id, name, profile FROM players WHERE list_contains(?, profile)",
        [list(TRIGGERBOT_PROFILES)]).fetchall())
    return evaluate(shots, honest_player_matches=int(n_honest), honest_hours=float(seconds) / 3600.0,
                    triggerbots=bots, false_alarm_player_hours=false_alarm_player_hours, xs=xs,
                    tail_shots=extra)


def evaluate(shots: Sequence[JudgedShot], *, honest_player_matches: int, honest_hours: float,
             triggerbots: Sequence[tuple[int, str, str]], false_alarm_player_hours: float = 1000.0,
             xs: Iterable[float] = TAIL_GRID, tail_shots: Sequence[JudgedShot] = ()) -> TriggerMeasurement:
    """``measure`` on judged shots already collected: ``honest_player_matches`` and
    ``honest_hours`` (player-hours) are the honest exposure (``tail_shots``' players included),
    ``triggerbots`` the (match_id, name, profile) of the triggerbot player-matches;
    ``tail_shots`` are honest shots that join the tail but not the table."""
    xs = tuple(xs)
    counts = shot_counts(shots)
    table = log_lr_table(counts, allow_missing=True)
    honest = [s for s in shots if s.stratum.startswith(HONEST_PREFIX)] + list(tail_shots)
    shots = list(shots) + list(tail_shots)
    peaks = honest_peaks(honest, table)
    # Player-matches without a judged shot peak at 0: they count in the exposure, not the tail.
    tail = tail_points(peaks.values(), honest_hours, xs)
    a, b = fit_tail(peaks.values(), honest_hours, xs)
    # The constants as they would be pasted: h and the alarms below are the detector's then.
    a, b = round(a, 2), round(b, 3)
    h = threshold(a, b, false_alarm_player_hours)
    current_h = threshold(trigger.TAIL_LOG_RATE, trigger.TAIL_SLOPE, false_alarm_player_hours)
    new_runs, cur_runs = cusum_runs(shots, table, h), cusum_runs(shots, LOG_LR, current_h)

    def first(runs: Mapping[tuple[int, str], Cusum], key: tuple[int, str]) -> float | None:
        c = runs.get(key)
        return c.alarms[0] if c is not None and c.alarms else None

    return TriggerMeasurement(
        counts=counts, table=table, honest_player_matches=honest_player_matches, honest_hours=honest_hours,
        tail=tail, log_rate=a, slope=b, h=h, false_alarm_player_hours=false_alarm_player_hours,
        peak_max=max(peaks.values(), default=0.0),
        current_peak_max=max(honest_peaks(honest, LOG_LR).values(), default=0.0), current_h=current_h,
        honest_alarms=sum(len(new_runs[k].alarms) for k in peaks),
        current_honest_alarms=sum(len(cur_runs[k].alarms) for k in peaks),
        triggerbots=[(m, n, p, first(new_runs, (m, n)), first(cur_runs, (m, n))) for m, n, p in triggerbots],
        missing=missing_bands(counts),
    )


def snippet(m: TriggerMeasurement, source: str) -> str:
    """The measured constants as Python to paste into ``anticheat/detectors/trigger.py``."""
    rows = "\n".join("    (" + ", ".join(f"{x:.2f}" for x in row) + ")," for row in m.table)
    warn = "".join(f"# NOT MEASURED: band {band_label(b)} has no {side} shots\n" for b, side in m.missing)
    return (f"{warn}# referee lab trigger-table {source}\n# {m.honest_player_matches} honest player-matches, "
            f"{m.honest_hours:.1f} honest player-hours\nLOG_LR: tuple[tuple[float, ...], ...] = (\n{rows}\n)\n\n"
            f"TAIL_LOG_RATE = {m.log_rate:.2f}\nTAIL_SLOPE = {m.slope:.3f}\n")


# --- the command's output -------------------------------------------------------------------


def print_measurement(m: TriggerMeasurement, source: str, console: Any) -> None:
    """``referee lab trigger-table``'s report on a rich ``Console`` (80 columns)."""
    from rich.table import Table
    from rich.text import Text

    honest_shots = sum(int(v.sum()) for k, v in m.counts.items() if k.startswith(HONEST_PREFIX))
    trig_shots = sum(int(m.counts[p].sum()) for p in TRIGGERBOT_PROFILES if p in m.counts)
    console.print(f"{source}: {m.honest_player_matches} honest player-matches ({m.honest_hours:.2f} h); "
                  f"judged shots: {honest_shots} honest, {trig_shots} triggerbot", highlight=False)
    table = Table(title="LOG_LR: measured (new) beside trigger.py (now)", title_justify="left",
                  box=None, padding=(0, 1), pad_edge=False)
    table.add_column("band", no_wrap=True)
    table.add_column("", no_wrap=True)
    for c in range(CATEGORIES):
        table.add_column(str(c), justify="right", no_wrap=True)
    for b in range(BANDS):
        table.add_row(band_label(b), "new", *(f"{x:.2f}" for x in m.table[b]))
        table.add_row("", "now", *(f"{x:.2f}" for x in LOG_LR[b]), end_section=b < BANDS - 1)
    console.print(table)
    console.print("categories: 0 off target; on target 1 + first_contact + 2 prompt + 4 follows_on",
                  highlight=False)
    for b, side in m.missing:
        console.print(f"[bold red]band {band_label(b)}: no {side} shots, its row left at 0: do not ship this "
                      "table[/]", highlight=False)
    console.print()
    console.print(f"[italic]honest peak tail, h at F = {m.false_alarm_player_hours:g} player-h[/]", highlight=False)
    fig = Table(box=None, padding=(0, 1), pad_edge=False)
    for col, justify in (("", "left"), ("new", "right"), ("now", "right")):
        fig.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    fig.add_row("TAIL_LOG_RATE a", f"{m.log_rate:.2f}", f"{trigger.TAIL_LOG_RATE:.2f}")
    fig.add_row("TAIL_SLOPE b", f"{m.slope:.3f}", f"{trigger.TAIL_SLOPE:.3f}")
    fig.add_row("h = (a + ln F) / b", f"{m.h:.1f}", f"{m.current_h:.1f}")
    fig.add_row("honest peak max", f"{m.peak_max:.2f}", f"{m.current_peak_max:.2f}")
    fig.add_row("honest alarms", str(m.honest_alarms), str(m.current_honest_alarms))
    console.print(fig)
    grid = ", ".join(f"{x:g}: {n}" for x, n, _ in m.tail)
    console.print(f"fit over x (player-matches with peak >= x): {grid}", highlight=False)
    console.print()
    console.print("[italic]triggerbots' first alarm (s of play)[/]", highlight=False)
    bots = Table(box=None, padding=(0, 1), pad_edge=False)
    for col, justify in (("match", "right"), ("name", "left"), ("profile", "left"), ("new", "right"),
                         ("now", "right")):
        bots.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for match_id, name, profile, new, now in m.triggerbots:
        bots.add_row(str(match_id), name, profile, "-" if new is None else f"{new:.0f}",
                     "-" if now is None else f"{now:.0f}")
    console.print(bots)
    console.print()
    console.print(Text(snippet(m, source)), soft_wrap=True)
