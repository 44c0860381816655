"""Is the honest bot population a faithful stand-in for real players? (``referee lab fidelity``)

Every figure is measured on the honest players (``players.cheat = false``) of a corpus's stored
event streams, for the whole honest population and per skill level, with a 95 % interval and its
sample size, beside the published reference it should match:

* IW4MAdmin's real-player population (REFERENCES section 3), with the definitions the detector
  implements (``anticheat.detectors.iw4m``): headshot ratio (head + neck) / hits and the largest
  single-bone share over the players with at least ``bone_min_kills`` kills, the upper / lower
  torso ratio over the players with at least ``chest_min_hits`` upper-torso hits (and pooled over
  all hits, since a ten-minute session rarely reaches 30), and the per-hit view-angle offset
  (:func:`~anticheat.detectors.iw4m.angles.view_angle_offset`, deg) fitted as a log-normal
  (mu, sigma of ln offset over the hits with a positive offset; the share of exactly-zero
  offsets is reported beside it). "Within 1 sd" compares the estimate with the reference mean
  using IW4MAdmin's own sd at the population's median hits per player (``ratio sd(n)``); for the
  offset, the unit is the reference sigma (the sd of ln offset).
* Human reaction time (median 200-260 ms, REFERENCES section 11), see :func:`approaches` and
  :func:`reaction_times`. Read it with its limits: the onset is the server's, when the enemy
  becomes the nearest *visible* one, and the server's visible set is the visibility culler's
  (enemies sent to the player, extents predicted a round trip + refresh + 100 ms ahead so they
  never pop in late), while a player sees an enemy a downstream trip plus the client's 100 ms
  interpolation after the server does. Only the round trip is subtracted (the uncorrected time
  is reported beside it), and onsets the view was already turning to (pre-aim, anticipation),
  enemies appearing on target or out of view, and approaches never completed time nothing:
  their share is reported as "onsets unmeasurable".
* Fitts' law (R^2 >= 0.8 on the means per index-of-difficulty bin), see :func:`flicks` and
  :func:`fitts_fit`.
* Variety: the spread across players of the headshot ratio, the hit ratio, the time to kill and
  the shots per kill (no reference: a reader sees whether players differ as real ones do).

Intervals of figures over players are percentile bootstraps that resample players (hits of one
player are not independent); intervals of medians of events resample players too. Units: seconds,
degrees, meters; ratios are unitless.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anticheat.detectors.iw4m.angles import view_angle_offset
from anticheat.detectors.iw4m.thresholds import IW4MConfig, lerp
from anticheat.events import AimSample, ConnectionSample, SessionEvent, ShotResult
from server.recording import ReplayReader
from testbed.lab.kills import stream_kills
from testbed.lab.redetect import decompress
from testbed.lab.store import LabStore
from world.hitbox import Bone

__all__ = [
    "FIGURES",
    "Approach",
    "Fidelity",
    "Figure",
    "FittsFit",
    "PlayerData",
    "Reference",
    "approaches",
    "collect_stream",
    "corpus_fidelity",
    "fitts_fit",
    "flicks",
    "group_figures",
    "lognormal_fit",
    "reaction_times",
]

_HEAD = int(Bone.HEAD)
_NECK = int(Bone.NECK)
_UPPER = int(Bone.UPPER_TORSO)
_LOWER = int(Bone.LOWER_TORSO)


@dataclass(slots=True)
class PlayerData:
    """One honest player's session (a ``players`` row) as read from its match's stream.

    Attributes:
        match_id, name, skill, ping_ms: the ``players`` row.
        aim: (n, 7) float array of the player's AimSamples in order, columns ``AIM_COLUMNS``
            (time s, seq, yaw deg, pitch deg, target slot or -1, target angle deg, target distance m).
        rtt: (m, 2) array of (time s, rtt ms) of its ConnectionSamples.
        shots: shots fired (pellet 0 of each); hits: shots that hit a player (any pellet).
        bones: hit location of each analysed hit (one per shot, IW4MAdmin's rule).
        offsets: IW4MAdmin's offset (deg) of each analysed hit with a command before and after it.
        kills: kills (not suicides); ttk_s, attempts: AimDetect's time to kill (s) and attempts
            (shots since the previous kill or spawn) of each kill.
    """

    match_id: int
    name: str
    skill: str
    ping_ms: float
    aim: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 7)))
    rtt: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 2)))
    shots: int = 0
    hits: int = 0
    bones: list[int] = field(default_factory=list)
    offsets: list[float] = field(default_factory=list)
    kills: int = 0
    ttk_s: list[float] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)


AIM_COLUMNS: tuple[str, ...] = ("time_s", "seq", "yaw_deg", "pitch_deg", "target", "target_angle_deg",
                                "target_distance_m")
_T, _SEQ, _YAW, _PITCH, _TARGET, _ANGLE, _DIST = range(7)


class _Session:
    """Accumulates one session's events during the pass over a stream (lists, then arrays)."""

    __slots__ = ("aim", "data", "hits", "rtt")

    def __init__(self, data: PlayerData) -> None:
        self.data = data
        self.aim: list[tuple[float, ...]] = []
        self.rtt: list[tuple[float, float]] = []
        self.hits: list[ShotResult] = []


def collect_stream(events: Iterable[object], honest: Mapping[str, tuple[str, float]],
                   match_id: int = 0) -> list[PlayerData]:
    """The honest players' figures of one event stream, in one pass.

    ``honest`` maps each honest player's name to (skill, ping ms); other players' events are
    skipped. Slots are reused: a ``SessionEvent`` connect binds a slot to a name until the next.
    """
    current: dict[int, _Session | None] = {}
    sessions: list[_Session] = []
    last_shot: dict[int, tuple[int, int, int]] = {}
    ttk_col = _feature_index("time_to_kill_s")
    attempts_col = _feature_index("attempts")

    def tap(stream: Iterable[object]) -> Iterator[object]:
        for event in stream:
            kind = type(event)
            if kind is AimSample:
                s = current.get(event.player)  # type: ignore[attr-defined]
                if s is not None:
                    e: Any = event
                    s.aim.append((e.time_s, e.seq, e.yaw_deg, e.pitch_deg, -1 if e.target is None else e.target,
                                  e.target_angle_deg, e.target_distance_m))
            elif kind is ShotResult:
                _shot(event, current, last_shot)  # type: ignore[arg-type]
            elif kind is ConnectionSample:
                s = current.get(event.player)  # type: ignore[attr-defined]
                if s is not None:
                    s.rtt.append((event.time_s, event.rtt_ms))  # type: ignore[attr-defined]
            elif kind is SessionEvent:
                ev: Any = event
                if ev.kind == "connect" and ev.name in honest:
                    skill, ping = honest[ev.name]
                    s = _Session(PlayerData(match_id, ev.name, skill, ping))
                    sessions.append(s)
                    current[ev.player] = s
                else:
                    current[ev.player] = None
            yield event

    names: dict[str, _Session] = {}
    for name, kill, features in stream_kills(tap(events)):
        s = names.get(name) or next((x for x in reversed(sessions) if x.data.name == name), None)
        if s is None:
            continue
        names[name] = s
        s.data.kills += 1
        s.data.ttk_s.append(float(features[ttk_col]))
        s.data.attempts.append(int(features[attempts_col]))
    out = []
    for s in sessions:
        d = s.data
        d.aim = np.asarray(s.aim, dtype=np.float64).reshape(-1, 7)
        d.rtt = np.asarray(s.rtt, dtype=np.float64).reshape(-1, 2)
        d.offsets = _offsets(d.aim, s.hits)
        out.append(d)
    return out


def _feature_index(name: str) -> int:
    from anticheat.detectors.aimdetect.features import FEATURE_NAMES

    return FEATURE_NAMES.index(name)


def _shot(shot: ShotResult, current: Mapping[int, _Session | None], last: dict[int, tuple[int, int, int]]) -> None:
    """Count a shot (pellet 0) and, as IW4MAdmin does, the first pellet of a shot that hit a player."""
    s = current.get(shot.shooter)
    if s is None:
        return
    d = s.data
    if shot.pellet == 0:
        d.shots += 1
    if shot.victim is None or shot.bone == 0 or shot.victim == shot.shooter:
        return
    key = (shot.tick, shot.claim.seq, shot.weapon)
    if last.get(shot.shooter) == key:
        return
    last[shot.shooter] = key
    d.hits += 1
    d.bones.append(int(shot.bone))
    s.hits.append(shot)


def _offsets(aim: NDArray[np.float64], hits: Sequence[ShotResult]) -> list[float]:
    """IW4MAdmin's offset of each hit: a = the last command before the shot's, b = the first
    after it, c = the shot's claimed angles (hits without both neighbours are left out, as the
    detector leaves them unmeasured)."""
    if not hits or len(aim) == 0:
        return []
    seqs = aim[:, _SEQ]
    out: list[float] = []
    for shot in hits:
        seq = shot.claim.seq
        if seq <= 0:
            continue
        i = int(np.searchsorted(seqs, seq, side="left"))  # first command with seq >= the shot's
        j = int(np.searchsorted(seqs, seq, side="right"))  # first command after it
        if i == 0 or j >= len(seqs):
            continue
        a = (aim[i - 1, _PITCH], aim[i - 1, _YAW])
        b = (aim[j, _PITCH], aim[j, _YAW])
        out.append(view_angle_offset(a, b, (shot.claim.pitch_deg, shot.claim.yaw_deg)))
    return out


# --- reaction and flicks ------------------------------------------------------------------

IN_VIEW_DEG = 45.0
"""An enemy counts as appearing on screen when its angle from the view is at most this (deg):
half the narrowest horizontal field of view players set (90 deg)."""
QUIET_S = 0.5
"""A clean onset follows at least this long (s) with no visible enemy at all."""
ACQUIRE_RADIUS_M = 0.45
"""The crosshair is on the target within this distance (m) of the chest point the target angle is
measured to: the head centre is 0.43 m above it, the belt line players aim at 0.30 m below."""
MIN_SPEED_DEG_S = 30.0
"""A movement starts when the view turns at least this fast (deg/s); hand tremor and drift stay
far below it."""
MAX_APPROACH_S = 1.5
"""An approach must acquire its target within this long (s) of the onset."""
OFFSET_ZERO_DEG = 1e-6
"""Offsets below this (deg) are a zero detour's float rounding (the smallest real ones are a
mouse count, ~0.03 deg), counted as zero."""


@dataclass(frozen=True, slots=True)
class Approach:
    """One enemy appearing as the player's nearest visible enemy, and what the view did.

    Attributes:
        onset_s: server time the enemy became the nearest visible enemy (s).
        clean: no enemy at all was visible for ``QUIET_S`` before (a stimulus out of nothing;
            only these time a reaction).
        status: ``measured`` (a movement start and an acquisition), ``out_of_view`` (appeared
            beyond ``IN_VIEW_DEG``), ``pre_aimed`` (already on target at the onset), ``moving``
            (the view was already turning onto it at the onset: anticipation, no reaction to
            time), ``not_acquired`` (the target was lost or not reached within
            ``MAX_APPROACH_S``), ``no_movement`` (reached without a movement of the view: the
            target walked into the crosshair).
        start_s: when the movement onto it started (s; ``measured`` only, else NaN).
        end_s: when the crosshair came within ``ACQUIRE_RADIUS_M`` of it (s; NaN when not).
        amplitude_deg: the angle to the target at the movement start (deg; NaN when none).
        width_deg: the target's angular width ``2 atan(ACQUIRE_RADIUS_M / distance)`` then (deg).
    """

    onset_s: float
    clean: bool
    status: str
    start_s: float = math.nan
    end_s: float = math.nan
    amplitude_deg: float = math.nan
    width_deg: float = math.nan


def _view_speed(aim: NDArray[np.float64]) -> NDArray[np.float64]:
    """Angular speed of the view (deg/s) from each command to the next (0 for the last)."""
    yaw = np.radians(aim[:, _YAW])
    pitch = np.radians(aim[:, _PITCH])
    v = np.stack([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)], axis=1)
    step = np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", v[1:], v[:-1]), -1.0, 1.0)))
    dt = np.maximum(np.diff(aim[:, _T]), 1.0 / 128.0)
    return np.append(step / dt, 0.0)


