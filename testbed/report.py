"""Match results: every player's ground truth beside what the server recorded, as a table or JSON.

``referee match`` prints :func:`render_table` at the end, or with ``--json`` one JSON object
(:meth:`MatchResult.to_json`) on the last line of stdout. JSON contract, per item of ``players``:
``name``, ``profile`` (ground truth: the profile's name, ``honest`` or a cheat's), ``skill``,
``ping_ms``, ``jitter_ms``, ``loss`` (the configured link: round trip in ms, per-direction loss
fraction), ``rtt_ms`` and ``measured_loss`` (what the server measured, null when never
connected), ``shots``, ``hits``, ``kills``, ``deaths``, ``detections`` (a list of
``{"detector", "kind", "count", "first_s"}``, first_s in match seconds), ``first_detection_s``,
``sanction`` (the policy's recommended level: ``log``, ``monitor``, ``kick``, ``temp_ban``,
``permanent_ban``; ``none`` without any evidence), ``sanction_score``, ``connected``,
``left_s`` (match time the player left, null when still connected at the end or never
connected: a player who left still has its figures and detections), ``detection_list`` (every
detection in order: ``{"time_s", "detector", "kind", "reason", "value", "severity",
"evidence"}``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

__all__ = [
    "DetectionCount", "DetectionRecord", "MatchResult", "PlayerResult", "bot_lag_warning", "render_table", "summary_line",
]

NO_SANCTION = "none"


@dataclass(frozen=True, slots=True)
class DetectionCount:
    """How often one detector reported one kind about a player.

    Attributes: detector, kind, count; first_s: match time of the first one (s).
    """

    detector: str
    kind: str
    count: int
    first_s: float

    @property
    def label(self) -> str:
        """``detector:kind``."""
        return f"{self.detector}:{self.kind}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"detector": self.detector, "kind": self.kind, "count": self.count, "first_s": round(self.first_s, 3)}


@dataclass(frozen=True, slots=True)
class DetectionRecord:
    """One detection as the server reported it.

    Attributes: time_s (match time, s), player (slot), detector, kind, reason (e.g.
    ``Strain-1.39@136``), value (the measured value that crossed the threshold), severity
    (0..1), evidence (the figures behind it).
    """

    time_s: float
    player: int
    detector: str
    kind: str
    reason: str
    value: float
    severity: float
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, d: Any) -> DetectionRecord:
        """From an ``anticheat.events.Detection``."""
        return cls(float(d.time_s), int(d.player), str(d.detector), str(d.kind), str(d.reason), float(d.value),
                   float(d.severity), dict(d.evidence))

    @property
    def label(self) -> str:
        """``detector:kind``."""
        return f"{self.detector}:{self.kind}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form (non-finite numbers become null)."""
        return {
            "time_s": round(self.time_s, 3),
            "detector": self.detector,
            "kind": self.kind,
            "reason": self.reason,
            "value": _plain(self.value),
            "severity": _plain(self.severity),
            "evidence": _plain(dict(self.evidence)),
        }


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """One bot: its ground truth (from the scenario) and the server's record of it.

    Attributes:
        name, profile, skill: ground truth. ping_ms (round trip, ms), jitter_ms (per direction,
            ms), loss (per direction, 0..1): the emulated link as configured.
        slot: the server slot it last had (None when it never connected). connected: it
            completed the handshake at least once.
        rtt_ms, measured_loss: the server's smoothed RTT (ms) and loss (0..1) at the end.
        shots, hits, kills, deaths: as the server counted them (hits: shots that hit a player).
        detections: per (detector, kind), sorted by first occurrence.
        sanction: recommended sanction level name (``none`` without evidence).
        sanction_score: the policy's score (0..1) or None.
        cheat: ground truth from the bot's profile (``ProfileSpec.cheat``) when known (see
            :meth:`MatchResult.with_profiles`), None to look the label up (:attr:`honest`).
        left_s: match time the player left (s), None when connected at the end (or never).
        detection_list: every detection about the player, in order.
    """

    name: str
    profile: str
    skill: str
    ping_ms: float
    jitter_ms: float
    loss: float
    slot: int | None = None
    connected: bool = False
    rtt_ms: float | None = None
    measured_loss: float | None = None
    shots: int = 0
    hits: int = 0
    kills: int = 0
    deaths: int = 0
    detections: tuple[DetectionCount, ...] = ()
    sanction: str = NO_SANCTION
    sanction_score: float | None = None
    cheat: bool | None = None
    left_s: float | None = None
    detection_list: tuple[DetectionRecord, ...] = ()

    @property
    def honest(self) -> bool:
        """Ground truth: not a cheater. ``cheat`` when set; else the profile's ``cheat`` flag when
        the registry (``bots.registry.default_registry()``: built-ins and installed packages)
        knows the label; else only ``honest`` is honest (a profile named by ``module:callable``
        alone needs :meth:`MatchResult.with_profiles`)."""
        if self.cheat is not None:
            return not self.cheat
        from bots.registry import default_registry

        spec = default_registry().get(self.profile)
        return not spec.cheat if spec is not None else self.profile == "honest"

    @property
    def flagged(self) -> bool:
        """Any detector reported this player."""
        return bool(self.detections)

    @property
    def detection_total(self) -> int:
        """Detections of every kind."""
        return sum(d.count for d in self.detections)

    @property
    def first_detection_s(self) -> float | None:
        """Match time of the first detection (s), None when never flagged."""
        return min((d.first_s for d in self.detections), default=None)

    def to_json(self) -> dict[str, Any]:
        """The JSON contract of one player (see the module docstring)."""
        first = self.first_detection_s
        return {
            "name": self.name,
            "profile": self.profile,
            "skill": self.skill,
            "ping_ms": self.ping_ms,
            "jitter_ms": self.jitter_ms,
            "loss": self.loss,
            "slot": self.slot,
            "connected": self.connected,
            "rtt_ms": None if self.rtt_ms is None else round(self.rtt_ms, 1),
            "measured_loss": None if self.measured_loss is None else round(self.measured_loss, 4),
            "shots": self.shots,
            "hits": self.hits,
            "kills": self.kills,
            "deaths": self.deaths,
            "detections": [d.to_json() for d in self.detections],
            "first_detection_s": None if first is None else round(first, 3),
            "sanction": self.sanction,
            "sanction_score": None if self.sanction_score is None else round(self.sanction_score, 3),
            "left_s": None if self.left_s is None else round(self.left_s, 3),
            "detection_list": [d.to_json() for d in self.detection_list],
        }


