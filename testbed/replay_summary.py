"""``referee replay FILE``: what a replay holds, and (``--detect``) the detectors re-run over it.

The summary reads the header (scenario, map, seed, tick rate, ground-truth labels), counts events
per type and per player (shots, hits, headshots, kills, deaths, movement and fire evidence, the
detections recorded live) and notes a cut recording (a broken tail, or no end record).

``--detect`` feeds the recorded events, frame by frame, through a fresh detector suite built by
``anticheat.suite.build_pipeline`` with the tolerances recorded in the header, overridden by an
optional tolerance file. Slot changes are events in the stream (``SessionEvent``), which the
pipeline handles itself exactly as it did live (reset and bind on a connect, unbind on a
disconnect), so nothing needs replaying by hand. The pipeline's clock is the
time of the frame being fed, as it was the server's clock live, so with unchanged tolerances the
detections equal the recorded ones (DESIGN principle 3); :attr:`DetectRun.matches_live` says so.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from anticheat.suite import build_pipeline
from anticheat.events import Detection, FireEvidence, KillEvent, MovementEvidence, SessionEvent, ShotResult
from server.recording import ReplayReader
from testbed.report import DetectionCount, DetectionRecord, detection_counts

__all__ = [
    "DetectRun", "NamedDetection", "PlayerCounts", "ReplaySummary", "detect", "merge_tolerances", "render_detect",
    "render_evidence", "render_summary", "summarize",
]

_HEADSHOT_BONES = frozenset({2, 3})
"""Head and neck (REFERENCES section 3), as IW4MAdmin counts headshots."""


@dataclass(slots=True)
class PlayerCounts:
    """Per-slot counts over a replay (several players may have used one slot over time).

    Attributes: slot; names: every name that held the slot; profile: ground truth of the first
        name (from the header's labels, ``?`` when unknown); shots (per shot, pellets folded),
        rays (every registered ray), hits (rays that hit a player), headshots (head or neck
        hits), kills, deaths, movement and fire (evidence events), detections (recorded live).
    """

    slot: int
    names: list[str] = field(default_factory=list)
    profile: str = "?"
    shots: int = 0
    rays: int = 0
    hits: int = 0
    headshots: int = 0
    kills: int = 0
    deaths: int = 0
    movement: int = 0
    fire: int = 0
    detections: Counter[str] = field(default_factory=Counter)

    @property
    def name(self) -> str:
        """The slot's player name(s)."""
        return "/".join(self.names) if self.names else f"slot:{self.slot}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "slot": self.slot,
            "name": self.name,
            "profile": self.profile,
            "shots": self.shots,
            "rays": self.rays,
            "hits": self.hits,
            "headshots": self.headshots,
            "kills": self.kills,
            "deaths": self.deaths,
            "movement_evidence": self.movement,
            "fire_evidence": self.fire,
            "detections": dict(sorted(self.detections.items())),
        }


