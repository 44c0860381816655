"""Calibrated kind weights and conclusive kinds in the sanction policy."""

from __future__ import annotations

import math

import pytest

from anticheat.events import Detection
from anticheat.judgement.sanctions import (
    SanctionConfig,
    SanctionLevel,
    SanctionPolicy,
    count_log_ratio,
    fired_log_ratio,
)
from testbed.lab.calibrate import findings_to_conclude

NOW = 1_700_000_000.0


def _detection(detector: str, kind: str, severity: float = 1.0) -> Detection:
    return Detection(player=0, tick=1, time_s=0.0, detector=detector, kind=kind, value=1.0, severity=severity,
                     reason=f"{detector}-{kind}", evidence={})


def test_a_weak_kind_weighs_its_weight_and_stays_at_log() -> None:
    cfg = SanctionConfig(kind_weights=(("aimdetect.aimbot", 0.05),), evaluation_step_s=0.0)
    policy = SanctionPolicy(cfg)
    policy.add_detection(1, "p", _detection("aimdetect", "aimbot", 0.8), NOW)
    d = policy.evaluate("p", NOW)
    assert d.score == pytest.approx(cfg.detector_cap * 0.05)  # the kind's weight replaces the severity 0.8
    assert d.recommended is SanctionLevel.LOG


RATES = (("movement.speed", 0.1, 300.0), ("movement.timer", 0.1, 300.0))


def _posterior(n: int, honest: float, cheat: float, cfg: SanctionConfig) -> float:
    log_odds = (math.log(cfg.conclusive_prior / (1 - cfg.conclusive_prior)) + n * math.log(cheat / honest)
                - (cheat - honest) * cfg.conclusive_window_s / 3600)
    return 1 / (1 + math.exp(-log_odds))


def test_a_count_the_cheat_would_produce_is_conclusive_and_recommends_kick() -> None:
    cfg = SanctionConfig(kind_weights=(("movement.speed", 0.8), ("movement", 0.5)), kind_rates=RATES,
                         evaluation_step_s=0.0)
    assert cfg.kind_weight("movement", "speed") == 0.8 and cfg.kind_weight("movement", "timer") == 0.5
    assert cfg.kind_weight("fire", "rapid_fire") == 1.0
    # ln(3000) = 8.0 a finding against 25 for the 300 s window: 4 findings pass, 3 do not.
    assert _posterior(3, 0.1, 300.0, cfg) < cfg.conclusive_weight <= _posterior(4, 0.1, 300.0, cfg)
    policy = SanctionPolicy(cfg)
    for i in range(3):
        policy.add_detection(i, "p", _detection("movement", "speed", severity=0.3), NOW + i)
    assert policy.evaluate("p", NOW + 10).recommended is SanctionLevel.LOG  # 0.6 * (1 - 0.2^3) = 0.595
    policy.add_detection(3, "p", _detection("movement", "speed", severity=0.3), NOW + 20)
    d = policy.evaluate("p", NOW + 30)
    assert d.recommended is SanctionLevel.KICK and d.needs_review and d.applied is SanctionLevel.MONITOR
    assert d.reasons[0].startswith("conclusive: movement findings of the last 300 s give a posterior of")
    assert {0, 1, 2, 3} <= set(d.evidence_ids)
    later = policy.evaluate("p", NOW + 20 + cfg.conclusive_window_s + 1)
    assert later.recommended is SanctionLevel.LOG  # the capped score alone: 0.6 * (1 - 0.2^4)
    # Each rated kind present pays for the findings the cheat would have made of it: a timer
    # finding beside three speed findings is a weaker case than a fourth speed finding.
    mixed = SanctionPolicy(cfg)
    for i in range(3):
        mixed.add_detection(i, "q", _detection("movement", "speed"), NOW + i)
    mixed.add_detection(3, "q", _detection("movement", "timer"), NOW + 20)
    assert mixed.evaluate("q", NOW + 30).recommended is SanctionLevel.LOG


def test_a_lone_finding_of_a_kind_cheats_produce_by_the_hundred_is_not_conclusive() -> None:
    cfg = SanctionConfig(kind_rates=RATES, evaluation_step_s=0.0)
    policy = SanctionPolicy(cfg)
    policy.add_detection(1, "p", _detection("movement", "speed", severity=0.3), NOW)
    assert _posterior(1, 0.1, 300.0, cfg) < 1e-6
    assert policy.evaluate("p", NOW + 1).recommended is SanctionLevel.LOG


