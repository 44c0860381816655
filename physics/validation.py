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

import numba
import numpy as np
import numpy.typing as npt

from physics.config import MovementConfig, ValidationConfig
from physics.evidence import MovementEvidence, MovementKind
from physics.movement import MoveCommands, MoveResult, max_horizontal_speed, max_speed_kernel_args
from physics.movement_kernel import max_speeds
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


# Status codes of the compiled kernels: every check runs before the first write, so a refused
# batch leaves the state untouched, as the numpy version did.
_OK = 0
_BAD_SLOT = 1
_DUPLICATE = 2
_BACKWARDS = 3
_NEGATIVE = 4
_BAD_DT = 5
_NOT_FINITE = 6


@numba.njit(cache=True)
def _check_slots(sl: np.ndarray, a: int, b: int, capacity: int) -> int:
    """Of ``sl[a:b]``: _BAD_SLOT for a slot outside [0, capacity), _DUPLICATE for a slot named
    twice, else _OK."""
    seen = np.zeros(capacity, dtype=np.bool_)
    for i in range(a, b):
        s = sl[i]
        if s < 0 or s >= capacity:
            return _BAD_SLOT
        if seen[s]:
            return _DUPLICATE
        seen[s] = True
    return _OK


_DUPLICATE_CLAIM = "validate takes at most one claim per slot per call"


def _raise_slot_status(status: int, capacity: int, duplicate: str) -> None:
    if status == _BAD_SLOT:
        raise IndexError(f"slot out of range (capacity {capacity})")
    if status == _DUPLICATE:
        raise ValueError(duplicate)


# The kernels below compute what the numpy expressions they replace computed, operation for
# operation in IEEE double (no fast-math: no reassociation, no fused multiply-add), so every
# verdict, counter and evidence value is bit-identical; a batch costs microseconds instead of the
# ~40 numpy calls' fixed costs. Vector norms are summed as numpy's axis reduction does:
# (x*x + y*y) + z*z; hypot is the C library's, like numpy's.


@numba.njit(cache=True)
def _validate_prepare(
    a: int, b: int, sl: np.ndarray, prev_p: np.ndarray, claim: np.ndarray, auth: np.ndarray, dt: np.ndarray,
    pending_since: np.ndarray, claim_valid: np.ndarray, last_claim: np.ndarray,
    now_s: float, accept_m: float, ack_timeout_s: float, teleport_m: float,
    finite: np.ndarray, safe_claim: np.ndarray, deviation: np.ndarray, accepted: np.ndarray,
    pending: np.ndarray, base: np.ndarray, disp_h: np.ndarray, disp_3: np.ndarray,
    speed_h: np.ndarray, bad: np.ndarray, teleport: np.ndarray,
) -> int:
    """First half of ``MovementValidator.validate`` for rows ``a:b`` (no state is written); returns
    how many rows need the wall test (bad and not a teleport)."""
    n_wall = 0
    for i in range(a, b):
        s = sl[i]
        ok = math.isfinite(claim[i, 0]) and math.isfinite(claim[i, 1]) and math.isfinite(claim[i, 2])
        finite[i] = ok
        for j in range(3):
            safe_claim[i, j] = claim[i, j] if ok else auth[i, j]
        if ok:
            dx = safe_claim[i, 0] - auth[i, 0]
            dy = safe_claim[i, 1] - auth[i, 1]
            dz = safe_claim[i, 2] - auth[i, 2]
            deviation[i] = math.sqrt((dx * dx + dy * dy) + dz * dz)
        else:
            deviation[i] = np.inf
        accepted[i] = ok and deviation[i] <= accept_m
        pt = pending_since[s]
        pending[i] = (not math.isnan(pt)) and (now_s - pt < ack_timeout_s)
        judged = ok and not pending[i]
        valid = claim_valid[s]
        for j in range(3):
            base[i, j] = last_claim[s, j] if valid else prev_p[i, j]
        ex = safe_claim[i, 0] - base[i, 0]
        ey = safe_claim[i, 1] - base[i, 1]
        ez = safe_claim[i, 2] - base[i, 2]
        disp_h[i] = math.hypot(ex, ey)
        disp_3[i] = math.sqrt((ex * ex + ey * ey) + ez * ez)
        speed_h[i] = disp_h[i] / dt[i]
        bad[i] = judged and not accepted[i]
        teleport[i] = bad[i] and disp_3[i] >= teleport_m
        if bad[i] and not teleport[i]:
            n_wall += 1
    return n_wall


