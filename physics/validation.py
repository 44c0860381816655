"""Movement validation: the client's claimed position against the authoritative simulation,
and the timer check against commands sent faster than real time.

The server never applies a claim (DESIGN principle 1): it simulates each command itself
(``physics.movement.simulate``) and the claim only decides whether the client needs a correction
and whether the difference is evidence. Tolerances: ``ValidationConfig``.

Classification of a claim that deviates by more than ``accept_m`` (first match wins). The
claimed motion is measured from where the *client* was: its previous claim when that one was
accepted (the client then stands there, within ``accept_m`` of the server), else the previous
authoritative position (after a correction the client restarts from it). Measuring from the
server's position instead would fold up to ``accept_m`` of slowly accumulated, honest drift into
a single command and turn its correction into ``speed`` evidence.

1. ``teleport``: displacement >= ``teleport_m`` (Nex-AC 40 m);
2. ``wall_clip``: the claimed centre line crosses a wall, or the claimed position overlaps one;
3. ``speed``: horizontal speed above the model's exact maximum for that command (over every
   view direction) x (1 + ``speed_tolerance``);
4. otherwise a plain desync: corrected and counted, no evidence.

Small repeated excesses below the tolerance feed Grim's accumulated advantage, which yields
``speed`` evidence too (see :class:`MovementValidator`). After any correction the client keeps
sending claims from its old position until the correction reaches it; those are corrected
silently until it is acknowledged (explicitly, or implicitly by a claim that is accepted again)
or ``setback_ack_timeout_s`` has passed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from physics.config import MovementConfig, ValidationConfig
from physics.evidence import MovementEvidence, MovementKind
from physics.movement import MoveCommands, MoveResult, max_horizontal_speed
from world.geometry import MapGeometry

log = logging.getLogger(__name__)


class Verdict(IntEnum):
    """Outcome of validating one claim (``ValidationResult.verdict``)."""

    ACCEPTED = 0
    """Within ``accept_m`` of the authoritative position: no correction."""
    DESYNC = 1
    """Corrected, no evidence: the claim broke no rule, it simply disagreed."""
    SPEED = 2
    TELEPORT = 3
    WALL_CLIP = 4
    REJECTED = 5
    """The claim was NaN/inf: corrected, counted, never entered state."""
    PENDING = 6
    """Corrected silently: a previous correction is not yet acknowledged by the client."""


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Validation of K claims (one per validated player).

    Attributes:
        pos: (K, 3) the position the server keeps (m): always the authoritative one.
        accepted: (K,) the claim was within ``accept_m``.
        setback: (K,) the client must be corrected to ``pos``.
        deviation_m: (K,) distance claim - authoritative (m); inf for rejected claims.
        verdict: (K,) int8 ``Verdict`` codes.
        evidence: MovementEvidence for the claims that broke a rule.
    """

    pos: np.ndarray
    accepted: np.ndarray
    setback: np.ndarray
    deviation_m: np.ndarray
    verdict: np.ndarray
    evidence: tuple[MovementEvidence, ...]


def _vec(row: np.ndarray) -> tuple[float, float, float]:
    return (float(row[0]), float(row[1]), float(row[2]))