@dataclass(frozen=True, slots=True)
class MatchResult:
    """The outcome of one match.

    Attributes:
        scenario: scenario name. source: where it came from. mode: ``virtual`` or ``udp``.
        map: map name or path. seed: root seed. tick_rate_hz: server rate (Hz).
        duration_s: match time played (s, virtual or real). wall_s: wall-clock time it took (s).
        players: in scenario order. server: the server's own figures (tick statistics,
            rejections by reason, counters), plain data. replay: replay file path, if recorded.
    """

    scenario: str
    source: str
    mode: str
    map: str
    seed: int
    tick_rate_hz: int
    duration_s: float
    wall_s: float
    players: tuple[PlayerResult, ...]
    server: Mapping[str, Any] = field(default_factory=dict)
    replay: str | None = None

    @property
    def speedup(self) -> float:
        """Match seconds per wall second."""
        return self.duration_s / self.wall_s if self.wall_s > 0 else math.inf

    def with_profiles(self, profiles: Mapping[str, Any]) -> MatchResult:
        """A copy whose players carry their ground truth from ``profiles`` (label -> an object
        with a ``cheat`` flag, e.g. ``testbed.bot_factory.scenario_profiles(scenario)``); players
        whose label is not in it are left to :attr:`PlayerResult.honest`'s lookup."""
        players = tuple(
            dataclasses.replace(p, cheat=bool(profiles[p.profile].cheat)) if p.profile in profiles else p
            for p in self.players
        )
        return dataclasses.replace(self, players=players)

    def confusion(self) -> dict[str, int]:
        """Ground truth against "flagged by any detector": true/false positives and negatives."""
        out = {"true_positive": 0, "false_positive": 0, "true_negative": 0, "false_negative": 0}
        for p in self.players:
            if p.honest:
                out["false_positive" if p.flagged else "true_negative"] += 1
            else:
                out["true_positive" if p.flagged else "false_negative"] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        """One JSON-able object: the match, its players and the server's figures."""
        speedup = self.speedup
        return {
            "scenario": self.scenario,
            "source": self.source,
            "mode": self.mode,
            "map": self.map,
            "seed": self.seed,
            "tick_rate_hz": self.tick_rate_hz,
            "duration_s": round(self.duration_s, 3),
            "wall_s": round(self.wall_s, 3),
            "speedup": None if not math.isfinite(speedup) else round(speedup, 2),
            "replay": self.replay,
            "confusion": self.confusion(),
            "players": [p.to_json() for p in self.players],
            "server": _plain(self.server),
        }

    def to_json_line(self) -> str:
        """:meth:`to_json` as one line of JSON."""
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=False, allow_nan=False)