def approaches(aim: NDArray[np.float64]) -> list[Approach]:
    """Every approach of one player's session (``PlayerData.aim``), in order.

    Definitions (server time, deg, m): the *onset* is a command whose nearest visible enemy
    (``AimSample.target``) is a slot that was not the target in the ``QUIET_S`` before. The
    target is *acquired* at the first command at which the angle to it is at most
    ``atan(ACQUIRE_RADIUS_M / distance)``, the target unchanged since the onset and within
    ``MAX_APPROACH_S`` of it. The *movement start* is the first command between onset and
    acquisition at which the view turns at least ``MIN_SPEED_DEG_S``, at least half of that turn
    closes the angle to the target, and the angle never again exceeds its value there before the
    acquisition (the movement that brought the crosshair onto it). A start at the onset command
    itself means the view was already on its way (``moving``).
    """
    n = len(aim)
    if n < 2:
        return []
    t, target, angle, dist = aim[:, _T], aim[:, _TARGET], aim[:, _ANGLE], aim[:, _DIST]
    speed = _view_speed(aim)
    closing = np.append(-np.diff(angle) / np.maximum(np.diff(t), 1.0 / 128.0), 0.0)
    half = np.degrees(np.arctan(ACQUIRE_RADIUS_M / np.maximum(dist, 0.1)))
    seen = target >= 0
    # Index of the latest command at or before each one that had any visible enemy (-1: none yet).
    last_seen = np.maximum.accumulate(np.where(seen, np.arange(n), -1))
    onsets: list[int] = []
    for slot in np.unique(target[seen]):
        idx = np.flatnonzero(target == slot)
        fresh = np.r_[True, np.diff(t[idx]) > QUIET_S]
        onsets.extend(int(i) for i in idx[fresh])
    out: list[Approach] = []
    for i in sorted(onsets):
        before = last_seen[i - 1] if i > 0 else -1
        clean = bool(before < 0 or t[i] - t[before] >= QUIET_S)
        if angle[i] > IN_VIEW_DEG:
            out.append(Approach(float(t[i]), clean, "out_of_view"))
            continue
        if angle[i] <= half[i]:
            out.append(Approach(float(t[i]), clean, "pre_aimed"))
            continue
        end = i
        while end + 1 < n and target[end + 1] == target[i] and t[end + 1] - t[i] <= MAX_APPROACH_S:
            end += 1
        on = np.flatnonzero(angle[i:end + 1] <= half[i:end + 1])
        if len(on) == 0:
            out.append(Approach(float(t[i]), clean, "not_acquired"))
            continue
        e = i + int(on[0])
        # Running maximum of the angle from each command to the acquisition, read backwards.
        ahead_max = np.maximum.accumulate(angle[i:e + 1][::-1])[::-1]
        ok = (speed[i:e] >= MIN_SPEED_DEG_S) & (closing[i:e] >= 0.5 * speed[i:e]) & (ahead_max[:-1] <= angle[i:e])
        starts = np.flatnonzero(ok)
        if len(starts) == 0:
            out.append(Approach(float(t[i]), clean, "no_movement", end_s=float(t[e])))
            continue
        j = i + int(starts[0])
        if j == i:
            out.append(Approach(float(t[i]), clean, "moving", end_s=float(t[e])))
            continue
        out.append(Approach(float(t[i]), clean, "measured", float(t[j]), float(t[e]), float(angle[j]),
                            float(2.0 * half[j])))
    return out


