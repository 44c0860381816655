"""The operator facade: what a game mode or an admin tool calls, in code.

It wires the pipeline, the sanction policy, the review queue and the store together:

- detections: ``subscribe(callback, detector=..., kind=..., player=...)`` (detector-specific
  callbacks, such as BustAim's warnings bitmask, are registered by those detectors themselves);
- players: ``connect(slot, key, account_created)`` binds a slot to a stable player key and loads
  the player's lifetime profiles into the detectors; ``disconnect(slot)`` saves them. With
  ``follow_sessions=True`` the operator does both itself from the pipeline's stream (its
  ``SessionEvent``s; the player key is the name the client gave), so a server needs no calls;
- profiles: ``profile(key)``, ``save_profiles(key)``, ``reset_profile(key)``;
- flags: ``set_flags(player, detector, enabled)``;
- review: every decision that needs review opens (or escalates) a review item, persisted at once;
  ``review_queue()``, ``confirm()``, ``dismiss()`` (which makes the evidence stop counting);
- appeals: ``file_appeal()``, ``decide_appeal()``, ``appeals()``.

Detectors that keep lifetime profiles provide ``export_profile(slot) -> dict`` and
``import_profile(slot, dict)`` (and optionally ``reset_profile(slot)``); the facade finds them by
duck typing. No I/O other than the store. Time comes from the pipeline's injected clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from anticheat.events import Detection, SessionEvent
from anticheat.judgement.review import Appeal, AppealStatus, ReviewItem, ReviewQueue
from anticheat.judgement.sanctions import DAY_S, SanctionDecision, SanctionLevel
from anticheat.pipeline import DetectionPipeline

__all__ = ["REVIEW_ID_BLOCK", "Operator"]

log = logging.getLogger(__name__)

ReviewCallback = Callable[[ReviewItem], None]

_PRUNE_EVERY_S = 3600.0
"""How often ``poll`` drops evidence older than the window from memory (s): the window is days."""

REVIEW_ID_BLOCK = 16
"""Review item and appeal ids reserved from the store at a time. Small: they are rare, shown to
admins and typed back, and a restart abandons what is left of a block."""

_SAVE_PROFILES_EVERY_S = 0.5
"""How often ``poll`` saves the connected players' lifetime profiles (s of the pipeline's clock):
with the store's commit lag, a server killed outright loses under a second of them."""


