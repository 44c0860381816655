"""Client-side prediction of the player's own movement, and reconciliation with the server.

The client applies each of its commands at once with the server's own movement code
(``physics.movement.simulate`` on the same map geometry), so the player moves without waiting a
round trip, and it claims the predicted position in the command. Commands stay *pending* until
the server says it applied them (a SNAPSHOT's ``last_cmd_seq`` with the authoritative own
state, or a CORRECTION). Then the authoritative state replaces the prediction for that command
and the pending commands after it are simulated again from it: standard reconciliation (Quake 3,
Source, Overwatch).

Replaying costs one ``simulate`` call per pending command, so it only happens when the
authoritative state differs from what was predicted for that command; an honest client on a
deterministic server almost never replays. Units: meters, m/s, seconds, degrees.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import dataclass, field
from math import isfinite
from typing import NamedTuple

from physics.buttons import ALL_BUTTONS, Buttons
from physics.config import MovementConfig
from physics.movement import MoveCommands, simulate_one
from world.constants import STANCE_CROUCHING, STANCE_STANDING
from world.geometry import MapGeometry

log = logging.getLogger(__name__)

Vec3 = tuple[float, float, float]

_JUMP = int(Buttons.JUMP)
_CROUCH = int(Buttons.CROUCH)
_NOT_BUTTONS = ~int(ALL_BUTTONS)


class MoveState(NamedTuple):
    """One player's movement state: feet position (m), velocity (m/s), ground contact, stance
    (0 standing, 1 crouching)."""

    pos: Vec3
    vel: Vec3
    on_ground: bool
    stance: int


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    """Prediction and reconciliation.

    Attributes:
        match_pos_m: an authoritative position within this distance (m) of the prediction for the
            same command is taken as agreement: no replay. 0.1 mm: claims travel as float64, so
            an honest client on the same code agrees exactly; a disagreement above this is a
            real desync (a setback, a respawn, a server-side push).
        match_vel_m_s: the same for velocity (m/s).
        max_pending: unacknowledged commands kept (4 s at 64 Hz); older ones are dropped, and a
            later acknowledgement of them forces a replay from the authoritative state.
        movement: the movement constants the game ships (the server's defaults).
    """

    match_pos_m: float = 1e-4
    match_vel_m_s: float = 1e-3
    max_pending: int = 256
    movement: MovementConfig = field(default_factory=MovementConfig)

    def __post_init__(self) -> None:
        if not (self.match_pos_m >= 0.0 and self.match_vel_m_s >= 0.0):
            raise ValueError("PredictionConfig match tolerances must be >= 0")
        if self.max_pending < 1:
            raise ValueError("PredictionConfig.max_pending must be at least 1")


class PendingCommand(NamedTuple):
    """A command applied locally and not yet acknowledged by the server.

    Attributes: seq; forward, side (in [-1, 1]), yaw_deg (deg), buttons, dt_s (s): the movement
    input, as validated by ``MoveCommands``; weapon_speed_m_s: held weapon's move speed (m/s);
    moves: False while dead (the state is carried over unchanged); result: predicted state after
    the command.
    """

    seq: int
    forward: float
    side: float
    yaw_deg: float
    buttons: int
    dt_s: float
    weapon_speed_m_s: float
    moves: bool
    result: MoveState


class Reconciliation(NamedTuple):
    """Outcome of :meth:`Predictor.reconcile`.

    stale: the acknowledgement is older than one already applied; nothing changed.
    replayed: the prediction disagreed and the pending commands were simulated again.
    error_m: how far the current predicted position moved (m), 0 without a replay.
    """

    stale: bool
    replayed: bool
    error_m: float


# The two outcomes without a replay, shared (immutable): an honest client gets one per snapshot.
_STALE = Reconciliation(True, False, 0.0)
_AGREED = Reconciliation(False, False, 0.0)


def _close(a: MoveState, b: MoveState, pos_m: float, vel_m_s: float) -> bool:
    if a == b:
        # The usual case (an honest client on the same code): equal states are at distance 0.
        return True
    return (
        math.dist(a.pos, b.pos) <= pos_m
        and math.dist(a.vel, b.vel) <= vel_m_s
        and a.on_ground == b.on_ground
        and a.stance == b.stance
    )


class Predictor:
    """Predicted own movement: an authoritative base state plus the pending commands after it.

    Args:
        geometry: the map's collision (shared with other clients is fine: it is read-only).
        initial: the state before the first command.
        config: tolerances and movement constants.
    """

    def __init__(self, geometry: MapGeometry, initial: MoveState, config: PredictionConfig | None = None) -> None:
        self.geometry = geometry
        self.config = config or PredictionConfig()
        self._base = initial
        self._base_seq: int | None = None
        self._pending: deque[PendingCommand] = deque()
        # One command's arrays, rewritten before each ``simulate_one`` call: building a
        # ``MoveCommands`` per command cost more than the movement kernel itself. Only the values
        # ``predict`` validated (as ``MoveCommands`` does) are ever written into it.
        self._cmd = MoveCommands.single()
        self.replays = 0
        """Reconciliations that re-simulated the pending commands."""
        self.simulated = 0
        """``simulate`` calls made (predictions and replays)."""

    @property
    def state(self) -> MoveState:
        """The predicted state after the newest command."""
        return self._pending[-1].result if self._pending else self._base

    @property
    def base_seq(self) -> int | None:
        """The newest command the server acknowledged, None before any."""
        return self._base_seq

    @property
    def pending(self) -> tuple[PendingCommand, ...]:
        """Unacknowledged commands, oldest first."""
        return tuple(self._pending)

    def predicted_after(self, seq: int) -> MoveState | None:
        """The state predicted after command ``seq``, when still known."""
        if seq == self._base_seq:
            return self._base
        for p in self._pending:
            if p.seq == seq:
                return p.result
        return None

    def _step(
        self, state: MoveState, forward: float, side: float, yaw_deg: float, buttons: int, dt_s: float, speed: float
    ) -> tuple[MoveState, bool]:
        """``state`` after one command's movement (validated fields of a ``PendingCommand``; speed
        in m/s): (state, crouch pressed)."""
        if (
            state.on_ground and state.vel == (0.0, 0.0, 0.0) and state.pos[2] == 0.0
            and forward == 0.0 and side == 0.0 and not buttons & _JUMP
        ):
            # Standing still with no input: simulate would return the same position and zero
            # velocity exactly (no friction, no acceleration, no sweep); only the stance follows
            # CROUCH. Idle and camping players are common, and this test costs less than a move.
            crouch = bool(buttons & _CROUCH)
            stance = STANCE_CROUCHING if crouch else STANCE_STANDING
            return state._replace(stance=stance), crouch and state.stance == STANCE_STANDING
        self.simulated += 1
        cmd = self._cmd
        cmd.forward_move[0] = forward
        cmd.side_move[0] = side
        cmd.yaw_deg[0] = yaw_deg
        cmd.buttons[0] = buttons
        cmd.dt_s[0] = dt_s
        pos, vel, on_ground, stance, pressed = simulate_one(
            state.pos, state.vel, state.on_ground, state.stance, cmd, speed, self.geometry, self.config.movement
        )
        return MoveState(pos, vel, on_ground, stance), pressed

    def predict(
        self,
        seq: int,
        forward: float,
        side: float,
        yaw_deg: float,
        pitch_deg: float,
        buttons: int,
        dt_s: float,
        weapon_speed_m_s: float,
        moves: bool = True,
    ) -> tuple[MoveState, bool]:
        """Apply command ``seq`` locally; returns (predicted state after it, crouch pressed).

        ``moves`` False (dead) keeps the state unchanged, as the server does not move the dead.
        A command ``MoveCommands`` refuses (NaN, a non-positive duration, unknown buttons) raises
        its ValueError.
        """
        if (
            type(forward) is float and type(side) is float and type(yaw_deg) is float
            and type(pitch_deg) is float and type(dt_s) is float and type(buttons) is int
            and isfinite(forward + side + yaw_deg + pitch_deg + dt_s) and dt_s > 0.0 and not buttons & _NOT_BUTTONS
        ):
            # What ``MoveCommands.single`` stores for plain valid numbers, without building it.
            f, s, y, b, d = forward, side, yaw_deg, buttons, dt_s
        else:
            checked = MoveCommands.single(forward, side, yaw_deg, buttons, dt_s, pitch_deg)
            f, s, y = checked.forward_move.item(), checked.side_move.item(), checked.yaw_deg.item()
            b, d = checked.buttons.item(), checked.dt_s.item()
        pending = self._pending
        prev = pending[-1].result if pending else self._base
        speed = float(weapon_speed_m_s)
        if moves:
            result, pressed = self._step(prev, f, s, y, b, d, speed)
        else:
            result, pressed = prev, False
        pending.append(PendingCommand(seq, f, s, y, b, d, speed, moves, result))
        if len(pending) > self.config.max_pending:
            pending.popleft()
        return result, pressed

    def override(self, pos: Vec3) -> None:
        """The client believes itself at ``pos`` (m) after the newest command (a cheat's claim);
        later commands are predicted from there until the server corrects it."""
        if not all(math.isfinite(c) for c in pos):
            return
        p = (float(pos[0]), float(pos[1]), float(pos[2]))
        if self._pending:
            last = self._pending[-1]
            self._pending[-1] = last._replace(result=last.result._replace(pos=p))
        else:
            self._base = self._base._replace(pos=p)

    def reset(self, state: MoveState, seq: int | None, moves: bool = True) -> None:
        """Hard reset (spawn, death): the server's ``state`` after command ``seq``; pending
        commands after ``seq`` are replayed from it, older ones dropped. ``moves`` False (death)
        makes every pending command a no-move one first."""
        self._base = state
        self._base_seq = seq
        while self._pending and seq is not None and self._pending[0].seq <= seq:
            self._pending.popleft()
        if not moves:
            self._pending = deque(p._replace(moves=False) if p.moves else p for p in self._pending)
        self._replay()

    def reconcile(self, seq: int | None, auth: MoveState, force: bool = False) -> Reconciliation:
        """The server's state ``auth`` after command ``seq`` (None: before any command).

        Commands up to ``seq`` are dropped; when ``auth`` disagrees with what was predicted for
        ``seq`` (or ``force``, a CORRECTION) the later pending commands are simulated again
        from ``auth``. An acknowledgement older than the last one applied is stale and ignored;
        the same ``seq`` again is compared with the state already acknowledged for it.
        """
        if self._base_seq is not None and (seq is None or seq < self._base_seq):
            # "Nothing applied yet" after an acknowledgement is as stale as an older one (a
            # reordered snapshot); a server-side reset comes as a CORRECTION or a respawn.
            return _STALE
        predicted = self._base if seq is None or seq == self._base_seq else None
        while self._pending and seq is not None and self._pending[0].seq <= seq:
            p = self._pending.popleft()
            if p.seq == seq:
                predicted = p.result
        cfg = self.config
        self._base = auth
        self._base_seq = seq
        if not force and predicted is not None and _close(predicted, auth, cfg.match_pos_m, cfg.match_vel_m_s):
            return _AGREED
        before = self.state
        self._replay()
        self.replays += 1
        return Reconciliation(False, True, math.dist(before.pos, self.state.pos))

    def _replay(self) -> None:
        state = self._base
        replayed: deque[PendingCommand] = deque()
        for p in self._pending:
            if p.moves:
                state, _ = self._step(state, p.forward, p.side, p.yaw_deg, p.buttons, p.dt_s, p.weapon_speed_m_s)
            replayed.append(p._replace(result=state))
        self._pending = replayed


def state_from_correction(pos: Vec3, vel: Vec3, stance: int) -> MoveState:
    """A full state from a CORRECTION, which carries position and velocity only: on the ground
    when standing on the floor and not moving up (the floor is z = 0), stance as predicted."""
    on_ground = pos[2] <= 1e-9 and vel[2] <= 0.0
    return MoveState(pos, vel, on_ground, STANCE_CROUCHING if stance == STANCE_CROUCHING else STANCE_STANDING)