def reaction_times(found: Sequence[Approach], rtt: NDArray[np.float64], ping_ms: float) -> NDArray[np.float64]:
    """Reaction times (s) of the clean, measured approaches: movement start minus onset minus
    the player's round trip at the onset (the latest ConnectionSample ``rtt`` row (time s, ms) at
    or before it; ``ping_ms`` before the first). The onset is server time; the player sees the
    enemy a downstream trip later and its command needs an upstream trip back."""
    rows = [a for a in found if a.clean and a.status == "measured"]
    if not rows:
        return np.zeros(0)
    onset = np.array([a.onset_s for a in rows])
    start = np.array([a.start_s for a in rows])
    if len(rtt):
        k = np.searchsorted(rtt[:, 0], onset, side="right") - 1
        trip_ms = np.where(k >= 0, rtt[np.maximum(k, 0), 1], ping_ms)
    else:
        trip_ms = np.full(len(rows), ping_ms)
    return start - onset - trip_ms / 1000.0


def flicks(found: Sequence[Approach]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(index of difficulty (bits), movement time (s)) of every measured approach (clean or
    not): ID = log2(1 + A / W) with A the angle at the movement start and W the target's angular
    width, MT = acquisition minus movement start."""
    rows = [a for a in found if a.status == "measured"]
    amp = np.array([a.amplitude_deg for a in rows])
    width = np.array([a.width_deg for a in rows])
    mt = np.array([a.end_s - a.start_s for a in rows])
    return (np.log2(1.0 + amp / width) if rows else np.zeros(0)), mt


@dataclass(frozen=True, slots=True)
class FittsFit:
    """MT = a + b ID fitted on the mean MT of each ID bin.

    Attributes: a_s (s), b_s_per_bit (s/bit), r2 (of the bin means), bins (used), flicks (in them).
    """

    a_s: float
    b_s_per_bit: float
    r2: float
    bins: int
    flicks: int


def fitts_fit(ids: NDArray[np.float64], mts: NDArray[np.float64], bin_bits: float = 0.5,
              min_per_bin: int = 5) -> FittsFit:
    """Fitts' law fitted as the literature does: flicks binned by ID (``bin_bits`` wide), each
    bin with at least ``min_per_bin`` flicks reduced to its mean ID and mean MT, and the line
    fitted by least squares to those means (R^2 of the means). NaN figures with fewer than 3 bins."""
    ids = np.asarray(ids, dtype=np.float64)
    mts = np.asarray(mts, dtype=np.float64)
    if len(ids) == 0:
        return FittsFit(math.nan, math.nan, math.nan, 0, 0)
    key = np.floor(ids / bin_bits).astype(np.int64)
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    keep = counts >= min_per_bin
    if keep.sum() < 3:
        return FittsFit(math.nan, math.nan, math.nan, int(keep.sum()), int(counts[keep].sum()))
    mean_id = np.bincount(inverse, ids)[keep] / counts[keep]
    mean_mt = np.bincount(inverse, mts)[keep] / counts[keep]
    b, a = np.polyfit(mean_id, mean_mt, 1)
    resid = mean_mt - (a + b * mean_id)
    total = float(((mean_mt - mean_mt.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else math.nan
    return FittsFit(float(a), float(b), r2, int(keep.sum()), int(counts[keep].sum()))


def lognormal_fit(values: NDArray[np.float64]) -> tuple[float, float, int, float]:
    """(mu, sigma, n, zero share) of a log-normal fitted by maximum likelihood to the positive
    ``values`` (those of at least ``OFFSET_ZERO_DEG``): mu and sigma are the mean and the (ddof 0)
    sd of their logarithms; n counts them; zero share is the fraction of all values below
    ``OFFSET_ZERO_DEG`` (a log-normal has none)."""
    values = np.asarray(values, dtype=np.float64)
    pos = values[values >= OFFSET_ZERO_DEG]
    zero = float((values < OFFSET_ZERO_DEG).mean()) if len(values) else math.nan
    if len(pos) == 0:
        return math.nan, math.nan, 0, zero
    logs = np.log(pos)
    return float(logs.mean()), float(logs.std()), len(pos), zero


# --- figures ------------------------------------------------------------------------------

SKILLS: tuple[str, ...] = ("low", "average", "high", "pro")
REACTION_RANGE_S: tuple[float, float] = (0.200, 0.260)
"""Median human simple visual reaction time (s), REFERENCES section 11."""
FITTS_MIN_R2 = 0.8
VARIETY_MIN_HITS = 10
VARIETY_MIN_SHOTS = 20
VARIETY_MIN_KILLS = 3


@dataclass(frozen=True, slots=True)
class Reference:
    """What a figure is compared with.

    Attributes:
        text: how the table shows it (``0.222±0.043``, ``0.200-0.260``, ``>= 0.8``).
        low, high: the estimate is *within* when ``low <= estimate <= high`` (rule ``range``), or
            the reference value ``low`` (== ``high``) lies in the figure's 95 % interval (rule
            ``interval``: used for spreads, which have no published sd of their own).
        rule: ``range`` or ``interval``.
    """

    text: str
    low: float
    high: float
    rule: str = "range"


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure of one group of players.

    Attributes:
        key, label: identifier and the table's wording. estimate, low, high: the figure and its
            95 % interval (NaN when it cannot be measured). n: its sample size (players, hits,
            reactions or flicks: ``unit`` says which). spread: (p10, p90) across players for
            per-player figures, (p25, p75) of the events for reaction times, else None.
        reference: what it should match, or None.
    """

    key: str
    label: str
    estimate: float
    low: float
    high: float
    n: int
    unit: str
    spread: tuple[float, float] | None = None
    reference: Reference | None = None

    @property
    def verdict(self) -> str:
        """``within``, ``outside``, or ``-`` (no reference, or nothing measured)."""
        ref = self.reference
        if ref is None or not math.isfinite(self.estimate):
            return "-"
        if ref.rule == "interval":
            inside = math.isfinite(self.low) and self.low <= ref.low <= self.high
        else:
            inside = ref.low <= self.estimate <= ref.high
        return "within" if inside else "outside"

    def to_json(self) -> dict[str, Any]:
        """The figure as plain JSON values (NaN as None)."""
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None
        return {
            "label": self.label, "estimate": num(self.estimate), "low": num(self.low), "high": num(self.high),
            "n": self.n, "unit": self.unit, "spread": None if self.spread is None else [num(v) for v in self.spread],
            "reference": None if self.reference is None else {
                "text": self.reference.text, "low": self.reference.low, "high": self.reference.high,
                "rule": self.reference.rule},
            "verdict": self.verdict,
        }