class Operator:
    """Facade over a pipeline (with its policy and store) and a review queue.

    Args:
        pipeline: the detection pipeline; its ``policy`` and ``store`` are used when present.
        review: the review queue (default: a new one dismissing evidence in the pipeline's policy,
            taking its ids from the store's reserved blocks when there is a store). A queue passed
            in with a store should be built with ``store.ids("review")``/``store.ids("appeal")``
            too, or two servers sharing the database will reuse each other's ids.
        restore: rebuild the policy (evidence of the window, account ages) and the review queue
            from the store now. Do this once at startup, before feeding events.
        follow_sessions: connect and disconnect players as the pipeline sees them come and go
            (``SessionEvent``: profiles loaded after the slot is reset for the newcomer, saved
            before it is reset for the next one).
    """

    def __init__(
        self,
        pipeline: DetectionPipeline,
        review: ReviewQueue | None = None,
        restore: bool = True,
        *,
        follow_sessions: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.policy = pipeline.policy
        self.store = pipeline.store
        if review is None:
            store = pipeline.store
            review = ReviewQueue(
                pipeline.policy,
                item_ids=None if store is None else store.ids("review", REVIEW_ID_BLOCK),
                appeal_ids=None if store is None else store.ids("appeal", REVIEW_ID_BLOCK),
            )
        self.review = review
        self._review_subscribers: list[ReviewCallback] = []
        self._connected: dict[int, str] = {}
        self._last_prune = pipeline.clock()
        self._last_profile_save = self._last_prune
        pipeline.subscribe_decisions(self._on_decision)
        if follow_sessions:
            pipeline.subscribe_sessions(self._on_session)
        if restore and self.store is not None:
            self.restore()

    def _on_session(self, event: SessionEvent) -> None:
        if event.kind == "connect":
            self.connect(event.player, event.name)
        elif event.kind == "disconnect":
            # The pipeline unbinds the slot right after; the writes reach the store with its next
            # commit (within its flush interval), not inline in the tick.
            self._save_slot_profiles(event.player, self.pipeline.key_of(event.player))
            self._connected.pop(event.player, None)

    # --- startup --------------------------------------------------------------------------

    def restore(self) -> None:
        """Rebuild the policy and the review queue from the store (after a restart)."""
        store = self.store
        if store is None:
            return
        if self.policy is not None:
            since = self.pipeline.clock() - self.policy.config.window_days * DAY_S
            self.policy.restore(store.load_evidence(since=since))
            self.policy.restore_accounts(store.load_players())
        self.review.restore(store.load_review_items(), store.load_appeals())

    # --- detections and decisions ---------------------------------------------------------

    def subscribe(
        self,
        callback: Callable[[Detection], None],
        detector: str | None = None,
        kind: str | None = None,
        player: int | str | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(detection)`` for detections matching every filter given.

        Args:
            callback: called with each matching detection, inline: keep it short.
            detector: match the detection's detector name.
            kind: match the detection's kind.
            player: a slot (int) or a stable player key (str).

        Returns:
            A function that unsubscribes.
        """
        if detector is None and kind is None and player is None:
            return self.pipeline.subscribe(callback)
        key_of = self.pipeline.key_of

        def filtered(detection: Detection) -> None:
            if detector is not None and detection.detector != detector:
                return
            if kind is not None and detection.kind != kind:
                return
            if isinstance(player, int) and detection.player != player:
                return
            if isinstance(player, str) and key_of(detection.player) != player:
                return
            callback(detection)

        return self.pipeline.subscribe(filtered)

    def subscribe_decisions(self, callback: Callable[[SanctionDecision], None]) -> Callable[[], None]:
        """Call ``callback(decision)`` after every evaluation caused by a detection."""
        return self.pipeline.subscribe_decisions(callback)

    def subscribe_reviews(self, callback: ReviewCallback) -> Callable[[], None]:
        """Call ``callback(item)`` when a review item is opened or escalated (alert online admins)."""
        self._review_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._review_subscribers:
                self._review_subscribers.remove(callback)

        return unsubscribe

    def decision(self, player_key: str) -> SanctionDecision | None:
        """Evaluate ``player_key`` now without recording anything (None without a policy)."""
        if self.policy is None:
            return None
        return self.policy.evaluate(player_key, self.pipeline.clock())

    def _on_decision(self, decision: SanctionDecision) -> None:
        item = self.review.open(decision)
        if item is None:
            return
        if self.store is not None:
            self.store.save_review_item(item)
            # A review item is what protects a player from an unreviewed sanction: make it durable now.
            self.store.flush()
        log.info(
            "review item %d: %s recommended %s (score %.3f)",
            item.id,
            item.player,
            item.recommended.name,
            item.score,
        )
        for callback in list(self._review_subscribers):
            callback(item)

    # --- players and profiles -------------------------------------------------------------

    def connect(self, slot: int, player_key: str, account_created: float | None = None) -> None:
        """Bind ``slot`` to ``player_key`` and load the player's lifetime profiles into detectors.

        Args:
            slot: the player's slot on the server.
            player_key: the stable player key (account id or name).
            account_created: account creation time (epoch s) if known; otherwise the stored one.
        """
        now = self.pipeline.clock()
        # The slot's previous owner must not leak detector state or flags into this player; the
        # skip book is kept, as the server may already have measured this player's link.
        self.pipeline.reset_player(slot)
        self.pipeline.bind(slot, player_key)
        self._connected[slot] = player_key
        if self.policy is not None and account_created is not None:
            self.policy.set_account_created(player_key, account_created)
        if self.store is None:
            return
        self.store.upsert_player(player_key, now, account_created)
        if self.policy is not None and account_created is None:
            stored = self.store.load_account_created(player_key)
            if stored is not None:
                self.policy.set_account_created(player_key, stored)
        profiles = self.store.load_profiles(player_key)
        for detector in self.pipeline.detectors:
            importer = getattr(detector, "import_profile", None)
            blob = profiles.get(detector.name)
            if importer is not None and blob is not None:
                try:
                    importer(slot, blob)
                except (ValueError, TypeError, KeyError):
                    # A corrupt or outdated stored profile must not keep a player from joining: the
                    # detector starts fresh, and the stored blob stays for inspection.
                    log.exception("connect %s: %s refused the stored profile", player_key, detector.name)

    def disconnect(self, slot: int) -> None:
        """Save the lifetime profiles of the player in ``slot``, then free the slot."""
        key = self.pipeline.key_of(slot)
        self._save_slot_profiles(slot, key)
        self.pipeline.unbind(slot)
        self._connected.pop(slot, None)
        if self.store is not None:
            self.store.flush()

    def profile(self, player_key: str) -> dict[str, dict[str, Any]]:
        """Lifetime profiles of ``player_key``: ``{detector: profile}``.

        Live detector state wins for a connected player; the store answers for the rest.
        """
        out: dict[str, dict[str, Any]] = dict(self.store.load_profiles(player_key)) if self.store else {}
        slot = self.pipeline.slot_of(player_key)
        if slot is not None:
            for detector in self.pipeline.detectors:
                exporter = getattr(detector, "export_profile", None)
                if exporter is not None:
                    out[detector.name] = dict(exporter(slot))
        return out

    def save_profiles(self, player_key: str) -> None:
        """Persist the live profiles of connected ``player_key`` (e.g. periodically)."""
        slot = self.pipeline.slot_of(player_key)
        if slot is not None:
            self._save_slot_profiles(slot, player_key)

    def save_connected_profiles(self) -> None:
        """Persist the live profiles of every player connected through this operator."""
        for slot, key in list(self._connected.items()):
            self._save_slot_profiles(slot, key)

    def reset_profile(self, player_key: str) -> None:
        """Forget ``player_key``'s lifetime profiles, live and stored (sanction evidence is kept)."""
        slot = self.pipeline.slot_of(player_key)
        if slot is not None:
            for detector in self.pipeline.detectors:
                resetter = getattr(detector, "reset_profile", None)
                if resetter is not None:
                    resetter(slot)
                else:
                    detector.reset_player(slot)
        if self.store is not None:
            self.store.delete_profiles(player_key)
            self.store.flush()

    def _save_slot_profiles(self, slot: int, player_key: str) -> None:
        if self.store is None:
            return
        now = self.pipeline.clock()
        for detector in self.pipeline.detectors:
            exporter = getattr(detector, "export_profile", None)
            if exporter is not None:
                profile: Mapping[str, Any] = exporter(slot)
                self.store.save_profile(player_key, detector.name, profile, now)

    # --- flags ----------------------------------------------------------------------------

    def set_flags(self, player: int | str, detector: str, enabled: bool) -> None:
        """Enable or disable ``detector`` (or ``"*"``) for a slot or a connected player key."""
        slot = player if isinstance(player, int) else self.pipeline.slot_of(player)
        if slot is None:
            raise KeyError(f"player {player!r} is not connected")
        self.pipeline.set_enabled(slot, detector, enabled)

    # --- review ---------------------------------------------------------------------------

    def review_queue(self) -> tuple[ReviewItem, ...]:
        """Pending review items, oldest first."""
        return self.review.pending()

    def confirm(self, item_id: int, reviewer: str, note: str, level: SanctionLevel | None = None) -> ReviewItem:
        """Confirm review item ``item_id`` (at ``level``, default the recommended one)."""
        item = self.review.confirm(item_id, reviewer, note, self.pipeline.clock(), level)
        self._persist_item(item)
        return item

    def dismiss(self, item_id: int, reviewer: str, note: str) -> ReviewItem:
        """Dismiss review item ``item_id``: its evidence stops counting."""
        item = self.review.dismiss(item_id, reviewer, note, self.pipeline.clock())
        self._persist_item(item, dismissed=True)
        return item

    def file_appeal(self, player_key: str, sanction_ref: int, text: str) -> Appeal:
        """``player_key`` appeals the sanction of review item ``sanction_ref``."""
        appeal = self.review.file_appeal(player_key, sanction_ref, text, self.pipeline.clock())
        if self.store is not None:
            self.store.save_appeal(appeal)
            self.store.flush()
        return appeal

    def decide_appeal(self, appeal_id: int, reviewer: str, overturn: bool, note: str) -> Appeal:
        """Decide appeal ``appeal_id``; ``overturn`` reverses the sanction and dismisses its evidence."""
        appeal = self.review.decide_appeal(appeal_id, reviewer, overturn, note, self.pipeline.clock())
        if self.store is not None:
            self.store.save_appeal(appeal)
        item = self.review.get(appeal.sanction_ref)
        self._persist_item(item, dismissed=overturn)
        return appeal

    def appeals(self, player_key: str | None = None, status: AppealStatus | None = None) -> tuple[Appeal, ...]:
        """Appeals (of ``player_key`` / with ``status``), oldest first."""
        return self.review.appeals(player_key, status)

    def _persist_item(self, item: ReviewItem, dismissed: bool = False) -> None:
        if self.store is not None:
            self.store.save_review_item(item)
            if dismissed:
                self.store.mark_dismissed(item.evidence_ids)
            self.store.flush()

    # --- store passthrough ----------------------------------------------------------------

    def poll(self) -> None:
        """Housekeeping for the tick loop (call it on the thread that feeds the pipeline): every
        half second save the connected players' lifetime profiles; commit due store writes;
        hourly, drop expired evidence."""
        now = self.pipeline.clock()
        if self.store is not None:
            if now - self._last_profile_save >= _SAVE_PROFILES_EVERY_S:
                self._last_profile_save = now
                self.save_connected_profiles()
            self.store.poll()
        if self.policy is not None and now - self._last_prune >= _PRUNE_EVERY_S:
            self._last_prune = now
            self.policy.prune(now)

    def close(self) -> None:
        """Save the lifetime profiles of the players still connected, then flush and close the store."""
        if self.store is not None:
            self.save_connected_profiles()
            self.store.close()
