"""The one detector interface, and the context every detector reads shared facts from.

A detector is a pure consumer of typed events: it keeps bounded per-player state and returns the
``Detection``s an event causes. The pipeline dispatches each event to the matching ``on_*`` method;
detectors override only the ones they need. ``scores`` exposes the continuous statistics behind
a detector's decisions, normalised to its alarm threshold, so tolerances can be tuned offline.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType

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
NO_SCORES: Mapping[str, float] = MappingProxyType({})
"""The scores of a player a detector holds no evidence on (read-only, shared)."""

_LARGEST = sys.float_info.max


def over_limit(value: float, limit: float) -> float:
    """``value / limit``: a statistic that fires at ``limit``, normalised for ``Detector.scores``
    (unitless; an overflow is the largest finite float). A limit <= 0 is a degenerate tolerance
    under which any evidence fires: 1.0 for a positive value, else 0.0."""
    if limit > 0.0:
        return min(value / limit, _LARGEST)
    return 1.0 if value > 0.0 else 0.0


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

    def skip_counts(self) -> Mapping[str, int]:
        """Events this detector saw and did not judge, per reason (a skip-book reason such as
        ``high_ping``, or the detector's own). Empty for a detector that judges everything."""
        return {}

    def scores(self, player: int) -> Mapping[str, float]:
        """The continuous test statistics behind this detector's decisions on ``player``.

        For tuning without re-running matches: sampled over a match, the scores of every player
        give ROC curves by a sweep of the alarm threshold (here 1.0) over the recorded traces.

        Contract:

        - Keys are short statistic names (``"llr"``, ``"strain"``, ``"score"``, or the detection
          kind the statistic decides), fixed per detector: once it holds state on the player,
          every key is present on every call.
        - Values are finite floats without unit, normalised so that 1.0 is where the detector
          fires under its current tolerances (a statistic measured against a limit is reported
          as statistic / limit; a count as count / count needed) and higher is more suspicious:
          ``value >= 1.0`` means the statistic is at or past its alarm threshold. 0.0 (or the
          empty mapping) means no evidence yet; a signed statistic (a z-score) is negative on
          the innocent side. Gates on sample size (minimum hits, kills, samples) apply: below
          its gate a statistic is 0.0, since the detector cannot fire there.
        - A statistic that can fall quickly (a streak a miss resets, a count in a sliding
          window, a decaying score, a sequential test that restarts its walk, a ring cleared
          by a detection) is reported as its running maximum since the player's state began
          (``reset_player``): a reader sampling the scores now and then takes "the largest
          value seen up to time T >= t" as "would have fired by T at threshold t", so a value
          must not hide that it crossed between two samples. Cumulative statistics that move
          slowly (means and ratios over a session or a window) are reported as they are now;
          a detector may also keep them no lower than their highest value at one of its
          detections. Each detector's ``scores`` says which it reports.
        - O(1) or O(window) (a comparison with the other players: O(players^2)), and free of
          side effects: it never changes the detector's state and never emits, delays or
          hastens a detection.

        An unknown player (or one this detector never judged) gets the empty mapping.
        """
        return NO_SCORES
