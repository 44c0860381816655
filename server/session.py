"""Per-client session state: who a connected address is, and what it sent that awaits a tick."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from anticheat.events import AimSample
from server.handshake import SessionCredentials
from server.protocol import Shot, command_record, command_seqs
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
        queued: commands received but not yet applied, by sequence (bounded by the core), each
            its packed wire record: the tick reads them all as arrays at once.
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
        max_seq_jump: how far past the newest command held (queued or applied) a new command's
            sequence may be; further ones are refused (counted in ``commands_too_new``), as the
            replay window refuses far-ahead packets: one forged command numbered near 2**32
            would make every real command after it look applied already. The first command of
            a session may be anything.
        commands_overflowed: commands dropped unapplied because more than the queue's limit
            waited (the oldest go).
        last_taken_seq: sequence of the last command :meth:`take` returned (applied; dropped
            ones advance ``last_applied_seq`` only), -1 before any.
        commands_arrived_s: server time (s) the newest queued commands arrived: the timer
            check's clock when it is later than the tick's (a server catching up after a stall).
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
    queued: OrderedDict[int, bytes] = field(default_factory=OrderedDict)
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
    max_seq_jump: int = 2**32
    commands_too_new: int = 0
    commands_overflowed: int = 0
    last_taken_seq: int = -1
    commands_arrived_s: float = 0.0

    def queue(self, block: bytes, shots: tuple[Shot, ...], limit: int) -> int:
        """Queue the commands of a validated INPUT command block not seen before, and their shots;
        returns how many were new.

        ``block``: packed command records with strictly increasing sequence numbers, as
        ``proto.decode`` returns them. Redundant copies of commands already queued or applied are
        ignored: each command is applied once, in order. A new one is queued as its record, still
        packed. When more than ``limit`` wait, the oldest are dropped.
        """
        seqs = command_seqs(block)
        queued = self.queued
        last = len(seqs) - 1
        # The usual INPUT: its newest record is new, the ones before it are held (applied or
        # queued). The queue is kept in seq order; without holes it holds every seq from its first
        # to its newest, so a block reaching back no further than that first, or a queue that
        # continues the applied seqs, holds everything up to its newest: no record to look up.
        if queued:
            newest, first = next(reversed(queued)), next(iter(queued))
            covered = newest - first + 1 == len(queued) and (first == self.last_applied_seq + 1 or seqs[0] >= first)
        else:
            newest, covered = self.last_applied_seq, True
        if (covered and seqs[last] > newest and (last == 0 or seqs[last - 1] <= newest)
                and (newest < 0 or seqs[last] - newest <= self.max_seq_jump)):
            queued[seqs[last]] = command_record(block, last)
            new = 1
        else:
            new = self._queue_each(block, seqs)
            if not new:
                return 0
            queued = self.queued
        if shots:
            for shot in shots:
                if shot.cmd_seq in queued and shot.cmd_seq not in self.shots:
                    self.shots[shot.cmd_seq] = [s for s in shots if s.cmd_seq == shot.cmd_seq]
        while len(queued) > limit:
            seq, _ = queued.popitem(last=False)
            self.shots.pop(seq, None)
            self.commands_overflowed += 1
        return new

    def missing_before(self, drop_oldest: int, n: int) -> list[int] | None:
        """For the ``n`` commands :meth:`take` would return after dropping ``drop_oldest``: how
        many sequence numbers are missing before each (since the last command taken, in this
        tick or an earlier one, or the one before it in the queue), or None when none is:
        dropped, overflowed or lost commands whose movement the client's next claim includes.
        The first commands of a session have nothing before them (0)."""
        queued = self.queued
        before = self.last_taken_seq
        if not queued or n <= 0 or (not drop_oldest and next(reversed(queued)) - before == len(queued)):
            return None
        seqs = list(queued)[drop_oldest : drop_oldest + n]
        gaps = [seq - prev - 1 for prev, seq in zip([before, *seqs], seqs)]
        if before < 0:
            gaps[0] = 0
        return gaps if any(gaps) else None

    def _queue_each(self, block: bytes, seqs: tuple[int, ...]) -> int:
        """:meth:`queue`'s general case: every record checked, newest first; returns how many were new."""
        queued = self.queued
        applied = self.last_applied_seq
        newest = next(reversed(queued)) if queued else applied
        fresh: list[int] = []
        gap = False
        jump = self.max_seq_jump
        for index in range(len(seqs) - 1, -1, -1):
            seq = seqs[index]
            if seq <= applied:
                break  # the block's seqs increase, so every older record was applied too
            if newest >= 0 and seq - newest > jump:
                self.commands_too_new += 1
                continue
            if seq <= newest:
                if seq in queued:
                    continue
                gap = True  # a reordered packet brought a command that missed its own packets
            fresh.append(index)
        for index in reversed(fresh):
            queued[seqs[index]] = command_record(block, index)
        if gap:  # it went in after newer commands
            self.queued = OrderedDict(sorted(queued.items()))
        return len(fresh)

    def take(self, n: int, drop_oldest: int) -> list[bytes]:
        """Remove and return up to ``n`` queued command records in order, after dropping the
        oldest ``drop_oldest`` (the timer check refused them)."""
        queued = self.queued
        if not drop_oldest and n >= len(queued):
            # The usual case, everything at once. The queue is kept in sequence order, so its
            # last key is the newest.
            if not queued:
                return []
            self.last_applied_seq = max(self.last_applied_seq, next(reversed(queued)))
            self.last_taken_seq = next(reversed(queued))
            everything = list(queued.values())
            queued.clear()
            return everything
        out: list[bytes] = []
        for _ in range(drop_oldest):
            if not self.queued:
                break
            seq, _ = self.queued.popitem(last=False)
            self.shots.pop(seq, None)
            self.last_applied_seq = max(self.last_applied_seq, seq)
        while self.queued and len(out) < n:
            seq, cmd = self.queued.popitem(last=False)
            self.last_applied_seq = max(self.last_applied_seq, seq)
            self.last_taken_seq = seq
            out.append(cmd)
        return out
