"""What the admin page reads and does, as plain JSON-able data, over a live core and operator.

``AdminView`` is the only part of the admin that touches the game: the HTTP layer calls it from
``async`` handlers, so every call runs on the game server's event loop between two ticks and
never races a tick. Reading is cheap (the connected players, a bounded queue of recent detections
per player, the policy's evaluation); writing goes through the core's and the operator's own
methods (``core.kick`` is applied at the next tick).

The detections themselves (with their evidence figures) are seen only by subscribers, so the
view subscribes once and keeps the newest few per player; inside the tick the subscriber only
appends to bounded deques. The policy's ``Evidence`` (id, dismissed) is joined to them by
(detector, kind, reason, time recorded): the pipeline records a detection's evidence at the
clock reading that the subscriber sees in the same call.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anticheat.detectors.bustaim import BustAimFlag
from anticheat.events import Detection
from anticheat.judgement.operator import Operator
from anticheat.judgement.review import Appeal, AppealStatus, ReviewError, ReviewItem, ReviewStatus
from anticheat.judgement.sanctions import Evidence, SanctionDecision, SanctionLevel
from server.admin.explain import explain
from server.core import ServerCore

__all__ = ["AdminError", "AdminView", "Conflict", "NotFound", "ViewConfig"]


@dataclass(frozen=True, slots=True)
class ViewConfig:
    """Bounds of what the view keeps and lists.

    Attributes:
        detections_per_player: newest detections kept per player (with their evidence).
        recent_detections: newest detections kept across players (the page's feed).
        players_kept: players (keys) whose detections are kept, least recently detected dropped.
        decided_reviews: decided review items listed after the pending ones.
        evidence_per_item: evidence pieces listed per review item (the strongest families' newest).
    """

    detections_per_player: int = 64
    recent_detections: int = 200
    players_kept: int = 512
    decided_reviews: int = 20
    evidence_per_item: int = 40


class AdminError(Exception):
    """An action that cannot be done; ``status`` is the HTTP status it maps to."""

    status = 400


class NotFound(AdminError):
    """No such player, review item, appeal or detector."""

    status = 404


class Conflict(AdminError):
    """The item is not in a state that allows the action (already decided...)."""

    status = 409


@dataclass(frozen=True, slots=True)
class _Seen:
    """A detection as the subscriber saw it: the player's key then and the clock reading."""

    key: str
    detection: Detection
    at: float


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats as None (JSON has no NaN) and numpy scalars as Python's."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    item = getattr(value, "item", None)
    if item is not None:
        return _finite(item())
    return str(value)


def _round(value: float, digits: int = 4) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


def _level(level: SanctionLevel | None) -> str | None:
    return None if level is None else level.name.lower()


def _parse_level(name: str | None) -> SanctionLevel | None:
    if name is None or name == "":
        return None
    try:
        return SanctionLevel[name.upper()]
    except KeyError:
        raise AdminError(f"unknown level {name!r}; one of {[lv.name.lower() for lv in SanctionLevel]}") from None


def _review_error(exc: ReviewError) -> AdminError:
    text = str(exc)
    return NotFound(text) if text.startswith("no ") else Conflict(text)


class AdminView:
    """Live state and actions for the admin API.

    Args:
        core: the running server core (its pipeline must be ``operator.pipeline``).
        operator: the operator facade (review queue, appeals, flags, policy).
        config: bounds of what is kept.
    """

    def __init__(self, core: ServerCore, operator: Operator, config: ViewConfig | None = None) -> None:
        if core.pipeline is not operator.pipeline:
            raise ValueError("the core and the operator must share one pipeline")
        self.core = core
        self.operator = operator
        self.pipeline = operator.pipeline
        self.config = config or ViewConfig()
        self._by_player: OrderedDict[str, deque[_Seen]] = OrderedDict()
        self._recent: deque[_Seen] = deque(maxlen=self.config.recent_detections)
        self.detections_seen = 0
        self._unsubscribe: Callable[[], None] | None = operator.subscribe(self._on_detection)

    def close(self) -> None:
        """Stop watching detections."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # --- inside the tick: keep it to appends ----------------------------------------------

    def _on_detection(self, detection: Detection) -> None:
        key = self.pipeline.key_of(detection.player)
        seen = _Seen(key, detection, self.pipeline.clock())
        queue = self._by_player.get(key)
        if queue is None:
            queue = self._by_player[key] = deque(maxlen=self.config.detections_per_player)
            if len(self._by_player) > self.config.players_kept:
                self._by_player.popitem(last=False)
        else:
            self._by_player.move_to_end(key)
        queue.append(seen)
        self._recent.append(seen)
        self.detections_seen += 1

    # --- reading ---------------------------------------------------------------------------

    def now(self) -> float:
        """The pipeline's clock (s): review and evidence times are on it."""
        return self.pipeline.clock()

    def overview(self) -> dict[str, Any]:
        """The server at a glance: tick, time (s), map, players, pending reviews and appeals,
        tick time percentiles (ms) and detections seen since the admin started."""
        core = self.core
        stats = core.tick_stats
        return {
            "map": core.map.name,
            "tick": core.tick,
            "time_s": round(core.time_s, 3),
            "tick_rate_hz": core.config.tick_rate_hz,
            "players": len(core.by_slot),
            "review_pending": len(self.operator.review_queue()),
            "appeals_pending": len(self.operator.appeals(status=AppealStatus.PENDING)),
            "detections_seen": self.detections_seen,
            "tick_p50_ms": round(stats.percentile(50) * 1e3, 3),
            "tick_p99_ms": round(stats.percentile(99) * 1e3, 3),
            "tick_budget_ms": round(core.tick_dt_s * 1e3, 3),
        }

    def players(self) -> list[dict[str, Any]]:
        """The connected players: the core's live record (rtt_ms, jitter_ms, loss 0..1, shots,
        hits, kills, deaths, detections per ``detector:kind``, sanction), plus ``key``, ``score``
        (frags: kills, as a deathmatch scoreboard counts), ``accuracy`` (hits / shots) and the
        id of the player's pending review item (None)."""
        out = []
        review = self.operator.review
        for record in self.core.live_players():
            key = self.pipeline.key_of(record["slot"])
            pending = review.pending_for(key)
            shots = record["shots"]
            record.update(
                key=key,
                score=record["kills"],
                accuracy=round(record["hits"] / shots, 3) if shots else None,
                detections_total=sum(record["detections"].values()),
                review_item=None if pending is None else pending.id,
            )
            out.append({k: _finite(v) if not isinstance(v, (dict, list)) else v for k, v in record.items()})
        return out

    def player(self, slot: int) -> dict[str, Any]:
        """One connected player in full: the live record, recent detections (newest first, each
        explained, with its evidence), the sanction decision with each evidence family's
        contribution, the detector flags, BustAim's check flags and every detector's scores
        (1.0 = its alarm threshold)."""
        record = next((p for p in self.players() if p["slot"] == slot), None)
        if record is None:
            raise NotFound(f"no player in slot {slot}")
        key = record["key"]
        evidence = self._evidence_index(key)
        seen = list(self._by_player.get(key, ()))
        record["recent_detections"] = [self._detection(s, evidence) for s in reversed(seen)]
        record["sanction_detail"] = self.sanction(key)
        record["flags"] = self.flags(slot)
        scores = self.pipeline.scores(slot)
        record["scores"] = {name: _round(value, 3) for name, value in sorted(scores.items())}
        return record

    def sanction(self, key: str) -> dict[str, Any] | None:
        """The policy's decision for ``key`` now (nothing recorded): levels, score, the account
        factor and each evidence family's contribution with its counted and dismissed evidence."""
        decision = self.operator.decision(key)
        if decision is None:
            return None
        return self._decision(decision, self._policy_evidence(key))

    def detections(self, limit: int = 50, key: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` detections (of ``key`` when given), newest first."""
        source: Iterable[_Seen] = self._recent if key is None else self._by_player.get(key, ())
        chosen = list(source)[-max(0, limit):] if limit > 0 else []
        indexes: dict[str, dict[tuple[str, str, str, float], Evidence]] = {}
        out = []
        for seen in reversed(chosen):
            if seen.key not in indexes:
                indexes[seen.key] = self._evidence_index(seen.key)
            out.append(self._detection(seen, indexes[seen.key]))
        return out

    def flags(self, slot: int) -> dict[str, Any]:
        """The per-player flags of ``slot``: each detector on or off, and BustAim's check bits."""
        detectors = [{"detector": d.name, "enabled": self.pipeline.is_enabled(slot, d.name)}
                     for d in self.pipeline.detectors]
        out: dict[str, Any] = {"detectors": detectors, "bustaim": None}
        bustaim = self._bustaim()
        if bustaim is not None:
            flags = bustaim.get_flags(slot)
            out["bustaim"] = {
                "flags": int(flags),
                "checks": [{"name": f.name.lower(), "bit": int(f), "on": bool(flags & f)}
                           for f in BustAimFlag if f is not BustAimFlag.NONE],
            }
        return out

    def review(self) -> dict[str, Any]:
        """The review queue: pending items (oldest first) and the latest decided ones (newest
        first), each with its evidence explained and the player's slot if connected."""
        pending = [self._item(i) for i in self.operator.review_queue()]
        decided = [i for i in self.operator.review.items() if i.status != ReviewStatus.PENDING]
        recent = [self._item(i) for i in reversed(decided[-self.config.decided_reviews:])]
        return {"pending": pending, "decided": recent}

    def review_item(self, item_id: int) -> dict[str, Any]:
        """Review item ``item_id`` (any status)."""
        try:
            return self._item(self.operator.review.get(item_id))
        except ReviewError as exc:
            raise _review_error(exc) from None

    def appeals(self) -> list[dict[str, Any]]:
        """Every appeal, pending first, then newest first."""
        appeals = sorted(self.operator.appeals(), key=lambda a: (a.status != AppealStatus.PENDING, -a.id))
        return [self._appeal(a) for a in appeals]

    # --- acting ----------------------------------------------------------------------------

    def kick(self, slot: int, reason: str) -> dict[str, Any]:
        """Kick the player in ``slot`` (at the next tick)."""
        if not self.core.kick(slot, reason or "kicked by an admin"):
            raise NotFound(f"no player in slot {slot}")
        return {"slot": slot, "kicked": True, "reason": reason}

    def confirm(self, item_id: int, reviewer: str, note: str, level: str | None = None) -> dict[str, Any]:
        """Confirm review item ``item_id`` (at ``level``, default the recommended one)."""
        try:
            item = self.operator.confirm(item_id, reviewer, note, _parse_level(level))
        except ReviewError as exc:
            raise _review_error(exc) from None
        return self._item(item)

    def dismiss(self, item_id: int, reviewer: str, note: str) -> dict[str, Any]:
        """Dismiss review item ``item_id``: its evidence stops counting."""
        try:
            item = self.operator.dismiss(item_id, reviewer, note)
        except ReviewError as exc:
            raise _review_error(exc) from None
        return self._item(item)

    def file_appeal(self, player: str, item_id: int, text: str) -> dict[str, Any]:
        """File ``player``'s appeal against the sanction of review item ``item_id``."""
        try:
            return self._appeal(self.operator.file_appeal(player, item_id, text))
        except ReviewError as exc:
            raise _review_error(exc) from None

    def decide_appeal(self, appeal_id: int, reviewer: str, overturn: bool, note: str) -> dict[str, Any]:
        """Grant (``overturn``) or reject appeal ``appeal_id``."""
        try:
            return self._appeal(self.operator.decide_appeal(appeal_id, reviewer, overturn, note))
        except ReviewError as exc:
            raise _review_error(exc) from None

    def set_detector(self, slot: int, detector: str, enabled: bool) -> dict[str, Any]:
        """Turn ``detector`` (or ``"*"``) on or off for the player in ``slot``."""
        self._require_player(slot)
        try:
            self.operator.set_flags(slot, detector, enabled)
        except ValueError as exc:
            raise NotFound(str(exc)) from None
        return self.flags(slot)

    def set_bustaim_flags(self, slot: int, flags: int) -> dict[str, Any]:
        """Set BustAim's check flags (``BustAimFlag`` bits) for the player in ``slot``."""
        self._require_player(slot)
        bustaim = self._bustaim()
        if bustaim is None:
            raise NotFound("BustAim is not in this server's suite")
        if not 0 <= flags <= int(max(BustAimFlag)) * 2 - 1:
            raise AdminError(f"flags must be BustAimFlag bits, got {flags}")
        bustaim.set_flags(slot, flags)
        return self.flags(slot)

    # --- helpers ---------------------------------------------------------------------------

    def _require_player(self, slot: int) -> None:
        if slot not in self.core.by_slot:
            raise NotFound(f"no player in slot {slot}")

    def _bustaim(self) -> Any:
        try:
            return self.pipeline.detector("bustaim")
        except KeyError:
            return None

    def _policy_evidence(self, key: str) -> tuple[Evidence, ...]:
        policy = self.operator.policy
        return policy.evidence(key) if policy is not None else ()

    def _evidence_index(self, key: str) -> dict[tuple[str, str, str, float], Evidence]:
        return {(e.detector, e.kind, e.reason, e.at): e for e in self._policy_evidence(key)}

    def _family(self, detector: str, kind: str) -> str:
        policy = self.operator.policy
        return policy.family(detector, kind) if policy is not None else detector

    def _detection(self, seen: _Seen, evidence: Mapping[tuple[str, str, str, float], Evidence]) -> dict[str, Any]:
        d = seen.detection
        kept = evidence.get((d.detector, d.kind, d.reason, seen.at))
        return {
            "player": seen.key,
            "slot": d.player,
            "detector": d.detector,
            "kind": d.kind,
            "name": f"{d.detector}:{d.kind}",
            "family": self._family(d.detector, d.kind),
            "value": _finite(d.value),
            "severity": _finite(d.severity),
            "reason": d.reason,
            "explanation": explain(d.detector, d.kind, d.value, d.evidence),
            "evidence": [[str(k), _finite(v)] for k, v in d.evidence.items()],
            "tick": d.tick,
            "time_s": round(d.time_s, 3),
            "at": seen.at,
            "evidence_id": None if kept is None else kept.id,
            "dismissed": None if kept is None else kept.dismissed,
        }

    def _decision(self, decision: SanctionDecision, evidence: Iterable[Evidence]) -> dict[str, Any]:
        counted: dict[str, int] = {}
        dismissed: dict[str, int] = {}
        for e in evidence:
            family = self._family(e.detector, e.kind)
            book = dismissed if e.dismissed else counted
            book[family] = book.get(family, 0) + 1
        families = [
            {"family": family, "contribution": _round(contribution), "share": _round(contribution / total) if
             (total := sum(c for _, c in decision.families)) > 0 else None,
             "evidence": counted.get(family, 0), "dismissed": dismissed.get(family, 0)}
            for family, contribution in decision.families
        ]
        return {
            "player": decision.player,
            "at": decision.at,
            "recommended": _level(decision.recommended),
            "applied": _level(decision.applied),
            "score": _round(decision.score),
            "raw_score": _round(decision.raw_score),
            "account_factor": _round(decision.account_factor),
            "needs_review": decision.needs_review,
            "link_problem": decision.link_problem,
            "reasons": list(decision.reasons),
            "families": families,
            "expires_at": decision.expires_at,
        }

    def _item(self, item: ReviewItem) -> dict[str, Any]:
        key = item.player
        wanted = set(item.evidence_ids)
        pieces = [e for e in self._policy_evidence(key) if e.id in wanted]
        seen = {(s.detection.detector, s.detection.kind, s.detection.reason, s.at): s
                for s in self._by_player.get(key, ())}
        shown = []
        for e in pieces[-self.config.evidence_per_item:][::-1]:
            s = seen.get((e.detector, e.kind, e.reason, e.at))
            if s is not None:
                shown.append(self._detection(s, {(e.detector, e.kind, e.reason, e.at): e}))
            else:
                # Older than the detections kept in memory: the policy's record is all there is.
                shown.append({"player": key, "detector": e.detector, "kind": e.kind, "name": f"{e.detector}:{e.kind}",
                              "family": self._family(e.detector, e.kind), "severity": _finite(e.severity),
                              "reason": e.reason, "explanation": explain(e.detector, e.kind, math.nan, {}),
                              "evidence": [], "at": e.at, "evidence_id": e.id, "dismissed": e.dismissed})
        return {
            "id": item.id,
            "player": key,
            "slot": self.pipeline.slot_of(key),
            "created": item.created,
            "age_s": _round(self.now() - item.created, 1),
            "recommended": _level(item.recommended),
            "applied": _level(item.applied),
            "score": _round(item.score),
            "reasons": list(item.reasons),
            "evidence_count": len(item.evidence_ids),
            "evidence": shown,
            "status": item.status.value,
            "reviewer": item.reviewer,
            "note": item.note,
            "decided_at": item.decided_at,
            "confirmed_level": _level(item.confirmed_level),
            "expires_at": item.expires_at,
        }

    @staticmethod
    def _appeal(appeal: Appeal) -> dict[str, Any]:
        return {
            "id": appeal.id,
            "player": appeal.player,
            "review_item": appeal.sanction_ref,
            "filed": appeal.filed,
            "text": appeal.text,
            "status": appeal.status.value,
            "reviewer": appeal.reviewer,
            "note": appeal.decision_note,
            "decided_at": appeal.decided_at,
        }
