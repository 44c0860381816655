"""Human review of sanction recommendations, and appeals, as plain data.

BustAim's administrator guide: warnings only inform; an administrator confirms before anyone is
banned. The architecture article: mandatory human review at the 24 h ban level, and appeals must
exist. So every recommendation at KICK or above opens a ``ReviewItem``; a reviewer confirms it
(the sanction stands, possibly at a level the reviewer chooses) or dismisses it.

What dismissing does to the evidence: the item remembers the ids of the evidence the decision
counted; dismissing marks exactly those as dismissed in the ``SanctionPolicy`` (and the store
persists the mark), so they stop counting and the player's score falls to whatever evidence
arrived after the item was opened. Nothing is deleted: the detections stay on record for later
review. An appeal that is granted (``overturn=True``) does the same for the sanction it contests
and marks the item OVERTURNED.

The sanction reference of an appeal is a review item id: every sanction above monitoring has one.
Ids are counted in memory by default; a queue whose items and appeals go to a store shared by
several servers takes them from the store's reserved blocks instead (``item_ids``/``appeal_ids``,
which the ``Operator`` passes), so two servers never give two items the same id.
Time arguments are wall-clock seconds since the epoch, passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

from anticheat.judgement.ids import IdCounter, IdSource
from anticheat.judgement.sanctions import (
    SanctionDecision,
    SanctionLevel,
    SanctionPolicy,
)

__all__ = [
    "Appeal",
    "AppealStatus",
    "ReviewError",
    "ReviewItem",
    "ReviewQueue",
    "ReviewStatus",
]


class ReviewStatus(str, Enum):
    """State of a review item."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"
    OVERTURNED = "overturned"
    """Confirmed earlier, then reversed by a granted appeal."""


class AppealStatus(str, Enum):
    """State of an appeal."""

    PENDING = "pending"
    GRANTED = "granted"
    """The sanction was overturned."""
    REJECTED = "rejected"
    """The sanction stands."""


