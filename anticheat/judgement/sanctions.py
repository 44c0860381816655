"""The sanction policy: weigh a player's evidence over 30 days and recommend a level.

Anchors (REFERENCES section 4, the architecture article's sanction pipeline): evidence over 30
days, recency weight ``exp(-age / 7 days)``, account age under 7 days x1.3 and over 365 days x0.8,
cumulative score >= 0.95 permanent ban, >= 0.80 24 h ban + mandatory human review, >= 0.60
heightened monitoring, else log only. BustAim's administrator guide adds the rule this module is
built around: never ban automatically, humans confirm.

Combination rule (why not the article's): the article sums ``severity * recency * (i+1)/n`` over
the history. That rank-weighted sum is unbounded (n equal findings sum to about n/2 of one), so
twenty weak findings from a single noisy detector reach a permanent ban and the thresholds lose
their meaning as the history grows. This module uses a two-level noisy-OR that stays in [0, 1]:

1. Each evidence item ``i`` is a probability-like weight ``p_i = severity_i * exp(-age_i / tau)``.
2. Within one evidence *family* (by default one detector; correlated detectors can share a family
   through ``SanctionConfig.families``), findings combine by noisy-OR and the family is capped:
   ``c_f = detector_cap * (1 - prod_i (1 - p_i))``. Repeated findings raise confidence, but one
   family alone never exceeds ``detector_cap`` (0.60 by default: at most heightened monitoring).
3. Families combine by noisy-OR, treating independent detectors as independent witnesses:
   ``raw = 1 - prod_f (1 - c_f)``.
4. ``score = min(1, raw * account_age_factor)``.

With the defaults: one detector at full strength gives 0.60 (MONITOR), 0.78 on a new account
(KICK recommendation) and 0.48 on an old one; two independent detectors at full strength give
0.84 (24 h ban + review), three 0.936 (x1.3: permanent), four 0.974 (permanent). A single detection
of severity ``s`` that is 14 days old contributes ``detector_cap * s * exp(-2)``.
``SanctionConfig`` refuses a ``detector_cap`` for which one family could reach the temp-ban
threshold even on a new account (``detector_cap * new_account_factor < temp_ban_threshold``),
so "one detector alone never bans" is an invariant, not a hope. Because the age factor multiplies a
score bounded by 1, an account older than a year never scores above 0.80: its permanent ban always
needs a reviewer's escalation (conservative on purpose: old accounts have the most to lose).

Where KICK sits: between monitoring and the 24 h ban (``kick_threshold``, default 0.70). It is also
recommended, regardless of the score, when a recent detection has a *link* kind (desync, an
unplayable connection): BustAim's guide tells admins to kick desynced or heavily lagging players
"before they cause more trouble". Link detections are about the connection, not about cheating,
so they never add to the cheating score.

Calibrated weights (``kind_weights``): a detection kind that honest players also produce is weak
evidence, one they never produce is strong. Each ``detector.kind`` gets a weight w in (0, 1]
measured in the lab (``referee lab calibrate``): the posterior probability that a player is a
cheater after one such detection, w = LR p / (LR p + 1 - p), where LR is the kind's rate per
player-hour among the cheaters it is most typical of over its rate among honest players (the upper
95 % Garwood bound when honest players never produced it) and p the prior prevalence of cheaters.
A calibrated item weighs ``w * recency`` (w replaces the detector's own severity: the lab measured
the kind's findings as the detector grades them), so evidence adds up the way its reliability says.
An uncalibrated kind weighs ``severity * recency`` as before. Conclusive evidence (``kind_rates``): the lab also
gives each kind two rates per player-hour, honest players' (upper 95 % bound) and that of the
cheaters it is most typical of (lower 95 % bound). Over the last ``conclusive_window_s`` seconds a
family whose kinds fired n_k times has the Poisson log likelihood ratio
sum_k [n_k ln(c_k / h_k) - (c_k - h_k) W] (W the window in hours, or the time the player has been
observed when that is shorter, but at least ``conclusive_min_window_s``): a count the cheat would
produce and an honest player would not raises it, a lone finding of a kind the cheat produces by
the hundred lowers it. Different cheats make one kind at very different rates (a rage aimbot locks
on ten times as often as a lock aimbot), so when the lab lists each producing profile's rate
(``kind_profile_rates``) the alternative is their equal mixture: the kind's ratio is the mean over
the profiles of exp[n_k ln(c_p / h_k) - (c_p - h_k) W], and a count any one cheat would make
counts for it. A *repeat* kind (``repeat_kinds``) re-tests a running statistic, such as
IW4MAdmin's session hit-location ratios, so its findings are not independent events: one player
whose ratio sits above the limit is found again and again on the same hits. Its observation is
only whether it fired in the window, with the Poisson ratio of that event,
ln[(1 - exp(-c_k W)) / (1 - exp(-h_k W))], which never grows with the count. When its posterior at ``conclusive_prior`` reaches ``conclusive_weight``
the family is *conclusive*: the recommendation is at least KICK while it stays so, as for link
problems (a blatant cheat is removed from the match within seconds of its proof). The family cap
still bounds the score, so one family alone never reaches a ban. A KICK recommendation needs
review; nothing above ``auto_apply_max`` is applied without a human.

Automatic application: ``auto_apply_max`` (default MONITOR) is the highest level applied without a
human. A recommendation above it is recorded and applied only up to ``auto_apply_max``; every
recommendation at KICK or above needs review (``needs_review``), also when an operator's config
applies it automatically, so that each sanction has a review item a player can appeal.

Time: all ``now`` / ``at`` arguments are wall-clock seconds since the epoch (UTC), provided by the
caller's injected clock; the policy never reads a clock itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from anticheat.events import Detection

__all__ = [
    "DAY_S",
    "Evidence",
    "SanctionConfig",
    "SanctionDecision",
    "SanctionLevel",
    "SanctionPolicy",
    "count_log_ratio",
    "fired_log_ratio",
]

DAY_S = 86_400.0
"""Seconds in a day."""


def count_log_ratio(n: int, honest_per_h: float, cheats_per_h: Iterable[float], window_h: float,
                    repeat: bool = False) -> float:
    """ln of the likelihood ratio of ``n`` findings of one kind in ``window_h`` hours: cheaters
    (an equal mixture of Poisson rates ``cheats_per_h``, per hour) against honest players (Poisson
    at ``honest_per_h``). ``repeat``: the observation is only that the kind fired (module doc)."""
    if repeat:
        terms = [fired_log_ratio(honest_per_h, c, window_h) for c in cheats_per_h]
    else:
        terms = [n * math.log(c / honest_per_h) - (c - honest_per_h) * window_h for c in cheats_per_h]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms) / len(terms))


def fired_log_ratio(honest_per_h: float, cheat_per_h: float, window_h: float) -> float:
    """ln of P(a kind fires at least once in ``window_h`` hours | cheater) over the same for an
    honest player, both Poisson at their rates per hour: the evidence of a repeat kind."""
    return math.log(-math.expm1(-cheat_per_h * window_h)) - math.log(-math.expm1(-honest_per_h * window_h))


class SanctionLevel(IntEnum):
    """Sanction levels, ordered by severity (comparisons are meaningful)."""

    LOG = 0
    """Log only: a probable false positive on its own."""
    MONITOR = 1
    """Heightened monitoring: no sanction."""
    KICK = 2
    """Remove from the match (suspicion between monitoring and ban, or an unplayable link)."""
    TEMP_BAN_REVIEW = 3
    """24 h ban with mandatory human review."""
    PERMANENT_BAN = 4
    """Permanent ban."""


@dataclass(frozen=True, slots=True)
class SanctionConfig:
    """Tolerances of the sanction policy (REFERENCES section 4 defaults).

    Attributes:
        window_days: evidence older than this is ignored (days; article: 30).
        recency_tau_days: recency weight is ``exp(-age / tau)`` (days; article: 7).
        new_account_days, new_account_factor: accounts younger than this (days) have their score
            multiplied by the factor (article: < 7 days, x1.3).
        old_account_days, old_account_factor: accounts older than this (days) are multiplied by
            the factor (article: > 365 days, x0.8). Unknown account age: factor 1.0.
        monitor_threshold: score for heightened monitoring (article: 0.60).
        kick_threshold: score for a kick recommendation (ours: 0.70, between monitor and temp ban;
            set above ``temp_ban_threshold`` to never recommend kicks by score).
        temp_ban_threshold: score for a 24 h ban with mandatory review (article: 0.80).
        permanent_threshold: score for a permanent ban (article: 0.95).
        temp_ban_duration_s: length of the temporary ban (s; article: 24 h).
        detector_cap: the most one evidence family can contribute (0..1). Must keep
            ``detector_cap * new_account_factor < temp_ban_threshold`` unless
            ``allow_single_detector_ban``.
        allow_single_detector_ban: waive that invariant (an operator's explicit choice).
        auto_apply_max: the highest level applied without a human (default MONITOR: never kick or
            ban automatically, per BustAim's administrator guide).
        families: ``(detector, family)`` pairs grouping correlated detectors into one evidence
            family (e.g. two aim detectors reading the same angles). ``detector`` may also be
            ``"detector.kind"`` to split or group by kind. Unlisted detectors are their own family.
        link_kinds: detection kinds describing the connection rather than cheating (desync,
            unplayable link). They never add to the score and recommend KICK while recent.
        link_kick_window_s: how long a link detection keeps recommending KICK (s).
        kind_weights: ``("detector.kind", w)`` pairs, w in (0, 1]: a finding of a listed kind
            weighs w instead of its severity (``"detector"`` alone covers the detector's other
            kinds); unlisted kinds weigh their severity. The shipped values come from the lab
            (module doc).
        kind_rates: ``("detector.kind", honest_per_h, cheat_per_h)``: the lab's rates behind the
            conclusive test (module doc); kinds not listed never make a family conclusive.
        kind_profile_rates: ``("detector.kind", cheat_per_h)`` pairs, one for each cheat profile that
            produced the kind in the lab (lower 95 % bound of its rate): the conclusive test's
            alternative is their equal mixture (module doc); a kind without any uses the single
            cheat rate of ``kind_rates``.
        repeat_kinds: ``"detector.kind"`` names whose findings re-test a running statistic (the
            IW4MAdmin session means and ratios): the conclusive test counts them once per window.
        conclusive_prior: prevalence of cheaters the conclusive test's posterior assumes (0.02).
        conclusive_weight: the posterior that makes a family conclusive (0.95).
        conclusive_window_s: the window of recent evidence the conclusive test counts (s; 300).
            For a player observed for less than that (``SanctionPolicy.observe``: the first
            connect seen), the test's exposure is the time observed, no less than
            ``conclusive_min_window_s``: two findings in a player's first minute are not judged
            as if the player had had five minutes to make them.
        conclusive_min_window_s: the shortest exposure the conclusive test assumes (s; 60): a
            single early finding of a kind cheats make by the hundred stays short of proof.
        max_evidence_per_player, max_evidence_per_family: bounds on the evidence kept in memory
            (the store keeps all of it). When a player's evidence grows a quarter past the player
            bound, each family is cut to its bound, then the player to its bound, dropping the
            items that weigh least (dismissed first, then lowest ``severity * exp(at / tau)``: the
            order of current weights, which time never changes). A flood from one detector thus
            evicts its own weakest findings, never another family's evidence.
        top_reasons: how many reasons a decision lists.
        evaluation_step_s: recency weights and the window are computed at ``now`` rounded down to
            a multiple of this (s), so per-family products can be cached within a step; evidence
            newer than the step time counts at full weight. Relative weight error <= step / tau
            (1e-4 at 60 s and 7 days). 0: exact time, no caching across calls.
    """

    window_days: float = 30.0
    recency_tau_days: float = 7.0
    new_account_days: float = 7.0
    new_account_factor: float = 1.3
    old_account_days: float = 365.0
    old_account_factor: float = 0.8
    monitor_threshold: float = 0.60
    kick_threshold: float = 0.70
    temp_ban_threshold: float = 0.80
    permanent_threshold: float = 0.95
    temp_ban_duration_s: float = DAY_S
    detector_cap: float = 0.60
    allow_single_detector_ban: bool = False
    auto_apply_max: SanctionLevel = SanctionLevel.MONITOR
    families: tuple[tuple[str, str], ...] = ()
    link_kinds: frozenset[str] = field(default_factory=lambda: frozenset({"desync", "unplayable_link"}))
    link_kick_window_s: float = 60.0
    kind_weights: tuple[tuple[str, float], ...] = ()
    kind_rates: tuple[tuple[str, float, float], ...] = ()
    kind_profile_rates: tuple[tuple[str, float], ...] = ()
    repeat_kinds: frozenset[str] = field(default_factory=lambda: frozenset(
        {"iw4m.Bone", "iw4m.Chest", "iw4m.Offset", "iw4m.Snap"}))
    conclusive_prior: float = 0.02
    conclusive_weight: float = 0.95
    conclusive_window_s: float = 300.0
    conclusive_min_window_s: float = 60.0
    max_evidence_per_player: int = 2048
    max_evidence_per_family: int = 256
    top_reasons: int = 5
    evaluation_step_s: float = 60.0

    def __post_init__(self) -> None:
        for name in (
            "window_days",
            "recency_tau_days",
            "new_account_factor",
            "old_account_factor",
            "temp_ban_duration_s",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        for name in (
            "new_account_days",
            "old_account_days",
            "link_kick_window_s",
            "conclusive_window_s",
            "conclusive_min_window_s",
            "kick_threshold",
            "evaluation_step_s",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0.0 < self.detector_cap <= 1.0:
            raise ValueError(f"detector_cap must be in (0, 1], got {self.detector_cap!r}")
        if not (0.0 <= self.monitor_threshold <= self.temp_ban_threshold <= self.permanent_threshold <= 1.0):
            raise ValueError(
                "thresholds must satisfy 0 <= monitor <= temp_ban <= permanent <= 1, got "
                f"{self.monitor_threshold}, {self.temp_ban_threshold}, {self.permanent_threshold}"
            )
        if self.kick_threshold < self.monitor_threshold:
            raise ValueError(f"kick_threshold {self.kick_threshold} is below monitor_threshold")
        if self.new_account_days > self.old_account_days:
            raise ValueError("new_account_days must not exceed old_account_days")
        if (
            not self.allow_single_detector_ban
            and self.detector_cap * max(1.0, self.new_account_factor) >= self.temp_ban_threshold
        ):
            raise ValueError(
                f"detector_cap {self.detector_cap} x new_account_factor {self.new_account_factor} reaches "
                f"temp_ban_threshold {self.temp_ban_threshold}: a single detector could ban "
                "(set allow_single_detector_ban to accept that)"
            )
        for key, weight in self.kind_weights:
            if not isinstance(key, str) or not key or not (isinstance(weight, (int, float)) and 0.0 < weight <= 1.0):
                raise ValueError(f"kind_weights entries must be (\"detector.kind\", w) with 0 < w <= 1, got {(key, weight)!r}")
        for entry in self.kind_rates:
            if (len(entry) != 3 or not isinstance(entry[0], str)
                    or not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0.0 for r in entry[1:])):
                raise ValueError(f"kind_rates entries must be (\"detector.kind\", honest_per_h > 0, cheat_per_h > 0), "
                                 f"got {entry!r}")
        for entry in self.kind_profile_rates:
            if (len(entry) != 2 or not isinstance(entry[0], str) or not isinstance(entry[1], (int, float))
                    or not (math.isfinite(entry[1]) and entry[1] > 0.0)):
                raise ValueError(f"kind_profile_rates entries must be (\"detector.kind\", cheat_per_h > 0), got {entry!r}")
        if not 0.0 < self.conclusive_prior < 1.0:
            raise ValueError(f"conclusive_prior must be in (0, 1), got {self.conclusive_prior!r}")
        if not 0.0 < self.conclusive_weight <= 1.0:
            raise ValueError(f"conclusive_weight must be in (0, 1], got {self.conclusive_weight!r}")
        if self.max_evidence_per_player < 1 or self.max_evidence_per_family < 1 or self.top_reasons < 0:
            raise ValueError("evidence bounds must be >= 1 and top_reasons >= 0")

    def level_for(self, score: float) -> SanctionLevel:
        """The level a cumulative ``score`` (0..1) reaches."""
        if score >= self.permanent_threshold:
            return SanctionLevel.PERMANENT_BAN
        if score >= self.temp_ban_threshold:
            return SanctionLevel.TEMP_BAN_REVIEW
        if score >= self.kick_threshold:
            return SanctionLevel.KICK
        if score >= self.monitor_threshold:
            return SanctionLevel.MONITOR
        return SanctionLevel.LOG

    def kind_weight(self, detector: str, kind: str) -> float:
        """The calibrated weight of a ``detector``'s ``kind`` finding (1.0 when not calibrated)."""
        weights = dict(self.kind_weights)
        return weights.get(f"{detector}.{kind}", weights.get(detector, 1.0))

    def is_calibrated(self, detector: str, kind: str) -> bool:
        """Whether ``kind_weights`` lists ``detector.kind`` (or the whole detector)."""
        return any(key in (f"{detector}.{kind}", detector) for key, _ in self.kind_weights)

    def account_factor(self, age_days: float | None) -> float:
        """Score multiplier for an account ``age_days`` old (None: unknown, 1.0)."""
        if age_days is None:
            return 1.0
        if age_days < self.new_account_days:
            return self.new_account_factor
        if age_days > self.old_account_days:
            return self.old_account_factor
        return 1.0


@dataclass(frozen=True, slots=True)
class Evidence:
    """One detection as the policy weighs it.

    Attributes:
        id: evidence id (unique per store; the pipeline assigns it).
        player: stable player key (account id or name), not the reusable slot.
        detector, kind: who found what. severity: 0..1. at: wall-clock time it was recorded (epoch s).
        reason: the detection's human-readable reason. dismissed: a reviewer dismissed it, so it no
            longer counts.
    """

    id: int
    player: str
    detector: str
    kind: str
    severity: float
    at: float
    reason: str = ""
    dismissed: bool = False

    @classmethod
    def from_detection(cls, evidence_id: int, player: str, detection: Detection, at: float) -> Evidence:
        """Evidence for ``detection`` of ``player`` recorded at ``at`` (epoch s)."""
        return cls(evidence_id, player, detection.detector, detection.kind, detection.severity, at, detection.reason)


@dataclass(frozen=True, slots=True)
class SanctionDecision:
    """What the policy decided for one player at one moment.

    Attributes:
        player: player key. at: evaluation time (epoch s).
        recommended: the level the evidence reaches. applied: the level applied without a human
            (``min(recommended, auto_apply_max)``).
        score: cumulative score 0..1 after the account-age factor. raw_score: before it.
        account_factor: the factor used. needs_review: a human must look (recommended >= KICK).
        reasons: the strongest families, e.g. ``bustaim=0.512 (3 detections; strongest: ...)``.
        families: ``(family, contribution)`` pairs, strongest first.
        evidence_ids: ids of the evidence counted, listed when the decision needs review (a review
            item dismisses exactly these); empty below KICK.
        link_problem: a recent link detection (desync/unplayable) contributed a KICK.
        expires_at: for a temp ban, when it ends if applied now (epoch s); else None.
    """

    player: str
    at: float
    recommended: SanctionLevel
    applied: SanctionLevel
    score: float
    raw_score: float
    account_factor: float
    needs_review: bool
    reasons: tuple[str, ...] = ()
    families: tuple[tuple[str, float], ...] = ()
    evidence_ids: tuple[int, ...] = ()
    link_problem: bool = False
    expires_at: float | None = None


@dataclass(slots=True)
class _Tally:
    """A player's evidence folded at one (quantised) evaluation time, per family.

    Folding is the only arithmetic; a full rebuild folds every item in list order and an added item
    is folded at the end, so a tally kept up to date incrementally is bit-identical to a rebuilt one.
    """

    at: float
    miss: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    strongest: dict[str, tuple[float, str]] = field(default_factory=dict)
    ids: list[int] = field(default_factory=list)
    links: list[tuple[float, int]] = field(default_factory=list)
    conclusive: list[tuple[float, str, tuple[str, str]]] = field(default_factory=list)


class SanctionPolicy:
    """Per-player evidence and the decision it leads to. Pure: time is always passed in.

    Cost: ``evaluate`` is O(families) plus the evidence ids it lists. The per-family products are
    cached per player for the current evaluation step (``SanctionConfig.evaluation_step_s``) and
    updated as evidence arrives; only a new step, a dismissal or a trim refolds the player's
    evidence (O(evidence), at most once per step), so a player flooding detections costs little
    inline.
    """

    def __init__(self, config: SanctionConfig | None = None) -> None:
        self.config = config or SanctionConfig()
        self._evidence: dict[str, list[Evidence]] = {}
        self._created: dict[str, float] = {}
        self._observed_from: dict[str, float] = {}
        self._family_of: dict[str, str] = dict(self.config.families)
        self._weights: dict[tuple[str, str], float] = {}
        self._measured: dict[tuple[str, str], bool] = {}
        profiles: dict[str, list[float]] = {}
        for key, rate in self.config.kind_profile_rates:
            profiles.setdefault(key, []).append(float(rate))
        self._rates: dict[tuple[str, str], tuple[float, tuple[float, ...]]] = {
            tuple(key.split(".", 1)): (honest, tuple(profiles.get(key, (cheat,))))  # type: ignore[misc]
            for key, honest, cheat in self.config.kind_rates if "." in key
        }
        self._tallies: dict[str, _Tally] = {}
        self._window_s = self.config.window_days * DAY_S
        self._tau_s = self.config.recency_tau_days * DAY_S
        cap = self.config.max_evidence_per_player
        # Trim in chunks so that a player at the bound does not refold on every new detection.
        self._trim_at = cap + max(1, cap // 4)

    # --- evidence -------------------------------------------------------------------------

    def add(self, evidence: Evidence) -> None:
        """Record one piece of evidence (kept in arrival order, bounded per player)."""
        player = evidence.player
        items = self._evidence.setdefault(player, [])
        items.append(evidence)
        if len(items) >= self._trim_at:
            self._evidence[player] = self._trimmed(items)
            self._tallies.pop(player, None)
            return
        tally = self._tallies.get(player)
        if tally is not None:
            self._fold(tally, evidence)

    def _keep_key(self, item: Evidence) -> float:
        # log(severity * exp(at / tau)): comparable across time without overflowing exp.
        if item.dismissed:
            return -math.inf
        severity = 1.0 if item.kind in self.config.link_kinds else min(1.0, item.severity)
        if not severity > 0.0:
            return -math.inf
        return math.log(severity) + item.at / self._tau_s

    def _trimmed(self, items: list[Evidence]) -> list[Evidence]:
        cfg = self.config
        by_family: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            by_family.setdefault(self.family(item.detector, item.kind), []).append(index)
        keep: list[int] = []
        for indices in by_family.values():
            if len(indices) > cfg.max_evidence_per_family:
                # Ties (equal weight) keep the newer item.
                indices = sorted(indices, key=lambda i: (self._keep_key(items[i]), i))
                indices = indices[-cfg.max_evidence_per_family :]
            keep.extend(indices)
        if len(keep) > cfg.max_evidence_per_player:
            keep.sort(key=lambda i: (self._keep_key(items[i]), i))
            keep = keep[-cfg.max_evidence_per_player :]
        keep.sort()  # arrival order, which folding relies on
        return [items[i] for i in keep]

    def add_detection(self, evidence_id: int, player: str, detection: Detection, at: float) -> Evidence:
        """Record ``detection`` of ``player`` at ``at`` (epoch s); returns the evidence kept."""
        evidence = Evidence.from_detection(evidence_id, player, detection, at)
        self.add(evidence)
        return evidence

    def restore(self, evidence: Iterable[Evidence]) -> None:
        """Re-add persisted evidence after a restart, in the order it arrived: by time, then id
        (servers of a fleet draw ids from interleaved blocks, so ids alone are not that order)."""
        for item in sorted(evidence, key=lambda e: (e.at, e.id)):
            self.add(item)

    def dismiss(self, player: str, evidence_ids: Iterable[int]) -> int:
        """Mark evidence of ``player`` as dismissed by a reviewer; returns how many changed."""
        wanted = set(evidence_ids)
        items = self._evidence.get(player)
        if not items or not wanted:
            return 0
        changed = 0
        for i, item in enumerate(items):
            if item.id in wanted and not item.dismissed:
                items[i] = replace(item, dismissed=True)
                changed += 1
        if changed:
            self._tallies.pop(player, None)
        return changed

    def forget(self, player: str) -> None:
        """Drop every piece of evidence of ``player`` (e.g. an operator's profile reset)."""
        self._evidence.pop(player, None)
        self._tallies.pop(player, None)
        self._observed_from.pop(player, None)

    def observe(self, player: str, at: float) -> None:
        """``player`` is being watched from ``at`` (epoch s; the first call wins: a reconnect
        counts the time away as observed, which only weakens the conclusive test)."""
        self._observed_from.setdefault(player, at)

    def observed_from(self, player: str) -> float | None:
        """When ``player`` was first observed (epoch s), or None when never."""
        return self._observed_from.get(player)

    def prune(self, now: float) -> None:
        """Drop evidence older than the window from memory (epoch s); the store keeps history. Also
        forget when players without evidence were first observed, once a whole conclusive window
        ago (the memory stays bounded by the players present and those with evidence)."""
        horizon = now - self._window_s
        for player in list(self._evidence):
            items = self._evidence[player]
            if all(e.at >= horizon for e in items):
                continue
            kept = [e for e in items if e.at >= horizon]
            self._tallies.pop(player, None)
            if kept:
                self._evidence[player] = kept
            else:
                del self._evidence[player]
        # Once a whole window has passed the exposure is the window itself, so the start only
        # matters while the player has evidence a reconnect could be judged with.
        settled = now - self.config.conclusive_window_s
        for player in [p for p, since in self._observed_from.items() if since <= settled and p not in self._evidence]:
            del self._observed_from[player]

    def evidence(self, player: str) -> tuple[Evidence, ...]:
        """Evidence held for ``player``, oldest first (dismissed items included)."""
        return tuple(self._evidence.get(player, ()))

    def players(self) -> tuple[str, ...]:
        """Players with evidence in memory."""
        return tuple(self._evidence)

    # --- account age ----------------------------------------------------------------------

    def set_account_created(self, player: str, created_at: float | None) -> None:
        """Set when ``player``'s account was created (epoch s); None forgets it (factor 1.0)."""
        if created_at is None:
            self._created.pop(player, None)
        else:
            self._created[player] = created_at

    def account_created(self, player: str) -> float | None:
        """When ``player``'s account was created (epoch s), if known."""
        return self._created.get(player)

    def restore_accounts(self, created: Mapping[str, float | None]) -> None:
        """Set many account creation times at once (after a restart)."""
        for player, at in created.items():
            self.set_account_created(player, at)

    # --- decision -------------------------------------------------------------------------

    def family(self, detector: str, kind: str) -> str:
        """The evidence family of a ``detector``'s ``kind`` finding."""
        family_of = self._family_of
        if family_of:
            specific = family_of.get(f"{detector}.{kind}")
            if specific is not None:
                return specific
            return family_of.get(detector, detector)
        return detector

    def weight(self, detector: str, kind: str) -> float:
        """The calibrated weight of a ``detector``'s ``kind`` finding (cached)."""
        key = (detector, kind)
        w = self._weights.get(key)
        if w is None:
            w = self._weights[key] = self.config.kind_weight(detector, kind)
        return w

    def strength(self, detector: str, kind: str, severity: float) -> float:
        """What one finding weighs before recency (0..1): its kind's calibrated weight, or its
        ``severity`` when the kind was never measured."""
        return self.weight(detector, kind) if self.calibrated(detector, kind) else min(1.0, severity)

    def rated(self, detector: str, kind: str) -> bool:
        """Whether ``kind_rates`` lists the finding (only those count in the conclusive test)."""
        return (detector, kind) in self._rates

    def calibrated(self, detector: str, kind: str) -> bool:
        """Whether ``kind_weights`` lists the finding (its weight replaces the severity)."""
        key = (detector, kind)
        measured = self._measured.get(key)
        if measured is None:
            measured = self._measured[key] = self.config.is_calibrated(detector, kind)
        return measured

    def step_time(self, now: float) -> float:
        """The evaluation time ``now`` (epoch s) is quantised down to (see ``evaluation_step_s``)."""
        step = self.config.evaluation_step_s
        return math.floor(now / step) * step if step > 0.0 else now

    def _fold(self, tally: _Tally, item: Evidence) -> None:
        if item.dismissed:
            return
        # Evidence from "the future" (after the step time, or clock skew between restarts) counts at
        # full weight rather than above it.
        age_s = max(0.0, tally.at - item.at)
        if age_s > self._window_s:
            return
        if item.kind in self.config.link_kinds:
            tally.links.append((item.at, item.id))
            return
        severity = item.severity
        if not severity > 0.0:  # also skips NaN
            return
        fam = self.family(item.detector, item.kind)
        strength = self.strength(item.detector, item.kind, severity)
        if self.rated(item.detector, item.kind):
            tally.conclusive.append((item.at, fam, (item.detector, item.kind)))
        weight = strength * math.exp(-age_s / self._tau_s)
        tally.miss[fam] = tally.miss.get(fam, 1.0) * (1.0 - weight)
        tally.count[fam] = tally.count.get(fam, 0) + 1
        best = tally.strongest.get(fam)
        if best is None or weight > best[0]:
            tally.strongest[fam] = (weight, item.reason or f"{item.detector}:{item.kind}")
        tally.ids.append(item.id)

    def _tally(self, player: str, now: float) -> _Tally:
        at = self.step_time(now)
        tally = self._tallies.get(player)
        if tally is None or tally.at != at:
            tally = self._rebuild(player, at)
            self._tallies[player] = tally
        return tally

    def _rebuild(self, player: str, at: float) -> _Tally:
        # ``_fold`` over every item, inlined with local names: this is the one O(evidence) loop, run
        # once per step for a player with new evidence. The arithmetic must stay identical to
        # ``_fold`` (a property test compares incremental and rebuilt tallies bit for bit).
        tally = _Tally(at)
        miss, count, strongest, ids, links = tally.miss, tally.count, tally.strongest, tally.ids, tally.links
        conclusive = tally.conclusive
        strength_of, rated = self.strength, self.rated
        window_s, tau_s = self._window_s, self._tau_s
        link_kinds = self.config.link_kinds
        family = self.family
        exp = math.exp
        families: dict[tuple[str, str], str] = {}
        for item in self._evidence.get(player, ()):
            if item.dismissed:
                continue
            age_s = max(0.0, at - item.at)
            if age_s > window_s:
                continue
            kind = item.kind
            if kind in link_kinds:
                links.append((item.at, item.id))
                continue
            severity = item.severity
            if not severity > 0.0:
                continue
            strength = strength_of(item.detector, kind, severity)
            key = (item.detector, kind)
            fam = families.get(key)
            if fam is None:
                fam = families[key] = family(item.detector, kind)
            if rated(item.detector, kind):
                conclusive.append((item.at, fam, (item.detector, kind)))
            weight = strength * exp(-age_s / tau_s)
            miss[fam] = miss.get(fam, 1.0) * (1.0 - weight)
            count[fam] = count.get(fam, 0) + 1
            best = strongest.get(fam)
            if best is None or weight > best[0]:
                strongest[fam] = (weight, item.reason or f"{item.detector}:{kind}")
            ids.append(item.id)
        return tally

    def _assess(
        self, player: str, now: float
    ) -> tuple[_Tally, list[tuple[str, float]], float, float, float, SanctionLevel, list[int], list[tuple[str, float]]]:
        cfg = self.config
        tally = self._tally(player, now)
        contributions = sorted(
            ((fam, cfg.detector_cap * (1.0 - m)) for fam, m in tally.miss.items()), key=lambda fc: (-fc[1], fc[0])
        )
        miss_all = 1.0
        for _, c in contributions:
            miss_all *= 1.0 - c
        raw = 1.0 - miss_all
        created = self._created.get(player)
        age_days = None if created is None else max(0.0, now - created) / DAY_S
        factor = cfg.account_factor(age_days)
        score = min(1.0, raw * factor)
        recommended = cfg.level_for(score)
        # Link problems are judged against the exact time: their window is shorter than a step.
        link_ids = [i for at, i in tally.links if now - at <= cfg.link_kick_window_s]
        if link_ids and recommended < SanctionLevel.KICK:
            recommended = SanctionLevel.KICK
        # Only where it could decide the level: above KICK the score speaks for itself.
        conclusive = self._conclusive(player, tally, now) if cfg.level_for(score) < SanctionLevel.KICK else []
        if conclusive and recommended < SanctionLevel.KICK:
            recommended = SanctionLevel.KICK
        return tally, contributions, raw, factor, score, recommended, link_ids, conclusive

    def _exposure_s(self, player: str, now: float) -> float:
        """The play time (s) the conclusive test weighs findings against: its window, or the time
        ``player`` has been observed when shorter (no less than ``conclusive_min_window_s``)."""
        cfg = self.config
        since = self._observed_from.get(player)
        if since is None:
            return cfg.conclusive_window_s
        return min(cfg.conclusive_window_s, max(now - since, cfg.conclusive_min_window_s))

    def _conclusive(self, player: str, tally: _Tally, now: float) -> list[tuple[str, float]]:
        """Families whose findings of the last ``conclusive_window_s`` seconds before ``now`` are
        conclusive (module doc): ``(family, posterior)`` pairs, strongest first."""
        cfg = self.config
        counts: dict[str, dict[tuple[str, str], int]] = {}
        for at, fam, key in tally.conclusive:
            if 0.0 <= now - at <= cfg.conclusive_window_s:
                kinds = counts.setdefault(fam, {})
                kinds[key] = kinds.get(key, 0) + 1
        if not counts:
            return []
        window_h = self._exposure_s(player, now) / 3600.0
        prior_log_odds = math.log(cfg.conclusive_prior / (1.0 - cfg.conclusive_prior))
        out = []
        for fam, kinds in counts.items():
            llr = 0.0
            for (detector, kind), n in kinds.items():
                honest, cheats = self._rates[(detector, kind)]
                llr += count_log_ratio(n, honest, cheats, window_h, f"{detector}.{kind}" in cfg.repeat_kinds)
            log_odds = prior_log_odds + llr
            posterior = 1.0 / (1.0 + math.exp(-log_odds)) if log_odds > -700.0 else 0.0
            if posterior >= cfg.conclusive_weight:
                out.append((fam, posterior))
        return sorted(out, key=lambda fc: (-fc[1], fc[0]))

    def recommended(self, player: str, now: float) -> SanctionLevel:
        """The level ``evaluate`` would recommend, without building the decision (cheaper)."""
        return self._assess(player, now)[5]

    def evaluate(self, player: str, now: float) -> SanctionDecision:
        """Weigh ``player``'s evidence at ``now`` (epoch s) and decide."""
        cfg = self.config
        tally, contributions, raw, factor, score, recommended, link_ids, conclusive = self._assess(player, now)
        link_problem = bool(link_ids)
        applied = min(recommended, cfg.auto_apply_max)
        count, strongest = tally.count, tally.strongest
        reasons = [
            f"{fam}={c:.3f} ({count[fam]} detection{'s' if count[fam] != 1 else ''}; strongest: {strongest[fam][1]})"
            for fam, c in contributions[: cfg.top_reasons]
        ]
        if link_problem:
            reasons.insert(0, "link: recent desync/unplayable connection")
        for fam, combined in conclusive:
            reasons.insert(0, f"conclusive: {fam} findings of the last {self._exposure_s(player, now):g} s give a "
                              f"posterior of {combined:.3f} >= {cfg.conclusive_weight:g} (lab-measured rates)")
        return SanctionDecision(
            player=player,
            at=now,
            recommended=recommended,
            applied=applied,
            score=score,
            raw_score=raw,
            account_factor=factor,
            needs_review=recommended >= SanctionLevel.KICK,
            reasons=tuple(reasons),
            families=tuple(contributions),
            # Listing thousands of ids costs more than the rest of the evaluation; only a review
            # item (which dismisses exactly these) needs them.
            evidence_ids=tuple(tally.ids) + tuple(link_ids) if recommended >= SanctionLevel.KICK else (),
            link_problem=link_problem,
            expires_at=now + cfg.temp_ban_duration_s if recommended == SanctionLevel.TEMP_BAN_REVIEW else None,
        )
