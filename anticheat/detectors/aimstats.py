"""Statistical aim analysis over a player's recent view angles (REFERENCES section 4).

The server-authoritative article scores a player's last >= 100 aim samples on three signs of a
machine holding the mouse, and reports a fourth:

- snap rate: how often the view turns faster than a hand can (> 50 deg in one 60 fps frame) and
  lands on an enemy; above 5 % it adds 0.4 * min(rate / 0.05, 1);
- jitter: human hands shake, 0.3-3.0 deg per frame; below 0.3 it adds 0.3 * (1 - jitter / 0.3);
- tracking efficiency: staying on a moving target more than 92 % of the time adds
  0.3 * min((eff - 0.92) / 0.08, 1);
- micro-corrections: the small steps right after a shot (mean and sd are reported, not scored).

The score is suspicious above 0.7. Our definitions (the article leaves them open) are in
``AimStatsConfig`` and ``AimStatsDetector._flush``.

Batched evaluation. Aim samples are most of the event stream (one per applied command per player),
so ``on_aim`` only checks the skip conditions (the decision is cached until the player's latest
ConnectionSample changes) and packs the sample's few numeric fields into the player's pending
buffer. Every ``batch_samples`` (K) pending samples, when ``result`` is asked, and on ``flush``,
the pending samples are analysed at once (two compiled kernels and numpy): per-sample flags (visible, snap, jitter, tracking, on
target, micro-correction) exactly as a sample-by-sample analysis defines them, carried across
batch boundaries (previous command, velocity, step, last shot, continuity breaks), then the window
totals *at every sample of the batch* (running totals plus a cumulative sum of entries minus
evictions), then the score at every sample. A Detection is therefore the one the sample-by-sample
analysis would have emitted: same sample (its tick and time), same window figures (up to float
rounding: numpy's trigonometry may differ from ``math``'s in the last bit, and jitter values are
stored to 2**-30 deg/frame), same cooldown; ``tests/test_aimstats.py`` checks this against a plain
sample-by-sample reference.
Only its delivery is late: it is returned by the ``on_aim`` call that completes the batch, at most
K - 1 commands later (K = 256: 4 s at 64 Hz, 2 s at 128 Hz; the window is 10 s and the cooldown
30 s). A detection found while ``result`` was
evaluating is returned by the player's next ``on_aim`` (or ``flush``).

Staggered batches. A player's first batch is shorter by an amount set by his slot (a different one
for each of 256 consecutive slots at K = 256), every later one is K long. Players who join
together (a match start) would otherwise fill their batches on the same few ticks, and those
ticks would each analyse dozens of batches (0.7-1.6 ms at 64 players, the slowest ticks of a
128 Hz server); staggered, a tick analyses about one. Where batches end changes no detection (see
Determinism), only when it is delivered.

Determinism. What is detected does not depend on where batches end (so not on K, nor on whether
``result`` was asked in between): every flag depends only on the sample, its predecessor and the
carried state, the counts are integers, and each jitter value is rounded to a multiple of 2**-30
deg/frame (far below any figure of interest), so the window's jitter sum is exact in float64 in
any order (while it stays below 2**23 deg/frame). A replay fed the same events in the same order
gives the same detections as the live run, and so does any other K.

End of stream. Samples still pending when the stream ends or the player is reset are never
analysed unless someone calls ``flush`` (or ``result``) first; a caller that needs the tail (a
replay analysis report) calls ``flush()`` at the end. State stays bounded: at most K pending
samples, and a window history of ``window_samples + 2 K`` rows per player.

Normalisation. An AimSample is one client command. Angular steps are converted to "degrees per
60 fps frame" by ``step * frame_s / dt`` where dt is the server-time gap between the two commands,
floored at ``min_dt_s`` (one nominal command interval): commands applied in the same tick were
bunched by the network, not turned faster by the hand, and flooring under-states speeds, which
errs on the innocent side. Steps across a gap longer than ``max_gap_s`` (loss, pause, respawn)
are not measured at all.
"""

from __future__ import annotations

import logging
import math
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import AimSample, Buttons, Detection, SpawnEvent
from anticheat.skip import SkipBook, SkipReason
from anticheat.tolerances import searched

log = logging.getLogger(__name__)

_MAX_BATCH = 4096

__all__ = ["AimStatsConfig", "AimStatsDetector", "AimStatsResult", "angular_step_deg", "score"]


