"""Per-client session state: who a connected address is, and what it sent that awaits a tick."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from anticheat.events import AimSample
from server.handshake import SessionCredentials
from server.protocol import Command, Shot
from server.rate_limit import ClientRateLimiter
from server.replay_window import ReplayWindow

Address = tuple[str, int]


@dataclass(slots=True)
class ClientSession:
    """One connected client (mutable: owned by the server core, never shared).

    Attributes:
        slot, address, name, creds: identity; creds verify the session token of every packet.
        window: the packet-sequence replay window; limiter: per-client rate limits.
        connected_s, last_packet_s: server times (s).
        last_applied_seq: sequence of the last command applied (-1 before any).
        queued: commands received but not yet applied, by sequence (bounded by the core).
        shots: shots waiting for their command, by command sequence.
        cmd_time_s: the player's command clock (s): advances by each applied command's duration.
            Weapon timing runs on it, so network jitter never makes honest shots look early,
            while the timer check keeps it from running ahead of real time.
        respawn_at_s: server time of the next respawn while dead, else None.
        last_correction_seq: command sequence of the last setback sent (-1 none).
        shots_fired, hits, kills, deaths, commands_applied: counters for reports.
        last_correction_s: server time (s) of the last CORRECTION sent (-inf before any).
        last_aim: the AimSample of the last applied command, or None: where the crosshair was
            one command before a shot.
    """

    slot: int
    address: Address
    name: str
    creds: SessionCredentials
    window: ReplayWindow
    limiter: ClientRateLimiter
    connected_s: float
    last_packet_s: float
    cmd_time_s: float
    last_applied_seq: int = -1
    queued: OrderedDict[int, Command] = field(default_factory=OrderedDict)
    shots: dict[int, list[Shot]] = field(default_factory=dict)
    respawn_at_s: float | None = None
    last_correction_seq: int = -1
    shots_fired: int = 0
    hits: int = 0
    kills: int = 0
    deaths: int = 0
    commands_applied: int = 0
    last_aim: AimSample | None = None
    last_correction_s: float = -math.inf

    def queue(self, commands: tuple[Command, ...], shots: tuple[Shot, ...], limit: int) -> int:
        """Queue the commands not seen before (and their shots); returns how many were new.

        Redundant copies of commands already queued or applied are ignored: each command is
        applied once, in order. When more than ``limit`` wait, the oldest are dropped.
        """
        new = 0
        for cmd in commands:
            if cmd.seq <= self.last_applied_seq or cmd.seq in self.queued:
                continue
            self.queued[cmd.seq] = cmd
            new += 1
        if new:
            fresh = {c.seq for c in commands}
            for shot in shots:
                if shot.cmd_seq in fresh and shot.cmd_seq in self.queued and shot.cmd_seq not in self.shots:
                    self.shots[shot.cmd_seq] = [s for s in shots if s.cmd_seq == shot.cmd_seq]
            order = list(self.queued)
            if order != sorted(order):  # a reordered packet brought an older command late
                self.queued = OrderedDict(sorted(self.queued.items()))
            while len(self.queued) > limit:
                seq, _ = self.queued.popitem(last=False)
                self.shots.pop(seq, None)
        return new

    def take(self, n: int, drop_oldest: int) -> list[Command]:
        """Remove and return up to ``n`` queued commands in order, after dropping the oldest
        ``drop_oldest`` (the timer check refused them)."""
        queued = self.queued
        if not drop_oldest and n >= len(queued):
            # The usual case, everything at once. The queue is kept in sequence order, so its
            # last key is the newest.
            if not queued:
                return []
            self.last_applied_seq = max(self.last_applied_seq, next(reversed(queued)))
            everything = list(queued.values())
            queued.clear()
            return everything
        out: list[Command] = []
        for _ in range(drop_oldest):
            if not self.queued:
                break
            seq, _ = self.queued.popitem(last=False)
            self.shots.pop(seq, None)
            self.last_applied_seq = max(self.last_applied_seq, seq)
        while self.queued and len(out) < n:
            seq, cmd = self.queued.popitem(last=False)
            self.last_applied_seq = max(self.last_applied_seq, seq)
            out.append(cmd)
        return out