FIGURES: tuple[tuple[str, str], ...] = (
    ("headshot", "headshot ratio"),
    ("headshot_sd", "  sd across players"),
    ("max_bone", "max-bone ratio"),
    ("max_bone_sd", "  sd across players"),
    ("chest", "chest ratio"),
    ("chest_pooled", "chest ratio, pooled"),
    ("offset_mu", "offset ln mu"),
    ("offset_sigma", "offset ln sigma"),
    ("offset_zero", "offset = 0 share"),
    ("reaction", "reaction s [IQR]"),
    ("reaction_raw", "  uncorrected [IQR]"),
    ("reaction_unmeasured", "  onsets unmeasurable"),
    ("fitts_r2", "Fitts R2 (bin means)"),
    ("fitts_b", "  b, s/bit"),
    ("fitts_a", "  a, s"),
    ("var_headshot", "player headshot ratio"),
    ("var_hit_ratio", "player hit ratio"),
    ("var_ttk", "player time to kill s"),
    ("var_shots_per_kill", "player shots/kill"),
)
"""Every figure's key and label, in table order."""


@dataclass(frozen=True, slots=True)
class _Player:
    """A player's numbers the figures need (computed once, resampled many times)."""

    skill: str
    hits: int
    kills: int
    shots: int
    head: int
    max_bone: int
    upper: int
    lower: int
    log_offsets: NDArray[np.float64]
    zero_offsets: int
    offsets: int
    reactions: NDArray[np.float64]
    raw_reactions: NDArray[np.float64]
    clean_onsets: int
    fitts: NDArray[np.float64]
    ttk_s: float