@dataclass(frozen=True, slots=True)
class AimStatsConfig:
    """Tolerances of the statistical aim analysis (article defaults, our units: deg, s, m).

    Attributes:
        window_samples: ring size (commands). 640 = 10 s at 64 Hz; must be >= ``min_samples``.
        min_samples: below this many samples there is no score (article: 100).
        frame_s: the frame the article's per-frame figures refer to (1/60 s).
        min_dt_s: floor of a command gap (one 64 Hz command interval), see the module doc.
        max_gap_s: a larger gap between two commands breaks continuity (no step measured).
        snap_deg_per_frame: a turn at least this fast is a snap (article: 50 deg in one frame,
            i.e. 3000 deg/s, which is 46.9 deg in one 64 Hz command).
        snap_on_target_deg: ... if it ends with the nearest visible enemy's chest within this
            angle (3 deg: inside a torso at 5 m, inside a player at 15 m).
        snap_rate_threshold, snap_weight: 5 % and 0.4 (article). The rate is snaps per sample
            that had a visible enemy (a frame with no one to snap to cannot show a snap).
        still_deg: a step smaller than this is no input at all (mouse untouched); such samples
            say nothing about hand jitter and are left out of it.
        flick_deg_per_frame: steps at least this fast are deliberate flicks, not jitter or
            tracking (20 deg/frame = 1200 deg/s).
        human_jitter_deg: 0.3 deg/frame, the low end of the article's human range 0.3-3.0.
        jitter_weight: 0.3 (article).
        min_jitter_samples: fewer valid jitter samples in the window: no jitter component.
        engage_cone_deg: a sample is engaged with its target within this angle (10 deg).
        track_min_deg_per_frame: the view must turn at least this much (0.05 deg/frame = 3 deg/s)
            for the sample to count as tracking, so holding still on a still enemy does not count.
        target_radius_m, min_cone_deg: the tight cone is the angle a 0.2 m chest half-width spans
            at the target's distance, never narrower than 0.5 deg.
        tracking_threshold, tracking_weight: 92 % and 0.3 (article).
        min_tracking_samples: fewer tracking samples in the window: no tracking component.
        micro_after_shot_samples: steps within this many commands after a fired command are
            corrective (4 commands ~ 60 ms).
        micro_max_deg_per_frame: ... and smaller than this (2 deg/frame).
        micro_ring: how many correction magnitudes are kept for mean/sd.
        suspicious_score: 0.7 (article); a Detection is emitted above it.
        cooldown_s: at most one Detection per player per this many seconds.
        severity: severity of the Detection (a statistical hint, never proof on its own).
        batch_samples: K (1..4096), how many pending samples of a player are analysed together
            (see the module doc): larger is cheaper per sample and delivers detections later (at
            most K - 1 commands); 1 analyses every sample on arrival. What is detected (sample,
            figures) does not depend on it.
    """

    window_samples: int = 640
    min_samples: int = 100
    frame_s: float = 1.0 / 60.0
    min_dt_s: float = 1.0 / 64.0
    max_gap_s: float = 0.25
    snap_deg_per_frame: float = 50.0
    snap_on_target_deg: float = 3.0
    snap_rate_threshold: float = searched(0.05, 0.02, 0.2)
    snap_weight: float = 0.4
    still_deg: float = 1e-3
    flick_deg_per_frame: float = 20.0
    human_jitter_deg: float = 0.3
    jitter_weight: float = 0.3
    min_jitter_samples: int = 30
    engage_cone_deg: float = 10.0
    track_min_deg_per_frame: float = 0.05
    target_radius_m: float = 0.2
    min_cone_deg: float = 0.5
    tracking_threshold: float = searched(0.92, 0.7, 0.99)
    tracking_weight: float = 0.3
    min_tracking_samples: int = 30
    micro_after_shot_samples: int = 4
    micro_max_deg_per_frame: float = 2.0
    micro_ring: int = 256
    suspicious_score: float = searched(0.7, 0.4, 1.5)
    cooldown_s: float = 30.0
    severity: float = 0.5
    batch_samples: int = 256

    def __post_init__(self) -> None:
        if self.window_samples < self.min_samples or self.min_samples < 1:
            raise ValueError("window_samples must be >= min_samples >= 1")
        if not 1 <= self.batch_samples <= _MAX_BATCH:
            raise ValueError(f"batch_samples must be in 1..{_MAX_BATCH}")
        if self.micro_ring < 1:
            raise ValueError("micro_ring must be >= 1")
        if self.min_dt_s <= 0.0 or self.frame_s <= 0.0:
            raise ValueError("frame_s and min_dt_s must be positive")


@dataclass(frozen=True, slots=True)
class AimStatsResult:
    """The analysis of one player's window.

    Attributes:
        samples: samples in the window; insufficient: fewer than ``min_samples`` (score is 0).
        score: 0..1; suspicious: score > ``suspicious_score``.
        snap_rate: snaps per visible-target sample; snaps, visible: the counts behind it.
        jitter_deg: mean jitter (deg per 60 fps frame) or nan when too few samples.
        tracking_efficiency: on-target fraction of tracking samples, or nan when too few.
        micro_mean_deg, micro_sd_deg: corrective steps after shots (deg/frame), nan when none.
        snap_part, jitter_part, tracking_part: the three contributions to ``score``.
    """

    samples: int
    insufficient: bool
    score: float
    suspicious: bool
    snap_rate: float
    snaps: int
    visible: int
    jitter_deg: float
    jitter_samples: int
    tracking_efficiency: float
    tracking_samples: int
    micro_mean_deg: float
    micro_sd_deg: float
    snap_part: float
    jitter_part: float
    tracking_part: float


