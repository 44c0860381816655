"""Instant locks: the view jumps onto an enemy within a single command.

A human flick follows a bell-shaped velocity profile (minimum jerk): it is fastest halfway and
slows to a near stop on the target, so the last command before the crosshair settles moves a small
fraction of the flick (about 1 % of its amplitude for a 150 ms flick at 64 commands a second). An
aimbot that writes the view angles moves the whole way in one command and lands on the target. The
evidence here is exactly that: a **locked flick** is one command that turns the view by at least
``min_turn_deg`` from the previous command of the same life (consecutive sequence numbers, so a lost
command never makes two turns look like one) and ends with the nearest visible enemy within
``on_deg`` of the crosshair (``AimSample.target_angle_deg``, measured by the server to the enemy's
chest at its current position, so a high-ping aimbot's lock on a moving target reads a few degrees
off: ``on_deg`` allows for that).

Lag and loss do not make locked flicks (the angles are the client's own and gaps in the sequence
are never judged), so unlike most detectors this one judges players on any link; only exempt
players are skipped. The view is set by the server at a spawn and the client adopts it about a
round trip later, a jump that is not the player's. Within ``spawn_grace_s`` of a spawn the turn
judged is therefore the smaller of the turn from the previous command and the distance from the
spawn view (``SpawnEvent.yaw_deg``/``pitch_deg``): the adoption, even with the player's own
movement in the same command, lands on the spawn view and is no flick, while an aimbot that snaps
onto an enemy from the spawn view (or straight from the last life's view) is judged as anywhere
else. A rage aimbot's first lock, a fifth of a second into its life, counts. Recordings without
the spawn view leave the whole grace unjudged.

A client that hitches (a frozen frame, a starved process) turns the view by everything the mouse
moved during the hitch in its next command, and a human flick finished meanwhile lands on the
target: one command, a whole flick. The command's view time (``AimSample.view_time_s``, the server
time the client rendered) shows the hitch, so a turn after the view time advanced more than
``hitch_s`` is not judged (counted as ``client_hitch``). Honest clients on a loaded machine made
such locks (two in 36 s: a KICK); an aimbot would have to stall its own view time before each lock
to hide it, which delays what it sees by as much.

Measured on the standard lab corpus (16 matches of 600 s, seeds 100000+; 26.7 honest player-hours
of every skill on 20-300 ms links with up to 5 % loss): honest players made **0** locked flicks at
20 deg and 6 deg (and 0 at 15 deg and 3 deg; the first appear at 10 deg and 3 deg, 6 in 26.7 h,
all by pros); lock aimbots 650 an hour (satellite link), proaim 830, rage aimbots 4,300, noclip
(which locks too) 130, smooth aimbots 0 to 250 depending on their strength and link.

Decision: a ``locked_flick`` Detection when ``min_events`` locked flicks fall within
``window_s`` seconds; the count then starts again. With honest players' rate at the upper 95 %
bound of 0 in 26.7 h (0.138 an hour) and Poisson arrivals, 2 within 60 s happen about
rate x (rate x window) = 3.2e-4 times an hour: one false alarm per ~3,000 player-hours, and fewer
the more honest hours the bound stands on.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector
from anticheat.detectors.aimstats import angular_step_deg
from anticheat.events import AimSample, Detection, SpawnEvent
from anticheat.skip import SkipBook, SkipReason
from anticheat.tolerances import searched

log = logging.getLogger(__name__)

__all__ = ["AimSnapConfig", "AimSnapDetector", "honest_false_alarms_per_hour"]


@dataclass(frozen=True, slots=True)
class AimSnapConfig:
    """Locked-flick tolerances.

    Attributes:
        min_turn_deg: the least view turn in one command that counts (deg; 20 = 1,280 deg/s at
            64 commands a second, a speed a human flick reaches mid-way, never on arrival).
        on_deg: the crosshair lands this close to the nearest visible enemy's chest (deg).
        spawn_grace_s: this soon after the player's spawn (s), a turn must also be ``min_turn_deg``
            away from the spawn view (unjudged when the spawn view is unknown).
        hitch_s: a command whose view time advanced more than this past the previous command's
            (s) follows a client hitch and is not judged (0.05 s: over three commands at 64 Hz).
        min_events, window_s: a detection when this many locked flicks fall within the window (s).
        severity: of the Detection.
    """

    min_turn_deg: float = searched(20.0, 10.0, 45.0)
    on_deg: float = searched(6.0, 2.0, 10.0)
    spawn_grace_s: float = 1.0
    hitch_s: float = 0.05
    min_events: int = 2
    window_s: float = searched(60.0, 10.0, 300.0)
    severity: float = 0.9

    def __post_init__(self) -> None:
        if not (0.0 < self.on_deg < self.min_turn_deg <= 180.0):
            raise ValueError("need 0 < on_deg < min_turn_deg <= 180")
        if self.min_events < 1 or not self.window_s > 0.0 or self.spawn_grace_s < 0.0 or not self.hitch_s > 0.0:
            raise ValueError("need min_events >= 1, window_s > 0, spawn_grace_s >= 0 and hitch_s > 0")


def honest_false_alarms_per_hour(honest_per_h: float, config: AimSnapConfig) -> float:
    """Alarms an hour a Poisson stream of ``honest_per_h`` locked flicks an hour raises, to first
    order in rate x window (exact enough while that product is small)."""
    x = honest_per_h * config.window_s / 3600.0
    return honest_per_h * x ** (config.min_events - 1) / math.factorial(config.min_events - 1)


class AimSnapDetector(Detector):
    """Counts each player's locked flicks in a sliding window."""

    name = "aimsnap"

    def __init__(self, config: AimSnapConfig | None = None) -> None:
        self.config = config or AimSnapConfig()
        self._last: dict[int, AimSample] = {}
        self._spawned: dict[int, SpawnEvent] = {}
        self._flicks: dict[int, deque[float]] = {}
        self._total: dict[int, int] = {}
        self.skipped: Counter[str] = Counter()

    def skip_counts(self) -> Mapping[str, int]:
        """Locked flicks not judged, per reason (``client_hitch``)."""
        return dict(self.skipped)

    def reset_player(self, player: int) -> None:
        for table in (self._last, self._spawned, self._flicks, self._total):
            table.pop(player, None)

    def scores(self, player: int) -> Mapping[str, float]:
        """``locked_flick``: locked flicks in the current window over ``min_events`` (1.0 alarms)."""
        if player not in self._total:
            return NO_SCORES
        return {"locked_flick": len(self._flicks.get(player, ())) / self.config.min_events}

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        self._spawned[spawn.player] = spawn
        self._last.pop(spawn.player, None)
        return NO_DETECTIONS

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        cfg = self.config
        player = sample.player
        prev = self._last.get(player)
        self._last[player] = sample
        self._total.setdefault(player, 0)
        if prev is None or sample.seq != prev.seq + 1 or sample.target is None:
            return NO_DETECTIONS
        if sample.target_angle_deg > cfg.on_deg:
            return NO_DETECTIONS
        turn = angular_step_deg(prev.yaw_deg, prev.pitch_deg, sample.yaw_deg, sample.pitch_deg)
        spawn = self._spawned.get(player)
        if spawn is not None and sample.time_s - spawn.time_s < cfg.spawn_grace_s:
            if spawn.yaw_deg is None or spawn.pitch_deg is None:
                return NO_DETECTIONS
            turn = min(turn, angular_step_deg(spawn.yaw_deg, spawn.pitch_deg, sample.yaw_deg, sample.pitch_deg))
        if turn < cfg.min_turn_deg or skip.player_reason(player) is SkipReason.EXEMPT:
            return NO_DETECTIONS
        if (sample.view_time_s is not None and prev.view_time_s is not None
                and sample.view_time_s - prev.view_time_s > cfg.hitch_s):
            self.skipped["client_hitch"] += 1
            return NO_DETECTIONS
        self._total[player] += 1
        window = self._flicks.setdefault(player, deque())
        window.append(sample.time_s)
        while window and sample.time_s - window[0] > cfg.window_s:
            window.popleft()
        if len(window) < cfg.min_events:
            return NO_DETECTIONS
        span = window[-1] - window[0]
        window.clear()
        log.info("aimsnap: player %d locked flick of %.0f deg (%d in %.1f s)", player, turn, cfg.min_events, span)
        return [Detection(
            player=player, tick=sample.tick, time_s=sample.time_s, detector=self.name, kind="locked_flick",
            value=turn, severity=cfg.severity,
            reason=f"LockedFlick-{cfg.min_events}in{span:.0f}s-{turn:.0f}deg",
            evidence={"turn_deg": round(turn, 2), "on_target_deg": round(sample.target_angle_deg, 2),
                      "target": sample.target, "distance_m": round(sample.target_distance_m, 1),
                      "flicks_in_window": cfg.min_events, "window_span_s": round(span, 3),
                      "flicks_total": self._total[player]},
        )]