def _summarise(p: PlayerData) -> _Player:
    bones = np.asarray(p.bones, dtype=np.int64)
    counts = np.bincount(bones, minlength=18) if len(bones) else np.zeros(18, dtype=np.int64)
    offsets = np.asarray(p.offsets, dtype=np.float64)
    found = approaches(p.aim)
    rt = reaction_times(found, p.rtt, p.ping_ms)
    raw = reaction_times(found, np.zeros((0, 2)), 0.0)
    ids, mts = flicks(found)
    ttk = np.asarray([x for x in p.ttk_s if x > 0.0])
    return _Player(
        skill=p.skill, hits=len(bones), kills=p.kills, shots=p.shots, head=int(counts[_HEAD] + counts[_NECK]),
        max_bone=int(counts.max()) if len(bones) else 0, upper=int(counts[_UPPER]), lower=int(counts[_LOWER]),
        log_offsets=np.log(offsets[offsets >= OFFSET_ZERO_DEG]), zero_offsets=int((offsets < OFFSET_ZERO_DEG).sum()),
        offsets=len(offsets),
        reactions=rt, raw_reactions=raw,
        clean_onsets=sum(1 for a in found if a.clean and a.status != "out_of_view"),
        fitts=np.column_stack([ids, mts]) if len(ids) else np.zeros((0, 2)),
        ttk_s=float(np.median(ttk)) if len(ttk) else math.nan,
    )


