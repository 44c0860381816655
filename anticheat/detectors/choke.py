"""Fake lag: a client that holds its outgoing datagrams and releases them in bursts (choke).

Held datagrams reach the server as silences followed by a burst. Each burst carries commands
that were made during the hold, so its shots claim old view times and its movement jumps for
everyone else. One silence proves nothing: delay jitter on a FIFO link makes the same shape (the
packets behind a late one arrive with it), and so does a client that hitches. What an honest link
does not do is keep it up, several long silences a second, second after second. A client whose
process stalls (a slow PC, a hitch) also goes silent, but it sends nothing meanwhile and stamps its
next datagram late: the server counts only the part of a silence its send times do not explain
(``server.netstats``), so a stalled client makes none. (A UDP match whose bot process was starved
for 9 % of its ticks flagged 11 of 12 honest players before that.) A cheat that stamps its held
datagrams at release looks like a stalled client and is not caught here.

The statistic is Page's CUSUM (``anticheat.detectors.cusum``) over one verdict per second of
connected play: positive when the second held at least ``holds_per_window`` silences of
``hold_s`` to ``max_hold_s``. The server reports each silence of 80 ms or more
(``ConnectionSample.silences_ms``).

Defaults measured with the link emulator (``testbed.link``, 64 Hz uplink, two hours per class,
the standard corpus's link classes; ``theta`` is the share of positive seconds):

================================  =============  ===================
link                              honest theta   fake lag theta
================================  =============  ===================
LAN to satellite, normal jitter   <= 0.0004      0.97-1.0
wifi, 35 ms jitter, normal        0.0004         0.97
wifi, 35 ms jitter, Pareto tail   0.10           0.97
satellite, 20 ms, Pareto tail     0.007          1.0
================================  =============  ===================

``theta0`` is the worst of them, the heavy-tailed 35 ms wifi (the corpus's links use normal
jitter; the Pareto tail is harsher than any of them). ``theta1`` is 0.9. Asked for one false
alarm per 10,000 honest player-hours at ``theta0``, the threshold is h = 15.4; the walk moves in
whole steps of ln 9, so eight positive seconds in a row are needed and the run length is in fact
about 16,800 player-hours. A fake lag of 100-300 ms holds is flagged after about 9 seconds of play. A link worse than the Pareto 35 ms one (jitter whose tail holds
packets 140 ms or more, twice a second) reads as fake lag: the detection's evidence carries the
player's measured jitter and loss for the reviewer.

Kind (detector ``choke``):

- ``fake_lag``: the CUSUM reached h.

Seconds in which the player was paused (no packet for more than ``max_hold_s``) or exempt are
not judged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.detectors.cusum import BernoulliCusum, threshold_for_arl
from anticheat.events import ConnectionSample, Detection
from anticheat.skip import SkipBook

log = logging.getLogger(__name__)

__all__ = ["ChokeConfig", "ChokeDetector"]


@dataclass(frozen=True, slots=True)
class ChokeConfig:
    """Fake-lag tolerances.

    Attributes:
        hold_s: a silence counts as a hold from this long (s): 140 ms, above what 35 ms of normal
            delay jitter produces more than rarely, below fake lag's usual 100-300 ms.
        max_hold_s: longer silences are outages or pauses, not choke (s).
        window_s: play time (s) of one verdict.
        holds_per_window: holds that make a verdict positive.
        theta0, theta1: a verdict's probability of being positive for an honest player and for a
            fake-lagging one (module doc).
        false_alarm_player_hours: the CUSUM's in-control average run length, in honest
            player-hours at ``theta0``.
        severity: of the Detection.
    """

    hold_s: float = 0.14
    max_hold_s: float = 1.0
    window_s: float = 1.0
    holds_per_window: int = 2
    theta0: float = 0.10
    theta1: float = 0.90
    false_alarm_player_hours: float = 10_000.0
    severity: float = 0.8

    def __post_init__(self) -> None:
        if not 0.0 < self.hold_s < self.max_hold_s:
            raise ValueError("choke: need 0 < hold_s < max_hold_s")
        if not self.window_s > 0.0 or self.holds_per_window < 1:
            raise ValueError("choke: window_s > 0 and holds_per_window >= 1")
        if not 0.0 < self.theta0 < self.theta1 < 1.0:
            raise ValueError("choke: need 0 < theta0 < theta1 < 1")
        if not self.false_alarm_player_hours > 0.0:
            raise ValueError("choke: false_alarm_player_hours must be positive")
        if self.windows_between_false_alarms <= 1.0:
            raise ValueError("choke: false_alarm_player_hours shorter than one window")

    @property
    def windows_between_false_alarms(self) -> float:
        """The CUSUM's in-control average run length in verdicts."""
        return self.false_alarm_player_hours * 3600.0 / self.window_s