@numba.njit(cache=True)
def _validate_commit(
    a: int, b: int, sl: np.ndarray, dt: np.ndarray, limit: np.ndarray, finite: np.ndarray, safe_claim: np.ndarray,
    accepted: np.ndarray, pending: np.ndarray, disp_h: np.ndarray, speed_h: np.ndarray,
    bad: np.ndarray, teleport: np.ndarray, wall: np.ndarray,
    advantage: np.ndarray, pending_since: np.ndarray, last_claim: np.ndarray, claim_valid: np.ndarray,
    desyncs: np.ndarray, rejected: np.ndarray, suppressed: np.ndarray,
    now_s: float, tolerance_factor: float, decay: float, adv_cap_m: float, adv_setback_m: float,
    speed_limit: np.ndarray, speed: np.ndarray, adv_flag: np.ndarray, setback: np.ndarray, verdict: np.ndarray,
) -> int:
    """Second half of ``MovementValidator.validate`` for rows ``a:b``: classification and every
    state write, in the numpy version's order; returns how many rows carry evidence."""
    n_evidence = 0
    for i in range(a, b):
        s = sl[i]
        judged = finite[i] and not pending[i]
        speed_limit[i] = limit[i] * tolerance_factor
        speed[i] = bad[i] and not teleport[i] and not wall[i] and speed_h[i] > speed_limit[i]
        flagged = teleport[i] or wall[i] or speed[i]
        adv = advantage[s]
        if flagged:
            excess = 0.0
        else:
            excess = disp_h[i] - limit[i] * dt[i]
            if not (excess >= 0.0 or math.isnan(excess)):
                excess = 0.0
        if judged:
            grown = adv * decay + excess
            adv = grown if (grown <= adv_cap_m or math.isnan(grown)) else adv_cap_m
        flag = judged and not flagged and adv >= adv_setback_m
        adv_flag[i] = flag
        if flag:
            adv = adv - adv_setback_m
        advantage[s] = adv
        back = (not accepted[i]) or flag
        setback[i] = back
        if not finite[i]:
            v = 5  # REJECTED
        elif pending[i] and not accepted[i]:
            v = 6  # PENDING
        elif teleport[i]:
            v = 3  # TELEPORT
        elif wall[i]:
            v = 4  # WALL_CLIP
        elif speed[i] or flag:
            v = 2  # SPEED
        elif back:
            v = 1  # DESYNC
        else:
            v = 0  # ACCEPTED
        verdict[i] = v
        if flagged or flag:
            n_evidence += 1
        # An accepted claim shows the client is where the server put it: an implicit ack.
        if accepted[i] or not pending[i]:
            pending_since[s] = np.nan
        if v == 1:
            desyncs[s] += 1
        if not finite[i]:
            rejected[s] += 1
        if v == 6:
            suppressed[s] += 1
        if back and math.isnan(pending_since[s]):
            pending_since[s] = now_s
        stays = finite[i] and not back
        if stays:
            for j in range(3):
                last_claim[s, j] = safe_claim[i, j]
        claim_valid[s] = stays
    return n_evidence