def _ratio_sd(n: float, sd_low: float, sd_high: float, n_low: int, n_high: int) -> float:
    """IW4MAdmin's sd of a ratio at ``n`` hits (interpolated from ``n_low`` to ``n_high``)."""
    return lerp(sd_low, sd_high, min(1.0, max(0.0, (n - n_low) / (n_high - n_low))))


def _bootstrap(parts: Sequence[NDArray[np.float64]], stat: Callable[[NDArray[np.float64]], float],
               rng: np.random.Generator,
               reps: int) -> tuple[float, float, float]:
    """``stat`` of the concatenated ``parts`` (one per player) and its 95 % percentile interval
    over ``reps`` resamplings of the players (NaN replicates are dropped)."""
    if not parts:
        return math.nan, math.nan, math.nan
    est = float(stat(np.concatenate(parts)))
    n = len(parts)
    values = np.array([stat(np.concatenate([parts[k] for k in row])) for row in rng.integers(0, n, (reps, n))],
                      dtype=np.float64)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return est, math.nan, math.nan
    low, high = np.percentile(values, [2.5, 97.5])
    return est, float(low), float(high)


def _scalars(values: Iterable[float]) -> list[NDArray[np.float64]]:
    return [np.array([v], dtype=np.float64) for v in values]


def _spread(values: Sequence[float] | NDArray[np.float64], q: tuple[float, float] = (10, 90)) -> tuple[float, float] | None:
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0:
        return None
    lo, hi = np.percentile(arr, q)
    return float(lo), float(hi)


def _sd(x: NDArray[np.float64]) -> float:
    return float(x.std(ddof=1)) if len(x) > 1 else math.nan


def _median(x: NDArray[np.float64]) -> float:
    return float(np.median(x)) if len(x) else math.nan


