"""Connection measurements against a simulated link with known delay, jitter and loss."""

from __future__ import annotations

import random

import pytest

from server.netstats import NetStats, NetStatsConfig

TICK_S = 1.0 / 128.0


def run_link(
    seconds: float, one_way_s: float, jitter_s: float = 0.0, drop: float = 0.0, seed: int = 1
) -> tuple[NetStats, list[float]]:
    """Simulate a 128 Hz client on a link: every tick a snapshot leaves, the client answers it
    with an INPUT (acking that tick) after ``one_way_s`` (+ uniform jitter), and that INPUT
    arrives ``one_way_s`` (+ jitter) later unless dropped. Returns the stats and the loss figure
    after each arrival."""
    stats = NetStats()
    losses: list[float] = []
    stats.open(0, 0.0)
    rng = random.Random(seed)
    pending: list[tuple[float, int, float]] = []
    ticks = int(seconds / TICK_S)
    for tick in range(ticks):
        now = tick * TICK_S
        pending.sort()
        while pending and pending[0][0] <= now:
            arrival, seq, client_send = pending.pop(0)
            stats.on_packet(0, seq, client_send, arrival)
            stats.on_ack(0, seq, arrival)
            losses.append(stats.client(0).loss)
        stats.on_snapshot_sent(0, tick, now)
        client_send = now + one_way_s + rng.uniform(0.0, jitter_s)
        if rng.random() >= drop:
            pending.append((client_send + one_way_s + rng.uniform(0.0, jitter_s), tick, client_send))
    return stats, losses


def test_rtt_converges_to_the_true_delay() -> None:
    stats, _ = run_link(3.0, one_way_s=0.040)
    sample = stats.sample(0, 3.0)
    assert sample.rtt_samples > 300
    assert sample.rtt_ms == pytest.approx(80.0, abs=0.5)


def test_rtt_follows_a_change_with_alpha_one_eighth() -> None:
    stats = NetStats()
    client = stats.open(0, 0.0)
    client.on_rtt_sample(0.100)
    assert client.srtt_s == pytest.approx(0.100)
    client.on_rtt_sample(0.200)
    assert client.srtt_s == pytest.approx(0.100 + 0.100 / 8)
    for _ in range(60):
        client.on_rtt_sample(0.200)
    assert client.srtt_s == pytest.approx(0.200, abs=0.001)
    for bad in (-0.1, float("nan"), float("inf"), 10.0):
        client.on_rtt_sample(bad)
    assert client.rtt_samples == 62


def test_repeated_ack_gives_one_sample_and_unknown_ticks_none() -> None:
    stats = NetStats()
    stats.open(0, 0.0)
    stats.on_snapshot_sent(0, 10, 1.0)
    stats.on_snapshot_sent(0, 10, 1.001)  # a second part of the same tick keeps the first time
    stats.on_ack(0, 10, 1.05)
    stats.on_ack(0, 10, 1.2)
    stats.on_ack(0, None, 1.3)
    stats.on_ack(0, 500, 1.3)  # never sent (or forgotten): no sample
    sample = stats.sample(0, 1.3)
    assert sample.rtt_samples == 1
    assert sample.rtt_ms == pytest.approx(50.0)


def test_jitter_of_a_constant_delay_is_zero() -> None:
    stats, _ = run_link(2.0, one_way_s=0.030)
    assert stats.sample(0, 2.0).jitter_ms < 1e-6


def test_jitter_of_a_random_delay() -> None:
    # Delay uniform in [0, 20 ms]: E|D| for the difference of two uniforms = 20/3 ms.
    stats, _ = run_link(20.0, one_way_s=0.030, jitter_s=0.020)
    assert stats.sample(0, 20.0).jitter_ms == pytest.approx(20.0 / 3.0, rel=0.2)


