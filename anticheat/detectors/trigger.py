"""Triggerbot: shots fired the instant the crosshair is on a player, and never off one.

A triggerbot presses FIRE on the first command its crosshair ray meets an enemy's hitbox (no
reaction time) and drops the human's own presses, so seen by the server its shots leave with the
spread-free crosshair on a player (``ShotResult.first_contact`` is not None), most of them on the
very command the crosshair got there (``first_contact`` True), and a player it has just shot stays
its next shot's mark. Neither sign alone separates it from honest play: on the standard corpus
(``lab/standard``, pellet-0 shots) the on-target fraction is 0.28 (low skill) to 0.55 (pro) for
honest bots, up to ~0.7 over a player-match at long range, against 0.86-0.93 for the triggerbots,
and ``first_contact`` among on-target shots is 0.4 on average for honest bots. What differs is the
combination: an honest player who lands a shot on first contact and lands the next one the same way
does it in streaks at long range; a triggerbot does it everywhere, and almost never shoots off target.

Each judged shot falls in one of nine categories: off target (0), or on target (1..8) as
``1 + first_contact + 2 * prompt + 4 * follows_on``, where ``prompt`` means the shot came as soon
as the weapon allowed after the previous one (within ``fire_interval_s + prompt_slack_s``: a
burst's continuation) and ``follows_on`` that the previous shot, less than ``follow_s`` before, was
on target too. The shot's range band (the distance of the player's nearest visible enemy in the
shot's ``AimSample``: < 15, 15-30, 30-50, >= 50 m or none) picks a row of ``LOG_LR``, the
log-likelihood ratio of each category between the triggerbots and the most triggerbot-like honest
skill per category (measured, see below). The per-shot ratios go into Page's CUSUM
(S = max(0, S + llr); alarm at h, then S restarts).

The threshold is set from a false-alarm rate in player-hours, but not from an i.i.d. run-length:
honest shots come in streaks (long-range taps that all land on first contact), and the honest
CUSUM peaks have a much heavier tail than an independent model predicts. Instead the tail was
measured. The table and the tail come from one run of ``referee lab trigger-table lab/train5
--honest lab/sessions3 --honest lab/sessions4 --honest lab/sessions6``: the table from
``lab/train5`` (spec ``standard``, seeds 100000-100015, the current honest model), the tail from
its honest players and those of three corpora of 30-minute sessions (640 honest player-matches,
266.6 honest player-hours, every skill and link class, link skips applied as live). The number
of honest player-matches whose peak reached x, per player-hour, fits
``exp(TAIL_LOG_RATE - TAIL_SLOPE * x)`` for x = 6..21 (highest peak 22.4), so ``h =
(TAIL_LOG_RATE + ln false_alarm_player_hours) / TAIL_SLOPE`` reads "one false alarm per
``false_alarm_player_hours`` honest player-hours" (1,000: h = 24.1). The table and tail before
(measured on ten-minute matches only, with an older honest model: h = 22.5) raised 2 honest
alarms in 96 held-out session hours (``lab/sessions6``, peaks 23.06 and 23.03): ten-minute
matches do not show the peaks that half-hour sessions reach. With these constants the four
triggerbots of ``lab/train5`` are flagged after 45, 8, 191 and 93 s of play, as before to the
second. Re-measure (``referee lab
trigger-table DIR`` walks a corpus's streams through ``TriggerDetector.judge_shot`` and prints
the table and the tail fit) when the aim model, ``first_contact`` or the range bands change. A
shot that touched an AimDetect bait and no player is not judged: it is the bait's evidence, and as
a miss it would count in a bait-shooting triggerbot's favour.

Kind (detector ``trigger``):

- ``on_target``: the CUSUM reached h: the player's shots have been on target, on first contact
  and in follow-ups, far more often than any honest skill's.
- ``takes``: a second CUSUM, over crosshair-entry opportunities (``trigger_takes``: the server's
  lag-compensated probe of every command's crosshair), reached ``takes_threshold``: the player
  fired within a command of its crosshair coming onto a player, weapon ready and trigger not held,
  nearly every time. Measured on ``lab/trig1`` (``referee lab corpus trigger --seed 560000``: 12
  ten-minute matches, 20.0 honest player-hours of every skill and link, 24 triggerbot
  engagements; ``referee lab takes lab/trig1``): honest players take 0.15-0.24 of their
  opportunities (the most of the four skills per band: 0.19, 0.24, 0.20, 0.18), triggerbots
  0.90-0.93; an honest player meets about 2,300 opportunities an hour, a triggerbot in play about
  900. ``TAKE_LLR`` is ln of those rates' ratios (taken, and not taken). Under an i.i.d. honest
  model the CUSUM's false alarms per hour are at most the opportunity rate times exp(-h) (Lorden):
  2,300 exp(-16) = 1 per 3,900 player-hours at h = 16. The measured honest peaks (120
  player-matches, highest 8.5; 17 reached 6, 2 reached 8) fall by e per 1.05 units, which puts
  one per 1,000 player-hours near 13: h = 16 is the larger of the two with a margin.
  Opportunities of players whose link is skipped are not judged, as for shots.
- ``delay``: one of a bank of CUSUMs, one per delay range of ``DELAY_RANGES``, reached
  ``delay_threshold``: the player's trigger pulls (``trigger_delays``: the first shot on each
  crosshair contact, with the commands from the crosshair coming onto a player to FIRE, and the
  pulls with the crosshair on nobody) have fallen in one narrow delay range far more often than any
  honest skill's, the mark of a triggerbot with a reaction delay (which ``on_target`` and
  ``takes`` do not see: its shots are not on first contact, and it lets pass every contact
  shorter than its delay). Measured on ``lab/trig1`` (``referee lab delays``): 41-79 % of an
  honest player's pulls are off target (per skill and band), most of the rest come within a
  command of the contact, and no skill puts more than 4 % of its pulls in 5-7 commands, or 3 % in
  any later 3-command range; a bot with a fixed delay puts 71-94 % of them in the range holding
  its delay, one with a delay drawn from 60-180 ms most of them within 5-10 commands, and 0-23 %
  of a delayed bot's pulls read as off target, where the server's probe and the bot's own ray
  disagree (``lab/trigd0``). ``DELAY_LLR`` contrasts a share of 0.9 in the range with the highest honest
  skill's (at least 3 %). The threshold comes from the bound that holds for any player whose
  shares are no higher than those (each step's likelihood ratio then has mean at most 1): at most
  exp(-h) alarms per judged pull and CUSUM. With 7 CUSUMs and at most 1,300 pulls an hour (an
  honest pro: 1,260) that is about one false alarm per 1,000 player-hours at h = 16. The measured
  honest peaks stay far below it (``lab/trig1``: highest 10.5 of 120 player-matches, 3 reached 8). A player
  who holds fire lends no evidence either way, so a cautious human is not suspect for waiting;
  one whose reaction times varied by under a command, and who never missed, would be. A
  triggerbot whose user also fires by hand dilutes its pulls with the human's.

Only pellet 0 is judged; shots of weapons on the skip list, or by players whose link is bad, are
not observed (they still count as the previous shot of the next one).
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.detectors.trigger_delays import DELAY_RANGES, DelayTracker, FirstFire, in_ranges
from anticheat.detectors.trigger_takes import Opportunity, TakeTracker
from anticheat.events import AimSample, Detection, ShotResult
from anticheat.skip import SkipBook
from anticheat.tolerances import searched
from world.weapons import WEAPONS

log = logging.getLogger(__name__)

__all__ = ["DELAY_LLR", "LOG_LR", "RANGE_BANDS_M", "TAKE_LLR", "TriggerConfig", "TriggerDetector", "shot_category"]

RANGE_BANDS_M: tuple[float, ...] = (15.0, 30.0, 50.0)
"""Upper bounds (m) of the first range bands; beyond the last (or no visible enemy): the last band."""

LOG_LR: tuple[tuple[float, ...], ...] = (
    (-1.82, -1.13, 1.34, -1.39, 0.23, 0.18, 3.06, 1.13, 3.14),
    (-1.83, -0.97, 1.14, 0.22, 0.34, -0.65, 2.46, 1.22, 2.12),
    (-1.59, -1.12, 0.93, 0.40, 1.06, -0.89, 1.61, 1.82, 2.18),
    (-1.52, -0.63, 0.65, 0.70, 0.89, -0.79, 1.16, 1.12, 2.03),
)
"""ln(P(category | triggerbot) / P(category | honest)) per range band (rows) and category
(columns, see the module docstring). Measured on ``lab/train5`` (``referee lab trigger-table``): the triggerbots' rates pooled
over the band and its neighbours; the honest rates the highest of the four skills per category,
renormalised; both floored at 0.005 (rare categories)."""

TAIL_LOG_RATE = 3.09
TAIL_SLOPE = 0.415
"""The honest peak tail: player-matches per honest player-hour whose CUSUM peak reached x is
exp(TAIL_LOG_RATE - TAIL_SLOPE * x) (fit on ``lab/train5`` and three session corpora, x = 6..21)."""

TAKE_LLR: tuple[tuple[float, float], ...] = (
    (-2.42, 1.58),
    (-2.20, 1.36),
    (-2.11, 1.51),
    (-2.30, 1.64),
)
"""Per range band (of ``RANGE_BANDS_M``: the nearest visible enemy's distance at the entry), the
log-likelihood ratio of an opportunity not taken and taken, triggerbots against the honest skill
that takes the most: ln((1 - t) / (1 - h)) and ln(t / h), t and h measured on ``lab/trig1``
(``referee lab takes``)."""

DELAY_LLR: tuple[tuple[tuple[float, float], ...], ...] = (
    ((-2.20, 2.23), (-2.27, 3.23), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.26, 3.00), (-2.27, 3.40)),
    ((-2.19, 2.12), (-2.26, 3.16), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.24, 2.76), (-2.27, 3.37)),
    ((-2.19, 2.09), (-2.26, 3.09), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.25, 2.83), (-2.27, 3.40)),
    ((-2.23, 2.54), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40), (-2.27, 3.40)),
)
"""Per range band, per delay range of ``DELAY_RANGES``, the log-likelihood ratio of a trigger pull
(``trigger_delays``) outside and inside the range: a triggerbot delayed into the range
(``testbed.lab.delays.CHEAT_SHARE``: 0.9 of its pulls there) against the honest skill with the
most pulls there (measured on ``lab/trig1``, ``referee lab delays``)."""

_WEAPON_INTERVAL_S = {int(w): spec.fire_interval_s for w, spec in WEAPONS.items()}


@dataclass(frozen=True, slots=True)
class TriggerConfig:
    """Triggerbot test parameters.

    Attributes:
        false_alarm_player_hours: an honest player raises one false alarm per this many hours of
            play, on average, by the measured tail of honest CUSUM peaks (1,000 player-hours).
        prompt_slack_s: a shot is "prompt" within the weapon's fire interval plus this (s): one
            and a half 64 Hz commands.
        follow_s: the previous shot counts as "just before" within this time (s).
        takes_threshold: the opportunity CUSUM's alarm level (log-LR units; see ``takes`` in the
            module docstring for how 16 was chosen).
        delay_threshold: the alarm level of each delay-range CUSUM (log-LR units; see ``delay``
            in the module docstring).
        severity: of the Detection.
    """

    false_alarm_player_hours: float = searched(1000.0, 50.0, 1e5)
    prompt_slack_s: float = 1.5 / 64.0
    follow_s: float = 1.0
    takes_threshold: float = searched(16.0, 8.0, 40.0)
    delay_threshold: float = searched(16.0, 6.0, 40.0)
    severity: float = 0.7

    def __post_init__(self) -> None:
        if not self.false_alarm_player_hours > 0.0:
            raise ValueError("trigger: false_alarm_player_hours must be positive")
        if self.threshold <= 0.0:
            raise ValueError("trigger: false_alarm_player_hours too small for a positive threshold")
        if not (self.takes_threshold > 0.0 and self.delay_threshold > 0.0):
            raise ValueError("trigger: takes_threshold and delay_threshold must be positive")
        if self.prompt_slack_s < 0.0 or not self.follow_s > 0.0:
            raise ValueError("trigger: prompt_slack_s >= 0 and follow_s > 0")

    @property
    def threshold(self) -> float:
        """The CUSUM's alarm threshold h (log-LR units)."""
        return (TAIL_LOG_RATE + math.log(self.false_alarm_player_hours)) / TAIL_SLOPE


