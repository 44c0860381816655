"""The fake-lag (choke) detector against hand-made silences and against the link emulator."""

from __future__ import annotations

import numpy as np
import pytest

from anticheat.detectors.choke import ChokeConfig, ChokeDetector
from anticheat.detectors.cusum import average_run_length
from anticheat.events import ConnectionSample
from anticheat.skip import SkipBook
from testbed.link import Link, LinkConfig

DT = 1.0 / 64.0
SAMPLE_S = 0.25


def _sample(t: float, silences_ms: tuple[float, ...] = (), since_update_s: float = 0.0) -> ConnectionSample:
    return ConnectionSample(player=3, time_s=t, rtt_ms=70.0, jitter_ms=20.0, loss=0.0,
                            since_update_s=since_update_s, silences_ms=silences_ms, tick=int(t * 64))


def _feed(det: ChokeDetector, per_second: list[tuple[float, ...]]) -> list[float]:
    """One second per entry: its silences go in the second's last sample (they ended within it).
    Returns the detection times (s)."""
    skip, found = SkipBook(), []
    found += [d.time_s for d in det.on_connection(_sample(0.0), skip)]
    for second, silences in enumerate(per_second):
        for k in range(1, 5):
            t = second + k * SAMPLE_S
            found += [d.time_s for d in det.on_connection(_sample(t, silences if k == 4 else ()), skip)]
    return found


def test_each_second_is_one_verdict_and_the_alarm_comes_when_the_walk_reaches_h() -> None:
    """Every second with two 150 ms silences adds ln(0.9/0.1) = 2.197; h is 15.39 for one false
    alarm per 10,000 player-hours, and 7 x 2.197 = 15.38 falls just short: the 8th positive
    second alarms, and the walk starts again from zero."""
    det = ChokeDetector()
    assert det.threshold == pytest.approx(15.39, abs=0.01)
    assert 7 * np.log(9.0) < det.threshold <= 8 * np.log(9.0)
    times = _feed(det, [(150.0, 150.0)] * 17)
    assert times == [8.0, 16.0]


@pytest.mark.parametrize("silences", [(300.0,), (120.0, 130.0, 110.0), (1500.0, 200.0, 200.0)])
def test_one_long_silence_a_second_short_ones_or_outages_are_not_choke(silences: tuple[float, ...]) -> None:
    """One hold a second, holds under 140 ms, or a second with an outage (over 1 s: not judged)."""
    det = ChokeDetector()
    assert _feed(det, [silences] * 120) == []
    assert det.scores(3).get("fake_lag", 0.0) == 0.0


def test_a_negative_second_takes_back_what_a_positive_one_added() -> None:
    det = ChokeDetector()
    assert _feed(det, [(150.0, 150.0), ()] * 200) == []
    assert 0.0 < det.scores(3)["fake_lag"] < 0.2


def _arrivals(cfg: LinkConfig, fake: bool, seconds: float, seed: int) -> np.ndarray:
    """Arrival times (s) of a 64 Hz client's datagrams over ``cfg``; ``fake`` holds them
    100-300 ms at a time and releases them together (the fake_lag bot's schedule)."""
    rng, link = np.random.default_rng(seed), Link(cfg, np.random.default_rng(seed + 1))
    out: list[float] = []
    held, hold_until = 0, None
    for i in range(int(seconds / DT)):
        t = i * DT
        out += [t] * len(link.due(t))
        if fake:
            if hold_until is None:
                hold_until = t + float(rng.uniform(0.1, 0.3))
            if t < hold_until - 1e-9:
                held += 1
                continue
            hold_until = None
            for _ in range(held):
                link.submit(b"x", t)
            held = 0
        link.submit(b"x", t)
    return np.asarray(out)


def _play(det: ChokeDetector, arrivals: np.ndarray) -> list[float]:
    """The arrivals' silences of 80 ms or more, sampled every 0.25 s as the server does."""
    gaps = np.diff(arrivals)
    ends, lengths = arrivals[1:][gaps >= 0.08], gaps[gaps >= 0.08]
    found, skip = [], SkipBook()
    for k in range(int(arrivals[-1] / SAMPLE_S)):
        t = (k + 1) * SAMPLE_S
        inside = (ends > t - SAMPLE_S) & (ends <= t)
        found += [d.time_s for d in det.on_connection(_sample(t, tuple(lengths[inside] * 1000.0)), skip)]
    return found


@pytest.mark.parametrize("ping_ms, jitter_ms, loss", [(20.0, 1.0, 0.0), (150.0, 35.0, 0.02), (300.0, 20.0, 0.05)])
def test_fake_lag_is_flagged_within_15_s_and_the_same_link_played_honestly_for_an_hour_is_not(
    ping_ms: float, jitter_ms: float, loss: float,
) -> None:
    cfg = LinkConfig(latency_ms=ping_ms / 2.0, jitter_ms=jitter_ms, loss=loss)
    fake = _play(ChokeDetector(), _arrivals(cfg, True, 60.0, 5))
    assert fake and fake[0] <= 15.0
    honest = ChokeDetector()
    assert _play(honest, _arrivals(cfg, False, 3600.0, 6)) == []
    assert honest.scores(3)["fake_lag"] < 0.5


def test_the_heavy_tailed_wifi_link_sits_near_theta0() -> None:
    """The default theta0 is the share of positive seconds on the harshest honest link measured,
    35 ms of Pareto-tailed jitter: an hour of it stays within sampling error of 0.10, and its
    CUSUM's average run length at that rate is the configured 10,000 player-hours."""
    cfg = LinkConfig(latency_ms=75.0, jitter_ms=35.0, loss=0.02, jitter_distribution="pareto_normal")
    arrivals = _arrivals(cfg, False, 3600.0, 8)
    gaps = np.diff(arrivals)
    ends = arrivals[1:][(gaps >= 0.14) & (gaps <= 1.0)]
    per_second = np.bincount(ends.astype(int), minlength=3600)[:3600]
    theta = float(np.mean(per_second >= 2))
    assert abs(theta - ChokeConfig().theta0) < 0.03
    det = ChokeDetector()
    arl_hours = average_run_length(ChokeConfig().theta0, 0.1, 0.9, det.threshold) / 3600.0
    # The walk moves in whole steps of ln 9: the first threshold past 10,000 h gives 16,800.
    assert 10_000.0 <= arl_hours < 20_000.0


def test_config_rejects_nonsense() -> None:
    for bad in ({"hold_s": 0.0}, {"hold_s": 2.0}, {"theta0": 0.95}, {"holds_per_window": 0},
                {"false_alarm_player_hours": -1.0}, {"window_s": 0.0}):
        with pytest.raises(ValueError):
            ChokeConfig(**bad)