def _plain(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become null, tuples lists, keys strings."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _detections_text(p: PlayerResult, width: int = 3) -> str:
    if not p.detections:
        return "-"
    by_count = sorted(p.detections, key=lambda d: (-d.count, d.first_s))
    parts = [f"{d.label} x{d.count}" for d in by_count[:width]]
    if len(by_count) > width:
        parts.append(f"+{len(by_count) - width} more")
    return ", ".join(parts)


def _detections_brief(p: PlayerResult) -> str:
    """The compact layout's summary: total, the most frequent ``detector:kind``, how many other kinds."""
    if not p.detections:
        return "-"
    top = min(p.detections, key=lambda d: (-d.count, d.first_s))
    more = f" +{len(p.detections) - 1}" if len(p.detections) > 1 else ""
    return f"{p.detection_total} {top.label}{more}"


def _player_cell(p: PlayerResult, compact: bool) -> Text:
    """The player's name, with whether it left (and when) or never connected."""
    text = Text(p.name)
    if not p.connected:
        text.append(" (never conn.)" if compact else " (never connected)", style="dim")
    elif p.left_s is not None:
        text.append(f" (left {p.left_s:.0f}s)" if compact else f" (left at {p.left_s:.1f} s)", style="yellow")
    return text


_SANCTION_STYLE = {"none": "dim", "log": "", "monitor": "yellow", "kick": "bold yellow", "temp_ban": "bold red", "permanent_ban": "bold red"}
_SANCTION_SHORT = {
    "none": "-", "monitor": "monitor", "kick": "kick", "temp_ban": "tempban", "temp_ban_review": "tempban",
    "permanent_ban": "permban",
}


def render_table(result: MatchResult, wide: bool = False, width: int | None = None) -> Table:
    """Every player's ground truth against what the server recorded (a rich Table).

    The default layout fits a 100-column terminal: link as ``ping/loss``, kills/deaths in one
    column, detections summarised as ``total top-detector:kind +other-kinds``, player names
    and profiles never wrapped. Narrower than that (``width``, the terminal's columns) it leaves
    out hits and K/D so that the detections and the sanction still fit 80 columns. ``wide``
    gives every column in full (about 150 columns).
    """
    speed = result.speedup
    speed_text = f", {speed:.0f}x real time" if math.isfinite(speed) and result.mode == "virtual" else ""
    title = (
        f"{result.scenario} on {result.map}: {result.duration_s:.0f} s {result.mode} at "
        f"{result.tick_rate_hz} Hz, seed {result.seed}{speed_text}"
    )
    c = result.confusion()
    caption = (
        f"cheaters flagged {c['true_positive']}/{c['true_positive'] + c['false_negative']}, "
        f"honest flagged {c['false_positive']}/{c['false_positive'] + c['true_negative']}"
    )
    if wide:
        table = _wide_table(result, title)
    else:
        narrow = width is not None and width < _COMPACT_WIDTH
        table = _compact_table(result, title, narrow)
        caption += "; link: ping ms/loss; detections: total, top kind, +other kinds"
        if narrow:
            caption += "; hits and K/D with --wide"
    table.caption = caption
    return table


def _wide_table(result: MatchResult, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for header, justify in (
        ("player", "left"),
        ("profile (truth)", "left"),
        ("ping ms", "right"),
        ("loss", "right"),
        ("rtt ms", "right"),
        ("shots", "right"),
        ("hits", "right"),
        ("kills", "right"),
        ("deaths", "right"),
        ("detections (detector:kind)", "left"),
        ("first s", "right"),
        ("sanction", "left"),
    ):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for p in result.players:
        truth_style = "green" if p.honest else "magenta"
        # A flagged honest player or an unflagged cheater is what the lab is looking for.
        wrong = p.flagged == p.honest
        first = p.first_detection_s
        table.add_row(
            _player_cell(p, compact=False),
            Text(p.profile, style=truth_style),
            f"{p.ping_ms:.0f}",
            f"{p.loss * 100:.1f}%",
            "-" if p.rtt_ms is None else f"{p.rtt_ms:.0f}",
            str(p.shots),
            str(p.hits),
            str(p.kills),
            str(p.deaths),
            Text(_detections_text(p), style="bold red" if wrong else ""),
            "-" if first is None else f"{first:.1f}",
            Text(p.sanction, style=_SANCTION_STYLE.get(p.sanction, "")),
        )
    return table


_COMPACT_WIDTH = 100
"""Terminal columns the compact layout needs with every one of its columns."""


def _compact_table(result: MatchResult, title: str, narrow: bool = False) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    names = [_player_cell(p, compact=True) for p in result.players]
    briefs = [_detections_brief(p) for p in result.players]
    # Names, profiles and detector:kind labels are never split: only the detections column wraps,
    # and only between its words.
    longest_label = max((len(d.label) for p in result.players for d in p.detections), default=3)
    table.add_column("player", no_wrap=True, min_width=max((t.cell_len for t in names), default=6))
    table.add_column("profile", no_wrap=True, min_width=max((len(p.profile) for p in result.players), default=7))
    table.add_column("link", justify="right", no_wrap=True)
    if not narrow:
        table.add_column("hit/shot", justify="right", no_wrap=True)
        table.add_column("K/D", justify="right", no_wrap=True)
    table.add_column("detections", ratio=1, min_width=longest_label)
    table.add_column("1st s", justify="right", no_wrap=True)
    table.add_column("sanction", no_wrap=True)
    for p, name, brief in zip(result.players, names, briefs):
        wrong = p.flagged == p.honest
        first = p.first_detection_s
        counts = () if narrow else (f"{p.hits}/{p.shots}", f"{p.kills}/{p.deaths}")
        table.add_row(
            name,
            Text(p.profile, style="green" if p.honest else "magenta"),
            f"{p.ping_ms:.0f}/{p.loss * 100:.0f}%",
            *counts,
            Text(brief, style="bold red" if wrong else ""),
            "-" if first is None else f"{first:.1f}",
            Text(_SANCTION_SHORT.get(p.sanction, p.sanction), style=_SANCTION_STYLE.get(p.sanction, "")),
        )
    return table


def summary_line(result: MatchResult) -> str:
    """One line: time, speed, kills, detections."""
    kills = sum(p.kills for p in result.players)
    detections = sum(p.detection_total for p in result.players)
    speed = result.speedup
    speed_text = f" ({speed:.0f}x)" if math.isfinite(speed) else ""
    return (
        f"{result.mode} match {result.duration_s:.1f} s in {result.wall_s:.1f} s wall{speed_text}: "
        f"{kills} kills, {detections} detections"
    )


BOT_LAG_WARN_SHARE = 0.01
"""A UDP match whose bots skipped more than this share of their ticks gets a warning."""


def bot_lag_warning(result: MatchResult) -> str | None:
    """A warning when the bots of a UDP match fell behind real time (a starved process skips
    client ticks), else None: what they played, and what the detectors made of it, is then not
    what those players on those links would give."""
    udp = result.server.get("udp") or {}
    skipped, commands = udp.get("bot_ticks_skipped"), udp.get("bot_commands")
    if not skipped or commands is None:
        return None
    share = skipped / (skipped + commands)
    if share <= BOT_LAG_WARN_SHARE:
        return None
    return (f"warning: the bots fell behind real time and skipped {share:.0%} of their ticks (this machine is "
            "busy): their play and these detections are not representative; rerun on an idle machine")


def detection_counts(rows: Sequence[tuple[str, str, float]]) -> tuple[DetectionCount, ...]:
    """Fold ``(detector, kind, time_s)`` rows into counts sorted by first occurrence."""
    first: dict[tuple[str, str], float] = {}
    counts: dict[tuple[str, str], int] = {}
    for detector, kind, t in rows:
        key = (detector, kind)
        counts[key] = counts.get(key, 0) + 1
        if key not in first:
            first[key] = t
    return tuple(
        DetectionCount(detector, kind, counts[(detector, kind)], first[(detector, kind)])
        for detector, kind in sorted(first, key=lambda k: (first[k], k))
    )