class MovementValidator:
    """Per-player validation state (structure of arrays over ``capacity`` slots).

    Arrays:
        advantage_m (N,): Grim's accumulated advantage (m of horizontal displacement beyond the
            model's envelope), decayed x``advantage_decay`` per command, capped.
        last_claim (N, 3), claim_valid (N,): the client's previous claim (m) and whether the client
            still stands there (it was accepted and no correction followed).
        pending_since_s (N,): server time (s) of the oldest unacknowledged correction, NaN if none.
        desyncs, rejected, suppressed (N,) int64: counters of corrections without evidence.
    """

    def __init__(
        self,
        capacity: int,
        config: ValidationConfig | None = None,
        movement: MovementConfig | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.config = config or ValidationConfig()
        self.movement = movement or MovementConfig()
        self.advantage_m = np.zeros(capacity, dtype=np.float64)
        self.pending_since_s = np.full(capacity, np.nan, dtype=np.float64)
        self.last_claim = np.zeros((capacity, 3), dtype=np.float64)
        self.claim_valid = np.zeros(capacity, dtype=bool)
        self.desyncs = np.zeros(capacity, dtype=np.int64)
        self.rejected = np.zeros(capacity, dtype=np.int64)
        self.suppressed = np.zeros(capacity, dtype=np.int64)

    @property
    def capacity(self) -> int:
        """Number of player slots."""
        return int(self.advantage_m.shape[0])

    def reset(self, slot: int, now_s: float) -> None:
        """Forget a slot's advantage after a respawn or server teleport and wait for the client to
        acknowledge its new position (claims from the old one are corrected silently)."""
        self.advantage_m[slot] = 0.0
        self.pending_since_s[slot] = now_s
        self.claim_valid[slot] = False

    def clear(self, slot: int) -> None:
        """Reset a slot completely (player left or joined)."""
        self.advantage_m[slot] = 0.0
        self.pending_since_s[slot] = np.nan
        self.claim_valid[slot] = False
        self.desyncs[slot] = 0
        self.rejected[slot] = 0
        self.suppressed[slot] = 0

    def awaiting_ack(self, slot: int, now_s: float) -> bool:
        """Whether ``slot`` still has an unacknowledged setback or respawn (within the timeout)."""
        since = self.pending_since_s[slot]
        return bool(not np.isnan(since) and now_s - since < self.config.setback_ack_timeout_s)

    def acknowledge(self, slots: np.ndarray | int) -> None:
        """The clients in ``slots`` confirmed they applied the last correction sent to them."""
        self.pending_since_s[slots] = np.nan
        self.claim_valid[slots] = False

    def validate(
        self,
        slots: np.ndarray,
        prev_pos: np.ndarray,
        prev_vel: np.ndarray,
        prev_on_ground: npt.ArrayLike,
        cmd: MoveCommands,
        auth: MoveResult,
        claimed: np.ndarray,
        weapon_speed_m_s: np.ndarray | float,
        geometry: MapGeometry,
        tick: int,
        now_s: float,
    ) -> ValidationResult:
        """Validate K claims, one per distinct slot, against the authoritative step.

        Args:
            slots: (K,) distinct player slots.
            prev_pos, prev_vel, prev_on_ground: authoritative state before the command
                ((K, 3) m, (K, 3) m/s, (K,) bool).
            cmd: the K commands that were simulated. auth: ``simulate``'s result for them.
            claimed: (K, 3) positions (m) the clients claim after the command; NaN/inf rows are
                rejected (never raise: one bad client must not stop the batch).
            weapon_speed_m_s: (K,) or scalar, held weapons' move speeds (m/s).
            geometry: the map (``world.geometry.MapGeometry``). tick, now_s: server tick and
                time (s), stamped on the evidence.
        """
        cfg = self.config
        sl = np.asarray(slots, dtype=np.intp)
        k = sl.shape[0]
        if len(np.unique(sl)) != k:
            raise ValueError("validate takes at most one claim per slot per call")
        if not math.isfinite(now_s):
            raise ValueError("now_s must be finite")
        prev_p = np.asarray(prev_pos, dtype=np.float64)
        prev_v = np.asarray(prev_vel, dtype=np.float64)
        claim = np.asarray(claimed, dtype=np.float64)
        for name, arr in (("prev_pos", prev_p), ("prev_vel", prev_v), ("claimed", claim)):
            if arr.shape != (k, 3):
                raise ValueError(f"{name} must have shape ({k}, 3), got {arr.shape}")
        if len(cmd) != k or auth.pos.shape != (k, 3):
            raise ValueError("cmd and auth must hold one entry per slot")
        auth_pos = auth.pos

        finite = np.all(np.isfinite(claim), axis=1)
        safe_claim = np.where(finite[:, None], claim, auth_pos)
        deviation = np.where(finite, np.linalg.norm(safe_claim - auth_pos, axis=1), np.inf)
        accepted = finite & (deviation <= cfg.accept_m)

        pending_t = self.pending_since_s[sl]
        pending = ~np.isnan(pending_t) & (now_s - pending_t < cfg.setback_ack_timeout_s)
        # An accepted claim shows the client is where the server put it: an implicit ack.
        self.pending_since_s[sl[accepted | ~pending]] = np.nan
        judged = finite & ~pending

        base = np.where(self.claim_valid[sl][:, None], self.last_claim[sl], prev_p)
        disp = safe_claim - base
        disp_h = np.hypot(disp[:, 0], disp[:, 1])
        disp_3 = np.linalg.norm(disp, axis=1)
        dt = cmd.dt_s
        speed_h = disp_h / dt
        limit = max_horizontal_speed(prev_v, prev_on_ground, cmd, weapon_speed_m_s, self.movement)

        bad = judged & ~accepted
        teleport = bad & (disp_3 >= cfg.teleport_m)
        wall = np.zeros(k, dtype=bool)
        wall_value = np.zeros(k)
        rows = np.flatnonzero(bad & ~teleport)
        if rows.size:
            wall[rows], wall_value[rows] = self._wall_clip(geometry, base[rows], safe_claim[rows])
        speed_limit = limit * (1.0 + cfg.speed_tolerance)
        speed = bad & ~teleport & ~wall & (speed_h > speed_limit)
        # A command already flagged on its own is not counted again in the advantage.
        flagged = teleport | wall | speed
        adv = self.advantage_m[sl]
        excess = np.where(flagged, 0.0, np.maximum(disp_h - limit * dt, 0.0))
        adv = np.where(judged, np.minimum(adv * cfg.advantage_decay + excess, cfg.advantage_cap_m), adv)
        # Advantage backs the speed kind: many small excesses, each within the tolerance.
        adv_flag = judged & ~flagged & (adv >= cfg.advantage_setback_m)
        adv = np.where(adv_flag, adv - cfg.advantage_setback_m, adv)
        self.advantage_m[sl] = adv

        setback = ~accepted | adv_flag
        verdict = np.full(k, Verdict.ACCEPTED, dtype=np.int8)
        verdict[setback] = Verdict.DESYNC
        verdict[speed | adv_flag] = Verdict.SPEED
        verdict[wall] = Verdict.WALL_CLIP
        verdict[teleport] = Verdict.TELEPORT
        verdict[finite & pending & ~accepted] = Verdict.PENDING
        verdict[~finite] = Verdict.REJECTED

        self.desyncs[sl[verdict == Verdict.DESYNC]] += 1
        self.rejected[sl[~finite]] += 1
        self.suppressed[sl[verdict == Verdict.PENDING]] += 1
        newly = setback & np.isnan(self.pending_since_s[sl])
        self.pending_since_s[sl[newly]] = now_s
        stays = finite & ~setback
        self.last_claim[sl[stays]] = safe_claim[stays]
        self.claim_valid[sl] = stays

        evidence: list[MovementEvidence] = []
        for i in np.flatnonzero(teleport | wall | speed | adv_flag):
            if teleport[i]:
                kind, value, lim = MovementKind.TELEPORT, disp_3[i], cfg.teleport_m
            elif wall[i]:
                kind, value, lim = MovementKind.WALL_CLIP, wall_value[i], 0.0
            elif speed[i]:
                kind, value, lim = MovementKind.SPEED, speed_h[i], speed_limit[i]
            else:
                # The advantage only grows on a command whose speed exceeded the model's maximum,
                # so here value > limit holds, with the limit without tolerance.
                kind, value, lim = MovementKind.SPEED, speed_h[i], limit[i]
            evidence.append(
                MovementEvidence(
                    player=int(sl[i]),
                    tick=int(tick),
                    time_s=float(now_s),
                    kind=kind,
                    value=float(value),
                    limit=float(lim),
                    claimed=_vec(safe_claim[i]) if finite[i] else None,
                    authoritative=_vec(auth_pos[i]),
                    setback=True,
                )
            )
        if evidence:
            log.debug("movement evidence: %s", [(e.player, e.kind.value, round(e.value, 3)) for e in evidence])
        return ValidationResult(
            pos=auth_pos.copy(),
            accepted=accepted,
            setback=setback,
            deviation_m=deviation,
            verdict=verdict,
            evidence=tuple(evidence),
        )

    def _wall_clip(self, geometry: MapGeometry, prev: np.ndarray, claim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(clipped (M,), meters of claimed path beyond the first wall contact (M,)).

        A claim clips when its centre line crosses a wall (a full sweep of the player circle would
        also flag honest corner-cutting of a slide, which the straight segment shortcuts by a few
        millimetres; the centre line needs a whole radius of penetration) or when the player
        circle at the claimed position overlaps a wall.
        """
        h = self.config.wall_probe_height_m
        p0 = np.column_stack([prev[:, :2], np.full(len(prev), h)])
        p1 = np.column_stack([claim[:, :2], np.full(len(claim), h)])
        crosses = ~np.asarray(geometry.los_clear(p0, p1), dtype=bool)
        inside = np.asarray(geometry.circle_blocked(claim[:, :2]), dtype=bool)
        clipped = crosses | inside
        value = np.zeros(len(prev))
        rows = np.flatnonzero(clipped)
        if rows.size:
            res = geometry.sweep(prev[rows, :2], claim[rows, :2])
            value[rows] = np.hypot(*(claim[rows, :2] - np.asarray(res.end)).T)
        return clipped, value


class TimerBalance:
    """Grim's timer check (REFERENCES section 6) as a structure of arrays over player slots.

    Each command adds its duration to a per-player balance; the server clock subtracts the real
    time elapsed between arrivals. A client running its clock fast (speed hack) makes the
    balance grow; commands that would push it above ``timer_drift_allowance_s`` are dropped and
    reported as ``timer`` evidence.

    Lag cannot be banked: the balance is clamped from below at ``-timer_lag_floor_s``, so a player
    silent for 1 s may then send at most floor + allowance (0.24 s by default) of commands at once;
    the rest is dropped. Whether that drop is evidence is the one policy choice here: with
    ``timer_forgive_lag_burst`` (default) the time clamped away is remembered for
    ``timer_forgive_window_s`` and dropped commands are forgiven up to it (counted in
    ``forgiven`` but no evidence), because an honest client flushing its queue after a lag spike
    gains nothing from commands that are dropped anyway. Callers should drop the *oldest*
    commands of an over-full batch: after a spike they are the stale ones.

    Arrays: balance_s, last_now_s (NaN until the first batch), forgive_s, forgive_until_s (s),
    dropped, forgiven (counts of commands) (N,).
    """

    def __init__(self, capacity: int, config: ValidationConfig | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.config = config or ValidationConfig()
        self.balance_s = np.zeros(capacity, dtype=np.float64)
        self.last_now_s = np.full(capacity, np.nan, dtype=np.float64)
        self.forgive_s = np.zeros(capacity, dtype=np.float64)
        self.forgive_until_s = np.zeros(capacity, dtype=np.float64)
        self.dropped = np.zeros(capacity, dtype=np.int64)
        self.forgiven = np.zeros(capacity, dtype=np.int64)

    def reset(self, slot: int) -> None:
        """Start the slot's balance afresh (respawn, teleport, new player)."""
        self.balance_s[slot] = 0.0
        self.last_now_s[slot] = np.nan
        self.forgive_s[slot] = 0.0
        self.forgive_until_s[slot] = 0.0

    def on_commands(
        self, slot: int, n_commands: int, cmd_dt_s: float, now_s: float, tick: int = 0
    ) -> tuple[int, MovementEvidence | None]:
        """``n_commands`` commands of ``cmd_dt_s`` seconds each arrived from ``slot`` at server time
        ``now_s``: returns (how many to apply, timer evidence or None)."""
        accepted, evidence = self.on_commands_batch(
            np.array([slot]), np.array([n_commands]), np.array([cmd_dt_s]), now_s, tick
        )
        return int(accepted[0]), (evidence[0] if evidence else None)

    def on_commands_batch(
        self,
        slots: np.ndarray,
        n_commands: np.ndarray,
        cmd_dt_s: np.ndarray | float,
        now_s: float,
        tick: int = 0,
        positions: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[MovementEvidence, ...]]:
        """Batched :meth:`on_commands` for K distinct slots; returns (accepted counts (K,), evidence).

        ``positions`` (K, 3), optional, fills the evidence's ``authoritative`` field (m).
        Raises ValueError for non-finite times, durations outside
        [``min_command_dt_s``, ``max_command_dt_s``], negative counts or a clock going backwards.
        """
        cfg = self.config
        sl = np.asarray(slots, dtype=np.intp)
        k = sl.shape[0]
        if len(np.unique(sl)) != k:
            raise ValueError("slots must be distinct")
        n = np.asarray(n_commands)
        if n.shape != (k,) or not np.issubdtype(n.dtype, np.integer) or np.any(n < 0):
            raise ValueError("n_commands must be (K,) non-negative integers")
        dt = np.broadcast_to(np.asarray(cmd_dt_s, dtype=np.float64), (k,))
        if not math.isfinite(now_s):
            raise ValueError("now_s must be finite")
        if not np.all(np.isfinite(dt)) or np.any(dt < cfg.min_command_dt_s) or np.any(dt > cfg.max_command_dt_s):
            raise ValueError(
                f"command durations must lie in [{cfg.min_command_dt_s}, {cfg.max_command_dt_s}] s"
            )
        last = self.last_now_s[sl]
        fresh = np.isnan(last)
        last = np.where(fresh, now_s, last)
        if np.any(now_s < last):
            raise ValueError("server clock went backwards")

        bal = np.where(fresh, 0.0, self.balance_s[sl]) - (now_s - last)
        forgive = np.where(now_s > self.forgive_until_s[sl], 0.0, self.forgive_s[sl])
        forgive_until = self.forgive_until_s[sl]
        floor = -cfg.timer_lag_floor_s
        clamped = np.maximum(floor - bal, 0.0)
        was_clamped = clamped > 0.0
        forgive = np.where(was_clamped, np.minimum(forgive + clamped, cfg.timer_forgive_cap_s), forgive)
        forgive_until = np.where(was_clamped, now_s + cfg.timer_forgive_window_s, forgive_until)
        bal = np.maximum(bal, floor)

        # Tiny slack so a balance landing exactly on the allowance is still accepted.
        room = np.floor((cfg.timer_drift_allowance_s - bal) / dt + 1e-9)
        accepted = np.clip(room, 0, n).astype(np.int64)
        excess = n - accepted
        ahead_ms = (bal + n * dt) * 1000.0
        bal = bal + accepted * dt
        if cfg.timer_forgive_lag_burst:
            silent = np.minimum(excess, np.floor(forgive / dt + 1e-9).astype(np.int64))
        else:
            silent = np.zeros(k, dtype=np.int64)
        forgive = np.maximum(forgive - silent * dt, 0.0)
        flagged = excess - silent

        self.balance_s[sl] = bal
        self.last_now_s[sl] = now_s
        self.forgive_s[sl] = forgive
        self.forgive_until_s[sl] = forgive_until
        self.dropped[sl] += excess
        self.forgiven[sl] += silent

        evidence = []
        for i in np.flatnonzero(flagged > 0):
            where = _vec(np.asarray(positions)[i]) if positions is not None else (0.0, 0.0, 0.0)
            evidence.append(
                MovementEvidence(
                    player=int(sl[i]),
                    tick=int(tick),
                    time_s=float(now_s),
                    kind=MovementKind.TIMER,
                    value=float(ahead_ms[i]),
                    limit=cfg.timer_drift_allowance_s * 1000.0,
                    claimed=None,
                    authoritative=where,
                    setback=False,
                )
            )
        return accepted, tuple(evidence)