@dataclass(slots=True)
class _Player:
    cusum: BernoulliCusum
    window_start_s: float | None = None
    holds: int = 0
    paused: bool = False
    judged: int = 0


class ChokeDetector(Detector):
    """Fake lag from the silences between a player's datagrams (module doc)."""

    name = "choke"

    def __init__(self, config: ChokeConfig | None = None) -> None:
        self.config = cfg = config or ChokeConfig()
        self.threshold = threshold_for_arl(cfg.theta0, cfg.theta1, cfg.windows_between_false_alarms)
        """The CUSUM's alarm threshold h (log-LR units)."""
        self._players: dict[int, _Player] = {}

    def _state(self, player: int) -> _Player:
        st = self._players.get(player)
        if st is None:
            cfg = self.config
            st = _Player(BernoulliCusum(cfg.theta0, cfg.theta1, self.threshold))
            self._players[player] = st
        return st

    def on_connection(self, sample: ConnectionSample, skip: SkipBook) -> Sequence[Detection]:
        cfg = self.config
        st = self._state(sample.player)
        if sample.exempt or sample.since_update_s > cfg.max_hold_s:
            st.paused = True
        for gap_ms in sample.silences_ms:
            gap = gap_ms / 1000.0
            if gap > cfg.max_hold_s:
                st.paused = True
            elif gap >= cfg.hold_s:
                st.holds += 1
        if st.window_start_s is None or sample.time_s < st.window_start_s:
            # The first window opens here: what ended before it is not part of it.
            st.window_start_s, st.holds, st.paused = sample.time_s, 0, False
            return NO_DETECTIONS
        if sample.time_s - st.window_start_s < cfg.window_s - 1e-9:
            return NO_DETECTIONS
        positive, paused = st.holds >= cfg.holds_per_window, st.paused
        st.window_start_s, st.holds, st.paused = sample.time_s, 0, False
        if paused:
            return NO_DETECTIONS
        st.judged += 1
        if not st.cusum.observe(positive):
            return NO_DETECTIONS
        cusum = st.cusum
        evidence = {
            "windows": cusum.observations, "positive_windows": cusum.positives, "cusum": cusum.peak,
            "threshold": self.threshold, "theta0": cfg.theta0, "theta1": cfg.theta1,
            "false_alarm_player_hours": cfg.false_alarm_player_hours, "alarm": cusum.alarms,
            "jitter_ms": sample.jitter_ms, "loss": sample.loss, "rtt_ms": sample.rtt_ms,
        }
        reason = f"FakeLag-{cusum.positives}/{cusum.observations}"
        cusum.restart()
        log.info("choke: player %d fake lag (%s)", sample.player, reason)
        return (Detection(player=sample.player, tick=max(sample.tick, 0), time_s=sample.time_s, detector=self.name, kind="fake_lag",
                          reason=reason, value=float(evidence["cusum"]), severity=cfg.severity,
                          evidence=evidence),)

    def reset_player(self, player: int) -> None:
        self._players.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``fake_lag``: the CUSUM's highest value since the player's state began, over h (its
        walk falls back at every negative second, so the running maximum); none before the
        player's first judged second."""
        st = self._players.get(player)
        if st is None or not st.judged:
            return NO_SCORES
        return {"fake_lag": over_limit(st.cusum.peak, self.threshold)}
