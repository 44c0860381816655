"""The authoritative game core: a step function over datagrams and time, with no sockets inside.

``receive`` takes one datagram from an address and returns the immediate replies (handshake,
pong); ``step`` runs one fixed tick at a given server time and returns the datagrams to send.
Behind UDP a transport calls them in real time; in-process the testbed calls them in virtual time
(DESIGN principle 2). The tick follows DESIGN's flow in order, one module per phase (like
ioquake3's ``sv_client``, ``sv_game``, ``sv_snapshot``), each taking the core as an argument:

0. clients and respawns (``server.clients``: kicks, timeouts; ``server.respawns``),
1. apply inputs (``server.inputs``: movement simulation, validation, corrections, weapon
   actions; ``server.aim_samples``),
2. resolve shots (``server.shots``: lag-compensated batched hit registration, damage, kills, baits),
3. detect (``server.detection``: the anticheat pipeline consumes the tick's events),
4. record (history ring buffer, replay file),
5. snapshot (per-client visibility culling, ``server.snapshot_send``).

Between ticks, ``receive`` hands each datagram to ``server.clients``.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from typing import Any

import numpy as np

from anticheat.events import SessionEvent
from anticheat.pipeline import DetectionPipeline
from lagcomp.history import TickHistory
from lagcomp.hitreg import BaitTargets
from physics.validation import MovementValidator, TimerBalance
from physics.weapon_state import WeaponState
from server import clients, detection, inputs, player_report, shots
from server.aim_samples import aim_kernels
from server.clients import DepartedPlayer
from server.config import ServerConfig
from server.core_state import Outgoing
from server.events import EventBus
from server.handshake import Handshake
from server.netstats import NetStats
from server.phantoms import Phantoms
from server.recording import ReplayWriter
from server.respawns import respawn_due
from server.session import Address, ClientSession
from server.shots import Bait
from server.snapshot_send import send_snapshots
from server.snapshots import SnapshotBuilder
from server.tick_stats import TickStats
from server.visibility import VisibilityCuller
from world.geometry import MapGeometry
from world.mapfile import GameMap
from world.state import WorldLimits, WorldState
from world.weapons import WEAPONS


class ServerCore:
    """One match's authoritative server (sans-IO).

    Args:
        config: server configuration. game_map: the map. secret: HMAC key for cookies and tokens
        (>= 32 bytes). seed: seeds every random choice (spawns, spread, session salts), so a
        virtual-time match is reproducible. pipeline: the anticheat pipeline (None: no detection).
        recorder: replay writer (None: no recording). bus: operator event bus.
        geometry: prepared map geometry, when the caller already built it.
    """

    def __init__(
        self,
        config: ServerConfig,
        game_map: GameMap,
        *,
        secret: bytes,
        seed: int,
        pipeline: DetectionPipeline | None = None,
        recorder: ReplayWriter | None = None,
        bus: EventBus | None = None,
        geometry: MapGeometry | None = None,
    ) -> None:
        self.config = config
        self.map = game_map
        self.geometry = geometry or MapGeometry(game_map)
        # The first three children are those of before the phantoms (spawn(n)'s k-th child does
        # not depend on n): every other choice of a seeded match stays as it was.
        seeds = np.random.SeedSequence(seed).spawn(4)
        self._spawn_rng = np.random.default_rng(seeds[0])
        self._spread_rng = np.random.default_rng(seeds[1])
        self._salt_rng = np.random.default_rng(seeds[2])
        cap = config.max_clients
        self.world = WorldState(WorldLimits(max_players=cap))
        self.weapons = WeaponState(cap, config.weapons)
        self.validator = MovementValidator(cap, config.validation, config.movement)
        self.timer = TimerBalance(cap, config.validation)
        self.history = TickHistory(config.history(), cap)
        self.culler = VisibilityCuller(config.visibility, self.geometry, cap, config.tick_rate_hz)
        self.netstats = NetStats(config.netstats)
        self.phantoms = Phantoms(
            config.phantom, self.geometry, cap, config.tick_rate_hz, self.culler.period_ticks,
            np.random.default_rng(seeds[3]), config.primaries,
            max(spec.move_speed_m_s for spec in WEAPONS.values()) * max(1.0, config.movement.sprint_factor),
            config.movement.jump_apex_m, history_s=config.rewind.max_unlag_s,
        )
        self.handshake = Handshake(
            secret, clock=lambda: self.time_s, random_bytes=self._random_bytes, config=config.handshake
        )
        self.snapshots = SnapshotBuilder(config.protocol)
        self.pipeline = pipeline
        self.recorder = recorder
        self.bus = bus or EventBus()
        self.sessions: dict[Address, ClientSession] = {}
        self.by_slot: dict[int, ClientSession] = {}
        self.rejections: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.detections: dict[int, Counter[str]] = {}
        self.departed: list[DepartedPlayer] = []
        """Players who left, in leaving order: their record as it stood when they left."""
        self.tick = 0
        self.time_s = 0.0
        self.tick_dt_s = config.tick_dt_s
        self.tick_stats = TickStats(self.tick_dt_s)
        self._baits: list[Bait] = []
        self._bait_room = config.snapshot_bait_room()
        self._max_packet_jump = config.max_packet_jump()
        self._bait_cache: BaitTargets | None = None
        """The baits as hit registration takes them, None until needed after a change."""
        self._next_bait_id = 200
        self._next_conn_sample_s = 0.0
        self._datagrams_this_tick = 0
        self._tick_events: list[Any] = []
        self._session_events: list[SessionEvent] = []
        self._out: Outgoing = []
        self._kicks: dict[int, str] = {}
        # Load (or compile) the kernels now, not in the middle of the first tick that needs them.
        self.weapons.sync_to(self.world)
        inputs.warm_kernels(self)

    # ------------------------------------------------------------------ time

    def next_tick_s(self) -> float:
        """Server time (s) of the next tick: tick k runs at k * tick_dt."""
        return (self.tick + 1) * self.tick_dt_s

    def _random_bytes(self, n: int) -> bytes:
        return self._salt_rng.bytes(n)

    # ------------------------------------------------------------------ receive

    def receive(self, addr: Address, datagram: bytes, now_s: float) -> Outgoing:
        """Handle one datagram from ``addr`` at server time ``now_s`` (s); returns immediate replies.

        Never raises on a datagram: anything invalid is dropped and counted by reason in
        ``rejections``.
        """
        return clients.receive(self, addr, datagram, now_s)

    # ------------------------------------------------------------------ tick

    def step(self, now_s: float) -> Outgoing:
        """Run one tick at server time ``now_s`` (s); returns the datagrams to send.

        The cyclic garbage collector is paused for the tick: its collections cost 1-10 ms (gen 0/1,
        80 ms for gen 2) whenever the allocation count crosses a threshold, wherever that falls, and
        were most of the slow ticks' "inputs" time. Paused, the collection runs at the first
        allocation after the tick, once its datagrams are out; reference counting still frees
        everything acyclic at once."""
        if not gc.isenabled():
            # The embedding application manages the collector itself.
            return self._step(now_s)
        gc.disable()
        try:
            return self._step(now_s)
        finally:
            gc.enable()

    def _step(self, now_s: float) -> Outgoing:
        started = time.perf_counter()
        cpu_started = time.thread_time()
        self.tick += 1
        self.time_s = now_s
        self._datagrams_this_tick = 0
        self._tick_events = self._session_events
        self._session_events = []
        self._out = []
        clock = time.perf_counter
        stats = self.tick_stats
        clients.apply_kicks(self)
        clients.expire_clients(self, now_s)
        respawn_due(self, now_s)
        t0 = clock()
        # 1. apply inputs
        pending = inputs.apply_inputs(self, now_s)
        inputs.resend_corrections(self, now_s)
        t1 = clock()
        # 2. resolve shots
        shots.resolve_shots(self, pending, now_s)
        detection.connection_samples(self, now_s)
        t2 = clock()
        # 3. detect
        detections = detection.detect(self)
        t3 = clock()
        # 4. record
        self.history.record(self.tick, now_s, self.world)
        if self.recorder is not None:
            self.recorder.write_tick(self.tick, now_s, [*self._tick_events, *detections])
        shots.expire_baits(self, now_s)
        t4 = clock()
        # 5. visibility, then snapshots
        rtt = self._rtt_array()
        self.culler.refresh(self.tick, self.world, rtt)
        self.phantoms.update(self.tick, now_s, self.world, rtt)
        t5 = clock()
        send_snapshots(self, now_s)
        t6 = clock()
        stats.add_phases(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
        stats.add(t6 - started, time.thread_time() - cpu_started)
        return self._out

    def _rtt_array(self) -> np.ndarray:
        """Each connected slot's smoothed round trip (s), 0 elsewhere: what the culler predicts with."""
        rtt = np.zeros(self.config.max_clients)
        rtt_ms = self.netstats.rtt_ms
        for slot in self.by_slot:
            rtt[slot] = rtt_ms(slot) / 1000.0
        return rtt

    # ------------------------------------------------------------------ operators

    def kick(self, slot: int, reason: str = "kicked") -> bool:
        """Disconnect the player in ``slot`` at the start of the next tick (SERVER_DISCONNECT
        KICKED is sent); ``reason`` is the departure reason reports show. False when the slot is
        not connected. Safe to call between ticks from another task of the same event loop."""
        if slot not in self.by_slot:
            return False
        self._kicks[slot] = reason
        return True

    def live_players(self) -> list[dict[str, Any]]:
        """The connected players now, by slot: each one's :meth:`report` record plus
        ``connected_s`` (server time of connecting, s) and ``address`` ("host:port")."""
        return player_report.live_players(self)

    def report(self) -> dict[str, Any]:
        """What the server recorded: per player and for the server itself (plain JSON-able data).

        ``players`` lists everyone seen in the session: those still connected (by slot, with
        ``connected`` true, ``left_s`` and ``left_reason`` null), then those who left, in leaving
        order, with ``connected`` false, ``left_s`` (server time they left, s) and ``left_reason``
        (``client``, ``timeout``...), their figures as they stood when they left and every
        detection counted for them (including ones the detectors delivered after they left).
        A player who left and came back appears once per stay."""
        return player_report.report(self)

    def close(self) -> None:
        """End of the match: detectors deliver what they still hold (recorded like any tick's
        detections, so a replay re-run ends the same way), then the recording is closed."""
        detection.flush(self)
        if self.recorder is not None:
            self.recorder.close()

    # ------------------------------------------------------------------ phases, for tests

    def _aim_kernels(
        self, slots: np.ndarray, stops: np.ndarray, moved: np.ndarray, cos_sin: np.ndarray, offset: int,
        row_pos: np.ndarray, row_stance: np.ndarray, row_vel: np.ndarray, row_ground: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``server.aim_samples.aim_kernels`` on this core's world and visibility."""
        return aim_kernels(self.world, self.culler.visible, slots, stops, moved, cos_sin, offset, row_pos, row_stance,
                           row_vel, row_ground)

    def _send_snapshots(self, now_s: float) -> None:
        """``server.snapshot_send.send_snapshots`` on this core."""
        send_snapshots(self, now_s)


__all__ = ["DepartedPlayer", "Outgoing", "ServerCore"]
