"""Per-client connection measurements: round trip, jitter, loss, time since the last packet.

- Round trip (RTT): the server remembers when it sent each tick's snapshot; when an INPUT acks a
  tick for the first time, now - sent is one sample. It includes the client's wait until its next
  input (at most one client tick, 7.8 ms at 128 Hz). Samples are smoothed like TCP's SRTT
  (RFC 6298: alpha 1/8). Other sources (e.g. a client-echoed timestamp) can feed
  :meth:`ClientNetStats.on_rtt_sample`.
- Jitter: RFC 3550's interarrival jitter from the client's send time (INPUT/PING
  ``client_time_s``) and the arrival time: D = change in (arrival - send) between consecutive
  packets, J += (|D| - J) / 16. The clocks' offset cancels out.
- Loss: fraction of the packet sequence numbers missing over the newest ``loss_window`` numbers.
- Since update: time since the last packet arrived (a paused or AFK client stops sending).
- Silences: each gap between two packets' arrivals longer than the gap between their send
  times (``client_time_s``) by at least ``silence_min_s``, kept until
  :meth:`ClientNetStats.take_silences` hands them to the detectors. A client that holds its
  datagrams (fake lag) shows as a run of such gaps, and so does a late packet on a jittery link;
  a client that stopped (a stalled process, a hitch) sends nothing in between and stamps its next
  packet late, so its silence is its own and is not one.

Pure: every call takes the time (s) from the caller. Everything is stored in seconds and
reported in milliseconds (RTT, jitter), a 0..1 fraction (loss) and seconds (since update).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


_MAX_RING = 16384
"""Longest per-client ring (packets or ticks): over two minutes at 128 Hz."""

_MAX_SILENCES = 64
"""Most silences a client keeps (2 s hold at most 25 of 80 ms)."""

SILENCE_MEMORY_S = 2.0
"""How long (s) a client's silences are kept, to compare with the other clients'."""


@dataclass(frozen=True, slots=True)
class NetStatsConfig:
    """Estimator settings.

    Attributes:
        rtt_alpha: SRTT gain per sample (RFC 6298's 1/8).
        jitter_gain: jitter gain per packet (RFC 3550's 1/16).
        loss_window: packets over which loss is measured (the replay window's 256: 2 s at 128 Hz).
        snapshot_history: ticks whose send time is remembered for ack RTT (64: 0.5 s at 128 Hz;
            an ack older than that gives no sample).
        max_rtt_s: samples above this (s) are discarded as nonsense (sv_maxunlag is 1 s).
        silence_min_s: arrival gaps exceeding their send-time gap by at least this much (s) are
            kept as silences (80 ms: five 64 Hz packets; below any choke a detector judges).
    """

    rtt_alpha: float = 1.0 / 8.0
    jitter_gain: float = 1.0 / 16.0
    loss_window: int = 256
    snapshot_history: int = 64
    max_rtt_s: float = 2.0
    silence_min_s: float = 0.08

    def __post_init__(self) -> None:
        if not 0.0 < self.rtt_alpha <= 1.0 or not 0.0 < self.jitter_gain <= 1.0:
            raise ValueError("rtt_alpha and jitter_gain must lie in (0, 1]")
        # Each client keeps rings this long: a billion (a typo) asked for gigabytes per connection.
        if not (1 <= self.loss_window <= _MAX_RING and 1 <= self.snapshot_history <= _MAX_RING):
            raise ValueError(f"loss_window and snapshot_history must lie in [1, {_MAX_RING}]")
        if not (math.isfinite(self.max_rtt_s) and self.max_rtt_s > 0.0):
            raise ValueError("max_rtt_s must be positive and finite")
        if not (math.isfinite(self.silence_min_s) and self.silence_min_s > 0.0):
            raise ValueError("silence_min_s must be positive and finite")


@dataclass(frozen=True, slots=True)
class NetSample:
    """One client's connection quality at ``time_s``.

    Attributes:
        slot: player slot. time_s: server time of the sample (s).
        rtt_ms: smoothed round trip (ms), 0 until ``rtt_samples`` > 0.
        rtt_samples: RTT samples taken so far.
        jitter_ms: interarrival jitter (ms).
        loss: fraction (0..1) of sequence numbers missing over the loss window.
        packets: packets counted so far.
        since_update_s: time since the last packet (s); before the first packet, time since the
            session opened.
    """

    slot: int
    time_s: float
    rtt_ms: float
    rtt_samples: int
    jitter_ms: float
    loss: float
    packets: int
    since_update_s: float


class ClientNetStats:
    """Measurements of one client (bounded state: two fixed rings)."""

    __slots__ = (
        "config", "srtt_s", "rtt_samples", "jitter_s", "packets", "last_packet_s",
        "_prev_transit_s", "_received", "_received_count", "_newest_seq", "_first_seq",
        "_sent_tick", "_sent_time_s", "_last_acked_tick", "_newest_sent_tick", "_silences", "_prev_client_s",
        "_taken_until_s",
    )

    def __init__(self, config: NetStatsConfig, now_s: float) -> None:
        self.config = config
        self.srtt_s = 0.0
        self.rtt_samples = 0
        self.jitter_s = 0.0
        self.packets = 0
        self.last_packet_s = now_s
        self._prev_transit_s: float | None = None
        self._received = [False] * config.loss_window
        self._received_count = 0
        self._newest_seq = -1
        self._first_seq = -1
        self._sent_tick = [-1] * config.snapshot_history
        self._sent_time_s = [0.0] * config.snapshot_history
        self._last_acked_tick = -1
        self._newest_sent_tick = -1
        # (end s, length s) of the silences of the last SILENCE_MEMORY_S.
        self._silences: list[tuple[float, float]] = []
        self._prev_client_s: float | None = None
        self._taken_until_s = -math.inf

    # -- arrivals ------------------------------------------------------------------------------

    def on_packet(self, seq: int, client_time_s: float | None, now_s: float) -> None:
        """An authenticated packet with sequence ``seq`` sent at ``client_time_s`` (client clock,
        s, None if the packet has none) arrived at ``now_s`` (s)."""
        self.on_input(seq, client_time_s, None, now_s)

    def on_input(self, seq: int, client_time_s: float | None, ack_tick: int | None, now_s: float) -> None:
        """A packet as in :meth:`on_packet` that also acks ``ack_tick`` (an INPUT; None: no ack
        yet), which is then taken as by :meth:`on_ack`. One call for the per-tick packet."""
        if self.packets:
            gap = now_s - self.last_packet_s
            if client_time_s is not None and self._prev_client_s is not None:
                # The part of the silence the client spent not sending is not the link's.
                gap -= max(0.0, client_time_s - self._prev_client_s)
            if gap >= self.config.silence_min_s:
                kept = self._silences
                while kept and (kept[0][0] < now_s - SILENCE_MEMORY_S or len(kept) >= _MAX_SILENCES):
                    kept.pop(0)
                kept.append((now_s, gap))
        if client_time_s is not None:
            self._prev_client_s = client_time_s
        self.packets += 1
        self.last_packet_s = now_s
        newest = self._newest_seq
        if seq == newest + 1 and newest >= 0:
            # The usual packet, next in sequence: its ring entry last held the number a whole
            # window ago, which leaves the window now (what _record_seq does, for one step).
            idx = seq % self.config.loss_window
            if not self._received[idx]:
                self._received[idx] = True
                self._received_count += 1
            self._newest_seq = seq
        else:
            self._record_seq(seq)
        if client_time_s is not None:
            transit = now_s - client_time_s
            if self._prev_transit_s is not None:
                d = abs(transit - self._prev_transit_s)
                self.jitter_s += (d - self.jitter_s) * self.config.jitter_gain
            self._prev_transit_s = transit
        if ack_tick is not None:
            self.on_ack(ack_tick, now_s)

    def _record_seq(self, seq: int) -> None:
        window = self.config.loss_window
        received = self._received
        if self._newest_seq < 0:
            self._first_seq = self._newest_seq = seq
            received[seq % window] = True
            self._received_count = 1
            return
        if seq > self._newest_seq:
            if seq - self._newest_seq >= window:
                received[:] = [False] * window
                self._received_count = 0
            else:
                # Numbers skipped over are now inside the window as missing: forget what the
                # ring held for them a whole window ago.
                for s in range(self._newest_seq + 1, seq + 1):
                    idx = s % window
                    if received[idx]:
                        received[idx] = False
                        self._received_count -= 1
            self._newest_seq = seq
            received[seq % window] = True
            self._received_count += 1
        elif seq > self._newest_seq - window and seq >= self._first_seq:
            idx = seq % window
            if not received[idx]:
                received[idx] = True
                self._received_count += 1

    # -- round trip ----------------------------------------------------------------------------

    def on_snapshot_sent(self, tick: int, now_s: float) -> None:
        """A snapshot of ``tick`` left at ``now_s`` (s); later parts of the same tick are ignored."""
        idx = tick % self.config.snapshot_history
        if self._sent_tick[idx] != tick:
            self._sent_tick[idx] = tick
            self._sent_time_s[idx] = now_s
            self._newest_sent_tick = max(self._newest_sent_tick, tick)

    def on_ack(self, tick: int | None, now_s: float) -> None:
        """An INPUT acked ``tick`` (the newest snapshot the client has); the first ack of a tick
        gives an RTT sample, repeats of it do not. A tick newer than every snapshot sent is
        ignored: taken, it would end sampling until the ticks caught up with it."""
        if tick is None or tick <= self._last_acked_tick or tick > self._newest_sent_tick:
            return
        self._last_acked_tick = tick
        idx = tick % self.config.snapshot_history
        if self._sent_tick[idx] == tick:
            self.on_rtt_sample(now_s - self._sent_time_s[idx])

    def on_rtt_sample(self, rtt_s: float) -> None:
        """Fold one round-trip sample (s) into SRTT; negative, non-finite or absurd samples are dropped."""
        if not (math.isfinite(rtt_s) and 0.0 <= rtt_s <= self.config.max_rtt_s):
            return
        if self.rtt_samples == 0:
            self.srtt_s = rtt_s
        else:
            self.srtt_s += (rtt_s - self.srtt_s) * self.config.rtt_alpha
        self.rtt_samples += 1

    # -- reading -------------------------------------------------------------------------------

    def take_silences(self, before_s: float) -> tuple[tuple[float, float], ...]:
        """The silences (end s, length s: arrival gap minus send gap) that ended after the last
        call and by ``before_s`` (s), oldest first."""
        start, self._taken_until_s = self._taken_until_s, max(self._taken_until_s, before_s)
        return tuple(x for x in self._silences if start < x[0] <= before_s)

    def recent_silences(self) -> tuple[tuple[float, float], ...]:
        """Every silence (end s, length s) of the last ``SILENCE_MEMORY_S``, taken or not."""
        return tuple(self._silences)

    @property
    def loss(self) -> float:
        """Fraction (0..1) of sequence numbers missing among the newest ``loss_window``."""
        if self._newest_seq < 0:
            return 0.0
        span = min(self.config.loss_window, self._newest_seq - self._first_seq + 1)
        return 1.0 - self._received_count / span

    def sample(self, slot: int, now_s: float) -> NetSample:
        """The current figures (RTT and jitter in ms)."""
        return NetSample(
            slot=slot,
            time_s=now_s,
            rtt_ms=self.srtt_s * 1000.0,
            rtt_samples=self.rtt_samples,
            jitter_ms=self.jitter_s * 1000.0,
            loss=self.loss,
            packets=self.packets,
            since_update_s=max(0.0, now_s - self.last_packet_s),
        )


class NetStats:
    """The measurements of every connected client, keyed by slot."""

    def __init__(self, config: NetStatsConfig | None = None) -> None:
        self.config = config or NetStatsConfig()
        self._clients: dict[int, ClientNetStats] = {}

    def open(self, slot: int, now_s: float) -> ClientNetStats:
        """Start measuring a new session in ``slot`` (replaces any previous one)."""
        stats = ClientNetStats(self.config, now_s)
        self._clients[slot] = stats
        return stats

    def close(self, slot: int) -> None:
        """Forget ``slot`` (session ended)."""
        self._clients.pop(slot, None)

    def __contains__(self, slot: object) -> bool:
        return slot in self._clients

    def client(self, slot: int) -> ClientNetStats:
        """The measurements of ``slot``; KeyError when not open."""
        return self._clients[slot]

    def on_packet(self, slot: int, seq: int, client_time_s: float | None, now_s: float) -> None:
        """See :meth:`ClientNetStats.on_packet`."""
        self._clients[slot].on_packet(seq, client_time_s, now_s)

    def on_input(self, slot: int, seq: int, client_time_s: float, ack_tick: int | None, now_s: float) -> None:
        """See :meth:`ClientNetStats.on_input`."""
        self._clients[slot].on_input(seq, client_time_s, ack_tick, now_s)

    def on_snapshot_sent(self, slot: int, tick: int, now_s: float) -> None:
        """See :meth:`ClientNetStats.on_snapshot_sent`."""
        self._clients[slot].on_snapshot_sent(tick, now_s)

    def on_ack(self, slot: int, tick: int | None, now_s: float) -> None:
        """See :meth:`ClientNetStats.on_ack`."""
        self._clients[slot].on_ack(tick, now_s)

    def rtt_ms(self, slot: int) -> float:
        """The smoothed round trip of ``slot`` (ms), as :meth:`sample` reports it, without
        building the whole sample (the tick reads every client's)."""
        return self._clients[slot].srtt_s * 1000.0

    def sample(self, slot: int, now_s: float) -> NetSample:
        """Figures of ``slot`` at ``now_s`` (s)."""
        return self._clients[slot].sample(slot, now_s)

    def samples(self, now_s: float) -> list[NetSample]:
        """Figures of every open slot, in slot order."""
        return [self._clients[s].sample(s, now_s) for s in sorted(self._clients)]