def shot_category(on_target: bool, first_contact: bool, prompt: bool, follows_on: bool) -> int:
    """The shot's column of ``LOG_LR``: 0 off target, else 1 + first_contact + 2 prompt + 4 follows_on."""
    if not on_target:
        return 0
    return 1 + first_contact + 2 * prompt + 4 * follows_on


def range_band(distance_m: float | None) -> int:
    """The row of ``LOG_LR`` for the nearest visible enemy's distance (m), None when none."""
    if distance_m is None:
        return len(RANGE_BANDS_M)
    for i, upper in enumerate(RANGE_BANDS_M):
        if distance_m < upper:
            return i
    return len(RANGE_BANDS_M)


@dataclass(slots=True)
class _Player:
    """One player's evidence: the CUSUM and the facts of its last shot."""

    statistic: float = 0.0
    peak: float = 0.0
    shots: int = 0
    on_target: int = 0
    first_contact: int = 0
    last_shot_s: float = -math.inf
    last_on: bool = False
    takes: float = 0.0
    takes_peak: float = 0.0
    opportunities: int = 0
    taken: int = 0
    delays: list[float] = field(default_factory=lambda: [0.0] * len(DELAY_RANGES))
    delay_peak: float = 0.0
    pulls: int = 0
    in_range: list[int] = field(default_factory=lambda: [0] * len(DELAY_RANGES))