def test_loss_of_ten_percent() -> None:
    stats, losses = run_link(40.0, one_way_s=0.02, drop=0.10, seed=3)
    settled = losses[len(losses) // 10 :]
    assert sum(settled) / len(settled) == pytest.approx(0.10, abs=0.01)
    assert stats.sample(0, 40.0).loss == pytest.approx(0.10, abs=0.06)


def test_no_loss_and_reordering_is_not_loss() -> None:
    stats = NetStats()
    client = stats.open(0, 0.0)
    for seq in [0, 2, 1, 3, 5, 4, 6, 7]:
        client.on_packet(seq, None, 0.0)
    assert client.loss == 0.0
    client.on_packet(7, None, 0.0)  # a duplicate does not count twice
    assert client.loss == 0.0


def test_loss_gap_and_big_jump() -> None:
    cfg = NetStatsConfig(loss_window=100)
    stats = NetStats(cfg)
    client = stats.open(0, 0.0)
    for seq in range(0, 100, 2):
        client.on_packet(seq, None, 0.0)
    assert client.loss == pytest.approx(0.5, abs=0.011)
    client.on_packet(10_000, None, 0.0)  # a jump past the whole window
    assert client.loss == pytest.approx(0.99)
    for seq in range(10_001, 10_100):
        client.on_packet(seq, None, 0.0)
    assert client.loss == 0.0


def test_since_update_measures_silence() -> None:
    stats = NetStats()
    stats.open(2, 5.0)
    assert stats.sample(2, 6.0).since_update_s == pytest.approx(1.0)
    stats.on_packet(2, 0, 6.0, 6.5)
    s = stats.sample(2, 9.5)
    assert s.since_update_s == pytest.approx(3.0)
    assert (s.slot, s.time_s, s.packets) == (2, 9.5, 1)
    stats.close(2)
    assert 2 not in stats


def test_samples_lists_every_open_slot() -> None:
    stats = NetStats()
    for slot in (5, 1, 3):
        stats.open(slot, 0.0)
    assert [s.slot for s in stats.samples(1.0)] == [1, 3, 5]


def test_silences_are_held_time_between_arrivals_and_are_taken_once() -> None:
    """A silence is an arrival gap beyond the gap between the two packets' send times, kept when
    at least ``silence_min_s`` (80 ms), with its end time, and handed out once when it ended by
    the time asked. A client that stopped sending (its next packet stamped late) made its own
    silence: none."""
    stats = NetStats(NetStatsConfig(silence_min_s=0.08))
    client = stats.open(0, 0.0)
    sends = [5.0, 5.0156, 5.0312, 5.0468, 5.0624, 5.078, 5.0936, 5.1092]
    arrivals = [5.03, 5.0456, 5.2456, 5.2456, 5.2612, 5.34, 5.3556, 5.4556]
    for seq, (sent, t) in enumerate(zip(sends, arrivals, strict=True)):
        client.on_input(seq, sent, None, t)
    (end, length), = client.take_silences(5.3)
    assert (end, length) == pytest.approx((5.2456, 0.2 - 0.0156))
    (end, length), = client.take_silences(5.5)
    assert (end, length) == pytest.approx((5.4556, 0.1 - 0.0156))
    assert client.take_silences(5.5) == ()
    assert len(client.recent_silences()) == 2
    # Stalled for 0.5 s: the next packet was sent 0.5 s later too.
    client.on_input(8, 5.6092, None, 5.9456)
    assert client.take_silences(6.0) == ()
    with pytest.raises(ValueError):
        NetStatsConfig(silence_min_s=0.0)


def test_a_silence_most_players_share_has_a_common_cause() -> None:
    """A server stall or a starved process running many clients silences everyone at once; a
    fake lagger is silent alone."""
    from server.detection import shared_silence

    alone = [[(3.0, 0.1)], [], [(9.0, 0.2)]]
    assert not shared_silence(10.0, 0.2, alone)
    # Two of three others silent over most of the same 200 ms (one ended a little later).
    assert shared_silence(10.0, 0.2, [[(10.05, 0.2)], [(9.99, 0.15)], []])
    # Overlapping less than half of it does not count.
    assert not shared_silence(10.0, 0.2, [[(9.85, 0.2)], [(9.85, 0.2)], []])
    # With fewer than two others there is no telling.
    assert not shared_silence(10.0, 0.2, [[(10.0, 0.2)]])