def test_a_player_observed_for_less_than_the_window_is_judged_on_the_time_observed() -> None:
    cfg = SanctionConfig(kind_rates=RATES, evaluation_step_s=0.0)
    prior = math.log(cfg.conclusive_prior / (1 - cfg.conclusive_prior))

    def posterior(n: int, exposure_s: float) -> float:
        return 1 / (1 + math.exp(-(prior + n * math.log(3000.0) - 299.9 * exposure_s / 3600)))

    # Two speed findings 50 s into a session: against 50 s of play, no cheat-free explanation; against
    # the 300 s window, a cheat would have made about 25.
    assert posterior(2, 300.0) < cfg.conclusive_weight <= posterior(2, 60.0)
    watched, unknown = SanctionPolicy(cfg), SanctionPolicy(cfg)
    watched.observe("p", NOW)
    watched.observe("p", NOW + 40)  # a reconnect: the first connect stays the start
    assert watched.observed_from("p") == NOW and unknown.observed_from("p") is None
    for policy in (watched, unknown):
        policy.add_detection(1, "p", _detection("movement", "speed", severity=0.3), NOW + 10)
        policy.add_detection(2, "p", _detection("movement", "speed", severity=0.3), NOW + 50)
    d = watched.evaluate("p", NOW + 50)
    assert d.recommended is SanctionLevel.KICK
    assert d.reasons[0].startswith("conclusive: movement findings of the last 60 s give a posterior of")
    assert unknown.evaluate("p", NOW + 50).recommended is SanctionLevel.LOG
    # The exposure is never shorter than conclusive_min_window_s: a lone finding in the first
    # seconds is as weak as against a minute (ln 3000 - 5.0 < the 3.9 the prior needs).
    early = SanctionPolicy(cfg)
    early.observe("p", NOW)
    early.add_detection(1, "p", _detection("movement", "speed", severity=0.3), NOW + 2)
    assert posterior(1, 60.0) < cfg.conclusive_weight <= posterior(1, 2.0)
    assert early.evaluate("p", NOW + 2).recommended is SanctionLevel.LOG
    # Memory: a player without evidence is forgotten once a whole window has passed; one with
    # evidence keeps its start (a reconnect is judged with its earlier findings).
    quiet = SanctionPolicy(cfg)
    quiet.observe("q", NOW)
    quiet.observe("p", NOW)
    quiet.add_detection(1, "p", _detection("movement", "speed", severity=0.3), NOW + 5)
    quiet.prune(NOW + cfg.conclusive_window_s - 1)
    assert quiet.observed_from("q") == NOW
    quiet.prune(NOW + cfg.conclusive_window_s)
    assert quiet.observed_from("q") is None and quiet.observed_from("p") == NOW
    quiet.forget("p")
    assert quiet.observed_from("p") is None


def test_the_pipeline_observes_a_player_from_its_connect() -> None:
    from anticheat.events import SessionEvent
    from anticheat.pipeline import DetectionPipeline

    clock = [NOW + 7.0]
    policy = SanctionPolicy(SanctionConfig())
    from anticheat.skip import SkipBook

    pipeline = DetectionPipeline([], SkipBook(), policy=policy, clock=lambda: clock[0])
    pipeline.feed(SessionEvent(player=3, tick=1, time_s=7.0, kind="connect", name="alice"))
    assert policy.observed_from("alice") == NOW + 7.0


def test_unrated_kinds_never_make_a_family_conclusive() -> None:
    policy = SanctionPolicy(SanctionConfig(kind_rates=RATES, evaluation_step_s=0.0))
    for i in range(20):
        policy.add_detection(i, "p", _detection("wallhack", "hidden_tracking"), NOW)
    d = policy.evaluate("p", NOW)
    assert d.score == pytest.approx(0.6) and d.recommended is SanctionLevel.MONITOR


@pytest.mark.parametrize("weights", [(("a.b", 0.0),), (("a.b", 1.5),), (("", 0.5),)])
def test_bad_weights_are_refused(weights: tuple[tuple[str, float], ...]) -> None:
    with pytest.raises(ValueError):
        SanctionConfig(kind_weights=weights)