class TriggerDetector(Detector):
    """Per-player CUSUM over each shot's category log-likelihood ratio."""

    name = "trigger"

    def __init__(self, config: TriggerConfig | None = None) -> None:
        self.config = config or TriggerConfig()
        self._h = self.config.threshold
        self._players: dict[int, _Player] = {}
        # The last few commands' nearest visible enemy distance, by seq: a shot's command is
        # among the tick's samples, which come before its shots.
        self._ranges: dict[int, deque[tuple[int, float | None]]] = {}
        self._trackers: dict[int, TakeTracker] = {}
        self._delay_trackers: dict[int, DelayTracker] = {}
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Shots not judged, per skip reason."""
        return dict(self.skipped)

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)
        self._ranges.pop(player, None)
        self._trackers.pop(player, None)
        self._delay_trackers.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``llr``: the highest shot CUSUM statistic the player reached against the threshold h;
        ``takes``: the highest opportunity CUSUM statistic against ``takes_threshold``; ``delay``:
        the highest of the delay-range CUSUMs against ``delay_threshold`` (unitless; 1.0 raises an
        alarm; each statistic restarts after one, the peak is kept)."""
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        cfg = self.config
        return {"llr": over_limit(st.peak, self._h), "takes": over_limit(st.takes_peak, cfg.takes_threshold),
                "delay": over_limit(st.delay_peak, cfg.delay_threshold)}

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        ring = self._ranges.get(sample.player)
        if ring is None:
            ring = self._ranges[sample.player] = deque(maxlen=8)
        ring.append((sample.seq, sample.target_distance_m if sample.target is not None else None))
        if sample.fire_ready is None:
            return NO_DETECTIONS  # recorded before the crosshair probe
        tracker = self._trackers.get(sample.player)
        if tracker is None:
            tracker = self._trackers[sample.player] = TakeTracker()
        out: list[Detection] = []
        for opportunity in tracker.feed(sample):
            out += self._judge_opportunity(opportunity, sample, skip)
        delays = self._delay_trackers.get(sample.player)
        if delays is None:
            delays = self._delay_trackers[sample.player] = DelayTracker()
        first = delays.feed(sample)
        if first is not None:
            out += self._judge_first_fire(first, sample, skip)
        return out

    def _judge_first_fire(self, first: FirstFire, sample: AimSample, skip: SkipBook) -> list[Detection]:
        reason = skip.player_reason(first.player)
        if reason is not None:
            self.skipped[reason.value] += 1
            return []
        st = self._players.get(first.player)
        if st is None:
            st = self._players[first.player] = _Player()
        st.pulls += 1
        row = DELAY_LLR[range_band(first.distance_m)]
        h = self.config.delay_threshold
        alarm = None
        for r, ((out_llr, in_llr), inside) in enumerate(zip(row, in_ranges(first.delay_commands), strict=True)):
            st.in_range[r] += inside
            st.delays[r] = max(0.0, st.delays[r] + (in_llr if inside else out_llr))
            st.delay_peak = max(st.delay_peak, st.delays[r])
            if alarm is None and st.delays[r] >= h:
                alarm = r
        if alarm is None:
            return []
        n, inside, peak = st.pulls, st.in_range[alarm], st.delays[alarm]
        lo, hi = DELAY_RANGES[alarm]
        st.delays = [0.0] * len(DELAY_RANGES)
        st.in_range = [0] * len(DELAY_RANGES)
        st.pulls = 0
        log.info("trigger: player %d pulled the trigger %d of %d times %d-%d commands into a contact",
                 first.player, inside, n, lo, hi)
        return [Detection(player=first.player, tick=sample.tick, time_s=sample.time_s, detector=self.name,
                          kind="delay", value=inside / n, severity=self.config.severity,
                          reason=f"Delay-{lo}-{hi}-{inside}/{n}",
                          evidence={"in_range": inside, "pulls": n, "range_commands": [lo, hi],
                                    "cusum": peak, "threshold": h})]

    def _judge_opportunity(self, opp: Opportunity, sample: AimSample, skip: SkipBook) -> list[Detection]:
        reason = skip.player_reason(opp.player)
        if reason is not None:
            self.skipped[reason.value] += 1
            return []
        st = self._players.get(opp.player)
        if st is None:
            st = self._players[opp.player] = _Player()
        st.opportunities += 1
        st.taken += opp.taken
        st.takes = max(0.0, st.takes + TAKE_LLR[range_band(opp.distance_m)][opp.taken])
        st.takes_peak = max(st.takes_peak, st.takes)
        h = self.config.takes_threshold
        if st.takes < h:
            return []
        n, taken, peak = st.opportunities, st.taken, st.takes
        st.takes = 0.0
        st.opportunities = st.taken = 0
        log.info("trigger: player %d took %d of %d crosshair contacts", opp.player, taken, n)
        return [Detection(player=opp.player, tick=sample.tick, time_s=sample.time_s, detector=self.name,
                          kind="takes", value=taken / n, severity=self.config.severity,
                          reason=f"Takes-{taken}/{n}",
                          evidence={"taken": taken, "opportunities": n, "cusum": peak, "threshold": h})]

    def _range_of(self, player: int, seq: int) -> float | None:
        for s, dist in reversed(self._ranges.get(player, ())):
            if s == seq:
                return dist
        return None

    def judge_shot(self, shot: ShotResult, skip: SkipBook) -> tuple[int, int] | None:
        """The shot's ``(range band, category)``: its row and column of ``LOG_LR``, or None when
        it is not judged (not pellet 0, a bait shot, a skipped weapon or link).

        Updates the player's last-shot facts (what makes the next shot prompt or a follow-on)
        exactly as ``on_shot`` does, which calls it; the CUSUM is left alone. Offline measurement
        (``referee lab trigger-table``) reads the categories through it.
        """
        if shot.pellet != 0:
            return None
        st = self._players.get(shot.shooter)
        if st is None:
            st = self._players[shot.shooter] = _Player()
        cfg = self.config
        on = shot.first_contact is not None
        if shot.bait_hit and not on:
            # A shot at an AimDetect bait is AimDetect's evidence; read as a miss here it would
            # count as the most honest kind of shot for a triggerbot that fires at baits.
            self.skipped["bait"] += 1
            return None
        since = shot.time_s - st.last_shot_s
        prompt = since <= _WEAPON_INTERVAL_S.get(shot.weapon, 0.0) + cfg.prompt_slack_s
        follows_on = st.last_on and since < cfg.follow_s
        st.last_shot_s, st.last_on = shot.time_s, on
        reason = skip.shot_reason(shot.shooter, None, shot.weapon)
        if reason is not None:
            self.skipped[reason.value] += 1
            return None
        return (range_band(self._range_of(shot.shooter, shot.claim.seq)),
                shot_category(on, bool(shot.first_contact), prompt, follows_on))

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        judged = self.judge_shot(shot, skip)
        if judged is None:
            return NO_DETECTIONS
        band, category = judged
        st = self._players[shot.shooter]
        cfg = self.config
        st.shots += 1
        st.on_target += shot.first_contact is not None
        st.first_contact += bool(shot.first_contact)
        st.statistic = max(0.0, st.statistic + LOG_LR[band][category])
        st.peak = max(st.peak, st.statistic)
        if st.statistic < self._h:
            return NO_DETECTIONS
        shots, positives, first, peak = st.shots, st.on_target, st.first_contact, st.statistic
        st.statistic = 0.0
        st.shots = st.on_target = st.first_contact = 0
        log.info("trigger: player %d on target at %d of %d shots (%d first contact)", shot.shooter, positives, shots, first)
        return [Detection(player=shot.shooter, tick=shot.tick, time_s=shot.time_s, detector=self.name,
                          kind="on_target", value=positives / shots, severity=cfg.severity,
                          reason=f"OnTarget-{positives}/{shots}",
                          evidence={"on_target": positives, "shots": shots, "first_contact": first,
                                    "cusum": peak, "threshold": self._h,
                                    "false_alarm_player_hours": cfg.false_alarm_player_hours})]