class ReviewError(ValueError):
    """An operation on the review queue that cannot be done (unknown id, wrong state...)."""


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One recommendation waiting for (or decided by) a human.

    Attributes:
        id, player (player key), created (epoch s).
        recommended: the level the evidence reached; score: the cumulative score then (0..1).
        applied: the level applied automatically when it was opened (what a reviewer confirms or
            lifts). reasons: the decision's reasons. evidence_ids: the evidence it counted.
        status; reviewer, note, decided_at (epoch s): who decided, why and when.
        confirmed_level: the level the reviewer confirmed (None until confirmed).
        expires_at: end of a confirmed temporary ban (epoch s), None if permanent or none.
    """

    id: int
    player: str
    created: float
    recommended: SanctionLevel
    score: float
    applied: SanctionLevel = SanctionLevel.LOG
    reasons: tuple[str, ...] = ()
    evidence_ids: tuple[int, ...] = ()
    status: ReviewStatus = ReviewStatus.PENDING
    reviewer: str = ""
    note: str = ""
    decided_at: float | None = None
    confirmed_level: SanctionLevel | None = None
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Appeal:
    """A player's appeal against a sanction.

    Attributes:
        id, player (player key), sanction_ref (the review item id of the sanction), filed (epoch s),
        text (the player's statement), status, reviewer, decision_note, decided_at (epoch s).
    """

    id: int
    player: str
    sanction_ref: int
    filed: float
    text: str
    status: AppealStatus = AppealStatus.PENDING
    reviewer: str = ""
    decision_note: str = ""
    decided_at: float | None = None


class ReviewQueue:
    """Review items and appeals. Pure data plus the policy it dismisses evidence in.

    Args:
        policy: the sanction policy whose evidence a dismissal or a granted appeal marks dismissed
            (None: only the records change; the caller handles the evidence).
        temp_ban_duration_s: length of a confirmed temporary ban (s), defaults to the policy's.
        item_ids, appeal_ids: where new review item and appeal ids come from (default: counted in
            memory from 1, continuing after the largest restored).
    """

    def __init__(
        self,
        policy: SanctionPolicy | None = None,
        temp_ban_duration_s: float | None = None,
        *,
        item_ids: IdSource | None = None,
        appeal_ids: IdSource | None = None,
    ) -> None:
        self._policy = policy
        if temp_ban_duration_s is None:
            temp_ban_duration_s = policy.config.temp_ban_duration_s if policy is not None else 86_400.0
        self._temp_ban_s = temp_ban_duration_s
        self._items: dict[int, ReviewItem] = {}
        # player -> id of the pending item: ``open`` runs after every detection of a suspect.
        self._pending_of: dict[str, int] = {}
        self._appeals: dict[int, Appeal] = {}
        self._item_ids: IdSource = item_ids if item_ids is not None else IdCounter()
        self._appeal_ids: IdSource = appeal_ids if appeal_ids is not None else IdCounter()

    # --- review items ---------------------------------------------------------------------

    def open(self, decision: SanctionDecision) -> ReviewItem | None:
        """Queue ``decision`` for review if it needs one.

        A player has at most one pending item: a stronger recommendation escalates it in place
        (same id, new level, score and evidence); an equal or weaker one changes nothing.

        Returns:
            The new or escalated item, or None when nothing changed.
        """
        if not decision.needs_review:
            return None
        pending = self.pending_for(decision.player)
        if pending is not None:
            if decision.recommended <= pending.recommended:
                return None
            item = replace(
                pending,
                recommended=decision.recommended,
                score=decision.score,
                applied=max(pending.applied, decision.applied),
                reasons=decision.reasons,
                evidence_ids=decision.evidence_ids,
            )
        else:
            item = ReviewItem(
                id=self._item_ids.take(),
                player=decision.player,
                created=decision.at,
                recommended=decision.recommended,
                score=decision.score,
                applied=decision.applied,
                reasons=decision.reasons,
                evidence_ids=decision.evidence_ids,
            )
        self._put(item)
        return item

    def confirm(
        self, item_id: int, reviewer: str, note: str, now: float, level: SanctionLevel | None = None
    ) -> ReviewItem:
        """A reviewer confirms item ``item_id``: the sanction at ``level`` (default: recommended) stands.

        A confirmed TEMP_BAN_REVIEW expires ``temp_ban_duration_s`` after ``now`` (epoch s).
        """
        item = self._pending(item_id)
        confirmed = item.recommended if level is None else SanctionLevel(level)
        expires = now + self._temp_ban_s if confirmed == SanctionLevel.TEMP_BAN_REVIEW else None
        item = replace(
            item,
            status=ReviewStatus.CONFIRMED,
            reviewer=reviewer,
            note=note,
            decided_at=now,
            confirmed_level=confirmed,
            expires_at=expires,
        )
        self._put(item)
        return item

    def dismiss(self, item_id: int, reviewer: str, note: str, now: float) -> ReviewItem:
        """A reviewer dismisses item ``item_id``: its evidence stops counting (see module doc)."""
        item = self._pending(item_id)
        item = replace(item, status=ReviewStatus.DISMISSED, reviewer=reviewer, note=note, decided_at=now)
        self._put(item)
        if self._policy is not None:
            self._policy.dismiss(item.player, item.evidence_ids)
        return item

    def get(self, item_id: int) -> ReviewItem:
        """The item ``item_id``."""
        try:
            return self._items[item_id]
        except KeyError:
            raise ReviewError(f"no review item {item_id}") from None

    def pending(self) -> tuple[ReviewItem, ...]:
        """Pending items, oldest first."""
        return tuple(i for i in sorted(self._items.values(), key=lambda i: i.id) if i.status == ReviewStatus.PENDING)

    def pending_for(self, player: str) -> ReviewItem | None:
        """``player``'s pending item, if any."""
        item_id = self._pending_of.get(player)
        return None if item_id is None else self._items[item_id]

    def _put(self, item: ReviewItem) -> None:
        self._items[item.id] = item
        if item.status == ReviewStatus.PENDING:
            self._pending_of[item.player] = item.id
        elif self._pending_of.get(item.player) == item.id:
            del self._pending_of[item.player]

    def items(self, player: str | None = None) -> tuple[ReviewItem, ...]:
        """All items (of ``player`` if given), oldest first."""
        return tuple(
            i for i in sorted(self._items.values(), key=lambda i: i.id) if player is None or i.player == player
        )

    # --- appeals --------------------------------------------------------------------------

    def file_appeal(self, player: str, sanction_ref: int, text: str, now: float) -> Appeal:
        """``player`` appeals the sanction of review item ``sanction_ref`` (pending or confirmed)."""
        item = self.get(sanction_ref)
        if item.player != player:
            raise ReviewError(f"review item {sanction_ref} is not a sanction of {player!r}")
        if item.status not in (ReviewStatus.PENDING, ReviewStatus.CONFIRMED):
            raise ReviewError(f"review item {sanction_ref} is {item.status.value}: nothing to appeal")
        for appeal in self._appeals.values():
            if appeal.sanction_ref == sanction_ref and appeal.status == AppealStatus.PENDING:
                raise ReviewError(f"appeal {appeal.id} against item {sanction_ref} is already pending")
        appeal = Appeal(self._appeal_ids.take(), player, sanction_ref, now, text)
        self._appeals[appeal.id] = appeal
        return appeal

    def decide_appeal(self, appeal_id: int, reviewer: str, overturn: bool, note: str, now: float) -> Appeal:
        """Decide appeal ``appeal_id``; ``overturn`` grants it and reverses the sanction.

        Granting marks the contested item OVERTURNED (DISMISSED if it was still pending) and
        dismisses its evidence in the policy; rejecting leaves the sanction as it is.
        """
        appeal = self.appeal(appeal_id)
        if appeal.status != AppealStatus.PENDING:
            raise ReviewError(f"appeal {appeal_id} is already {appeal.status.value}")
        status = AppealStatus.GRANTED if overturn else AppealStatus.REJECTED
        appeal = replace(appeal, status=status, reviewer=reviewer, decision_note=note, decided_at=now)
        self._appeals[appeal_id] = appeal
        if overturn:
            item = self.get(appeal.sanction_ref)
            new_status = ReviewStatus.DISMISSED if item.status == ReviewStatus.PENDING else ReviewStatus.OVERTURNED
            item = replace(
                item,
                status=new_status,
                reviewer=reviewer,
                note=f"appeal {appeal_id} granted: {note}",
                decided_at=now,
                expires_at=None,
            )
            self._put(item)
            if self._policy is not None:
                self._policy.dismiss(item.player, item.evidence_ids)
        return appeal

    def appeal(self, appeal_id: int) -> Appeal:
        """The appeal ``appeal_id``."""
        try:
            return self._appeals[appeal_id]
        except KeyError:
            raise ReviewError(f"no appeal {appeal_id}") from None

    def appeals(self, player: str | None = None, status: AppealStatus | None = None) -> tuple[Appeal, ...]:
        """Appeals (of ``player`` / with ``status`` if given), oldest first."""
        return tuple(
            a
            for a in sorted(self._appeals.values(), key=lambda a: a.id)
            if (player is None or a.player == player) and (status is None or a.status == status)
        )

    # --- persistence support --------------------------------------------------------------

    def restore(self, items: Iterable[ReviewItem], appeals: Iterable[Appeal]) -> None:
        """Reload persisted items and appeals (after a restart); new ids never repeat theirs."""
        for item in items:
            self._put(item)
            self._item_ids.skip_past(item.id)
        for appeal in appeals:
            self._appeals[appeal.id] = appeal
            self._appeal_ids.skip_past(appeal.id)

    def _pending(self, item_id: int) -> ReviewItem:
        item = self.get(item_id)
        if item.status != ReviewStatus.PENDING:
            raise ReviewError(f"review item {item_id} is already {item.status.value}")
        return item
