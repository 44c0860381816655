"""Sanction policy (levels, recency, account age, combination), review queue, appeals, tolerances."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anticheat.judgement.review import AppealStatus, ReviewError, ReviewQueue, ReviewStatus
from anticheat.judgement.sanctions import DAY_S, Evidence, SanctionConfig, SanctionLevel, SanctionPolicy
from anticheat.tolerances import ToleranceError, apply_all, apply_overrides, load_overrides

NOW = 1_700_000_040.0  # a multiple of the 60 s evaluation step, so ages are exact
CAP = SanctionConfig().detector_cap
severities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def ev(
    i: int, detector: str, severity: float = 1.0, age_days: float = 0.0, player: str = "p", kind: str = "k"
) -> Evidence:
    return Evidence(i, player, detector, kind, severity, NOW - age_days * DAY_S, f"{detector}-{i}")


def policy_with(*items: Evidence, config: SanctionConfig | None = None) -> SanctionPolicy:
    policy = SanctionPolicy(config)
    for item in items:
        policy.add(item)
    return policy


# --- levels and thresholds ---------------------------------------------------------------


def test_level_thresholds_follow_the_article() -> None:
    cfg = SanctionConfig()
    assert cfg.level_for(0.0) == SanctionLevel.LOG
    assert cfg.level_for(0.599) == SanctionLevel.LOG
    assert cfg.level_for(0.60) == SanctionLevel.MONITOR
    assert cfg.level_for(0.70) == SanctionLevel.KICK
    assert cfg.level_for(0.80) == SanctionLevel.TEMP_BAN_REVIEW
    assert cfg.level_for(0.949) == SanctionLevel.TEMP_BAN_REVIEW
    assert cfg.level_for(0.95) == SanctionLevel.PERMANENT_BAN


def test_no_evidence_logs_only() -> None:
    decision = SanctionPolicy().evaluate("nobody", NOW)
    assert decision.score == 0.0 and decision.recommended == SanctionLevel.LOG and not decision.needs_review


def test_recency_weight_14_days_is_exp_minus_2() -> None:
    fresh = policy_with(ev(1, "a", 0.5)).evaluate("p", NOW)
    old = policy_with(ev(1, "a", 0.5, age_days=14)).evaluate("p", NOW)
    assert fresh.score == pytest.approx(CAP * 0.5)
    assert old.score == pytest.approx(CAP * 0.5 * math.exp(-2))
    assert old.score / fresh.score == pytest.approx(math.exp(-2))


def test_evidence_outside_the_30_day_window_is_ignored() -> None:
    assert policy_with(ev(1, "a", 1.0, age_days=30.5)).evaluate("p", NOW).score == 0.0
    assert policy_with(ev(1, "a", 1.0, age_days=29.5)).evaluate("p", NOW).score > 0.0


def test_account_age_factors() -> None:
    items = (ev(1, "a", 0.9), ev(2, "b", 0.9))
    base = policy_with(*items).evaluate("p", NOW)
    assert base.account_factor == 1.0
    for age_days, factor in ((3.0, 1.3), (6.99, 1.3), (7.0, 1.0), (365.0, 1.0), (400.0, 0.8)):
        policy = policy_with(*items)
        policy.set_account_created("p", NOW - age_days * DAY_S)
        decision = policy.evaluate("p", NOW)
        assert decision.account_factor == factor
        assert decision.score == pytest.approx(min(1.0, base.raw_score * factor))


def test_one_detection_alone_never_reaches_a_ban() -> None:
    for created in (None, NOW - DAY_S, NOW - 1000 * DAY_S):
        policy = policy_with(ev(1, "bustaim", 1.0))
        policy.set_account_created("p", created)
        decision = policy.evaluate("p", NOW)
        assert decision.recommended < SanctionLevel.TEMP_BAN_REVIEW
    # Even a flood from one detector stays below the ban levels.
    flood = policy_with(*(ev(i, "bustaim", 1.0) for i in range(500)))
    flood.set_account_created("p", NOW - DAY_S)
    assert flood.evaluate("p", NOW).recommended < SanctionLevel.TEMP_BAN_REVIEW


def test_several_independent_detectors_do_reach_ban_levels() -> None:
    two = policy_with(ev(1, "bustaim"), ev(2, "iw4m")).evaluate("p", NOW)
    assert two.score == pytest.approx(1 - (1 - CAP) ** 2)
    assert two.recommended == SanctionLevel.TEMP_BAN_REVIEW
    four = policy_with(ev(1, "bustaim"), ev(2, "iw4m"), ev(3, "aimstats"), ev(4, "movement")).evaluate("p", NOW)
    assert four.recommended == SanctionLevel.PERMANENT_BAN
    assert four.reasons[0].startswith(("aimstats=", "bustaim=", "iw4m=", "movement="))


def test_families_group_correlated_detectors() -> None:
    cfg = SanctionConfig(families=(("bustaim", "aim"), ("iw4m", "aim")))
    decision = policy_with(ev(1, "bustaim"), ev(2, "iw4m"), config=cfg).evaluate("p", NOW)
    assert decision.score == pytest.approx(CAP)  # one family, one cap
    assert [f for f, _ in decision.families] == ["aim"]
    by_kind = SanctionConfig(families=(("iw4m.Strain", "strain"),))
    split = policy_with(ev(1, "iw4m", kind="Strain"), ev(2, "iw4m", kind="Bone"), config=by_kind).evaluate("p", NOW)
    assert {f for f, _ in split.families} == {"strain", "iw4m"}


def test_repeated_findings_of_one_detector_accumulate_up_to_the_cap() -> None:
    one = policy_with(ev(1, "a", 0.3)).evaluate("p", NOW).score
    three = policy_with(ev(1, "a", 0.3), ev(2, "a", 0.3), ev(3, "a", 0.3)).evaluate("p", NOW).score
    assert one == pytest.approx(CAP * 0.3)
    assert three == pytest.approx(CAP * (1 - 0.7**3))
    assert one < three < CAP


def test_default_policy_never_applies_beyond_monitor_but_records_recommendation() -> None:
    policy = policy_with(ev(1, "a"), ev(2, "b"), ev(3, "c"), ev(4, "d"))
    decision = policy.evaluate("p", NOW)
    assert decision.recommended == SanctionLevel.PERMANENT_BAN
    assert decision.applied == SanctionLevel.MONITOR
    assert decision.needs_review
    operator = SanctionConfig(auto_apply_max=SanctionLevel.PERMANENT_BAN)
    auto = policy_with(ev(1, "a"), ev(2, "b"), ev(3, "c"), ev(4, "d"), config=operator).evaluate("p", NOW)
    assert auto.applied == SanctionLevel.PERMANENT_BAN and auto.needs_review


def test_temp_ban_has_a_24h_expiry() -> None:
    decision = policy_with(ev(1, "a"), ev(2, "b")).evaluate("p", NOW)
    assert decision.recommended == SanctionLevel.TEMP_BAN_REVIEW
    assert decision.expires_at == NOW + 24 * 3600


def test_link_problems_recommend_kick_without_adding_to_the_score() -> None:
    policy = policy_with(ev(1, "bustaim", 1.0, kind="desync"))
    decision = policy.evaluate("p", NOW + 10)
    assert decision.score == 0.0 and decision.recommended == SanctionLevel.KICK and decision.link_problem
    assert decision.applied == SanctionLevel.MONITOR
    assert policy.evaluate("p", NOW + 120).recommended == SanctionLevel.LOG


def test_config_refuses_a_cap_letting_one_detector_ban() -> None:
    with pytest.raises(ValueError, match="single detector"):
        SanctionConfig(detector_cap=0.7)
    SanctionConfig(detector_cap=0.7, allow_single_detector_ban=True)
    with pytest.raises(ValueError):
        SanctionConfig(monitor_threshold=0.9)
    with pytest.raises(ValueError):
        SanctionConfig(recency_tau_days=0.0)


def test_evidence_is_bounded_per_player() -> None:
    policy = SanctionPolicy(SanctionConfig(max_evidence_per_player=10))
    for i in range(53):
        policy.add(ev(i, "a", 0.1, age_days=(53 - i) / 100))
        assert len(policy.evidence("p")) <= 12  # trimmed in chunks of a quarter of the bound
    ids = [e.id for e in policy.evidence("p")]
    assert ids == list(range(53 - len(ids), 53)) and len(ids) >= 10  # equal severity: the newest stay
    # The decision after trimming equals a fresh policy fed the same kept evidence.
    fresh = policy_with(*policy.evidence("p"))
    assert policy.evaluate("p", NOW) == fresh.evaluate("p", NOW)


def test_a_flood_from_one_detector_never_evicts_another_family() -> None:
    policy = SanctionPolicy(SanctionConfig(max_evidence_per_player=50, max_evidence_per_family=20))
    policy.add(ev(0, "iw4m", 0.9, age_days=5))
    policy.add(ev(1, "bustaim", 0.95, age_days=6))  # strong but old
    for i in range(2, 500):
        policy.add(ev(i, "bustaim", 0.5 if i % 2 else 0.1, age_days=0.01))
    kept = policy.evidence("p")
    assert kept[0].id == 0 and len(kept) <= 62
    bustaim = [e for e in kept if e.detector == "bustaim"]
    # Each trim cuts bustaim to its 20 weightiest (fresh 0.5s); weak 0.1s only live until the next trim.
    assert sum(e.severity == 0.5 for e in bustaim) >= 20
    assert sum(e.severity == 0.1 for e in bustaim) <= (62 - 21) // 2 + 1
    assert "iw4m" in {f for f, _ in policy.evaluate("p", NOW).families}


def test_evaluation_time_is_quantised_to_the_step() -> None:
    item = ev(1, "a", 0.5, age_days=14)
    policy = policy_with(item)
    assert policy.step_time(NOW + 59.0) == NOW
    assert policy.evaluate("p", NOW + 59.0).score == policy.evaluate("p", NOW).score
    exact = policy_with(item, config=SanctionConfig(evaluation_step_s=0.0))
    assert exact.evaluate("p", NOW + 59.0).score < exact.evaluate("p", NOW).score
    assert exact.evaluate("p", NOW + 59.0).score == pytest.approx(
        CAP * 0.5 * math.exp(-(14 * DAY_S + 59) / (7 * DAY_S))
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), severities, st.floats(0.0, 40.0), st.floats(0.0, 200_000.0)),
        min_size=1,
        max_size=25,
    )
)
def test_cached_tallies_equal_a_fresh_evaluation(items: list[tuple[str, float, float, float]]) -> None:
    """Interleaving adds and evaluations at advancing times never changes the answer."""
    live = SanctionPolicy(SanctionConfig(max_evidence_per_player=8))
    t = NOW
    for i, (detector, severity, age_days, advance_s) in enumerate(items):
        t += advance_s
        live.add(Evidence(i, "p", detector, "k", severity, t - age_days * DAY_S, ""))
        if i % 3 == 0:
            live.dismiss("p", [i - 1])
        decision = live.evaluate("p", t)
        fresh = policy_with(*live.evidence("p"), config=live.config)
        assert decision == fresh.evaluate("p", t)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), severities, st.floats(0.0, 40.0)), max_size=30),
    st.one_of(st.none(), st.floats(0.0, 2000.0)),
)
def test_score_stays_in_unit_interval_and_one_family_never_bans(
    items: list[tuple[str, float, float]], account_age_days: float | None
) -> None:
    policy = policy_with(*(ev(i, d, s, a) for i, (d, s, a) in enumerate(items)))
    policy.set_account_created("p", None if account_age_days is None else NOW - account_age_days * DAY_S)
    decision = policy.evaluate("p", NOW)
    assert 0.0 <= decision.score <= 1.0
    if len({d for d, _, _ in items}) <= 1:
        assert decision.recommended < SanctionLevel.TEMP_BAN_REVIEW
    # Adding evidence never lowers the score.
    policy.add(ev(999, "a", 0.5))
    assert policy.evaluate("p", NOW).score >= decision.score - 1e-12


# --- review queue and appeals ------------------------------------------------------------


def strong_policy() -> SanctionPolicy:
    return policy_with(ev(1, "a"), ev(2, "b"))


def test_review_item_opens_once_and_escalates_in_place() -> None:
    policy = strong_policy()
    queue = ReviewQueue(policy)
    item = queue.open(policy.evaluate("p", NOW))
    assert item is not None and item.status == ReviewStatus.PENDING
    assert item.recommended == SanctionLevel.TEMP_BAN_REVIEW and item.applied == SanctionLevel.MONITOR
    assert item.evidence_ids == (1, 2)
    assert queue.open(policy.evaluate("p", NOW)) is None  # same level: nothing new
    policy.add(ev(3, "c"))
    policy.add(ev(4, "d"))
    escalated = queue.open(policy.evaluate("p", NOW))
    assert escalated is not None and escalated.id == item.id
    assert escalated.recommended == SanctionLevel.PERMANENT_BAN and escalated.evidence_ids == (1, 2, 3, 4)
    assert queue.pending() == (escalated,)
    assert queue.open(SanctionPolicy().evaluate("q", NOW)) is None  # LOG needs no review


def test_confirm_records_reviewer_and_expiry() -> None:
    policy = strong_policy()
    queue = ReviewQueue(policy)
    item = queue.open(policy.evaluate("p", NOW))
    assert item is not None
    done = queue.confirm(item.id, "admin", "watched the demo", NOW + 60)
    assert done.status == ReviewStatus.CONFIRMED and done.reviewer == "admin"
    assert done.confirmed_level == SanctionLevel.TEMP_BAN_REVIEW and done.expires_at == NOW + 60 + DAY_S
    assert queue.pending() == ()
    with pytest.raises(ReviewError, match="already confirmed"):
        queue.dismiss(item.id, "admin", "", NOW)
    # Evidence still counts after a confirmation.
    assert policy.evaluate("p", NOW).recommended == SanctionLevel.TEMP_BAN_REVIEW


def test_dismiss_makes_the_evidence_stop_counting() -> None:
    policy = strong_policy()
    queue = ReviewQueue(policy)
    item = queue.open(policy.evaluate("p", NOW))
    assert item is not None
    policy.add(ev(3, "c", 0.5))  # arrives after the item was opened: not covered by the dismissal
    queue.dismiss(item.id, "admin", "lag, not aimbot", NOW)
    after = policy.evaluate("p", NOW)
    assert after.score == pytest.approx(CAP * 0.5)
    assert [f for f, _ in after.families] == ["c"]
    assert all(e.dismissed for e in policy.evidence("p") if e.id in (1, 2))


def test_appeals_are_filed_and_decided() -> None:
    policy = strong_policy()
    queue = ReviewQueue(policy)
    item = queue.open(policy.evaluate("p", NOW))
    assert item is not None
    queue.confirm(item.id, "admin", "", NOW)
    with pytest.raises(ReviewError):
        queue.file_appeal("someone-else", item.id, "not me", NOW)
    appeal = queue.file_appeal("p", item.id, "I was lagging", NOW + 10)
    assert appeal.status == AppealStatus.PENDING
    with pytest.raises(ReviewError, match="already pending"):
        queue.file_appeal("p", item.id, "again", NOW + 11)
    rejected = queue.decide_appeal(appeal.id, "senior", False, "demo is clear", NOW + 20)
    assert rejected.status == AppealStatus.REJECTED
    assert queue.get(item.id).status == ReviewStatus.CONFIRMED
    second = queue.file_appeal("p", item.id, "new evidence", NOW + 30)
    granted = queue.decide_appeal(second.id, "senior", True, "desync confirmed", NOW + 40)
    assert granted.status == AppealStatus.GRANTED
    assert queue.get(item.id).status == ReviewStatus.OVERTURNED
    assert policy.evaluate("p", NOW).score == 0.0
    assert queue.appeals("p") == (rejected, granted)
    with pytest.raises(ReviewError):
        queue.decide_appeal(second.id, "senior", True, "", NOW)


def test_restore_continues_ids() -> None:
    policy = strong_policy()
    queue = ReviewQueue(policy)
    item = queue.open(policy.evaluate("p", NOW))
    assert item is not None
    appeal = queue.file_appeal("p", item.id, "x", NOW)
    fresh = ReviewQueue(policy)
    fresh.restore(queue.items(), queue.appeals())
    assert fresh.pending() == (item,)
    policy.add(ev(5, "x", player="q"))
    policy.add(ev(6, "y", player="q"))
    assert fresh.open(policy.evaluate("q", NOW)).id == item.id + 1  # type: ignore[union-attr]
    assert fresh.appeals() == (appeal,)
    fresh.decide_appeal(appeal.id, "admin", False, "", NOW)
    assert fresh.file_appeal("p", item.id, "y", NOW).id == appeal.id + 1


# --- tolerances --------------------------------------------------------------------------


class Mode(Enum):
    STRICT = "strict"
    LENIENT = "lenient"


@dataclass(frozen=True, slots=True)
class Inner:
    radius_m: float = 3.0


@dataclass(frozen=True, slots=True)
class ExampleConfig:
    max_ping_ms: float = 600.0
    probes: int = 3
    enabled: bool = True
    label: str = "x"
    weapons: frozenset[int] = frozenset({7})
    ranges: tuple[float, ...] = (45.0, 50.0)
    pair: tuple[int, str] = (1, "a")
    mode: Mode = Mode.STRICT
    limit: float | None = None
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        if self.probes < 1:
            raise ValueError("probes must be >= 1")


def test_overrides_load_and_apply() -> None:
    text = """
    [example]
    max_ping_ms = 400
    probes = 5
    enabled = false
    label = "y"
    weapons = [1, 2]
    ranges = [10, 20.5, 30]
    pair = [2, "b"]
    mode = "lenient"
    limit = 2.5

    [example.inner]
    radius_m = 1.5
    """
    overrides = load_overrides(text)
    cfg = apply_overrides(ExampleConfig(), overrides["example"], "example")
    assert cfg == ExampleConfig(
        max_ping_ms=400.0,
        probes=5,
        enabled=False,
        label="y",
        weapons=frozenset({1, 2}),
        ranges=(10.0, 20.5, 30.0),
        pair=(2, "b"),
        mode=Mode.LENIENT,
        limit=2.5,
        inner=Inner(1.5),
    )
    assert isinstance(cfg.max_ping_ms, float)
    assert apply_overrides(ExampleConfig(), {}) == ExampleConfig()


def test_overrides_from_a_file_and_apply_all(tmp_path: Path) -> None:
    path = tmp_path / "tolerances.toml"
    path.write_text('[sanctions]\nauto_apply_max = "kick"\nfamilies = [["bustaim", "aim"]]\n[example]\nprobes = 2\n')
    configs = apply_all({"sanctions": SanctionConfig(), "example": ExampleConfig()}, load_overrides(path))
    sanctions, example = configs["sanctions"], configs["example"]
    assert isinstance(sanctions, SanctionConfig) and isinstance(example, ExampleConfig)
    assert sanctions.auto_apply_max == SanctionLevel.KICK
    assert sanctions.families == (("bustaim", "aim"),)
    assert example.probes == 2
    with pytest.raises(ToleranceError, match="unknown section"):
        apply_all({"example": ExampleConfig()}, {"exmaple": {}})
    with pytest.raises(ToleranceError, match="cannot read"):
        load_overrides(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_pingms": 1.0}, r"\[example\] unknown key 'max_pingms'"),
        ({"max_ping_ms": "fast"}, r"\[example\] max_ping_ms: expected a number"),
        ({"max_ping_ms": True}, r"\[example\] max_ping_ms: expected a number"),
        ({"max_ping_ms": math.inf}, r"\[example\] max_ping_ms: must be a finite number"),
        ({"max_ping_ms": math.nan}, r"must be a finite number"),
        ({"probes": 2.0}, r"\[example\] probes: expected an integer"),
        ({"enabled": 1}, r"\[example\] enabled: expected true or false"),
        ({"weapons": 7}, r"\[example\] weapons: expected an array"),
        ({"weapons": [1, "x"]}, r"\[example\] weapons\[1\]: expected an integer"),
        ({"pair": [1]}, r"expected an array of 2 items"),
        ({"mode": "wild"}, r"\[example\] mode: 'wild' is not a Mode"),
        ({"probes": 0}, r"\[example\] rejected by ExampleConfig: probes must be >= 1"),
        ({"inner": {"radius": 1.0}}, r"\[example.inner\] unknown key 'radius'"),
    ],
)
def test_override_errors_name_section_and_key(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ToleranceError, match=message):
        apply_overrides(ExampleConfig(), overrides, "example")


def test_invalid_toml_and_non_table_sections() -> None:
    with pytest.raises(ToleranceError, match="invalid TOML"):
        load_overrides("[broken")
    with pytest.raises(ToleranceError, match="must be a table"):
        load_overrides("max_ping_ms = 3")
    # nan is valid TOML, so it parses; it is refused when applied.
    with pytest.raises(ToleranceError, match="finite"):
        apply_overrides(ExampleConfig(), load_overrides("[e]\nmax_ping_ms = nan")["e"], "e")