@pytest.mark.parametrize("rates", [(("a.b", 0.0, 1.0),), (("a.b", 1.0, float("nan")),), (("a.b", 1.0),)])
def test_bad_rates_are_refused(rates: tuple[tuple[str, float, float], ...]) -> None:
    with pytest.raises(ValueError):
        SanctionConfig(kind_rates=rates)


def test_a_repeat_kind_counts_once_however_often_it_fires() -> None:
    # IW4MAdmin's Chest re-tests one session ratio: six findings in the window are one observation.
    rates = (("iw4m.Chest", 0.138, 73.0), ("iw4m.Strain", 0.138, 73.0))
    cfg = SanctionConfig(kind_rates=rates, evaluation_step_s=0.0)
    assert "iw4m.Chest" in cfg.repeat_kinds and "iw4m.Strain" not in cfg.repeat_kinds
    w = cfg.conclusive_window_s / 3600.0
    # By hand: P(fired | cheat) = 1 - e^-6.083 = 0.99772, P(fired | honest) = 1 - e^-0.0115 = 0.011434.
    assert fired_log_ratio(0.138, 73.0, w) == pytest.approx(math.log(0.997718 / 0.0114341), rel=1e-4)
    prior_odds = cfg.conclusive_prior / (1 - cfg.conclusive_prior)
    odds = prior_odds * math.exp(fired_log_ratio(0.138, 73.0, w))
    assert odds / (1 + odds) == pytest.approx(0.640, abs=0.001)
    chest, strain = SanctionPolicy(cfg), SanctionPolicy(cfg)
    for i in range(6):
        chest.add_detection(i, "p", _detection("iw4m", "Chest"), NOW + 10 * i)
        strain.add_detection(i, "p", _detection("iw4m", "Strain"), NOW + 10 * i)
    assert chest.evaluate("p", NOW + 60).recommended < SanctionLevel.KICK
    assert not any(r.startswith("conclusive") for r in chest.evaluate("p", NOW + 60).reasons)
    # The same rates on an independent kind: six findings where 0.0115 are expected conclude.
    assert strain.evaluate("p", NOW + 60).reasons[0].startswith("conclusive: iw4m findings")
    assert findings_to_conclude(0.138, 73.0, cfg, "iw4m.Chest") is None
    assert findings_to_conclude(0.138, 73.0, cfg, "iw4m.Strain") == 3


def test_the_alternative_is_a_mixture_of_the_profiles_that_make_the_kind() -> None:
    # A lock aimbot locks on far less often than a rage aimbot: three findings in 300 s are what
    # the slowest producer makes, and that is evidence, although the fastest would make 180.
    cfg = SanctionConfig(evaluation_step_s=0.0)
    w = cfg.conclusive_window_s / 3600.0
    single = findings_to_conclude(0.138, [2163.0], cfg, "aimsnap.locked_flick")
    assert single is not None and single > 15
    assert findings_to_conclude(0.138, [57.0, 324.0, 2163.0], cfg, "aimsnap.locked_flick") == 3
    # By hand for n = 3: the 57/h term dominates: 3 ln(57 / 0.138) - (57 - 0.138) / 12 - ln 3.
    by_hand = 3 * math.log(57.0 / 0.138) - (57.0 - 0.138) * w - math.log(3.0)
    assert count_log_ratio(3, 0.138, [57.0, 324.0, 2163.0], w) == pytest.approx(by_hand, abs=1e-6)
    rates = (("aimsnap.locked_flick", 0.138, 2163.0),)
    profiles = tuple(("aimsnap.locked_flick", c) for c in (57.0, 324.0, 2163.0))
    mixed = SanctionPolicy(SanctionConfig(kind_rates=rates, kind_profile_rates=profiles, evaluation_step_s=0.0))
    fastest = SanctionPolicy(SanctionConfig(kind_rates=rates, evaluation_step_s=0.0))
    for policy in (mixed, fastest):
        for i in range(3):
            policy.add_detection(i, "p", _detection("aimsnap", "locked_flick"), NOW + 20 * i)
    assert mixed.evaluate("p", NOW + 60).reasons[0].startswith("conclusive: aimsnap findings")
    assert not any(r.startswith("conclusive") for r in fastest.evaluate("p", NOW + 60).reasons)
    with pytest.raises(ValueError):
        SanctionConfig(kind_profile_rates=(("a.b", -1.0),))