@dataclass(frozen=True, slots=True)
class NamedDetection:
    """A recorded detection and the name of the player it is about (``slot:<n>`` when unknown)."""

    name: str
    detection: DetectionRecord

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form: ``player``, ``slot``, then the detection's fields."""
        return {"player": self.name, "slot": self.detection.player, **self.detection.to_json()}


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    """What a replay file holds.

    Attributes: path; header (as recorded); frames; events; first_s / last_s: times of the first
        and last frame (s, None when empty); last_tick; events_by_type; players (by slot);
        truncated: the recording was cut: it ends on an incomplete or corrupt frame, or (format 2)
        lacks the end record a server writes when it closes the file; ``cut_reason`` says which
        (None when whole, or for a format 1 file, which has no end record). end: the end record
        (last tick, time, reason), None when absent. detections: every detection recorded live,
        in order, with the name of the player in its slot at the time.
    """

    path: str
    header: Mapping[str, Any]
    frames: int
    events: int
    first_s: float | None
    last_s: float | None
    last_tick: int | None
    events_by_type: Mapping[str, int]
    players: tuple[PlayerCounts, ...]
    truncated: bool
    detections: tuple[NamedDetection, ...] = ()
    cut_reason: str | None = None
    end: Mapping[str, Any] | None = None
    format_version: int = 1

    def evidence(self, player: str | None = None) -> list[NamedDetection]:
        """The recorded detections, of ``player`` (a name) only when given."""
        return [d for d in self.detections if player is None or d.name == player]

    @property
    def duration_s(self) -> float:
        """Time covered by the frames (s)."""
        if self.first_s is None or self.last_s is None:
            return 0.0
        return self.last_s - self.first_s

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form (the header's bulky config omitted)."""
        header = {k: v for k, v in self.header.items() if k not in ("config", "scenario")}
        scenario = self.header.get("scenario")
        if isinstance(scenario, Mapping):
            header["scenario"] = scenario.get("name")
        return {
            "path": self.path,
            "header": header,
            "frames": self.frames,
            "events": self.events,
            "first_s": self.first_s,
            "last_s": self.last_s,
            "duration_s": round(self.duration_s, 3),
            "last_tick": self.last_tick,
            "truncated": self.truncated,
            "cut_reason": self.cut_reason,
            "end": None if self.end is None else dict(self.end),
            "format_version": self.format_version,
            "events_by_type": dict(self.events_by_type),
            "players": [p.to_json() for p in self.players],
        }


def _labels(header: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    labels = header.get("labels")
    if not isinstance(labels, list):
        return {}  # none recorded, or not the list a match writes: the profiles stay unknown
    return {str(label.get("name")): label for label in labels if isinstance(label, Mapping)}


def summarize(path: str | os.PathLike[str]) -> ReplaySummary:
    """Read a replay and count what it holds (ReplayError when it is not a replay)."""
    reader = ReplayReader(path)
    header = reader.header
    labels = _labels(header)
    players: dict[int, PlayerCounts] = {}
    current: dict[int, str] = {}
    found: list[NamedDetection] = []

    def player(slot: int) -> PlayerCounts:
        p = players.get(slot)
        if p is None:
            p = players[slot] = PlayerCounts(slot)
        return p

    by_type: Counter[str] = Counter()
    frames = events = 0
    first_s: float | None = None
    last_s: float | None = None
    last_tick: int | None = None
    for frame in reader.frames():
        frames += 1
        if first_s is None:
            first_s = frame.time_s
        last_s = frame.time_s
        last_tick = frame.tick
        for event in frame.events:
            events += 1
            by_type[type(event).__name__] += 1
            if isinstance(event, ShotResult):
                p = player(event.shooter)
                p.rays += 1
                if event.pellet == 0:
                    p.shots += 1
                if event.victim is not None:
                    p.hits += 1
                    if event.bone in _HEADSHOT_BONES:
                        p.headshots += 1
            elif isinstance(event, KillEvent):
                player(event.killer).kills += 1
                player(event.victim).deaths += 1
            elif isinstance(event, MovementEvidence):
                player(event.player).movement += 1
            elif isinstance(event, FireEvidence):
                player(event.player).fire += 1
            elif isinstance(event, Detection):
                player(event.player).detections[f"{event.detector}:{event.kind}"] += 1
                # The slot keeps its last player's name after a disconnect: the detectors'
                # flush at the end may still report about them.
                found.append(NamedDetection(current.get(event.player, f"slot:{event.player}"), DetectionRecord.of(event)))
            elif isinstance(event, SessionEvent) and event.kind == "connect":
                current[event.player] = event.name
                p = player(event.player)
                if event.name not in p.names:
                    p.names.append(event.name)
                    if p.profile == "?" and event.name in labels:
                        p.profile = str(labels[event.name].get("profile", "?"))
    return ReplaySummary(
        path=os.fspath(path),
        header=header,
        frames=frames,
        events=events,
        first_s=first_s,
        last_s=last_s,
        last_tick=last_tick,
        events_by_type=dict(sorted(by_type.items())),
        players=tuple(players[s] for s in sorted(players)),
        truncated=bool(reader.cut),
        detections=tuple(found),
        cut_reason=_cut_reason(reader),
        end=reader.end,
        format_version=reader.version,
    )


NOT_CLOSED = "the server stopped without closing it"
BROKEN_TAIL = "ends on an incomplete or corrupt frame"


def _cut_reason(reader: ReplayReader) -> str | None:
    """Why the recording is cut, after its frames were read (None when it was closed)."""
    if reader.truncated:
        return BROKEN_TAIL
    if reader.cut:
        return NOT_CLOSED
    return None


# --- detectors over a replay --------------------------------------------------------------------


def _key(d: Detection) -> tuple[Any, ...]:
    return (d.player, d.tick, d.detector, d.kind, d.value, d.reason)


@dataclass(frozen=True, slots=True)
class DetectRun:
    """The detectors re-run over a replay.

    Attributes: path; tolerances (the override tables used); detections (in order); live
        (the detections recorded in the file); events_fed; names (slot -> player name, last
        binding); profiles (name -> ground truth).
    """

    path: str
    tolerances: Mapping[str, Mapping[str, Any]]
    detections: tuple[Detection, ...]
    live: tuple[Detection, ...]
    events_fed: int
    names: Mapping[int, str]
    profiles: Mapping[str, str]

    @property
    def matches_live(self) -> bool:
        """The re-run found exactly the detections recorded live (same order, same values)."""
        return [_key(d) for d in self.detections] == [_key(d) for d in self.live]

    def per_player(self) -> dict[int, tuple[DetectionCount, ...]]:
        """Detections per slot, counted per (detector, kind)."""
        rows: dict[int, list[tuple[str, str, float]]] = {}
        for d in self.detections:
            rows.setdefault(d.player, []).append((d.detector, d.kind, d.time_s))
        return {slot: detection_counts(r) for slot, r in sorted(rows.items())}

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        per = self.per_player()
        return {
            "path": self.path,
            "events_fed": self.events_fed,
            "detections": len(self.detections),
            "live_detections": len(self.live),
            "matches_live": self.matches_live,
            "tolerances": {k: dict(v) for k, v in self.tolerances.items()},
            "players": [
                {
                    "slot": slot,
                    "name": self.names.get(slot, f"slot:{slot}"),
                    "profile": self.profiles.get(self.names.get(slot, ""), "?"),
                    "detections": [c.to_json() for c in counts],
                }
                for slot, counts in per.items()
            ],
        }


def merge_tolerances(base: Mapping[str, Any] | None, overrides: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Tolerance tables ``base`` (a replay header's, possibly malformed) with ``overrides`` on top, per key."""
    merged: dict[str, dict[str, Any]] = {}
    for source in (base, overrides):
        if not isinstance(source, Mapping):
            continue  # none, or a header entry that is not a table
        for section, table in source.items():
            if isinstance(table, Mapping):
                merged.setdefault(str(section), {}).update(table)
    return merged


def detect(
    path: str | os.PathLike[str], tolerances: Mapping[str, Mapping[str, Any]] | None = None
) -> DetectRun:
    """Re-run the detector suite over a replay (ToleranceError for a bad override table).

    Args:
        path: the replay file.
        tolerances: override tables applied on top of the ones recorded in the header.
    """
    reader = ReplayReader(path)
    header = reader.header
    used = merge_tolerances(header.get("tolerances"), tolerances)
    now = [0.0]
    pipeline = build_pipeline(used or None, clock=lambda: now[0])
    names: dict[int, str] = {}
    found: list[Detection] = []
    live: list[Detection] = []
    fed = 0
    feed = pipeline.feed
    for frame in reader.frames():
        now[0] = frame.time_s
        for event in frame.events:
            if isinstance(event, Detection):
                live.append(event)
                continue
            if isinstance(event, SessionEvent) and event.kind == "connect":
                names[event.player] = event.name
            fed += 1
            result = feed(event)
            if result:
                found.extend(result)
    # The match's end, as the live server closed it: held-back detections come out now.
    found.extend(pipeline.flush())
    labels = _labels(header)
    return DetectRun(
        path=os.fspath(path),
        tolerances=used,
        detections=tuple(found),
        live=tuple(live),
        events_fed=fed,
        names=names,
        profiles={name: str(label.get("profile", "?")) for name, label in labels.items()},
    )


# --- rendering ---------------------------------------------------------------------------------


def _fmt_s(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def _truncated_text(summary: ReplaySummary) -> str:
    if summary.truncated:
        return f"yes: {summary.cut_reason}"
    if summary.end is None:
        return "unknown (format 1 replays have no end record)"
    return f"no (closed: {summary.end.get('reason', '?')})"


def render_summary(summary: ReplaySummary) -> Group:
    """The summary as rich renderables: header facts, events per type, per-player counts."""
    h = summary.header
    scenario = h.get("scenario")
    scenario_name = scenario.get("name") if isinstance(scenario, Mapping) else scenario
    facts = Table(show_header=False, box=None, title=f"replay {summary.path}", title_justify="left")
    facts.add_column(style="bold")
    facts.add_column()
    for label, value in (
        ("scenario", scenario_name or "-"),
        ("mode", h.get("mode", "-")),
        ("map", h.get("map", "-")),
        ("seed", h.get("seed", "-")),
        ("tick rate", f"{h.get('tick_rate_hz', '-')} Hz"),
        ("players (labels)", len(h.get("labels") or [])),
        ("frames", summary.frames),
        ("events", summary.events),
        ("time", f"{_fmt_s(summary.first_s)} .. {_fmt_s(summary.last_s)} s ({summary.duration_s:.2f} s)"),
        ("last tick", summary.last_tick if summary.last_tick is not None else "-"),
        ("truncated", _truncated_text(summary)),
    ):
        facts.add_row(label, str(value))
    types = Table(title="events per type", title_justify="left")
    types.add_column("type")
    types.add_column("count", justify="right")
    for name, count in summary.events_by_type.items():
        types.add_row(name, str(count))
    players = Table(title="per player", title_justify="left")
    for col, justify in (
        ("slot", "right"),
        ("name", "left"),
        ("profile", "left"),
        ("shots", "right"),
        ("hits", "right"),
        ("hs", "right"),
        ("kills", "right"),
        ("deaths", "right"),
        ("move ev", "right"),
        ("fire ev", "right"),
        ("detections (recorded)", "left"),
    ):
        players.add_column(col, justify=justify)  # type: ignore[arg-type]
    for p in summary.players:
        det = ", ".join(f"{k} x{v}" for k, v in p.detections.most_common(3))
        if len(p.detections) > 3:
            det += f", +{len(p.detections) - 3} more"
        players.add_row(
            str(p.slot), p.name, p.profile, str(p.shots), str(p.hits), str(p.headshots), str(p.kills),
            str(p.deaths), str(p.movement), str(p.fire), det or "-",
        )
    return Group(facts, types, players)


def render_detect(run: DetectRun) -> Group:
    """The re-run's detections per player, and whether they equal the live ones."""
    verdict = "the same as the live run" if run.matches_live else "DIFFERENT from the live run"
    line = Text(
        f"detectors re-run over {run.events_fed} events: {len(run.detections)} detections, "
        f"{len(run.live)} recorded live: {verdict}",
        style="" if run.matches_live else "bold red",
    )
    if not run.detections:
        return Group(line)
    table = Table(title="detections (re-run)", title_justify="left")
    for col, justify in (("slot", "right"), ("name", "left"), ("profile", "left"), ("detector:kind", "left"), ("count", "right"), ("first s", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for slot, counts in run.per_player().items():
        name = run.names.get(slot, f"slot:{slot}")
        for i, c in enumerate(counts):
            table.add_row(
                str(slot) if i == 0 else "", name if i == 0 else "", run.profiles.get(name, "?") if i == 0 else "",
                c.label, str(c.count), f"{c.first_s:.2f}",
            )
    return Group(line, table)


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.4g}"
    return str(value)


def render_evidence(rows: list[NamedDetection], title: str = "detections (recorded)") -> Table | Text:
    """Each recorded detection: time, player, detector:kind, reason, value and its evidence
    mapping (``key=value`` pairs, folded to the terminal's width)."""
    if not rows:
        return Text(f"{title}: none")
    table = Table(title=f"{title}: {len(rows)}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, collapse_padding=True)
    table.add_column("time s", justify="right", no_wrap=True)
    table.add_column("player", no_wrap=True)
    table.add_column("detector:kind", no_wrap=True)
    # A reason such as ``Movement-speed-1.47/1.02x3`` is one word: kept on one line.
    table.add_column("reason", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("evidence", overflow="fold")
    for row in rows:
        d = row.detection
        evidence = ", ".join(f"{k}={_fmt_value(v)}" for k, v in d.evidence.items()) or "-"
        table.add_row(f"{d.time_s:.2f}", row.name, d.label, d.reason or "-", _fmt_value(d.value), evidence)
    return table
