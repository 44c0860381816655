"""Movement detections from physics' MovementEvidence (REFERENCES sections 4 and 6).

Physics already corrects every bad move (setback), so cheating buys nothing; this detector only
decides when the *pattern* of corrections means a cheat rather than a bad link. A kind is
detected when ``count`` pieces of its evidence fall within ``window_s``: speed 3 in 10 s,
teleport 1, wall clip 2 in 10 s, timer 3 in 10 s.

Protecting honest players (Grim's users' top complaint is false positives after lag spikes and
respawns):
- evidence is dropped while the SkipBook says the player's link is bad (ping, loss, paused);
- it is also dropped for ``lag_grace_s`` after the last bad connection sample, because the burst
  of queued commands that follows a spike looks exactly like a speed or timer hack;
- a SpawnEvent clears the player's windows and starts ``spawn_grace_s`` of ignored evidence, since
  the respawn relocation is a legitimate teleport.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector
from anticheat.events import ConnectionSample, Detection, MovementEvidence, MovementKind, SpawnEvent
from anticheat.skip import SkipBook

log = logging.getLogger(__name__)

__all__ = ["KindRule", "MovementConfig", "MovementDetector"]


@dataclass(frozen=True, slots=True)
class KindRule:
    """``count`` pieces of evidence within ``window_s`` seconds make a detection of ``severity``."""

    count: int
    window_s: float
    severity: float

    def __post_init__(self) -> None:
        if self.count < 1 or self.window_s < 0.0:
            raise ValueError("count must be >= 1 and window_s >= 0")


@dataclass(frozen=True, slots=True)
class MovementConfig:
    """Movement-detection tolerances.

    Attributes:
        speed, teleport, wall_clip, timer: the rule of each MovementKind (defaults in the module
            doc; severities 0.5, 0.7, 0.6, 0.6: a teleport is the hardest to produce honestly).
        lag_grace_s: evidence is ignored this long after a connection sample with a skip reason
            (1 s: the queued-command burst after a spike).
        spawn_grace_s: evidence is ignored this long after a spawn (1 s).
        cooldown_s: at most one Detection per player and kind per this many seconds.
    """

    speed: KindRule = field(default_factory=lambda: KindRule(3, 10.0, 0.5))
    teleport: KindRule = field(default_factory=lambda: KindRule(1, 10.0, 0.7))
    wall_clip: KindRule = field(default_factory=lambda: KindRule(2, 10.0, 0.6))
    timer: KindRule = field(default_factory=lambda: KindRule(3, 10.0, 0.6))
    lag_grace_s: float = 1.0
    spawn_grace_s: float = 1.0
    cooldown_s: float = 10.0

    def rule(self, kind: MovementKind) -> KindRule:
        """The rule for ``kind``."""
        return {
            MovementKind.SPEED: self.speed,
            MovementKind.TELEPORT: self.teleport,
            MovementKind.WALL_CLIP: self.wall_clip,
            MovementKind.TIMER: self.timer,
        }[kind]


class _PlayerMovement:
    __slots__ = ("windows", "peaks", "quiet_until_s", "quiet_reason", "last_emit")

    def __init__(self) -> None:
        self.windows: dict[MovementKind, deque[float]] = {}
        # The most pieces of each kind one window ever held (windows slide and are cleared).
        self.peaks: dict[MovementKind, int] = {}
        self.quiet_until_s = -math.inf
        self.quiet_reason = ""
        self.last_emit: dict[MovementKind, float] = {}

    def quiet(self, until_s: float, reason: str) -> None:
        if until_s >= self.quiet_until_s:
            self.quiet_until_s = until_s
            self.quiet_reason = reason


class MovementDetector(Detector):
    """Turns repeated movement evidence into ``movement`` Detections (kind = evidence kind)."""

    name = "movement"

    def __init__(self, config: MovementConfig | None = None) -> None:
        self.config = config or MovementConfig()
        self._players: dict[int, _PlayerMovement] = {}
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Evidence not judged, per reason (skip reasons plus ``lag_grace`` / ``spawn_grace``)."""
        return dict(self.skipped)

    def _state(self, player: int) -> _PlayerMovement:
        st = self._players.get(player)
        if st is None:
            st = _PlayerMovement()
            self._players[player] = st
        return st

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """Per MovementKind (keyed by its value: ``speed``, ``teleport``, ``wall_clip``,
        ``timer``), the most pieces of judged evidence one ``window_s`` ever held, against the
        rule's ``count`` (unitless). Windows slide and are cleared by a detection, a spawn and a
        lag spike, so each value is the maximum since the player's state began; evidence
        dropped in a grace period never counts."""
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        rule = self.config.rule
        peaks = st.peaks
        return {kind.value: peaks.get(kind, 0) / rule(kind).count for kind in MovementKind}

    def on_connection(self, sample: ConnectionSample, skip: SkipBook) -> Sequence[Detection]:
        if skip.player_reason(sample.player) is not None:
            st = self._state(sample.player)
            st.quiet(sample.time_s + self.config.lag_grace_s, "lag_grace")
            # Evidence gathered just before a spike may already be its first symptoms.
            st.windows.clear()
        return NO_DETECTIONS

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        st = self._state(spawn.player)
        st.windows.clear()
        st.quiet(spawn.time_s + self.config.spawn_grace_s, "spawn_grace")
        return NO_DETECTIONS

    def on_movement(self, evidence: MovementEvidence, skip: SkipBook) -> Sequence[Detection]:
        reason = skip.player_reason(evidence.player)
        st = self._state(evidence.player)
        if reason is not None:
            self.skipped[reason.value] += 1
            st.quiet(evidence.time_s + self.config.lag_grace_s, "lag_grace")
            return NO_DETECTIONS
        if evidence.time_s < st.quiet_until_s:
            self.skipped[st.quiet_reason] += 1
            return NO_DETECTIONS
        rule = self.config.rule(evidence.kind)
        window = st.windows.get(evidence.kind)
        if window is None:
            window = deque(maxlen=rule.count)
            st.windows[evidence.kind] = window
        now = evidence.time_s
        window.append(now)
        complete = len(window) == rule.count and now - window[0] <= rule.window_s
        # Evidence is rare: counting the ring for the peak costs nothing that matters.
        held = rule.count if complete else sum(1 for t in window if now - t <= rule.window_s)
        if held > st.peaks.get(evidence.kind, 0):
            st.peaks[evidence.kind] = held
        if not complete:
            return NO_DETECTIONS
        if evidence.time_s - st.last_emit.get(evidence.kind, -math.inf) < self.config.cooldown_s:
            return NO_DETECTIONS
        st.last_emit[evidence.kind] = evidence.time_s
        window.clear()
        kind = evidence.kind.value
        log.info("movement: player %d %s x%d", evidence.player, kind, rule.count)
        return (Detection(
            player=evidence.player, tick=evidence.tick, time_s=evidence.time_s, detector=self.name, kind=kind,
            value=evidence.value, severity=rule.severity,
            reason=f"Movement-{kind}-{evidence.value:.2f}/{evidence.limit:.2f}x{rule.count}",
            evidence={"count": rule.count, "window_s": rule.window_s, "value": evidence.value,
                      "limit": evidence.limit, "setback": int(evidence.setback)},
        ),)
