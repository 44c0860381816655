"""The one detector interface, and the context every detector reads shared facts from.

A detector is a pure consumer of typed events: it keeps bounded per-player state and returns the
``Detection``s an event causes. The pipeline dispatches each event to the matching ``on_*`` method;
detectors override only the ones they need.
"""

from __future__ import annotations

from collections.abc import Sequence

from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    KillEvent,
    MovementEvidence,
    ShotResult,
    SpawnEvent,
)
from anticheat.skip import SkipBook

NO_DETECTIONS: Sequence[Detection] = ()


class Detector:
    """Base class: every hook returns the detections the event causes (usually none).

    Subclasses set ``name`` and hold a frozen config dataclass in ``config``. Hooks must be
    deterministic functions of the events seen so far and must keep per-player state bounded
    (fixed-size rings, counters), so a detector costs the same after an hour as after a minute.
    """

    name: str = "detector"

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        """A registered shot (one per pellet)."""
        return NO_DETECTIONS

    def on_kill(self, kill: KillEvent, skip: SkipBook) -> Sequence[Detection]:
        """A kill, after the shot that caused it."""
        return NO_DETECTIONS

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        """One applied input command with its view angles."""
        return NO_DETECTIONS

    def on_movement(self, evidence: MovementEvidence, skip: SkipBook) -> Sequence[Detection]:
        """Movement validation evidence from physics."""
        return NO_DETECTIONS

    def on_fire(self, evidence: FireEvidence, skip: SkipBook) -> Sequence[Detection]:
        """A shot refused by weapon mechanics."""
        return NO_DETECTIONS

    def on_connection(self, sample: ConnectionSample, skip: SkipBook) -> Sequence[Detection]:
        """A connection-quality sample (the SkipBook has already recorded it)."""
        return NO_DETECTIONS

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        """A (re)spawn: reset per-life state here."""
        return NO_DETECTIONS

    def flush(self) -> Sequence[Detection]:
        """End of the stream (match over, replay read): deliver anything still held back.

        Detectors that analyse in batches override this; the live server calls it when it
        closes and a replay re-run calls it at the end, so both see the same detections."""
        return NO_DETECTIONS

    def reset_player(self, player: int) -> None:
        """Forget everything about ``player`` (slot reused or an operator reset)."""