def angular_step_deg(yaw0: float, pitch0: float, yaw1: float, pitch1: float) -> float:
    """Great-circle angle (deg) between two view directions given as yaw/pitch in degrees."""
    p0 = math.radians(pitch0)
    p1 = math.radians(pitch1)
    dy = math.radians(yaw1 - yaw0)
    # Haversine form: accurate for the tiny steps jitter is made of, where acos loses digits.
    h = math.sin((p1 - p0) / 2.0) ** 2 + math.cos(p0) * math.cos(p1) * math.sin(dy / 2.0) ** 2
    return math.degrees(2.0 * math.asin(math.sqrt(min(1.0, max(0.0, h)))))


@numba.njit(cache=True, nogil=True)
def angular_step_compiled(yaw0: float, pitch0: float, yaw1: float, pitch1: float) -> float:  # pragma: no cover - compiled
    """:func:`angular_step_deg` for compiled callers (deg): the same libm calls in the same
    order; squares are products, where CPython calls pow (they may differ in the last place).
    Python code calls :func:`angular_step_deg`: a call here with other argument types (an int
    from a client) would compile a new specialisation wherever it happens, a tick included."""
    p0 = math.radians(pitch0)
    p1 = math.radians(pitch1)
    dy = math.radians(yaw1 - yaw0)
    s0 = math.sin((p1 - p0) / 2.0)
    s1 = math.sin(dy / 2.0)
    h = s0 * s0 + math.cos(p0) * math.cos(p1) * (s1 * s1)
    return math.degrees(2.0 * math.asin(math.sqrt(min(1.0, max(0.0, h)))))


def score(snap_rate: float, jitter_deg: float, tracking_efficiency: float,
          config: AimStatsConfig) -> tuple[float, float, float]:
    """The article's three contributions (snap, jitter, tracking); nan inputs contribute 0."""
    snap = 0.0
    if snap_rate > config.snap_rate_threshold:
        snap = config.snap_weight * min(snap_rate / config.snap_rate_threshold, 1.0)
    jitter = 0.0
    if not math.isnan(jitter_deg) and jitter_deg < config.human_jitter_deg:
        jitter = config.jitter_weight * (1.0 - max(jitter_deg, 0.0) / config.human_jitter_deg)
    tracking = 0.0
    if not math.isnan(tracking_efficiency) and tracking_efficiency > config.tracking_threshold:
        span = 1.0 - config.tracking_threshold
        tracking = config.tracking_weight * min((tracking_efficiency - config.tracking_threshold) / span, 1.0)
    return snap, jitter, tracking


# A pending sample's fields, packed as doubles on arrival (while the sample is still in the CPU
# cache): time_s, yaw, pitch, target angle, target (nan: none), target distance, buttons, tick.
_RAW = struct.Struct("8d")
_T, _YAW, _PITCH, _TANGLE, _TARGET, _DIST, _BUTTONS, _TICK = range(8)
_NRAW = 8
# Rows of a player's per-sample flag history; every value is an integer in a float64, so sums are
# exact in any order (jitter is stored in units of _JITTER_QUANTUM).
_VISIBLE, _SNAP, _JITTER, _JITTER_N, _TRACK, _ON_TRACK = range(6)
_FLAGS = 6
_JITTER_QUANTUM = 2.0**-30
_NEVER = -(1 << 62)  # sample index "before any sample" (last shot, last break)
_FIRE = int(Buttons.FIRE)
_NAN = math.nan
_NO_ROWS = np.zeros(0, dtype=np.int64)
_UNSET = object()


# The two compiled kernels below do the per-sample arithmetic of a batch in one call each: the
# numpy version spent most of a batch's ~50 us in the fixed cost of its ~60 small calls, and all
# 64 players of a match fill their batch on the same tick. They perform the numpy version's
# operations in the same order (IEEE double, no fast-math): sin, cos, hypot and the degree
# conversions give numpy's results bit for bit; arcsin and arctan2 do not (libm vs numpy's own),
# so those two stay numpy calls between the kernels. min / max are conditional expressions that
# keep np.minimum / np.maximum's choice on NaN and ties.
# ruff: noqa: FURB136


