"""Which past time a shot's targets are rewound to (REFERENCES section 7, Source engine).

The server estimates what the shooter was looking at: ``now - latency - interp_delay`` (the
world state reached the client one downstream trip late, the client rendered it one
interpolation delay later still, and the command took an upstream trip back: the latency is the
round trip, as Source's send-to-ack "outgoing latency" is). A client's claimed view time is evidence: it is used only when
it lies within ``claim_tolerance_s`` of the estimate, otherwise the estimate wins. The result is
never older than ``now - max_unlag_s`` and never in the future. Units: seconds.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from lagcomp.config import RewindPolicy
from lagcomp.shot import RewindDecision

__all__ = [
    "CLAIMED",
    "DECISIONS",
    "ESTIMATE",
    "MAX_UNLAG",
    "NOT_REWOUND",
    "RewindPolicy",
    "decision_of",
    "rewind_times",
]

CLAIMED: Final = 0
ESTIMATE: Final = 1
MAX_UNLAG: Final = 2
NOT_REWOUND: Final = 3

DECISIONS: Final[tuple[RewindDecision, ...]] = (
    RewindDecision.CLAIMED,
    RewindDecision.ESTIMATE,
    RewindDecision.MAX_UNLAG,
    RewindDecision.NOT_REWOUND,
)
"""``DECISIONS[code]`` is the RewindDecision of a code returned by :func:`rewind_times`."""


def decision_of(code: int) -> RewindDecision:
    """The RewindDecision of an int8 code from :func:`rewind_times`."""
    return DECISIONS[int(code)]


def rewind_times(
    now_s: np.ndarray | float,
    latency_s: np.ndarray | float,
    claimed_view_time_s: np.ndarray | float,
    policy: RewindPolicy,
) -> tuple[np.ndarray, np.ndarray]:
    """Rewind time and decision code of S shots (arguments broadcast to (S,)).

    Args:
        now_s: server time of registration (s).
        latency_s: the shooter's outgoing latency estimate (s): Source measures it send-to-ack, so
            it is the round trip (what the client renders is one downstream trip old when it
            fires, and the command takes an upstream trip); negative or non-finite values are
            treated as 0 (the server measured it, so this only guards against a bad estimator).
        claimed_view_time_s: the client's claimed view time (s), NaN where the shot carried none.
        policy: the rewind policy.
    Returns:
        times: (S,) float64 seconds; decisions: (S,) int8 codes, see :data:`DECISIONS`.
    """
    now, lat, claim = np.broadcast_arrays(
        np.atleast_1d(np.asarray(now_s, dtype=np.float64)),
        np.atleast_1d(np.asarray(latency_s, dtype=np.float64)),
        np.atleast_1d(np.asarray(claimed_view_time_s, dtype=np.float64)),
    )
    if not policy.enabled:
        return now.astype(np.float64, copy=True), np.full(now.shape, NOT_REWOUND, dtype=np.int8)
    lat = np.where(np.isfinite(lat) & (lat > 0.0), lat, 0.0)
    estimate = now - lat - policy.interp_delay_s
    # NaN compares False, so an absent claim falls back to the estimate here.
    trusted = np.abs(claim - estimate) <= policy.claim_tolerance_s
    times = np.where(trusted, claim, estimate)
    decisions = np.where(trusted, CLAIMED, ESTIMATE).astype(np.int8)
    oldest = now - policy.max_unlag_s
    too_old = times < oldest
    times = np.where(too_old, oldest, times)
    decisions[too_old] = MAX_UNLAG
    # A claim slightly ahead of now (within tolerance) is still only "now": no extrapolation.
    times = np.minimum(times, now)
    return times, decisions