@numba.njit(cache=True)
def _validate_run(
    first: int, bounds: np.ndarray, sl: np.ndarray, prev_p: np.ndarray, claim: np.ndarray, auth: np.ndarray,
    dt: np.ndarray, limit: np.ndarray, pending_since: np.ndarray, claim_valid: np.ndarray, last_claim: np.ndarray,
    advantage: np.ndarray, desyncs: np.ndarray, rejected: np.ndarray, suppressed: np.ndarray,
    now_s: float, accept_m: float, ack_timeout_s: float, teleport_m: float, tolerance_factor: float, decay: float,
    adv_cap_m: float, adv_setback_m: float,
    flag_rows: np.ndarray, float_rows: np.ndarray, claim_rows: np.ndarray, verdict: np.ndarray, n_evidence: np.ndarray,
) -> int:
    """``_validate_prepare`` then ``_validate_commit`` of batch ``first``, then of the next... (batch
    j: rows ``bounds[j, 0]:bounds[j, 1]``) until a batch has rows for the wall test: returns that
    batch, prepared and not committed (the caller tests its rows and commits it), or the number
    of batches. ``n_evidence[j]``: the commit's count of batch j. The per-row outputs are the
    rows of ``flag_rows`` (finite, accepted, pending, bad, teleport, wall, speed, adv_flag,
    setback), ``float_rows`` (deviation, disp_h, disp_3, speed_h, speed_limit, wall value) and
    ``claim_rows`` (safe_claim, base): three arguments instead of seventeen."""
    finite, accepted, pending, bad = flag_rows[0], flag_rows[1], flag_rows[2], flag_rows[3]
    teleport, wall, speed, adv_flag, setback = flag_rows[4], flag_rows[5], flag_rows[6], flag_rows[7], flag_rows[8]
    deviation, disp_h, disp_3, speed_h, speed_limit = float_rows[0], float_rows[1], float_rows[2], float_rows[3], float_rows[4]
    safe_claim, base = claim_rows[0], claim_rows[1]
    for j in range(first, bounds.shape[0]):
        a = bounds[j, 0]
        b = bounds[j, 1]
        if _validate_prepare(
            a, b, sl, prev_p, claim, auth, dt, pending_since, claim_valid, last_claim, now_s, accept_m, ack_timeout_s,
            teleport_m, finite, safe_claim, deviation, accepted, pending, base, disp_h, disp_3, speed_h, bad, teleport,
        ):
            return j
        n_evidence[j] = _validate_commit(
            a, b, sl, dt, limit, finite, safe_claim, accepted, pending, disp_h, speed_h, bad, teleport, wall,
            advantage, pending_since, last_claim, claim_valid, desyncs, rejected, suppressed,
            now_s, tolerance_factor, decay, adv_cap_m, adv_setback_m, speed_limit, speed, adv_flag, setback, verdict,
        )
    return bounds.shape[0]


@numba.njit(cache=True)
def _validate_open(
    bounds: np.ndarray, sl: np.ndarray, capacity: int, vel: np.ndarray, ground: np.ndarray, weapon_speed: np.ndarray,
    fwd: np.ndarray, side: np.ndarray, yaw_deg: np.ndarray, buttons: np.ndarray, cfg: np.ndarray, flags: np.ndarray,
    prev_p: np.ndarray, claim: np.ndarray, auth: np.ndarray, dt: np.ndarray, limit: np.ndarray,
    pending_since: np.ndarray, claim_valid: np.ndarray, last_claim: np.ndarray, advantage: np.ndarray,
    desyncs: np.ndarray, rejected: np.ndarray, suppressed: np.ndarray,
    now_s: float, accept_m: float, ack_timeout_s: float, teleport_m: float, tolerance_factor: float, decay: float,
    adv_cap_m: float, adv_setback_m: float,
    flag_rows: np.ndarray, float_rows: np.ndarray, claim_rows: np.ndarray, verdict: np.ndarray, n_evidence: np.ndarray,
) -> int:
    """The start of ``validate_batches`` in one compiled call: ``_check_slots`` of every batch in
    order (minus the first failure's status), then, when every velocity component and weapon
    speed is finite, the model's top speeds (m/s) into ``limit`` (``movement_kernel.max_speeds``:
    ``max_horizontal_speed``'s values for finite inputs) and ``_validate_run`` from the first
    batch (its result); else -_NOT_FINITE with nothing written (numpy's model gives the limits).
    ``vel`` ... ``flags``: ``max_speed_kernel_args`` (its ``dt`` is ``dt``)."""
    for j in range(bounds.shape[0]):
        status = _check_slots(sl, bounds[j, 0], bounds[j, 1], capacity)
        if status != _OK:
            return -status
    for i in range(vel.shape[0]):
        for c in range(vel.shape[1]):
            if not math.isfinite(vel[i, c]):
                return -_NOT_FINITE
    for i in range(weapon_speed.shape[0]):
        if not math.isfinite(weapon_speed[i]):
            return -_NOT_FINITE
    limit[:] = max_speeds(vel, ground, weapon_speed, fwd, side, yaw_deg, buttons, dt, cfg, flags)
    return _validate_run(
        0, bounds, sl, prev_p, claim, auth, dt, limit, pending_since, claim_valid, last_claim, advantage, desyncs,
        rejected, suppressed, now_s, accept_m, ack_timeout_s, teleport_m, tolerance_factor, decay, adv_cap_m,
        adv_setback_m, flag_rows, float_rows, claim_rows, verdict, n_evidence,
    )


