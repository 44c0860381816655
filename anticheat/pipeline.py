"""The detection pipeline: dispatch events to detectors, then route what they find.

Inline, the server feeds the events of a tick through ``feed_many``; offline, a replay goes
through it too (``feed`` is the same for one event), one event at a time, so a replay yields
exactly the detections of the live run (DESIGN principle 3), given the same detectors, flags and
events.

Order for one event:

1. A ``ConnectionSample`` is recorded in the ``SkipBook`` before any detector sees it, so every
   detector judges with the same, current skip conditions.
2. The event goes to the matching hook (``on_shot``, ``on_kill``...) of every detector enabled for
   the event's player (the shooter, the killer, the sampled player). The routes are built once:
   a dict from event type to the bound hooks of the detectors that override that hook, so the hot
   path is a dict lookup and a loop over bound methods (no per-event allocation unless a detector
   finds something).
3. Each detection gets an evidence id (from blocks the store reserves, unique across the servers
   sharing its database; counted in memory without a store) and goes to the subscribers, the
   sanction policy (under the player's stable key) and the store; then the policy re-evaluates
   each player concerned and the decision goes to the decision subscribers (and to the store when
   the recommended level changed), throttled per player by ``decision_interval_s`` unless the
   level changed.

Players: detections carry the reusable slot; evidence is kept per stable player key, bound with
``bind(slot, key)`` when a player connects. An unbound slot is keyed ``"slot:<n>"`` (fine for
offline analysis; a live server binds every player).

Bad input never crashes the server (DESIGN principle 6): an event of an unknown type is counted
and ignored; a detector or subscriber that raises is logged (once per detector), counted and
skipped for that event, unless ``isolate_errors`` is off (tests).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from anticheat.detector import Detector
from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    KillEvent,
    MovementEvidence,
    SessionEvent,
    ShotResult,
    SpawnEvent,
)
from anticheat.judgement.ids import IdCounter, IdSource
from anticheat.judgement.sanctions import Evidence, SanctionDecision, SanctionLevel, SanctionPolicy
from anticheat.skip import SkipBook
from anticheat.judgement.store import DetectionStore

__all__ = ["ALL_DETECTORS", "DETECTION_ID_BLOCK", "DetectionPipeline", "PipelineStats", "slot_key"]

log = logging.getLogger(__name__)

ALL_DETECTORS = "*"
"""Detector name meaning every detector, for ``set_enabled``."""

DETECTION_ID_BLOCK = 256
"""Evidence ids reserved from the store at a time: the inline path pays one database round trip
per this many detections."""

DetectionCallback = Callable[[Detection], None]
DecisionCallback = Callable[[SanctionDecision], None]

# Event type -> (hook name, attribute holding the judged player's slot).
_HOOKS: dict[type, tuple[str, str]] = {
    ShotResult: ("on_shot", "shooter"),
    KillEvent: ("on_kill", "killer"),
    AimSample: ("on_aim", "player"),
    MovementEvidence: ("on_movement", "player"),
    FireEvidence: ("on_fire", "player"),
    ConnectionSample: ("on_connection", "player"),
    SpawnEvent: ("on_spawn", "player"),
}


def slot_key(slot: int) -> str:
    """The player key of a slot nobody bound (offline analysis)."""
    return f"slot:{slot}"


@dataclass(frozen=True, slots=True)
class _Route:
    hooks: tuple[tuple[str, Callable[[Any, SkipBook], Sequence[Detection]]], ...]
    player_of: Callable[[Any], int]
    records_connection: bool


@dataclass(frozen=True, slots=True)
class PipelineStats:
    """A snapshot of the pipeline's counters.

    Attributes:
        events: events fed, by event type name. unknown_events: events of no known type.
        detections: detections by ``(detector, kind)``. errors: exceptions by detector (or
            ``"subscriber"``). time_ns: time spent in each detector's hooks (ns), empty unless
            the pipeline was built with ``time_detectors=True``. skips: events not judged, by
            ``(detector, reason)`` (``Detector.skip_counts``).
    """

    events: dict[str, int]
    unknown_events: int
    detections: dict[tuple[str, str], int]
    errors: dict[str, int]
    time_ns: dict[str, int]
    skips: dict[tuple[str, str], int] = field(default_factory=dict)


class DetectionPipeline:
    """Feeds events to detectors and routes their detections.

    Args:
        detectors: the detectors, in dispatch order; names must be unique.
        skip: the shared skip book (the pipeline records connection samples in it).
        policy: the sanction policy (None: detections are only reported and stored).
        store: persistence (None: nothing is persisted).
        clock: wall-clock time in seconds since the epoch (injected; a replay can pass a clock
            derived from its events to reproduce the live sanction timeline).
        time_detectors: measure time spent per detector (costs two clock reads per hook call).
        isolate_errors: catch and count exceptions from detectors and subscribers.
        decision_interval_s: after a detection the policy's recommended level is always checked
            (cheap); the full decision is built and sent to decision subscribers when that level
            changed, or when this long (s, clock time) has passed since the player's last one.
            A suspect flooding detections thus costs one full decision per interval, while an
            escalation is never delayed. 0: a full decision after every event with detections.
    """

    def __init__(
        self,
        detectors: Sequence[Detector],
        skip: SkipBook,
        policy: SanctionPolicy | None = None,
        store: DetectionStore | None = None,
        clock: Callable[[], float] = time.time,
        *,
        time_detectors: bool = False,
        isolate_errors: bool = True,
        decision_interval_s: float = 1.0,
    ) -> None:
        names = [d.name for d in detectors]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"detector names must be unique, duplicated: {duplicates}")
        if ALL_DETECTORS in names:
            raise ValueError(f"{ALL_DETECTORS!r} is reserved and cannot be a detector name")
        self.detectors: tuple[Detector, ...] = tuple(detectors)
        self.skip = skip
        self.policy = policy
        self.store = store
        self.clock = clock
        self._isolate = isolate_errors
        self._time_ns: dict[str, int] = {}
        self._routes: dict[type, _Route] = {}
        for event_type, (hook_name, player_attr) in _HOOKS.items():
            base = getattr(Detector, hook_name)
            hooks = tuple(
                (d.name, self._timed(d.name, getattr(d, hook_name)) if time_detectors else getattr(d, hook_name))
                for d in self.detectors
                # A hook left as the base class's no-op is never called: most detectors use two or
                # three hooks, and skipping the rest is most of the dispatch cost saved.
                if getattr(type(d), hook_name, base) is not base
            )
            self._routes[event_type] = _Route(hooks, attrgetter(player_attr), event_type is ConnectionSample)
        self._disabled: dict[int, frozenset[str]] = {}
        self._keys: dict[int, str] = {}
        self._subscribers: list[DetectionCallback] = []
        self._decision_subscribers: list[DecisionCallback] = []
        self._session_subscribers: list[Callable[[SessionEvent], None]] = []
        self._last_level: dict[str, SanctionLevel] = {}
        self._last_decided: dict[str, float] = {}
        self._decision_interval_s = decision_interval_s
        # Evidence ids: with a store, from blocks it reserves (unique across the servers sharing
        # its database; one round trip per block); without one, counted in memory.
        self._ids: IdSource = store.ids("detection", DETECTION_ID_BLOCK) if store is not None else IdCounter()
        self._event_counts: dict[type, int] = dict.fromkeys([*self._routes, SessionEvent], 0)
        self._unknown = 0
        self._detection_counts: dict[tuple[str, str], int] = {}
        self._errors: dict[str, int] = {}

    # --- the hot path ---------------------------------------------------------------------

    def feed(self, event: object) -> list[Detection]:
        """Dispatch one event; returns the detections it caused (usually none)."""
        return self.feed_many((event,))

    def feed_many(self, events: Iterable[object]) -> list[Detection]:
        """Dispatch events in order, each as ``feed`` would (its detections routed before the next
        event goes out); returns every detection, in order. The server feeds a tick's events at
        once, a replay its whole stream: the per-event lookups are made once."""
        out: list[Detection] = []
        routes = self._routes
        counts = self._event_counts
        skip = self.skip
        # The same dict throughout: a subscriber may (un)flag players between two events.
        flags = self._disabled
        for event in events:
            event_type = type(event)
            route = routes.get(event_type)
            if route is None:
                self._unrouted(event, event_type)
                continue
            counts[event_type] += 1
            if route.records_connection:
                skip.record(event)  # type: ignore[arg-type]
            disabled = flags.get(route.player_of(event)) if flags else None
            found = None
            for name, hook in route.hooks:
                if disabled is not None and name in disabled:
                    continue
                try:
                    result = hook(event, skip)
                except Exception:
                    if not self._isolate:
                        raise
                    self._count_error(name)
                    continue
                if result:
                    if found is None:
                        found = list(result)
                    else:
                        found.extend(result)
            if found is not None:
                self._route_detections(found)
                out.extend(found)
        return out

    def _unrouted(self, event: object, event_type: type) -> None:
        """An event no detector hook takes: a slot changing hands, or an unknown type."""
        if event_type is SessionEvent:
            self._on_session(event)  # type: ignore[arg-type]
            return
        self._unknown += 1
        if self._unknown == 1:
            log.warning("pipeline: ignoring event of unknown type %s", event_type.__name__)

    def _timed(self, name: str, hook: Callable[[Any, SkipBook], Any]) -> Callable[[Any, SkipBook], Any]:
        """``hook`` with its time (ns, raising or not) added to detector ``name``'s total."""
        clock = time.perf_counter_ns
        spent = self._time_ns

        def timed(event: Any, skip: SkipBook) -> Any:
            start = clock()
            try:
                return hook(event, skip)
            finally:
                spent[name] = spent.get(name, 0) + clock() - start

        return timed

    def _count_error(self, where: str) -> None:
        count = self._errors.get(where, 0) + 1
        self._errors[where] = count
        if count == 1:
            log.exception("pipeline: %s raised; counted and skipped from now on without logging", where)

    # --- routing detections ---------------------------------------------------------------

    def _route_detections(self, found: list[Detection]) -> None:
        now = self.clock()
        policy = self.policy
        store = self.store
        counts = self._detection_counts
        take_id = self._ids.take
        touched: list[str] = []
        for detection in found:
            key = (detection.detector, detection.kind)
            counts[key] = counts.get(key, 0) + 1
            evidence_id = take_id()
            player_key = self._keys.get(detection.player) or slot_key(detection.player)
            for callback in self._subscribers:
                self._call(callback, detection)
            if policy is not None:
                policy.add(Evidence.from_detection(evidence_id, player_key, detection, now))
                if player_key not in touched:
                    touched.append(player_key)
            if store is not None:
                store.add_detection(evidence_id, player_key, detection, now)
        if policy is None:
            return
        for player_key in touched:
            last = self._last_decided.get(player_key)
            if (
                last is None
                or now - last >= self._decision_interval_s
                or policy.recommended(player_key, now) != self._last_level.get(player_key, SanctionLevel.LOG)
            ):
                self._decide(player_key, now)

    def _decide(self, player_key: str, now: float) -> SanctionDecision:
        assert self.policy is not None
        decision = self.policy.evaluate(player_key, now)
        self._last_decided[player_key] = now
        if self._last_level.get(player_key, SanctionLevel.LOG) != decision.recommended:
            self._last_level[player_key] = decision.recommended
            if self.store is not None:
                self.store.add_decision(decision)
        for callback in self._decision_subscribers:
            self._call(callback, decision)
        return decision

    def _call(self, callback: Callable[[Any], None], arg: object) -> None:
        try:
            callback(arg)
        except Exception:
            if not self._isolate:
                raise
            self._count_error("subscriber")

    # --- subscriptions --------------------------------------------------------------------

    def subscribe(self, callback: DetectionCallback) -> Callable[[], None]:
        """Call ``callback(detection)`` for every detection; returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._remove(self._subscribers, callback)

    def subscribe_decisions(self, callback: DecisionCallback) -> Callable[[], None]:
        """Call ``callback(decision)`` after every evaluation caused by a detection; returns unsubscribe."""
        self._decision_subscribers.append(callback)
        return lambda: self._remove(self._decision_subscribers, callback)

    def subscribe_sessions(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` when a slot changes hands, while the slot belongs to the player
        concerned: after a connect reset and bound it (the place to load lifetime profiles), before
        a disconnect resets it (the place to save them). Returns a function that unsubscribes."""
        self._session_subscribers.append(callback)
        return lambda: self._remove(self._session_subscribers, callback)

    @staticmethod
    def _remove(callbacks: list[Any], callback: object) -> None:
        if callback in callbacks:
            callbacks.remove(callback)

    # --- players and flags ----------------------------------------------------------------

    def flush(self) -> list[Detection]:
        """End of the stream: every detector delivers what it still holds, through the same
        path as detections found by ``feed`` (subscribers, policy, store)."""
        found: list[Detection] = []
        for detector in self.detectors:
            found.extend(detector.flush())
        if found:
            self._route_detections(found)
        return found

    def _on_session(self, event: SessionEvent) -> None:
        """A slot changed hands: what happened live happens again in a replay, from the stream."""
        self._event_counts[SessionEvent] += 1
        if event.kind == "connect":
            self.reset_player(event.player)
            self.bind(event.player, event.name)
            if self.policy is not None:
                self.policy.observe(self.key_of(event.player), self.clock())
            self._notify_session(event)
        elif event.kind == "disconnect":
            self._notify_session(event)
            self.unbind(event.player)

    def _notify_session(self, event: SessionEvent) -> None:
        for callback in self._session_subscribers:
            self._call(callback, event)

    def bind(self, slot: int, player_key: str) -> None:
        """``slot`` now belongs to the player with the stable ``player_key``."""
        self._keys[slot] = player_key

    def unbind(self, slot: int) -> None:
        """The player in ``slot`` left: reset detectors and flags, forget the slot's key and link."""
        self.reset_player(slot)
        self._keys.pop(slot, None)
        self.skip.forget(slot)

    def key_of(self, slot: int) -> str:
        """The stable key of the player in ``slot`` (``"slot:<n>"`` when unbound)."""
        return self._keys.get(slot) or slot_key(slot)

    def slot_of(self, player_key: str) -> int | None:
        """The slot ``player_key`` is bound to, if connected."""
        for slot, key in self._keys.items():
            if key == player_key:
                return slot
        return None

    def set_enabled(self, player: int, detector: str, enabled: bool) -> None:
        """Enable or disable ``detector`` (a name, or ``"*"`` for all) for the player in slot ``player``.

        A disabled detector receives none of that player's events (as shooter, killer or subject),
        so its state for the player stays as it was.
        """
        names = {d.name for d in self.detectors}
        if detector != ALL_DETECTORS and detector not in names:
            raise ValueError(f"unknown detector {detector!r}; known: {sorted(names)}")
        current = set(self._disabled.get(player, ()))
        targets = names if detector == ALL_DETECTORS else {detector}
        if enabled:
            current -= targets
        else:
            current |= targets
        if current:
            self._disabled[player] = frozenset(current)
        else:
            self._disabled.pop(player, None)

    def is_enabled(self, player: int, detector: str) -> bool:
        """Whether ``detector`` judges the player in slot ``player``."""
        return detector not in self._disabled.get(player, ())

    def reset_player(self, player: int) -> None:
        """Reset every detector's state for slot ``player`` and clear its flags."""
        for detector in self.detectors:
            detector.reset_player(player)
        self._disabled.pop(player, None)

    def scores(self, player: int) -> dict[str, float]:
        """Every detector's scores for slot ``player`` (``Detector.scores``), keyed
        ``"<detector>:<statistic>"``. A detector that raises is left out and counted in
        ``stats().errors`` like an error in its hooks (raised when ``isolate_errors`` is off).
        Read-only: nothing is fed, routed or decided."""
        out: dict[str, float] = {}
        for detector in self.detectors:
            name = detector.name
            try:
                found = detector.scores(player)
            except Exception:
                if not self._isolate:
                    raise
                self._count_error(name)
                continue
            for stat, value in found.items():
                out[f"{name}:{stat}"] = value
        return out

    def detector(self, name: str) -> Detector:
        """The detector called ``name``."""
        for detector in self.detectors:
            if detector.name == name:
                return detector
        raise KeyError(name)

    # --- evaluation and counters ----------------------------------------------------------

    def evaluate(self, player_key: str) -> SanctionDecision | None:
        """Re-evaluate ``player_key`` now (e.g. periodically, as evidence ages); None without policy."""
        if self.policy is None:
            return None
        return self._decide(player_key, self.clock())

    def stats(self) -> PipelineStats:
        """A snapshot of the counters."""
        return PipelineStats(
            events={t.__name__: n for t, n in self._event_counts.items() if n},
            unknown_events=self._unknown,
            detections=dict(self._detection_counts),
            errors=dict(self._errors),
            time_ns=dict(self._time_ns),
            skips={(d.name, reason): n for d in self.detectors for reason, n in dict(d.skip_counts()).items() if n},
        )