@numba.njit(cache=True, nogil=True)
def _motion_kernel(
    raw: np.ndarray, m: int, max_gap_s: float, min_dt_s: float, frame_s: float,
    has_prev: np.ndarray, to_frame: np.ndarray, h: np.ndarray, vx: np.ndarray, vy: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Continuity, frame scale, haversine term (before its arcsin) and angular velocity of rows
    1..m of ``raw`` against their predecessors."""
    rp0 = math.radians(raw[0, _PITCH])
    cos0 = math.cos(rp0)
    for i in range(m):
        gap = raw[i + 1, _T] - raw[i, _T]
        dyaw = raw[i + 1, _YAW] - raw[i, _YAW]
        dpitch = raw[i + 1, _PITCH] - raw[i, _PITCH]
        has_prev[i] = gap >= 0.0 and gap <= max_gap_s
        scale = frame_s / (min_dt_s if gap < min_dt_s else gap)
        to_frame[i] = scale
        p0 = raw[i, _PITCH]
        p1 = raw[i + 1, _PITCH]
        rp1 = math.radians(p1)
        cos1 = math.cos(rp1)
        hh = math.sin((rp1 - rp0) / 2.0)
        hh *= hh
        sy = math.sin(math.radians(dyaw) / 2.0)
        sy *= sy
        cc = cos0 * cos1
        rp0 = rp1  # (each pitch's radians and cosine serve two steps)
        cos0 = cos1
        cc *= sy
        hh += cc
        hh = 1.0 if hh > 1.0 else hh
        hh = 0.0 if hh < 0.0 else hh
        h[i] = math.sqrt(hh)
        cos_p = math.cos(math.radians((p0 + p1) * 0.5))
        v = dyaw + 180.0
        if not 0.0 <= v < 360.0:  # (x % 360 is x itself inside the range, as numpy's modulo)
            v = v % 360.0
        v -= 180.0
        v *= cos_p
        v *= scale
        vx[i] = v
        vy[i] = dpitch * scale


@numba.njit(cache=True, nogil=True)
def _flag_kernel(
    raw: np.ndarray, m: int, speed: np.ndarray, step_x: np.ndarray, vx_x: np.ndarray, vy_x: np.ndarray,
    has_prev: np.ndarray, slow0: bool, cone: np.ndarray, flags: np.ndarray, slow: np.ndarray,
    snap_deg_per_frame: float, snap_on_target_deg: float, flick_deg_per_frame: float, still_deg: float,
    engage_cone_deg: float, track_min_deg_per_frame: float, min_cone_deg: float,
) -> bool:  # pragma: no cover - compiled
    """Visible, snap, jitter, tracking and on-target flags of rows 1..m of ``raw`` into
    ``flags`` (``cone``: the angle the chest spans at each row's target distance); ``slow`` gets
    each row's flick-free measured step. Returns whether any row snapped. ``*_x`` arrays hold the
    carried value at index 0."""
    snapped = False
    prev_slow = slow0
    for i in range(m):
        target = raw[i + 1, _TARGET]
        visible = not math.isnan(target)
        sp = speed[i]
        hp = has_prev[i]
        snap = sp >= snap_deg_per_frame and raw[i + 1, _TANGLE] <= snap_on_target_deg and visible and hp
        snapped |= snap
        is_slow = sp < flick_deg_per_frame and hp
        slow[i] = is_slow
        s1 = step_x[i + 1]
        s0 = step_x[i]
        biggest = s1 if (s1 >= s0 or math.isnan(s1)) else s0
        jittered = is_slow and prev_slow and biggest > still_deg
        prev_slow = is_slow
        jitter = math.hypot(vx_x[i + 1] - vx_x[i], vy_x[i + 1] - vy_x[i])
        jitter /= _JITTER_QUANTUM
        track = (raw[i + 1, _TARGET] - raw[i, _TARGET] == 0.0 and raw[i, _TANGLE] <= engage_cone_deg
                 and is_slow and sp >= track_min_deg_per_frame)
        flags[_VISIBLE, i] = visible
        flags[_SNAP, i] = snap
        flags[_JITTER_N, i] = jittered
        flags[_JITTER, i] = np.rint(jitter) if jittered else 0.0
        flags[_TRACK, i] = track
        c = cone[i]
        widest = min_cone_deg if min_cone_deg >= c else c
        flags[_ON_TRACK, i] = track and raw[i + 1, _TANGLE] <= widest
    return snapped


@numba.njit(cache=True, nogil=True)
def _micro_kernel(
    raw: np.ndarray, m: int, first: int, fired_before: int, last_break: int, cut: np.ndarray,
    has_prev: np.ndarray, speed: np.ndarray, after: int, still_deg: float, micro_max_deg_per_frame: float,
    rows: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Micro-corrections: measured steps within ``after`` commands after a command that fired,
    with no continuity break (``last_break``, then the pending positions ``cut``, ascending)
    since that command, among rows 1..m of ``raw``. Writes their indices (0..m-1) to ``rows``; returns (their count, index of the last
    sample that fired, ``fired_before`` when none did)."""
    last_fire = fired_before  # the last shot strictly before row i
    brk = last_break  # the last continuity break at or before row i
    c = 0
    k = 0
    for i in range(m):
        idx = first + i
        while c < cut.size and cut[c] == i:  # (two breaks may fall before the same sample)
            brk = idx if idx > brk else brk
            c += 1
        sp = speed[i]
        if (idx - last_fire <= after and last_fire >= brk and has_prev[i]
                and sp > still_deg and sp < micro_max_deg_per_frame):
            rows[k] = i
            k += 1
        if int(raw[i + 1, _BUTTONS]) & _FIRE:
            last_fire = idx
    return k, last_fire


def _warm_kernels(detector: AimStatsDetector) -> None:
    """Compile (or load from numba's cache) the kernels now, not inside a tick, for the argument
    types of a real batch (a strided view is another signature than a contiguous array): analyse
    a throwaway window of two samples, the second one fired. Once compiled, tens of microseconds
    per detector built: cheaper than remembering, in module state, that it was done."""
    w = _PlayerWindow(-1, 4, 4, 2)
    _RAW.pack_into(w.raw_bytes, _RAW.size, 0.0, 0.0, 0.0, 1.0, 1.0, 5.0, 0.0, 0.0)
    _RAW.pack_into(w.raw_bytes, 2 * _RAW.size, 0.01, 1.0, 0.5, 1.0, 1.0, 5.0, float(_FIRE), 1.0)
    w.m = 2
    w.breaks.append(1)
    detector._flush(w)


def _room(buf: np.ndarray, end: int, keep: int, m: int) -> int:
    """Make room for ``m`` more entries after ``buf[..., :end]`` (last axis), moving its last
    ``keep`` entries to the front when needed; returns the new end. The buffers have ``2 K`` spare
    entries beyond ``keep`` and a batch adds at most K, so a move happens at most every other batch."""
    if end + m <= buf.shape[-1]:
        return end
    keep = min(end, keep)
    buf[..., :keep] = buf[..., end - keep : end]
    return keep


class _PlayerWindow:
    """One player's pending samples, window history and the state carried across batches (bounded).

    ``raw`` row i + 1 holds the i-th pending sample (``_RAW`` fields), row 0 the last analysed
    sample when ``carry``. ``hist[:, end - n : end]`` are the flags of the window's samples (fewer
    until n samples were analysed) and ``tot`` their totals.
    """

    __slots__ = (
        "breaks",
        "carry",
        "due",
        "end",
        "hist",
        "last_break",
        "last_emit_s",
        "last_fire",
        "m",
        "micro",
        "micro_end",
        "n",
        "outbox",
        "peak",
        "player",
        "raw",
        "raw_bytes",
        "skip_book",
        "skip_config",
        "skip_conn",
        "skip_reason",
        "slow",
        "step",
        "tot",
        "total",
        "vx",
        "vy",
    )

    def __init__(self, player: int, n: int, micro_ring: int, batch: int) -> None:
        self.player = player
        self.n = n
        self.m = 0  # pending samples
        # Analyse when m reaches this (1 when a detection waits in the outbox); the first batch is
        # cut short by a slot-dependent amount (see "Staggered batches"): 97 is odd, so 256
        # consecutive slots get 256 different lengths when the batch is 256.
        self.due = batch - (player * 97) % batch
        self.raw_bytes = bytearray((batch + 1) * _RAW.size)
        self.raw = np.frombuffer(self.raw_bytes).reshape(batch + 1, _NRAW)
        # Pending-sample positions before which continuity broke (skip, respawn).
        self.breaks: list[int] = []
        self.carry = False  # row 0 of raw is the previous command (False before any, after a break)
        self.total = 0  # samples analysed so far (the index of the next one)
        spare = 2 * batch  # room for a few batches between compactions
        self.hist = np.zeros((_FLAGS, n + spare))
        self.end = 0
        self.tot = np.zeros(_FLAGS)
        self.micro = np.zeros(micro_ring + spare)
        self.micro_end = 0
        # The last analysed sample's motion: a flick-free measured step (its velocity is the
        # reference of the next jitter), velocity (deg/frame) and step (deg).
        self.slow = False
        self.vx = 0.0
        self.vy = 0.0
        self.step = 0.0
        self.last_fire = _NEVER  # index of the last analysed sample that fired
        self.last_break = _NEVER  # index of the first sample after the last continuity break
        self.last_emit_s = -math.inf
        self.peak = 0.0  # the highest score of a detection (see ``AimStatsDetector.scores``)
        self.outbox: list[Detection] = []
        # The last skip decision and what it was made from (see ``AimStatsDetector.on_aim``).
        self.skip_conn: object = _UNSET
        self.skip_book: object = _UNSET
        self.skip_config: object = _UNSET
        self.skip_reason: SkipReason | None = None

    def break_continuity(self) -> None:
        if self.m:
            self.breaks.append(self.m)
        else:
            self.carry = False
            self.last_break = self.total

    def count(self) -> int:
        return min(self.total, self.n)


class AimStatsDetector(Detector):
    """Inline statistical aim analysis; emits ``aimstats``/``aim_stats`` Detections.

    Extra API: :meth:`result` (the current analysis of a player), :meth:`flush` (analyse what is
    pending and return the detections not delivered yet), :meth:`skip_counts`.
    """

    name = "aimstats"

    def __init__(self, config: AimStatsConfig | None = None) -> None:
        self.config = config or AimStatsConfig()
        self._players: dict[int, _PlayerWindow] = {}
        self.skipped: Counter[str] = Counter()
        cfg = self.config
        self._batch = cfg.batch_samples
        # The jitter and tracking parts are at most their (positive) weights: when those alone
        # cannot exceed the threshold, a window without the snap part is never suspicious.
        self._needs_snap = max(cfg.jitter_weight, 0.0) + max(cfg.tracking_weight, 0.0) <= cfg.suspicious_score
        _warm_kernels(self)  # last: the throwaway analysis reads the whole configuration

    def skip_counts(self) -> Mapping[str, int]:
        """Samples not analysed, per skip reason."""
        return dict(self.skipped)

    def _window(self, player: int) -> _PlayerWindow:
        w = self._players.get(player)
        if w is None:
            cfg = self.config
            w = _PlayerWindow(player, cfg.window_samples, cfg.micro_ring, cfg.batch_samples)
            self._players[player] = w
        return w

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        player = sample.player
        w = self._players.get(player)
        if w is None:
            w = self._window(player)
        # The skip decision is a function of the book's (frozen) config and the player's latest
        # ConnectionSample (frozen): it is made again only when either changed.
        conn = skip.connection(player)
        if conn is w.skip_conn and skip is w.skip_book and skip.config is w.skip_config:
            reason = w.skip_reason
        else:
            reason = skip.player_reason(player)
            w.skip_conn, w.skip_book, w.skip_config, w.skip_reason = conn, skip, skip.config, reason
        if reason is not None:
            self.skipped[reason.value] += 1
            # A lagging player's commands arrive in bursts: do not measure steps across it.
            w.break_continuity()
            return NO_DETECTIONS
        m = w.m + 1
        target = sample.target
        _RAW.pack_into(w.raw_bytes, m * _RAW.size, sample.time_s, sample.yaw_deg, sample.pitch_deg,
                       sample.target_angle_deg, _NAN if target is None else target, sample.target_distance_m,
                       sample.buttons, sample.tick)
        w.m = m
        if m < w.due:
            return NO_DETECTIONS
        return self._deliver(w)

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        w = self._players.get(spawn.player)
        if w is not None:
            # The respawn sets a new view: that turn is not the player's hand.
            w.break_continuity()
        return NO_DETECTIONS

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)

    def result(self, player: int) -> AimStatsResult:
        """The current analysis of ``player`` (insufficient when unknown); analyses what is pending.

        A detection this evaluation finds is returned by the player's next ``on_aim`` (or ``flush``).
        """
        w = self._players.get(player)
        if w is None:
            return self._result(np.zeros(_FLAGS), 0, [])
        if w.m or w.breaks:
            w.outbox.extend(self._flush(w))
            if w.outbox:
                w.due = 1  # deliver with the next sample
        return self._result(w.tot, w.count(), self._micro_values(w, w.micro_end))

    def scores(self, player: int) -> Mapping[str, float]:
        """``score``: the article's combined score (0..1) against ``suspicious_score``.

        Read from the window as of the player's last analysed batch (pending samples are not
        analysed here: that would change when detections are delivered), so it lags the stream
        by at most ``batch_samples - 1`` commands; 0.0 while the window holds fewer than
        ``min_samples``. Inside a batch the score is computed only where it may cross, so what
        it did between two batch ends is not followed; but the value is never below the highest
        score a detection reported, so the batch's end or the cooldown never hides a crossing.
        Unitless.
        """
        w = self._players.get(player)
        if w is None:
            return NO_SCORES
        now = self._result(w.tot, w.count(), []).score
        return {"score": over_limit(max(now, w.peak), self.config.suspicious_score)}

    def flush(self, player: int | None = None) -> list[Detection]:
        """Analyse the pending samples of ``player`` (None: every player) and return the detections
        not delivered yet, e.g. at the end of a replay."""
        players = list(self._players) if player is None else [player]
        out: list[Detection] = []
        for p in players:
            w = self._players.get(p)
            if w is not None:
                out.extend(self._deliver(w))
        return out

    def _deliver(self, w: _PlayerWindow) -> Sequence[Detection]:
        found = self._flush(w)
        w.due = self._batch
        if w.outbox:
            found = w.outbox + found
            w.outbox = []
        return tuple(found) if found else NO_DETECTIONS

    # --- the batch -----------------------------------------------------------------------

    def _flush(self, w: _PlayerWindow) -> list[Detection]:
        """Analyse the pending samples (see ``_analyse``); malformed angles (inf) raise no warning
        but, as in a sample-by-sample analysis, measure nothing."""
        with np.errstate(all="ignore"):
            return self._analyse(w)

    def _analyse(self, w: _PlayerWindow) -> list[Detection]:
        """Analyse the pending samples: flags, window totals, score at every sample, detections.

        The flags follow the sample-by-sample definitions (carried state at index 0 of the ``*_x``
        arrays). The per-sample work is in the compiled kernels (a numpy call costs about a
        microsecond whatever its size); the rest skips what cannot matter (per-sample scores)
        when nothing in the batch needs it.
        """
        m = w.m
        breaks = w.breaks
        if m == 0:
            if breaks:
                breaks.clear()
                w.break_continuity()
            return []
        cfg = self.config
        n = w.n
        first = w.total
        carry = w.carry
        if not carry:
            w.raw[0] = w.raw[1]  # a stand-in: the first sample has no predecessor
        rows = w.raw[: m + 1]
        raw = rows.T
        now = raw[:, 1:]  # the batch's fields

        # Continuity with the previous command, frame scale (deg per 60 fps frame), the angular
        # step's haversine term and the angular velocity (deg/frame: yaw wrapped to [-180, 180)
        # and scaled by the cosine of the mean pitch). Arrays named ``*_x`` hold the previous
        # command's carried value at index 0.
        has_prev = np.empty(m, dtype=np.bool_)
        to_frame = np.empty(m)
        h = np.empty(m)
        vx_x = np.empty(m + 1)
        vx_x[0] = w.vx
        vx = vx_x[1:]
        vy_x = np.empty(m + 1)
        vy_x[0] = w.vy
        vy = vy_x[1:]
        _motion_kernel(rows, m, cfg.max_gap_s, cfg.min_dt_s, cfg.frame_s, has_prev, to_frame, h, vx, vy)
        if not carry:
            has_prev[0] = False
        cut = [b for b in breaks if b < m]
        if cut:
            has_prev[cut] = False
        # Angular step (haversine, as ``angular_step_deg``; arcsin is numpy's, see the kernels).
        step_x = np.empty(m + 1)
        step_x[0] = w.step
        step = step_x[1:]
        np.arcsin(h, out=step)
        step *= 2.0
        np.degrees(step, out=step)
        speed = step * to_frame

        # Per-sample flags, one row each, written straight into the history. Jitter: change of
        # angular velocity between two flick-free measured steps, unless both steps are below
        # ``still_deg`` (mouse untouched). Tracking: a flick-free turn while engaged with the
        # same target; on target inside the cone the chest spans at the target's distance
        # (arctan2 is numpy's, see the kernels; computed for every row, used for tracking rows).
        cone = np.maximum(now[_DIST], 1e-3)
        np.arctan2(cfg.target_radius_m, cone, out=cone)
        np.degrees(cone, out=cone)
        end = _room(w.hist, w.end, n, m)
        flags = w.hist[:, end : end + m]
        slow = np.empty(m, dtype=np.bool_)
        snapped = _flag_kernel(
            rows, m, speed, step_x, vx_x, vy_x, has_prev, w.slow and carry, cone, flags, slow,
            cfg.snap_deg_per_frame, cfg.snap_on_target_deg, cfg.flick_deg_per_frame, cfg.still_deg,
            cfg.engage_cone_deg, cfg.track_min_deg_per_frame, cfg.min_cone_deg,
        )
        # Micro-corrections: measured steps within ``micro_after_shot_samples`` commands after a
        # command that fired, with no continuity break since that command.
        fired_before = w.last_fire
        micro_rows = np.empty(m, dtype=np.int64)
        k, w.last_fire = _micro_kernel(
            rows, m, first, fired_before, w.last_break, np.array(cut, dtype=np.int64), has_prev, speed,
            cfg.micro_after_shot_samples, cfg.still_deg, cfg.micro_max_deg_per_frame, micro_rows,
        )
        micro_rows = micro_rows[:k]
        micro_end0 = w.micro_end
        if k:
            micro_end0 = _room(w.micro, w.micro_end, cfg.micro_ring, k)
            w.micro[micro_end0 : micro_end0 + k] = speed[micro_rows]
            w.micro_end = micro_end0 + k

        # Window totals: the previous ones plus the entering rows minus the leaving ones (the rows
        # n before them, some of which may be in this batch when m > n).
        lo = end - n
        leaving = w.hist[:, max(lo, 0) : lo + m] if lo + m > 0 else None
        tot0 = w.tot
        snaps_possible = snapped or tot0[_SNAP] > 0.0

        # Carry to the next batch.
        w.end = end + m
        w.total = first + m
        w.m = 0
        w.carry = True
        w.slow = bool(slow[-1])
        w.vx = float(vx[-1])
        w.vy = float(vy[-1])
        w.step = float(step[-1])
        if cut:
            w.last_break = first + cut[-1]
        if len(cut) < len(breaks):  # a break after the last pending sample
            w.carry = False
            w.last_break = w.total
        breaks.clear()
        tick = now[_TICK]
        times = now[_T]
        w.raw[0] = w.raw[m]  # (only rows 1..m of the arrays above are used from here on)

        # Score at every sample that has a full minimum window and is outside the cooldown.
        start = max(0, cfg.min_samples - first - 1)
        if (start >= m or float(times[start:].max()) - w.last_emit_s < cfg.cooldown_s
                or (self._needs_snap and not snaps_possible)):
            # No sample of the batch can be suspicious: only the batch-end totals are needed.
            delta = flags.sum(axis=1)
            if leaving is not None:
                delta -= leaving.sum(axis=1)
            w.tot = tot0 + delta
            return []
        delta = flags.copy()
        if leaving is not None:
            delta[:, m - leaving.shape[1] :] -= leaving
        totals = np.cumsum(delta, axis=1)
        totals += tot0[:, None]
        w.tot = totals[:, -1].copy()
        candidates = self._candidates(totals[:, start:])
        found: list[Detection] = []
        for j in (candidates + start).tolist():
            time_s = float(times[j])
            if time_s - w.last_emit_s < cfg.cooldown_s:
                continue
            # Confirm with the scalar definition (the vectorised score only picks candidates).
            count = min(first + j + 1, n)
            k_j = int(np.searchsorted(micro_rows, j, side="right"))
            r = self._result(totals[:, j], count, self._micro_values(w, micro_end0 + k_j))
            if r.score <= cfg.suspicious_score:
                continue
            w.last_emit_s = time_s
            if r.score > w.peak:
                w.peak = r.score
            found.append(self._detection(w.player, int(tick[j]), time_s, r))
        return found

    def _candidates(self, tot: np.ndarray) -> np.ndarray:
        """Columns of window totals whose score may exceed ``suspicious_score`` (a superset)."""
        cfg = self.config
        snap_rate = tot[_SNAP] / np.maximum(tot[_VISIBLE], 1.0)
        snapping = snap_rate > cfg.snap_rate_threshold
        if self._needs_snap and not snapping.any():
            return _NO_ROWS
        snap = np.where(snapping, cfg.snap_weight * np.minimum(snap_rate / cfg.snap_rate_threshold, 1.0), 0.0)
        n_jitter = tot[_JITTER_N]
        jitter_deg = tot[_JITTER] * _JITTER_QUANTUM / np.maximum(n_jitter, 1.0)
        jitter_ok = (n_jitter >= cfg.min_jitter_samples) & (n_jitter > 0) & (jitter_deg < cfg.human_jitter_deg)
        jitter = np.where(jitter_ok, cfg.jitter_weight * (1.0 - np.maximum(jitter_deg, 0.0) / cfg.human_jitter_deg), 0.0)
        n_track = tot[_TRACK]
        eff = tot[_ON_TRACK] / np.maximum(n_track, 1.0)
        track_ok = (n_track >= cfg.min_tracking_samples) & (n_track > 0) & (eff > cfg.tracking_threshold)
        span = 1.0 - cfg.tracking_threshold
        tracking = np.where(track_ok, cfg.tracking_weight * np.minimum((eff - cfg.tracking_threshold) / span, 1.0), 0.0)
        return np.flatnonzero(snap + jitter + tracking > cfg.suspicious_score - 1e-9)

    def _micro_values(self, w: _PlayerWindow, end: int) -> list[float]:
        """The micro-correction ring as it was when ``end`` values had been stored."""
        return w.micro[max(0, end - self.config.micro_ring) : end].tolist()

    def _result(self, tot: np.ndarray, count: int, micro: list[float]) -> AimStatsResult:
        cfg = self.config
        visible, snaps, jitter_q, n_jitter, n_track, on_track = (int(v) for v in tot.tolist())
        snap_rate = snaps / visible if visible else 0.0
        jitter = (jitter_q * _JITTER_QUANTUM / n_jitter
                  if n_jitter >= cfg.min_jitter_samples and n_jitter else math.nan)
        eff = on_track / n_track if n_track >= cfg.min_tracking_samples and n_track else math.nan
        if micro:
            mean = math.fsum(micro) / len(micro)
            sd = math.sqrt(math.fsum((v - mean) ** 2 for v in micro) / len(micro))
        else:
            mean = sd = math.nan
        insufficient = count < cfg.min_samples
        parts = (0.0, 0.0, 0.0) if insufficient else score(snap_rate, jitter, eff, cfg)
        total = sum(parts)
        return AimStatsResult(
            samples=count, insufficient=insufficient, score=total,
            suspicious=not insufficient and total > cfg.suspicious_score,
            snap_rate=snap_rate, snaps=snaps, visible=visible,
            jitter_deg=jitter, jitter_samples=n_jitter,
            tracking_efficiency=eff, tracking_samples=n_track,
            micro_mean_deg=mean, micro_sd_deg=sd,
            snap_part=parts[0], jitter_part=parts[1], tracking_part=parts[2],
        )

    def _detection(self, player: int, tick: int, time_s: float, r: AimStatsResult) -> Detection:
        log.info("aimstats: player %d score %.2f", player, r.score)
        figures: dict[str, float | int] = {
            "samples": r.samples, "snap_rate": r.snap_rate, "snaps": r.snaps, "visible": r.visible,
            "jitter_deg": r.jitter_deg, "jitter_samples": r.jitter_samples,
            "tracking_efficiency": r.tracking_efficiency, "tracking_samples": r.tracking_samples,
            "micro_mean_deg": r.micro_mean_deg, "micro_sd_deg": r.micro_sd_deg,
            "snap_part": r.snap_part, "jitter_part": r.jitter_part, "tracking_part": r.tracking_part,
        }
        # nan marks "not measured"; leaving it out keeps the evidence valid JSON.
        evidence: dict[str, float | int | str] = {k: v for k, v in figures.items() if not math.isnan(v)}
        return Detection(
            player=player, tick=tick, time_s=time_s, detector=self.name, kind="aim_stats",
            value=r.score, severity=self.config.severity,
            reason=f"AimStats-{r.score:.2f}@{r.samples}", evidence=evidence,
        )