def group_figures(players: Sequence[_Player], cfg: IW4MConfig, rng: np.random.Generator,
                  reps: int = 1000) -> list[Figure]:
    """Every figure of ``FIGURES`` for one group of players."""
    out: list[Figure] = []

    def add(key: str, est_low_high: tuple[float, float, float], n: int, unit: str,
            spread: tuple[float, float] | None = None, ref: Reference | None = None) -> None:
        label = dict(FIGURES)[key]
        out.append(Figure(key, label, *est_low_high, n=n, unit=unit, spread=spread, reference=ref))

    # Bone: IW4MAdmin's population is the players with enough kills; sd at their median hits.
    bone = [p for p in players if p.kills >= cfg.bone_min_kills and p.hits > 0]
    med_hits = float(np.median([p.hits for p in bone])) if bone else math.nan
    span = (cfg.bone_lerp_low_hits, cfg.bone_lerp_high_hits)
    for key, mean, sd_low, sd_high, values in (
        ("headshot", cfg.headshot_mean, cfg.headshot_sd_low, cfg.headshot_sd_high, [p.head / p.hits for p in bone]),
        ("max_bone", cfg.max_bone_mean, cfg.max_bone_sd_low, cfg.max_bone_sd_high,
         [p.max_bone / p.hits for p in bone]),
    ):
        sd = _ratio_sd(med_hits, sd_low, sd_high, *span) if bone else sd_low
        parts = _scalars(values)
        add(key, _bootstrap(parts, np.mean, rng, reps), len(bone), "players", _spread(values),
            Reference(f"{mean:.3f}±{sd:.3f}", mean - sd, mean + sd))
        add(f"{key}_sd", _bootstrap(parts, _sd, rng, reps), len(bone), "players", None,
            Reference(f"{sd:.3f}", sd, sd, "interval"))

    # Chest: upper / lower torso (lower floored at 1, as the detector does).
    chest = [p for p in players if p.upper >= cfg.chest_min_hits]
    chest_span = (cfg.chest_lerp_low_hits, cfg.chest_lerp_high_hits)
    values = [p.upper / max(1, p.lower) for p in chest]
    sd = _ratio_sd(float(np.median([p.upper for p in chest])) if chest else 0.0, cfg.chest_sd_low,
                   cfg.chest_sd_high, *chest_span)
    add("chest", _bootstrap(_scalars(values), np.mean, rng, reps), len(chest), "players", _spread(values),
        Reference(f"{cfg.chest_mean:.3f}±{sd:.3f}", cfg.chest_mean - sd, cfg.chest_mean + sd))
    torso = [p for p in players if p.upper + p.lower > 0]
    sd = _ratio_sd(float(np.median([p.upper for p in torso])) if torso else 0.0, cfg.chest_sd_low,
                   cfg.chest_sd_high, *chest_span)
    parts = [np.array([p.upper, p.lower], dtype=np.float64) for p in torso]
    add("chest_pooled", _bootstrap(parts, lambda x: x[0::2].sum() / x[1::2].sum() if x[1::2].sum() else math.nan,
                                   rng, reps), sum(p.upper + p.lower for p in torso), "torso hits", None,
        Reference(f"{cfg.chest_mean:.3f}±{sd:.3f}", cfg.chest_mean - sd, cfg.chest_mean + sd))

    # Offset: log-normal of the positive per-hit offsets; 1 sd = the reference sigma (ln units).
    logs = [p.log_offsets for p in players]
    n_pos = sum(len(x) for x in logs)
    sigma_ref = cfg.offset_sigma
    add("offset_mu", _bootstrap(logs, lambda x: x.mean() if len(x) else math.nan, rng, reps), n_pos, "hits",
        None, Reference(f"{cfg.offset_mu:.2f}±{sigma_ref:.2f}", cfg.offset_mu - sigma_ref, cfg.offset_mu + sigma_ref))
    add("offset_sigma", _bootstrap(logs, lambda x: x.std() if len(x) else math.nan, rng, reps), n_pos, "hits",
        None, Reference(f"{sigma_ref:.3f}±{sigma_ref:.3f}", 0.0, 2.0 * sigma_ref))
    zero_parts = [np.r_[np.ones(p.zero_offsets), np.zeros(p.offsets - p.zero_offsets)] for p in players]
    add("offset_zero", _bootstrap(zero_parts, lambda x: x.mean() if len(x) else math.nan, rng, reps),
        sum(p.offsets for p in players), "hits")

    # Reaction times (s) of the clean, measured onsets.
    rts = [p.reactions for p in players]
    all_rt = np.concatenate(rts) if rts else np.zeros(0)
    lo, hi = REACTION_RANGE_S
    add("reaction", _bootstrap(rts, _median, rng, reps), len(all_rt), "reactions",
        _spread(all_rt, (25, 75)), Reference(f"{lo:.3f}-{hi:.3f}", lo, hi))
    raw = [p.raw_reactions for p in players]
    add("reaction_raw", _bootstrap(raw, _median, rng, reps), len(all_rt), "reactions",
        _spread(np.concatenate(raw) if raw else np.zeros(0), (25, 75)))
    onset_parts = [np.r_[np.zeros(len(p.reactions)), np.ones(p.clean_onsets - len(p.reactions))] for p in players]
    add("reaction_unmeasured", _bootstrap(onset_parts, lambda x: x.mean() if len(x) else math.nan, rng, reps),
        sum(p.clean_onsets for p in players), "onsets")

    # Fitts' law on bin means.
    fl = [p.fitts for p in players]
    n_fl = sum(len(x) for x in fl)
    for key, attr in (("fitts_r2", "r2"), ("fitts_b", "b_s_per_bit"), ("fitts_a", "a_s")):
        ref = Reference(f">= {FITTS_MIN_R2}", FITTS_MIN_R2, 1.0) if key == "fitts_r2" else None
        add(key, _bootstrap(fl, lambda x, a=attr: getattr(fitts_fit(x[:, 0], x[:, 1]), a), rng, reps),
            n_fl, "flicks", None, ref)

    # Variety: each player's own figure, spread across players (median and p10-p90).
    for key, values in (
        ("var_headshot", [p.head / p.hits for p in players if p.hits >= VARIETY_MIN_HITS]),
        ("var_hit_ratio", [p.hits / p.shots for p in players if p.shots >= VARIETY_MIN_SHOTS]),
        ("var_ttk", [p.ttk_s for p in players if p.kills >= VARIETY_MIN_KILLS and math.isfinite(p.ttk_s)]),
        ("var_shots_per_kill", [p.shots / p.kills for p in players if p.kills >= 1]),
    ):
        add(key, _bootstrap(_scalars(values), _median, rng, reps), len(values), "players", _spread(values))
    return out