@numba.njit(cache=True)
def _timer_kernel(
    sl: np.ndarray, n: np.ndarray, dt: np.ndarray, clock_s: np.ndarray,
    balance: np.ndarray, last_now: np.ndarray, forgive_s: np.ndarray, forgive_until_s: np.ndarray,
    dropped: np.ndarray, forgiven: np.ndarray,
    min_dt: float, max_dt: float, allowance_s: np.ndarray, lag_floor_s: float, forgive_cap_s: float,
    forgive_window_s: float, forgive_burst: bool,
    accepted: np.ndarray, ahead_ms: np.ndarray, flagged: np.ndarray,
) -> int:
    """``TimerBalance.on_commands_batch`` after its type checks: how many slots had commands
    flagged, or minus a status code (_BAD_SLOT, _DUPLICATE, _NEGATIVE, _BAD_DT, _BACKWARDS),
    checked in that order before any write. ``dt``, ``clock_s`` (the time the commands arrived)
    and ``allowance_s``: one value per slot, or one for all."""
    k = sl.shape[0]
    status = _check_slots(sl, 0, k, balance.shape[0])
    if status != _OK:
        return -status
    for i in range(k):
        if n[i] < 0:
            return -_NEGATIVE
    step = 0 if dt.shape[0] == 1 else 1
    a_step = 0 if allowance_s.shape[0] == 1 else 1
    c_step = 0 if clock_s.shape[0] == 1 else 1
    for i in range(k):
        d = dt[i * step]
        if not (math.isfinite(d) and d >= min_dt and d <= max_dt):
            return -_BAD_DT
    for i in range(k):
        last = last_now[sl[i]]
        if not math.isnan(last) and clock_s[i * c_step] < last:
            return -_BACKWARDS
    floor = -lag_floor_s
    n_flagged = 0
    for i in range(k):
        s = sl[i]
        now_s = clock_s[i * c_step]
        last = last_now[s]
        fresh = math.isnan(last)
        if fresh:
            last = now_s
        bal = (0.0 if fresh else balance[s]) - (now_s - last)
        forgive = 0.0 if now_s > forgive_until_s[s] else forgive_s[s]
        until = forgive_until_s[s]
        clamped = floor - bal
        if not (clamped >= 0.0 or math.isnan(clamped)):
            clamped = 0.0
        if clamped > 0.0:
            grown = forgive + clamped
            forgive = grown if (grown <= forgive_cap_s or math.isnan(grown)) else forgive_cap_s
            until = now_s + forgive_window_s
        if not (bal >= floor or math.isnan(bal)):
            bal = floor
        d = dt[i * step]
        owed = forgive if forgive_burst else 0.0
        # Tiny slack so a balance landing exactly on the allowance is still accepted.
        strict = np.floor((allowance_s[i * a_step] - bal) / d + 1e-9)
        room = np.floor((allowance_s[i * a_step] + owed - bal) / d + 1e-9)
        count = n[i]
        ok = int(min(max(room, 0.0), float(count)))
        excess = count - ok
        ahead_ms[i] = (bal - owed + float(count) * d) * 1000.0
        bal = bal + float(ok) * d
        # Commands repaying the clamped silence bring the balance back toward zero: a client that
        # caught up stands where it stood before its lag, not at the allowance's edge, where the
        # next bit of jitter would make evidence once the debt expired.
        pay = min(max(bal, 0.0), owed)
        bal = bal - pay
        forgive = forgive - pay
        if pay > 0.0:
            # A slow catch-up keeps what it is owed: the debt expires a window after the last
            # clamp or repayment, so a client still catching up is not cut off mid-way.
            until = now_s + forgive_window_s
        if not (forgive >= 0.0 or math.isnan(forgive)):
            forgive = 0.0
        accepted[i] = ok
        flagged[i] = excess
        if excess > 0:
            n_flagged += 1
        balance[s] = bal
        last_now[s] = now_s
        forgive_s[s] = forgive
        forgive_until_s[s] = until
        dropped[s] += excess
        forgiven[s] += ok - int(min(max(strict, 0.0), float(count)))
    return n_flagged



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
        self._warm_up()

    @property
    def capacity(self) -> int:
        """Number of player slots."""
        return int(self.advantage_m.shape[0])

    def _warm_up(self) -> None:
        """Load (or compile) the kernels now, not in the middle of the first tick that needs them:
        an empty batch of the argument types ``validate_batches`` passes."""
        slots, rows3, rows, flags = np.zeros(0, np.intp), np.zeros((0, 3)), np.zeros(0), np.zeros(0, bool)
        _check_slots(slots, 0, 0, self.capacity)
        _validate_commit(
            0, 0, slots, rows, rows, flags, rows3, flags, flags, rows, rows, flags, flags, flags,
            self.advantage_m, self.pending_since_s, self.last_claim, self.claim_valid,
            self.desyncs, self.rejected, self.suppressed, 0.0, 0.0, 0.0, 0.0, 0.0,
            rows, flags, flags, flags, np.zeros(0, np.int8),
        )
        bounds = np.zeros((1, 2), np.int64)
        run = (
            rows3, rows3, rows3, rows, rows, self.pending_since_s, self.claim_valid, self.last_claim, self.advantage_m,
            self.desyncs, self.rejected, self.suppressed, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            np.zeros((9, 0), bool), np.zeros((6, 0)), np.zeros((2, 0, 3)), np.zeros(0, np.int8), np.zeros(1, np.int64),
        )
        _validate_run(0, bounds, slots, *run)
        cmd = MoveCommands(rows, rows, rows, rows, np.zeros(0, np.int64), rows)
        speed_args = max_speed_kernel_args(rows3, flags, cmd, rows, self.movement)
        if speed_args is not None:
            v, ground, wspeed, fwd, side, yaw, buttons, _, cfg_floats, cfg_flags = speed_args
            _validate_open(bounds, slots, self.capacity, v, ground, wspeed, fwd, side, yaw, buttons, cfg_floats,
                           cfg_flags, *run)

    def _refuse_bad_slots(self, sl: np.ndarray, batches: np.ndarray) -> None:
        """Raise IndexError or ValueError for the first of ``batches`` naming a slot out of range or twice."""
        cap = self.capacity
        for a, b in batches.tolist():
            _raise_slot_status(_check_slots(sl, a, b, cap), cap, _DUPLICATE_CLAIM)

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

    def awaiting_acks(self, now_s: float) -> np.ndarray:
        """(N,) bool per slot: it still has an unacknowledged setback or respawn (sent less than
        the ack timeout before ``now_s``, s)."""
        since = self.pending_since_s
        return ~np.isnan(since) & (now_s - since < self.config.setback_ack_timeout_s)

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
        if auth.pos.shape != (len(cmd), 3):
            raise ValueError("cmd and auth must hold one entry per slot")
        return self.validate_batches(
            [len(cmd)], slots, prev_pos, prev_vel, prev_on_ground, cmd, auth.pos, claimed, weapon_speed_m_s,
            geometry, tick, now_s,
        )[0]

    def validate_batches(
        self,
        sizes: list[int],
        slots: np.ndarray,
        prev_pos: np.ndarray,
        prev_vel: np.ndarray,
        prev_on_ground: npt.ArrayLike,
        cmd: MoveCommands,
        auth_pos: np.ndarray,
        claimed: np.ndarray,
        weapon_speed_m_s: np.ndarray | float,
        geometry: MapGeometry,
        tick: int,
        now_s: float,
        skipped_s: np.ndarray | None = None,
    ) -> list[ValidationResult]:
        """:meth:`validate` of consecutive batches, ``sizes[i]`` rows each, exactly as if it were
        called once per batch in order (a slot appears at most once per batch; a later batch sees
        the state the earlier ones left), with the model's top speeds computed for all rows at once.

        The server applies a tick's commands in rounds, one command per player each, and
        validates the rounds together: validation never feeds back into the simulation.
        ``auth_pos``: (N, 3) ``simulate``'s positions; the other arguments are :meth:`validate`'s
        over all N rows, batch after batch.

        ``skipped_s``: optional (N,) seconds of the player's commands between its previous
        claim and this row's that the server never applied (the timer check dropped them). The
        claim's displacement spans them too, so the speed checks judge it over the command's
        duration plus these: a client flushing its queue after a stall is corrected, not flagged.
        """
        cfg = self.config
        cap = self.capacity
        sl = np.ascontiguousarray(slots, dtype=np.intp)
        k = sl.shape[0]
        if sum(sizes) != k or any(size < 0 for size in sizes):
            raise ValueError(f"batch sizes {sizes} do not add up to the {k} slots")
        if not math.isfinite(now_s):
            raise ValueError("now_s must be finite")
        prev_p = np.ascontiguousarray(prev_pos, dtype=np.float64)
        prev_v = np.asarray(prev_vel, dtype=np.float64)
        claim = np.ascontiguousarray(claimed, dtype=np.float64)
        auth = np.ascontiguousarray(auth_pos, dtype=np.float64)
        for name, arr in (("prev_pos", prev_p), ("prev_vel", prev_v), ("claimed", claim)):
            if arr.shape != (k, 3):
                raise ValueError(f"{name} must have shape ({k}, 3), got {arr.shape}")
        if len(cmd) != k or auth.shape != (k, 3):
            raise ValueError("cmd and auth must hold one entry per slot")
        dt = np.ascontiguousarray(cmd.dt_s, dtype=np.float64)
        if skipped_s is not None:
            gap = np.asarray(skipped_s, dtype=np.float64)
            if gap.shape != (k,) or not bool(np.all(np.isfinite(gap) & (gap >= 0.0))):
                raise ValueError(f"skipped_s must be ({k},) finite non-negative seconds")
            dt = dt + gap
        bounds: list[tuple[int, int]] = []
        a = 0
        for size in sizes:
            bounds.append((a, a + size))
            a += size
        batches = np.array(bounds, dtype=np.int64).reshape(-1, 2)
        try:
            speed_args = max_speed_kernel_args(prev_v, prev_on_ground, cmd, weapon_speed_m_s, self.movement)
        except Exception:
            self._refuse_bad_slots(sl, batches)  # the slots' faults are named first, as they always were
            raise
        # Row-wise, so one call over every batch gives each row what its own batch would.
        limit = np.empty(k)
        # The per-row outputs, in three buffers (see _validate_run).
        flag_rows = np.zeros((9, k), dtype=bool)
        float_rows = np.zeros((6, k))
        claim_rows = np.empty((2, k, 3))
        verdict = np.empty(k, dtype=np.int8)
        n_evidence = np.zeros(len(bounds), dtype=np.int64)
        now = float(now_s)
        run = (
            prev_p, claim, auth, dt, limit, self.pending_since_s, self.claim_valid, self.last_claim, self.advantage_m,
            self.desyncs, self.rejected, self.suppressed, now, cfg.accept_m, cfg.setback_ack_timeout_s, cfg.teleport_m,
            1.0 + cfg.speed_tolerance, cfg.advantage_decay, cfg.advantage_cap_m, cfg.advantage_setback_m,
            flag_rows, float_rows, claim_rows, verdict, n_evidence,
        )
        if speed_args is None:
            j = -_NOT_FINITE
        else:
            v, ground, wspeed, fwd, side, yaw, buttons, _, cfg_floats, cfg_flags = speed_args
            j = _validate_open(batches, sl, cap, v, ground, wspeed, fwd, side, yaw, buttons, cfg_floats, cfg_flags, *run)
        if j == -_NOT_FINITE:
            self._refuse_bad_slots(sl, batches)
            limit[:] = max_horizontal_speed(prev_v, prev_on_ground, cmd, weapon_speed_m_s, self.movement)
            j = _validate_run(0, batches, sl, *run)
        _raise_slot_status(-j, cap, _DUPLICATE_CLAIM)
        if j < len(bounds):
            finite, accepted, pending, bad, teleport, wall, speed, adv_flag, setback = flag_rows
            _, disp_h, _, speed_h, speed_limit, wall_value = float_rows
            safe_claim, base = claim_rows
        # A batch with claims to test against the walls comes back here for the geometry, then
        # the run goes on after it.
        while j < len(bounds):
            a, b = bounds[j]
            rows = a + np.flatnonzero(bad[a:b] & ~teleport[a:b])
            wall[rows], wall_value[rows] = self._wall_clip(geometry, base[rows], safe_claim[rows])
            n_evidence[j] = _validate_commit(
                a, b, sl, dt, limit, finite, safe_claim, accepted, pending, disp_h, speed_h, bad, teleport, wall,
                self.advantage_m, self.pending_since_s, self.last_claim, self.claim_valid,
                self.desyncs, self.rejected, self.suppressed,
                now, 1.0 + cfg.speed_tolerance, cfg.advantage_decay, cfg.advantage_cap_m, cfg.advantage_setback_m,
                speed_limit, speed, adv_flag, setback, verdict,
            )
            j = _validate_run(j + 1, batches, sl, *run)
        results = []
        kept = auth.copy()
        accepted, setback, deviation = flag_rows[1], flag_rows[8], float_rows[0]
        for (a, b), n_ev in zip(bounds, n_evidence.tolist(), strict=True):
            evidence = self._evidence(a, b, sl, auth, limit, flag_rows, float_rows, claim_rows, tick, now) if n_ev else ()
            results.append(
                ValidationResult(
                    pos=kept[a:b],
                    accepted=accepted[a:b],
                    setback=setback[a:b],
                    deviation_m=deviation[a:b],
                    verdict=verdict[a:b],
                    evidence=evidence,
                )
            )
        return results

    def _evidence(
        self, a: int, b: int, sl: np.ndarray, auth: np.ndarray, limit: np.ndarray, flag_rows: np.ndarray,
        float_rows: np.ndarray, claim_rows: np.ndarray, tick: int, now: float,
    ) -> tuple[MovementEvidence, ...]:
        """The MovementEvidence of rows ``a:b`` of a ``validate_batches`` call (its buffers, see
        ``_validate_run``; ``limit``: the model's top speeds, m/s)."""
        cfg = self.config
        finite, _, _, _, teleport, wall, speed, adv_flag, _ = flag_rows
        _, _, disp_3, speed_h, speed_limit, wall_value = float_rows
        safe_claim = claim_rows[0]
        evidence: list[MovementEvidence] = []
        for i in a + np.flatnonzero((teleport | wall | speed | adv_flag)[a:b]):
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
                    time_s=now,
                    kind=kind,
                    value=float(value),
                    limit=float(lim),
                    claimed=_vec(safe_claim[i]) if finite[i] else None,
                    authoritative=_vec(auth[i]),
                    setback=True,
                )
            )
        if evidence:
            log.debug("movement evidence: %s", [(e.player, e.kind.value, round(e.value, 3)) for e in evidence])
        return tuple(evidence)

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

    Lag is not banked for long: the balance is clamped from below at ``-timer_lag_floor_s``, so a
    player silent for 1 s may then send at most floor + allowance (0.24 s by default) of commands
    at once before the rest is dropped. With ``timer_forgive_lag_burst`` (default) the time clamped
    away is owed to the player for ``timer_forgive_window_s`` (at most ``timer_forgive_cap_s``):
    commands repaying it are accepted, counted in ``forgiven``, and bring the balance back toward
    zero. An honest client that fell behind (a lag spike, a starved process) and then catches up
    sends only commands for time that really passed; dropping them would rubber-band it, and
    leaving its balance at the allowance's edge would turn the next bit of jitter into evidence.
    A speed hack gains nothing: the debt is repaid once, and its sustained excess is flagged as
    soon as the debt is gone. Callers should drop the *oldest* commands of an over-full batch:
    after a spike they are the stale ones.

    Arrays: balance_s, last_now_s (NaN until the first batch), forgive_s, forgive_until_s (s),
    dropped, forgiven (counts of commands: dropped, and accepted only as repayment) (N,).
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
        # Load (or compile) the kernel now, not in the middle of the first tick that needs it.
        self.on_commands_batch(np.zeros(0, np.intp), np.zeros(0, np.int64), 0.01, 0.0)

    def _refuse_bad_slots(self, sl: np.ndarray) -> None:
        """Raise IndexError or ValueError when ``sl`` names a slot out of range or twice."""
        capacity = self.balance_s.shape[0]
        _raise_slot_status(_check_slots(sl, 0, sl.shape[0], capacity), capacity, "slots must be distinct")

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
        jitter_s: np.ndarray | None = None,
        arrived_s: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[MovementEvidence, ...]]:
        """Batched :meth:`on_commands` for K distinct slots; returns (accepted counts (K,), evidence).

        ``positions`` (K, 3), optional, fills the evidence's ``authoritative`` field (m).
        ``jitter_s`` (K,), optional: each player's measured interarrival jitter (s), which widens
        its allowance (``timer_jitter_allowance``); NaN or negative counts as none.
        ``arrived_s`` (K,), optional: when each slot's newest commands arrived (s, the server
        clock); each slot's balance then runs on the latest of ``now_s``, its arrival time and
        its previous clock. A server that ran late and catches up ticks at their nominal times
        would otherwise see a stall's worth of commands arrive in one tick's time: a timer flag on
        every player at once. A server on time (arrivals before the tick) is unaffected.
        Raises ValueError for non-finite times, durations outside
        [``min_command_dt_s``, ``max_command_dt_s``], negative counts or a clock going backwards.
        """
        cfg = self.config
        sl = np.ascontiguousarray(slots, dtype=np.intp)
        k = sl.shape[0]
        # The slots are checked first (the kernel does it for the calls that get there): a call
        # failing the checks below fails the slots' first when both are wrong.
        n = np.asarray(n_commands)
        if n.shape != (k,) or n.dtype.kind not in "iu":
            self._refuse_bad_slots(sl)
            raise ValueError("n_commands must be (K,) non-negative integers")
        if n.dtype != np.int64:
            n = n.astype(np.int64)
        if isinstance(cmd_dt_s, float):
            # One duration for every slot: the kernel reads it for each (np.full cost ~1.5 us a tick).
            dt = np.array([cmd_dt_s])
        else:
            try:
                dt = np.ascontiguousarray(np.broadcast_to(np.asarray(cmd_dt_s, dtype=np.float64), (k,)))
            except (TypeError, ValueError):
                self._refuse_bad_slots(sl)
                raise
        if not math.isfinite(now_s):
            self._refuse_bad_slots(sl)
            raise ValueError("now_s must be finite")
        if arrived_s is None:
            clock = np.array([float(now_s)])
        else:
            arrived = np.asarray(arrived_s, dtype=np.float64)
            if arrived.shape != (k,) or not bool(np.all(np.isfinite(arrived))):
                self._refuse_bad_slots(sl)
                raise ValueError(f"arrived_s must be ({k},) finite times")
            self._refuse_bad_slots(sl)
            # Never behind the slot's last clock: a late arrival time read before this tick's
            # nominal time caught up with it must not run the clock backwards.
            clock = np.fmax(np.maximum(arrived, float(now_s)), self.last_now_s[sl])
        if jitter_s is None:
            allowance = np.array([cfg.timer_drift_allowance_s])
        else:
            jit = np.asarray(jitter_s, dtype=np.float64)
            if jit.shape != (k,):
                self._refuse_bad_slots(sl)
                raise ValueError(f"jitter_s must have shape ({k},)")
            extra = np.minimum(np.nan_to_num(jit, nan=0.0, posinf=np.inf, neginf=0.0).clip(min=0.0)
                               * cfg.timer_jitter_allowance, cfg.timer_jitter_allowance_cap_s)
            allowance = cfg.timer_drift_allowance_s + extra
        accepted = np.empty(k, dtype=np.int64)
        ahead_ms = np.empty(k)
        flagged = np.empty(k, dtype=np.int64)
        n_flagged = _timer_kernel(
            sl, n, dt, clock, self.balance_s, self.last_now_s, self.forgive_s, self.forgive_until_s,
            self.dropped, self.forgiven, cfg.min_command_dt_s, cfg.max_command_dt_s, allowance,
            cfg.timer_lag_floor_s, cfg.timer_forgive_cap_s, cfg.timer_forgive_window_s,
            bool(cfg.timer_forgive_lag_burst),
            accepted, ahead_ms, flagged,
        )
        if n_flagged in (-_BAD_SLOT, -_DUPLICATE):
            self._refuse_bad_slots(sl)
        if n_flagged == -_NEGATIVE:
            raise ValueError("n_commands must be (K,) non-negative integers")
        if n_flagged == -_BAD_DT:
            raise ValueError(
                f"command durations must lie in [{cfg.min_command_dt_s}, {cfg.max_command_dt_s}] s"
            )
        if n_flagged == -_BACKWARDS:
            raise ValueError("server clock went backwards")

        evidence = []
        for i in np.flatnonzero(flagged > 0) if n_flagged else ():
            where = _vec(np.asarray(positions)[i]) if positions is not None else (0.0, 0.0, 0.0)
            evidence.append(
                MovementEvidence(
                    player=int(sl[i]),
                    tick=int(tick),
                    time_s=float(now_s),
                    kind=MovementKind.TIMER,
                    value=float(ahead_ms[i]),
                    limit=float(allowance[i if allowance.shape[0] > 1 else 0]) * 1000.0,
                    claimed=None,
                    authoritative=where,
                    setback=False,
                )
            )
        return accepted, tuple(evidence)
