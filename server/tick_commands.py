"""The tick's commands as arrays, in rounds: round k holds every player's k-th command of the
tick (one command per player per round), and the arrays keep what movement leaves for validation
after the last round."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np

from physics.movement import MoveCommands
from server import protocol as proto
from server.input_kernel import command_columns
from server.session import ClientSession
from world.state import WorldState

YAW, PITCH = 3, 4
"""Rows of yaw_deg and pitch_deg in TickCommands.numbers."""


NO_ROWS = np.zeros(0, dtype=np.intp)
NO_ROWS.flags.writeable = False


class TickCommands:
    """The tick's commands as arrays, round after round (N rows), and what movement leaves there
    for validation after the last round.

    Attributes:
        words, order: the records' 8-byte words (``proto.command_arrays``, read-only), row i
            from record order[i].
        slots, times: (N,) player slot and command clock after the command (s).
        numbers: (6, N) duration_s, forward, side, yaw_deg, pitch_deg and buttons: what movement
            reads. claimed: (N, 3) claimed positions (m).
        seq, view_time, view_yaw, view_pitch, recoil_pitch, recoil_yaw, buttons, switch: per row,
            those fields as Python values (they go into AimSamples; s and deg).
        yaw: (N,) the view yaw as the world keeps it, in [-180, 180) (deg).
        alive: (N,) the player is alive (so its command moves it); all_alive: all are.
        cos_sin: (2, 2, N) cos and sin of yaw and pitch (radians).
        prev_pos, prev_vel, prev_ground, speed, pos, vel, ground, stance, pressed: per moved row,
            the state before the command, the held weapon's move speed (m/s) and the simulated
            position, velocity, on-ground flag, stance and crouch press.
        move: the moved rows' commands when one movement batch took them all (validation's
            too), else None.
        aim: per row, the AimSample values of the player after the command's movement as lists
            (they go into Python objects): horizontal speed, target angle, target distance,
            hidden target angle, target slot (-1 none), stance, hidden target slot (-1 none), on
            ground (``aim_gather``'s).
    """

    __slots__ = (
        "aim",
        "alive",
        "all_alive",
        "buttons",
        "claimed",
        "cos_sin",
        "ground",
        "move",
        "numbers",
        "order",
        "pos",
        "pressed",
        "prev_ground",
        "prev_pos",
        "prev_vel",
        "recoil_pitch",
        "recoil_yaw",
        "seq",
        "slots",
        "speed",
        "stance",
        "switch",
        "times",
        "vel",
        "view_pitch",
        "view_time",
        "view_yaw",
        "words",
        "yaw",
    )

    def __init__(self, words: np.ndarray, halves: np.ndarray, order: np.ndarray, slots: list[int],
                 times: list[float], world: WorldState) -> None:
        n = order.shape[0]
        self.words = words
        self.order = order
        self.slots = np.array(slots, dtype=np.intp)
        self.times = np.array(times)
        self.numbers = np.empty((6, n))
        self.claimed = np.empty((n, 3))
        self.yaw = np.empty(n)
        rad = np.empty((2, n))
        ints = np.empty((3, n), dtype=np.int64)
        floats = np.empty((4, n))
        command_columns(words, halves, order, self.numbers, self.claimed, self.yaw, rad, ints, floats)
        self.seq, self.buttons, self.switch = ints.tolist()
        self.view_yaw, self.view_pitch, self.recoil_pitch, self.recoil_yaw = floats.tolist()
        self.view_time: list[float] = words[order, proto.CMD_VIEW_TIME].tolist()
        # Alive or dead stays as it was for the whole phase: kills come with the shots, after it.
        self.alive = world.alive[self.slots]
        self.all_alive = bool(self.alive.all())
        # The transcendental functions stay numpy's (the compiled kernels' libm could differ from
        # numpy's vectorised ones in the last bit): cos and sin of every view, once.
        self.cos_sin = np.empty((2, 2, n))
        np.cos(rad, out=self.cos_sin[0])
        np.sin(rad, out=self.cos_sin[1])
        self.prev_pos = np.empty((n, 3))
        self.prev_vel = np.empty((n, 3))
        self.prev_ground = np.empty(n, dtype=bool)
        self.speed = np.empty(n)
        self.pos = np.empty((n, 3))
        self.vel = np.empty((n, 3))
        self.ground = np.empty(n, dtype=bool)
        self.stance = np.empty(n, dtype=np.int8)
        self.pressed = np.empty(n, dtype=bool)
        self.aim: list[list[Any]] = [[None] * n for _ in range(8)]
        self.move: MoveCommands | None = None

    def command(self, row: int) -> proto.Command:
        """Row ``row`` as a Command (for the few rows that act on the weapon)."""
        return proto.unpack_command(self.words[self.order[row]].tobytes(), 0)


@dataclass(slots=True)
class Round:
    """One round of a tick's commands: the players' k-th commands, rows ``start:stop`` of the
    tick's command arrays (round after round)."""

    sessions: list[ClientSession]
    start: int
    stop: int
    acting: list[int]
    """Indices into the round of the commands that act on the weapon (switch, reload, shots)."""
    switches: bool
    """A command of the round switches weapons: the move speed of the player's next command may
    change (the switch comes after the round's movement)."""
    live: np.ndarray
    """Indices into the round of the players that moved (alive)."""
    mark: int = 0
    """Where the round's movement evidence goes in the tick's events: before its shots and aim
    samples (the claims are validated after the tick's last round)."""


def round_rows(lens: list[int]) -> tuple[list[list[int]], list[int] | None]:
    """Rounds of commands taken ``lens[i]`` per session, rows in session order (session 0's
    commands, then session 1's...): each round's sessions (indices, in order) and, for each row
    in round order, its row in session order (None when the two orders are the same: one command
    per session at most)."""
    if max(lens) == 1:
        return [[i for i, n in enumerate(lens) if n]], None
    starts = [0, *accumulate(lens[:-1])]
    members: list[list[int]] = []
    rows: list[int] = []
    for k in range(max(lens)):
        them = [i for i, n in enumerate(lens) if n > k]
        members.append(them)
        rows += [starts[i] + k for i in them]
    return members, rows
