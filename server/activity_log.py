"""The server's activity at INFO: connects, disconnects, detections and sanction changes.

One log record per event on the ``server.activity_log`` logger, its figures also passed as
structured fields (``extra``: ``event``, ``player``, ``slot``, ``check`` = ``detector:kind``...)
so a JSON log line carries them as keys. Detections are rare in honest play, so each one gets a
line; a flood (a blatant cheater can trip a check every tick) is cut to ``max_per_window``
lines per player per ``window_s`` of server time, and the rest is summed up in one line when the
player's next window opens, when the player leaves, or at :meth:`close`.

Sanctions: the pipeline sends a decision after detections (at most once a second per player
unless the level changes); a line is logged only when a player's recommended level changes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from anticheat.events import Detection
from anticheat.judgement.sanctions import SanctionDecision, SanctionLevel
from anticheat.pipeline import DetectionPipeline
from server.events import EventBus, PlayerConnected, PlayerDisconnected

__all__ = ["ActivityLog"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Window:
    """One player's detection lines in the current window of server time."""

    start_s: float
    logged: int = 0
    suppressed: Counter[str] = field(default_factory=Counter)


class ActivityLog:
    """Logs a server's connects, disconnects, detections and sanction changes at INFO.

    Args:
        bus: the core's event bus (PlayerConnected, PlayerDisconnected, Detection).
        pipeline: the detection pipeline (sanction decisions); None: no sanction lines.
        max_per_window: detection lines per player per window; window_s: its length (s of
            server time, the detections' own clock).
        logger: where the records go (``server.activity_log`` by default).
    """

    def __init__(self, bus: EventBus, pipeline: DetectionPipeline | None = None, *,
                 max_per_window: int = 5, window_s: float = 1.0, logger: logging.Logger = log) -> None:
        if max_per_window < 1 or not window_s > 0:
            raise ValueError("max_per_window must be >= 1 and window_s > 0")
        self.log = logger
        self.max_per_window = max_per_window
        self.window_s = window_s
        self._names: dict[int, str] = {}
        self._former: dict[int, str] = {}
        self._windows: dict[str, _Window] = {}
        self._levels: dict[str, SanctionLevel] = {}
        self._unsubscribe: list[Callable[[], None]] = [
            bus.subscribe(PlayerConnected, self._connected),
            bus.subscribe(PlayerDisconnected, self._disconnected),
            bus.subscribe(Detection, self._detection),
        ]
        if pipeline is not None:
            self._unsubscribe.append(pipeline.subscribe_decisions(self._decision))

    def close(self) -> None:
        """Sum up what the rate limit held back, and stop listening."""
        for name in list(self._windows):
            self._summarise(name)
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _name(self, slot: int) -> str:
        return self._names.get(slot) or self._former.get(slot) or f"slot:{slot}"

    def _connected(self, e: PlayerConnected) -> None:
        self._names[e.slot] = e.name
        self._former.pop(e.slot, None)
        self.log.info("connect: %s (slot %d) from %s", e.name, e.slot, e.address,
                      extra={"event": "connect", "player": e.name, "slot": e.slot, "address": e.address,
                             "server_time_s": e.time_s})

    def _disconnected(self, e: PlayerDisconnected) -> None:
        self._summarise(e.name)
        self._names.pop(e.slot, None)
        # Detections delivered after a player left (the detectors' flush) still name the player.
        self._former[e.slot] = e.name
        self.log.info("disconnect: %s (slot %d): %s", e.name, e.slot, e.reason,
                      extra={"event": "disconnect", "player": e.name, "slot": e.slot, "reason": e.reason,
                             "server_time_s": e.time_s})

    def _detection(self, d: Detection) -> None:
        if not self.log.isEnabledFor(logging.INFO):
            return
        name = self._name(d.player)
        check = f"{d.detector}:{d.kind}"
        window = self._windows.get(name)
        if window is None or d.time_s - window.start_s >= self.window_s:
            if window is not None:
                self._summarise(name)
            window = self._windows[name] = _Window(d.time_s)
        if window.logged >= self.max_per_window:
            window.suppressed[check] += 1
            return
        window.logged += 1
        self.log.info("detection: %s %s value=%.4g: %s", name, check, d.value, d.reason,
                      extra={"event": "detection", "player": name, "slot": d.player, "check": check,
                             "detector": d.detector, "kind": d.kind, "value": d.value, "severity": d.severity,
                             "reason": d.reason, "server_time_s": d.time_s})

    def _summarise(self, name: str) -> None:
        window = self._windows.pop(name, None)
        if window is None or not window.suppressed:
            return
        total = sum(window.suppressed.values())
        checks = ", ".join(f"{check} x{n}" for check, n in window.suppressed.most_common())
        self.log.info("detection: %s: %d more detections not logged (over %d a %g s window): %s", name, total,
                      self.max_per_window, self.window_s, checks,
                      extra={"event": "detections_suppressed", "player": name, "count": total,
                             "checks": dict(window.suppressed), "server_time_s": window.start_s})

    def _decision(self, decision: SanctionDecision) -> None:
        previous = self._levels.get(decision.player, SanctionLevel.LOG)
        level = decision.recommended
        if level == previous:
            return
        self._levels[decision.player] = level
        self.log.info("sanction: %s %s -> %s (score %.3f, applied %s%s): %s", decision.player,
                      previous.name.lower(), level.name.lower(), decision.score, decision.applied.name.lower(),
                      ", needs review" if decision.needs_review else "", "; ".join(decision.reasons) or "-",
                      extra={"event": "sanction", "player": decision.player, "level": level.name.lower(),
                             "previous": previous.name.lower(), "applied": decision.applied.name.lower(),
                             "score": decision.score, "needs_review": decision.needs_review,
                             "reasons": list(decision.reasons)})