# --- the corpus ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fidelity:
    """The figures of a corpus: ``groups`` maps ``honest`` (every honest player) and each skill
    present to its figures in ``FIGURES`` order; ``matches`` and ``players`` count what was read."""

    groups: dict[str, list[Figure]]
    matches: int
    players: int

    def to_json(self) -> dict[str, Any]:
        """``{"matches", "players", "groups": {group: {key: figure}}}``."""
        return {"matches": self.matches, "players": self.players,
                "groups": {g: {f.key: f.to_json() for f in figs} for g, figs in self.groups.items()}}


def _match_players(job: tuple[int, str, bytes, dict[str, tuple[str, float]]]) -> list[_Player]:
    """One stream's honest players, summarised (runs in a worker process when ``jobs`` > 1)."""
    match_id, codec, data, honest = job
    reader = ReplayReader(f"<corpus match {match_id}>", decompress(data, codec))
    events = (event for frame in reader.frames() for event in frame.events)
    return [_summarise(p) for p in collect_stream(events, honest, match_id)]


def _jobs(store: LabStore) -> Iterator[tuple[int, str, bytes, dict[str, tuple[str, float]]]]:
    honest: dict[int, dict[str, tuple[str, float]]] = {}
    for match_id, name, skill, ping in store.con.execute(
            "SELECT match_id, name, skill, ping_ms FROM players WHERE NOT cheat").fetchall():
        honest.setdefault(int(match_id), {})[str(name)] = (str(skill), float(ping or 0.0))
    ids = [int(r[0]) for r in store.con.execute("SELECT match_id FROM streams ORDER BY match_id").fetchall()]
    for match_id in ids:
        if match_id not in honest:
            continue
        # One stream in memory at a time: a standard corpus holds ~250 MB of them.
        for mid, codec, data in store.streams([match_id]):
            yield mid, codec, data, honest[match_id]


def corpus_fidelity(store: LabStore, *, reps: int = 1000, seed: int = 0, jobs: int = 1,
                    on_match: Callable[[int, int], object] | None = None) -> Fidelity:
    """Every figure of the honest players of the corpus in ``store``, per population and skill.

    ``jobs`` > 1 decodes streams in that many worker processes; ``on_match(done, total)`` is
    called after each stream; ``reps`` bootstrap resamplings (seeded by ``seed``) give the
    intervals.
    """
    total = int(store.con.execute("SELECT count(*) FROM streams").fetchone()[0])
    players: list[_Player] = []
    done = 0
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for part in pool.map(_match_players, _jobs(store)):
                players.extend(part)
                done += 1
                if on_match is not None:
                    on_match(done, total)
    else:
        for job in _jobs(store):
            players.extend(_match_players(job))
            done += 1
            if on_match is not None:
                on_match(done, total)
    cfg = IW4MConfig()
    rng = np.random.default_rng(seed)
    groups = {"honest": group_figures(players, cfg, rng, reps)}
    for skill in SKILLS:
        members = [p for p in players if p.skill == skill]
        if members:
            groups[skill] = group_figures(members, cfg, rng, reps)
    return Fidelity(groups, done, len(players))
