"""Rewind-time policy (Source engine rules, REFERENCES section 7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lagcomp.rewind_policy import (
    CLAIMED,
    ESTIMATE,
    MAX_UNLAG,
    NOT_REWOUND,
    RewindPolicy,
    decision_of,
    rewind_time,
    rewind_times,
)
from lagcomp.shot import RewindDecision

POLICY = RewindPolicy()  # interp 0.100, tolerance 0.200, max unlag 1.0


def test_claim_within_tolerance_is_used() -> None:
    # estimate = 10 - 0.05 - 0.1 = 9.85
    t, d = rewind_times(10.0, 0.05, 9.70, POLICY)
    assert t[0] == pytest.approx(9.70) and d[0] == CLAIMED
    t, d = rewind_times(10.0, 0.05, 9.85 - 0.199, POLICY)
    assert t[0] == pytest.approx(9.85 - 0.199) and d[0] == CLAIMED


def test_claim_beyond_tolerance_or_absent_gives_the_estimate() -> None:
    t, d = rewind_times(np.full(3, 10.0), 0.05, np.array([9.6, 9.0, np.nan]), POLICY)
    np.testing.assert_allclose(t, 9.85)
    np.testing.assert_array_equal(d, [ESTIMATE, ESTIMATE, ESTIMATE])


def test_max_unlag_clamp() -> None:
    t, d = rewind_times(10.0, 1.5, np.nan, POLICY)
    assert t[0] == pytest.approx(9.0) and d[0] == MAX_UNLAG
    # A trusted claim older than max unlag is clamped too.
    t, d = rewind_times(10.0, 0.95, 8.95, POLICY)
    assert t[0] == pytest.approx(9.0) and d[0] == MAX_UNLAG
    t, d = rewind_times(10.0, 0.2, np.nan, RewindPolicy(max_unlag_s=0.25))
    assert t[0] == pytest.approx(9.75) and d[0] == MAX_UNLAG


def test_never_in_the_future() -> None:
    # No interpolation delay, zero latency: a claim 0.1 s ahead is within tolerance but clamped to now.
    t, d = rewind_times(10.0, 0.0, 10.1, RewindPolicy(interp_delay_s=0.0))
    assert t[0] == 10.0 and d[0] == CLAIMED


def test_disabled_policy_does_not_rewind() -> None:
    t, d = rewind_times(np.array([5.0, 6.0]), 0.3, np.array([4.8, np.nan]), RewindPolicy(enabled=False))
    np.testing.assert_array_equal(t, [5.0, 6.0])
    np.testing.assert_array_equal(d, [NOT_REWOUND, NOT_REWOUND])
    assert decision_of(d[0]) is RewindDecision.NOT_REWOUND


def test_bad_latency_counts_as_zero() -> None:
    t, d = rewind_times(np.array([10.0, 10.0]), np.array([-1.0, np.inf]), np.nan, POLICY)
    np.testing.assert_allclose(t, 9.9)
    np.testing.assert_array_equal(d, [ESTIMATE, ESTIMATE])


def test_decision_codes_map_to_the_contract() -> None:
    assert [decision_of(c) for c in (CLAIMED, ESTIMATE, MAX_UNLAG, NOT_REWOUND)] == list(RewindDecision)


def test_policy_refuses_negative_values() -> None:
    with pytest.raises(ValueError):
        RewindPolicy(max_unlag_s=-1.0)


@settings(max_examples=200, deadline=None)
@given(
    now=st.floats(0.0, 1e5),
    latency=st.floats(0.0, 3.0),
    claim_offset=st.one_of(st.none(), st.floats(-3.0, 3.0)),
    interp=st.floats(0.0, 0.3),
    max_unlag=st.floats(0.0, 2.0),
)
def test_rewind_time_always_within_max_unlag_and_now(
    now: float, latency: float, claim_offset: float | None, interp: float, max_unlag: float
) -> None:
    policy = RewindPolicy(interp_delay_s=interp, max_unlag_s=max_unlag)
    claim = np.nan if claim_offset is None else now + claim_offset
    t, d = rewind_times(now, latency, claim, policy)
    assert now - max_unlag - 1e-9 <= t[0] <= now
    if d[0] == CLAIMED:
        assert abs(claim - (now - latency - interp)) <= policy.claim_tolerance_s + 1e-9


_ANY_FLOAT = st.one_of(
    st.floats(-5.0, 20.0, allow_nan=False), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300])
)


@settings(max_examples=500, deadline=None)
@given(_ANY_FLOAT, _ANY_FLOAT, _ANY_FLOAT, st.floats(0.0, 0.3), st.floats(0.0, 0.5), st.floats(0.05, 2.0), st.booleans())
def test_rewind_time_equals_rewind_times_bit_for_bit(
    now: float, latency: float, claim: float, interp: float, tolerance: float, unlag: float, enabled: bool
) -> None:
    policy = RewindPolicy(enabled=enabled, interp_delay_s=interp, claim_tolerance_s=tolerance, max_unlag_s=unlag)
    t, d = rewind_time(now, latency, claim, policy)
    ts, ds = rewind_times(now, latency, claim, policy)
    assert type(t) is float and type(d) is int
    assert np.array([t]).tobytes() == ts.tobytes() and d == int(ds[0])
