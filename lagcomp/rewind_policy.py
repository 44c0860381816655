"""Which past time a shot's targets are rewound to (REFERENCES section 7, Source engine).

The server estimates what the shooter was looking at: ``now - latency - interp_delay`` (the
world state reached the client one downstream trip late, the client rendered it one
interpolation delay later still, and the command took an upstream trip back: the latency is the
round trip, as Source's send-to-ack "outgoing latency" is). A client's claimed view time is evidence: it is used only when
it lies within ``claim_tolerance_s`` of the estimate, otherwise the estimate wins. The result is
never older than ``now - max_unlag_s`` and never in the future. Units: seconds.
"""

from __future__ import annotations

import math
from typing import Final

import numba
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
    "rewind_time",
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
    args = [np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (now_s, latency_s, claimed_view_time_s)]
    longest = max(args, key=np.size)
    if all(a.shape == longest.shape or (a.size == 1 and a.ndim <= longest.ndim) for a in args):
        # The server's case (one now, a column per shot): np.broadcast_arrays costs ~10 us a call.
        now, lat, claim = (a if a.shape == longest.shape else np.full(longest.shape, a.item()) for a in args)
    else:
        now, lat, claim = np.broadcast_arrays(*args)
    if not policy.enabled:
        return now.astype(np.float64, copy=True), np.full(now.shape, NOT_REWOUND, dtype=np.int8)
    times = np.empty(now.shape)
    decisions = np.empty(now.shape, dtype=np.int8)
    _rewind_kernel(
        np.ascontiguousarray(now).reshape(-1), np.ascontiguousarray(lat).reshape(-1),
        np.ascontiguousarray(claim).reshape(-1), float(policy.interp_delay_s), float(policy.claim_tolerance_s),
        float(policy.max_unlag_s), times.reshape(-1), decisions.reshape(-1),
    )
    return times, decisions


def rewind_time(now_s: float, latency_s: float, claimed_view_time_s: float, policy: RewindPolicy) -> tuple[float, int]:
    """:func:`rewind_times` of one shot, in Python floats: (rewind time (s), decision code).

    The same operations in the same order as ``_rewind_kernel`` (IEEE double arithmetic and
    comparisons only, no transcendental function), so the same bits: a server tick registers one
    to three shots, for which the arrays, broadcasting and kernel call of :func:`rewind_times`
    cost more than the arithmetic. Arguments as :func:`rewind_times`' (s; the claim NaN when the
    shot carried none)."""
    n = float(now_s)
    if not policy.enabled:
        return n, NOT_REWOUND
    lt = float(latency_s)
    if not (math.isfinite(lt) and lt > 0.0):
        lt = 0.0
    estimate = n - lt - float(policy.interp_delay_s)
    c = float(claimed_view_time_s)
    if abs(c - estimate) <= float(policy.claim_tolerance_s):
        t, d = c, CLAIMED
    else:
        t, d = estimate, ESTIMATE
    oldest = n - float(policy.max_unlag_s)
    if t < oldest:
        t, d = oldest, MAX_UNLAG
    return (t if (t <= n or math.isnan(t)) else n), d


@numba.njit(cache=True, nogil=True)
def _rewind_kernel(
    now: np.ndarray, lat: np.ndarray, claim: np.ndarray, interp_delay_s: float, claim_tolerance_s: float,
    max_unlag_s: float, times_out: np.ndarray, decisions_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The policy per shot, in the operations and order of the numpy version it replaced (IEEE
    double, no fast-math; the final min written as ``np.minimum``), which cost ~20 calls of fixed
    overhead for the 1-3 shots of a typical tick."""
    for i in range(now.shape[0]):
        n = now[i]
        lt = lat[i]
        if not (math.isfinite(lt) and lt > 0.0):
            lt = 0.0
        estimate = n - lt - interp_delay_s
        c = claim[i]
        # NaN compares False, so an absent claim falls back to the estimate here.
        if abs(c - estimate) <= claim_tolerance_s:
            t = c
            d = CLAIMED
        else:
            t = estimate
            d = ESTIMATE
        oldest = n - max_unlag_s
        if t < oldest:
            t = oldest
            d = MAX_UNLAG
        # A claim slightly ahead of now (within tolerance) is still only "now": no extrapolation.
        times_out[i] = t if (t <= n or math.isnan(t)) else n
        decisions_out[i] = d


# Compile (or load from numba's cache) at import, never inside a tick.
rewind_times(0.0, 0.0, 0.0, RewindPolicy())
