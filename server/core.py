"""The authoritative game core: a step function over datagrams and time, with no sockets inside.

``receive`` takes one datagram from an address and returns the immediate replies (handshake,
pong); ``step`` runs one fixed tick at a given server time and returns the datagrams to send.
Behind UDP a transport calls them in real time; in-process the testbed calls them in virtual time
(DESIGN principle 2). The tick follows DESIGN's flow in order:

1. apply inputs (movement simulation, validation, corrections, weapon actions, aim samples),
2. resolve shots (lag-compensated batched hit registration, damage, kills, baits),
3. detect (the anticheat pipeline consumes the tick's events),
4. record (history ring buffer, replay file),
5. snapshot (per-client visibility culling, encode, send).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from anticheat.events import AimSample, ConnectionSample, Detection, KillEvent, SessionEvent, SpawnEvent
from anticheat.pipeline import DetectionPipeline
from lagcomp.history import TickHistory
from lagcomp.hitreg import BaitTargets, ShotBatch, eye_positions, register_shots, to_shot_result
from lagcomp.rewind_policy import decision_of, rewind_times
from lagcomp.shot import ShotClaim
from physics.buttons import Buttons
from physics.movement import MoveCommands, simulate
from physics.validation import MovementValidator, TimerBalance, Verdict
from physics.weapon_state import WeaponState, current_spread_deg, shot_directions
from server import protocol as proto
from server.config import ServerConfig
from server.events import EventBus, PlayerConnected, PlayerDisconnected
from server.handshake import CookieStatus, Handshake, TokenStatus
from server.netstats import NetStats
from server.rate_limit import ClientRateLimiter, RateVerdict
from server.recording import ReplayWriter
from server.replay_window import ReplayVerdict, ReplayWindow
from server.session import Address, ClientSession
from server.snapshots import SnapshotBuilder
from server.spawns import choose_spawn
from server.tick_stats import TickStats
from server.visibility import VisibilityCuller
from world.constants import CROUCHING_CHEST_M, CROUCHING_EYE_M, STANDING_CHEST_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.hitbox import Bone
from world.mapfile import GameMap
from world.state import WorldLimits, WorldState, view_direction
from world.weapons import WEAPONS, WeaponId

log = logging.getLogger(__name__)

Outgoing = list[tuple[Address, bytes]]
_CHEST_M = np.array([STANDING_CHEST_M, CROUCHING_CHEST_M])
_EYE_M = np.array([STANDING_EYE_M, CROUCHING_EYE_M])


@dataclass(slots=True)
class _Bait:
    entity_id: int
    shooter: int
    centre: tuple[float, float, float]
    expires_s: float


@dataclass(slots=True)
class _PendingShot:
    session: ClientSession
    shot: proto.Shot
    origin: np.ndarray
    directions: np.ndarray
    cmd_time_s: float
    recoil: tuple[float, float]
    view: tuple[float, float]
    """(yaw, pitch) of the command that fired (deg)."""
    punch: tuple[float, float]
    """(pitch, yaw) kick the shot flew with (deg)."""
    prev_aim: tuple[float, float, float, float] | None
    """(yaw, pitch, punch pitch, punch yaw) after the command before (deg), None when unknown."""
    cmd_dt_s: float


def _crosshair(yaw_deg: float, pitch_deg: float, punch_pitch_deg: float, punch_yaw_deg: float) -> np.ndarray:
    """Unit direction of the spread-free crosshair: view plus punch, as physics.shot_directions aims."""
    return np.asarray(view_direction(yaw_deg - punch_yaw_deg, min(90.0, max(-90.0, pitch_deg + punch_pitch_deg))),
                      dtype=np.float64)


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
        seeds = np.random.SeedSequence(seed).spawn(3)
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
        self.tick = 0
        self.time_s = 0.0
        self.tick_dt_s = config.tick_dt_s
        self.tick_stats = TickStats(self.tick_dt_s)
        self._baits: list[_Bait] = []
        self._next_bait_id = 200
        self._next_conn_sample_s = 0.0
        self._datagrams_this_tick = 0
        self._tick_events: list[Any] = []
        self._session_events: list[SessionEvent] = []
        self._out: Outgoing = []

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
        self._datagrams_this_tick += 1
        if self._datagrams_this_tick > self.config.max_datagrams_per_tick:
            self.rejections["tick_budget"] += 1
            return []
        try:
            msg = proto.decode_client(datagram, self.config.protocol)
        except proto.ProtocolError as exc:
            self.rejections[exc.reason.value] += 1
            return []
        try:
            if isinstance(msg, proto.Connect):
                return self._on_connect(addr, msg, len(datagram))
            if isinstance(msg, proto.ChallengeResponse):
                return self._on_challenge_response(addr, msg, len(datagram), now_s)
            session = self._authenticate(addr, msg, len(datagram), now_s)
            if session is None:
                return []
            if isinstance(msg, proto.Input):
                self._on_input(session, msg, now_s)
                return []
            if isinstance(msg, proto.Ping):
                pong = proto.Pong(ping_seq=msg.packet_seq, client_time_s=msg.client_time_s, server_time_s=now_s)
                return [(addr, proto.encode(pong, self.config.protocol))]
            if isinstance(msg, proto.Disconnect):
                self._drop(session, "client")
            return []
        except Exception:  # never let one datagram stop the server; count and keep going
            self.rejections["internal_error"] += 1
            log.exception("error handling a datagram from %s", addr)
            return []

    def _on_connect(self, addr: Address, msg: proto.Connect, size: int) -> Outgoing:
        cookie = self.handshake.issue_cookie(addr, msg.nonce)
        reply = proto.encode(proto.Challenge(cookie=cookie), self.config.protocol)
        if len(reply) > size:  # no amplification: never answer bigger than asked
            self.rejections["unpadded_connect"] += 1
            return []
        return [(addr, reply)]

    def _on_challenge_response(self, addr: Address, msg: proto.ChallengeResponse, size: int, now_s: float) -> Outgoing:
        status = self.handshake.check_cookie(addr, msg.nonce, msg.cookie)
        if status is not CookieStatus.VALID:
            self.rejections[f"cookie_{status.value}"] += 1
            return []
        session = self.sessions.get(addr)
        if session is None:
            slot = self.world.free_slot()
            if slot is None:
                self.rejections["server_full"] += 1
                reply = proto.encode(proto.Reject(code=proto.RefuseCode.SERVER_FULL), self.config.protocol)
                return [(addr, reply)] if len(reply) <= size else []
            session = self._open_session(addr, slot, msg.name, now_s)
        accept = proto.Accept(
            token=session.creds.token,
            slot=session.slot,
            tick_rate_hz=self.config.tick_rate_hz,
            map_name=self.map.name,
            server_time_s=now_s,
            limits=proto.AcceptLimits(
                max_datagram_bytes=self.config.protocol.max_datagram_bytes,
                max_commands=self.config.protocol.max_commands,
                max_shots=self.config.protocol.max_shots,
                max_command_duration_s=self.config.protocol.max_command_duration_s,
                max_packets_per_s=self.config.rate_limit.packets_per_s,
                max_bytes_per_s=self.config.rate_limit.bytes_per_s,
            ),
        )
        reply = proto.encode(accept, self.config.protocol)
        if len(reply) > size:
            self.rejections["unpadded_response"] += 1
            return []
        return [(addr, reply)]

    def _open_session(self, addr: Address, slot: int, name: str, now_s: float) -> ClientSession:
        creds = self.handshake.open_session(slot, addr)
        session = ClientSession(
            slot=slot,
            address=addr,
            name=name,
            creds=creds,
            window=ReplayWindow(),
            limiter=ClientRateLimiter(self.config.rate_limit, now_s),
            connected_s=now_s,
            last_packet_s=now_s,
            cmd_time_s=now_s,
        )
        self.sessions[addr] = session
        self.by_slot[slot] = session
        self.world.activate(slot, weapon=int(WeaponId.PISTOL), ammo=0, reserve=0)
        self.netstats.open(slot, now_s)
        self.validator.clear(slot)
        self.timer.reset(slot)
        self.culler.forget(slot)
        self.detections[slot] = Counter()
        # Detector state follows from this event, live and in a replay alike.
        self._session_events.append(SessionEvent(player=slot, tick=self.tick, time_s=now_s, kind="connect", name=name))
        session.respawn_at_s = now_s
        self.counters["connects"] += 1
        self.bus.publish(PlayerConnected(slot=slot, name=name, address=f"{addr[0]}:{addr[1]}", time_s=now_s))
        return session

    def _authenticate(self, addr: Address, msg: Any, size: int, now_s: float) -> ClientSession | None:
        session = self.sessions.get(addr)
        if session is None:
            self.rejections["unknown_session"] += 1
            return None
        status = self.handshake.check_token(session.creds, msg.token, addr)
        if status is not TokenStatus.VALID:
            self.rejections[f"token_{status.value}"] += 1
            return None
        verdict = session.window.accept(msg.packet_seq)
        if verdict is not ReplayVerdict.FRESH:
            self.rejections[f"replay_{verdict.value}"] += 1
            return None
        rate = session.limiter.allow(size, now_s)
        if rate is not RateVerdict.OK:
            self.rejections[f"rate_{rate.value}"] += 1
            return None
        session.last_packet_s = now_s
        return session

    def _on_input(self, session: ClientSession, msg: proto.Input, now_s: float) -> None:
        self.netstats.on_packet(session.slot, msg.packet_seq, msg.client_time_s, now_s)
        self.netstats.on_ack(session.slot, msg.ack_tick, now_s)
        new = session.queue(msg.commands, msg.shots, self.config.max_queued_commands)
        self.counters["commands_received"] += new
        self.counters["commands_redundant"] += len(msg.commands) - new

    def _drop(self, session: ClientSession, reason: str) -> None:
        slot = session.slot
        self.sessions.pop(session.address, None)
        self.by_slot.pop(slot, None)
        self.world.deactivate(slot)
        self.weapons.clear(slot)
        self.validator.clear(slot)
        self.timer.reset(slot)
        self.culler.forget(slot)
        self.netstats.close(slot)
        self._session_events.append(
            SessionEvent(player=slot, tick=self.tick, time_s=self.time_s, kind="disconnect", name=session.name)
        )
        self.counters[f"disconnect_{reason}"] += 1
        self.bus.publish(PlayerDisconnected(slot=slot, name=session.name, reason=reason, time_s=self.time_s))

    # ------------------------------------------------------------------ tick

    def step(self, now_s: float) -> Outgoing:
        """Run one tick at server time ``now_s`` (s); returns the datagrams to send."""
        started = time.perf_counter()
        self.tick += 1
        self.time_s = now_s
        self._datagrams_this_tick = 0
        self._tick_events = self._session_events
        self._session_events = []
        self._out = []
        clock = time.perf_counter
        stats = self.tick_stats
        self._expire_clients(now_s)
        self._respawn_due(now_s)
        t0 = clock()
        pending = self._apply_inputs(now_s)
        self._resend_corrections(now_s)
        t1 = clock()
        self._resolve_shots(pending, now_s)
        self._connection_samples(now_s)
        t2 = clock()
        detections = self._detect()
        t3 = clock()
        self.history.record(self.tick, now_s, self.world)
        if self.recorder is not None:
            self.recorder.write_tick(self.tick, now_s, [*self._tick_events, *detections])
        self._baits = [b for b in self._baits if b.expires_s > now_s]
        t4 = clock()
        self.culler.refresh(self.tick, self.world, self._rtt_array(now_s))
        t5 = clock()
        if self.tick % self.config.snapshot_every == 0:
            self._send_snapshots(now_s)
        t6 = clock()
        stats.add_phases(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
        stats.add(t6 - started)
        return self._out

    def _expire_clients(self, now_s: float) -> None:
        for session in list(self.sessions.values()):
            if now_s - session.last_packet_s > self.config.client_timeout_s:
                self._drop(session, "timeout")

    def _respawn_due(self, now_s: float) -> None:
        for session in self.by_slot.values():
            if session.respawn_at_s is None or session.respawn_at_s > now_s:
                continue
            slot = session.slot
            spawn = choose_spawn(self.map, self.world, slot, self._spawn_rng)
            self.world.spawn(slot, (spawn.x, spawn.y, 0.0), spawn.yaw_deg)
            primary = int(self._spawn_rng.choice(self.config.primaries))
            session.cmd_time_s = max(session.cmd_time_s, now_s - self.config.validation.timer_lag_floor_s)
            self.weapons.spawn(slot, [primary, int(WeaponId.PISTOL)], session.cmd_time_s)
            self.validator.reset(slot, now_s)
            self.timer.reset(slot)
            session.respawn_at_s = None
            self._tick_events.append(SpawnEvent(player=slot, tick=self.tick, time_s=now_s))
            correction = proto.Correction(
                cmd_seq=max(session.last_applied_seq, 0), pos=(spawn.x, spawn.y, 0.0), vel=(0.0, 0.0, 0.0)
            )
            self._send(session, correction)
            session.last_correction_s = now_s
        self.weapons.sync_to(self.world)

    def _resend_corrections(self, now_s: float) -> None:
        """While a client has not acknowledged a setback or respawn, send it the current
        authoritative state again every ``correction_resend_s``: UDP may have lost the last one, and
        the per-command corrections in between are suppressed (they would repeat the same news)."""
        w = self.world
        for session in self.by_slot.values():
            slot = session.slot
            if now_s - session.last_correction_s < self.config.correction_resend_s or not w.alive[slot]:
                continue
            if not self.validator.awaiting_ack(slot, now_s):
                continue
            self.counters["corrections_resent"] += 1
            session.last_correction_s = now_s
            # Stamped with the newest applied command: an older stamp is dropped by the client as stale.
            self._send(session, proto.Correction(cmd_seq=max(session.last_applied_seq, 0), pos=_vec(w.pos[slot]),
                                                 vel=_vec(w.vel[slot])))

    # ---------------------------------------------------------- 1. apply inputs

    def _apply_inputs(self, now_s: float) -> list[_PendingShot]:
        sessions = [s for s in self.by_slot.values() if s.queued]
        if not sessions:
            return []
        for s in sessions:
            if s.last_applied_seq < 0:
                # The client's first commands: it may have learnt its spawn only now (a lost ACCEPT
                # delays everything), so the wait for its acknowledgement starts here, not at spawn.
                self.validator.reset(s.slot, now_s)
        slots = np.array([s.slot for s in sessions], dtype=np.intp)
        counts = np.array([len(s.queued) for s in sessions], dtype=np.int64)
        accepted, evidence = self.timer.on_commands_batch(
            slots, counts, self.tick_dt_s, now_s, self.tick, positions=self.world.pos[slots]
        )
        self._tick_events.extend(evidence)
        batches = []
        for session, n_ok, n in zip(sessions, accepted, counts, strict=True):
            if n_ok < n:
                self.rejections["timer_dropped"] += int(n - n_ok)
            batches.append((session, session.take(int(n_ok), drop_oldest=int(n - n_ok))))
        pending: list[_PendingShot] = []
        depth = max((len(cmds) for _, cmds in batches), default=0)
        for k in range(depth):
            round_ = [(s, cmds[k]) for s, cmds in batches if k < len(cmds)]
            pending.extend(self._apply_round(round_, now_s))
        self.weapons.sync_to(self.world)
        return pending

    def _apply_round(self, round_: list[tuple[ClientSession, proto.Command]], now_s: float) -> list[_PendingShot]:
        w = self.world
        slots = np.array([s.slot for s, _ in round_], dtype=np.intp)
        cmds = [c for _, c in round_]
        for session, cmd in round_:
            session.cmd_time_s += cmd.duration_s
            session.commands_applied += 1
        cmd_times = np.array([s.cmd_time_s for s, _ in round_])
        self.weapons.advance_slots(slots, cmd_times)
        yaw = np.array([c.yaw_deg for c in cmds])
        pitch = np.array([c.pitch_deg for c in cmds])
        buttons = np.array([c.buttons for c in cmds], dtype=np.int64)
        alive = w.alive[slots]
        w.yaw[slots] = (yaw + 180.0) % 360.0 - 180.0
        w.pitch[slots] = pitch
        live = np.flatnonzero(alive)
        crouch_pressed = np.zeros(len(round_), dtype=bool)
        if live.size:
            ls = slots[live]
            move = MoveCommands(
                forward_move=np.array([cmds[i].forward for i in live]),
                side_move=np.array([cmds[i].side for i in live]),
                yaw_deg=yaw[live],
                pitch_deg=pitch[live],
                buttons=buttons[live],
                dt_s=np.array([cmds[i].duration_s for i in live]),
            )
            held = self.weapons.weapon[ls].astype(np.intp)
            speed = np.array([WEAPONS[WeaponId(h)].move_speed_m_s if h else 6.0 for h in held])
            prev_pos, prev_vel, prev_ground = w.pos[ls].copy(), w.vel[ls].copy(), w.on_ground[ls].copy()
            result = simulate(prev_pos, prev_vel, prev_ground, w.stance[ls], move, speed, self.geometry, self.config.movement)
            claimed = np.array([cmds[i].pos for i in live], dtype=np.float64)
            verdict = self.validator.validate(
                ls, prev_pos, prev_vel, prev_ground, move, result, claimed, speed, self.geometry, self.tick, now_s
            )
            w.pos[ls] = verdict.pos
            w.vel[ls] = result.vel
            w.on_ground[ls] = result.on_ground
            w.stance[ls] = result.stance
            crouch_pressed[live] = result.crouch_pressed
            self._tick_events.extend(verdict.evidence)
            for j in np.flatnonzero(verdict.setback):
                i = int(live[j])
                session = round_[i][0]
                if (verdict.verdict[j] == Verdict.PENDING
                        and now_s - session.last_correction_s < self.config.correction_resend_s):
                    # Still awaiting the ack of a correction just sent: it already carries this news.
                    self.counters["corrections_suppressed"] += 1
                    continue
                session.last_correction_seq = cmds[i].seq
                session.last_correction_s = now_s
                self.counters["corrections"] += 1
                self._send(session, proto.Correction(cmd_seq=cmds[i].seq, pos=_vec(verdict.pos[j]), vel=_vec(result.vel[j])))
            if np.any(crouch_pressed):
                pressed = np.flatnonzero(crouch_pressed)
                for i in pressed:
                    self.weapons.note_crouch_presses(slots[i : i + 1], float(cmd_times[i]))
        pending: list[_PendingShot] = []
        for i, (session, cmd) in enumerate(round_):
            slot = session.slot
            t_cmd = float(cmd_times[i])
            if cmd.weapon_switch:
                self.weapons.switch_weapon(slot, cmd.weapon_switch, t_cmd)
            if cmd.buttons & Buttons.RELOAD:
                self.weapons.start_reload(slot, t_cmd)
            for shot in session.shots.pop(cmd.seq, ()):
                p = self._fire(session, cmd, shot, t_cmd, now_s)
                if p is not None:
                    pending.append(p)
        self._aim_samples(round_, slots, now_s)
        return pending

    def _fire(self, session: ClientSession, cmd: proto.Command, shot: proto.Shot, t_cmd: float, now_s: float) -> _PendingShot | None:
        slot = session.slot
        w = self.world
        outcome = self.weapons.try_fire(slot, shot.weapon, t_cmd, self.tick, alive=bool(w.alive[slot]))
        if not outcome.accepted:
            if outcome.evidence is not None:
                self._tick_events.append(outcome.evidence)
            self.rejections[f"shot_{outcome.evidence.kind.value if outcome.evidence else 'refused'}"] += 1
            return None
        spec = WEAPONS[WeaponId(shot.weapon)]
        speed = float(np.hypot(w.vel[slot, 0], w.vel[slot, 1]))
        spread = float(current_spread_deg(spec.id, speed, bool(w.on_ground[slot]), int(w.stance[slot])))
        directions = shot_directions(
            shot.yaw_deg, shot.pitch_deg, outcome.punch_pitch_deg, outcome.punch_yaw_deg,
            spread, spec.pellets, spec.pellet_spread_deg, self._spread_rng,
        )
        origin = eye_positions(w, np.array([slot]))[0]
        session.shots_fired += 1
        last = session.last_aim
        prev_aim = last[1:] if last is not None and last[0] == cmd.seq - 1 else None
        return _PendingShot(session, shot, origin, directions, t_cmd, (cmd.recoil_pitch_deg, cmd.recoil_yaw_deg),
                            (cmd.yaw_deg, cmd.pitch_deg), (outcome.punch_pitch_deg, outcome.punch_yaw_deg),
                            prev_aim, float(cmd.duration_s))

    def _aim_samples(self, round_: list[tuple[ClientSession, proto.Command]], slots: np.ndarray, now_s: float) -> None:
        w = self.world
        eye = w.pos[slots].copy()
        eye[:, 2] += _EYE_M[w.stance[slots]]
        view = view_direction(w.yaw[slots], w.pitch[slots])
        chest = w.pos.copy()
        chest[:, 2] += _CHEST_M[w.stance]
        to_t = chest[None, :, :] - eye[:, None, :]
        dist = np.linalg.norm(to_t, axis=2)
        cosang = np.einsum("kj,knj->kn", view, to_t) / np.maximum(dist, 1e-9)
        angle = np.degrees(np.arccos(np.clip(cosang, -1.0, 1.0)))
        candidates = self.culler.visible[slots] & w.alive[None, :] & w.active[None, :]
        candidates[np.arange(len(slots)), slots] = False
        angle = np.where(candidates, angle, np.inf)
        best = np.argmin(angle, axis=1)
        speed = np.hypot(w.vel[slots, 0], w.vel[slots, 1])
        for i, (session, cmd) in enumerate(round_):
            slot = session.slot
            b = int(best[i])
            has = bool(np.isfinite(angle[i, b]))
            session.last_aim = (cmd.seq, cmd.yaw_deg, cmd.pitch_deg, float(self.weapons.punch_pitch_deg[slot]),
                                float(self.weapons.punch_yaw_deg[slot]))
            self._tick_events.append(
                AimSample(
                    player=slot, tick=self.tick, time_s=now_s, seq=cmd.seq,
                    yaw_deg=cmd.yaw_deg, pitch_deg=cmd.pitch_deg,
                    recoil_pitch_deg=cmd.recoil_pitch_deg, recoil_yaw_deg=cmd.recoil_yaw_deg,
                    server_punch_pitch_deg=float(self.weapons.punch_pitch_deg[slot]),
                    server_punch_yaw_deg=float(self.weapons.punch_yaw_deg[slot]),
                    buttons=cmd.buttons, weapon=int(self.weapons.weapon[slot]), weapon_switch=cmd.weapon_switch,
                    stance=int(w.stance[slot]), on_ground=bool(w.on_ground[slot]), speed_m_s=float(speed[i]),
                    target=b if has else None,
                    target_angle_deg=float(angle[i, b]) if has else 180.0,
                    target_distance_m=float(dist[i, b]) if has else 0.0,
                )
            )

    # ---------------------------------------------------------- 2. resolve shots

    def _resolve_shots(self, pending: list[_PendingShot], now_s: float) -> None:
        if not pending:
            return
        rows = [(p, k) for p in pending for k in range(p.directions.shape[0])]
        shooter = np.array([p.session.slot for p, _ in rows], dtype=np.intp)
        latency = np.array([self._latency_s(p.session.slot, now_s) for p, _ in rows])
        claimed_time = np.array([p.shot.view_time_s for p, _ in rows])
        times, codes = rewind_times(now_s, latency, claimed_time, self.config.rewind)
        weapon_ids = np.array([p.shot.weapon for p, _ in rows], dtype=np.int16)
        origin = np.array([p.origin for p, _ in rows])
        direction = np.array([p.directions[k] for p, k in rows])
        # Probe rays ride in the same batch and never deal damage: the spread-free crosshair of
        # the shot, and that of the previous command one command earlier (first contact).
        probed = [row for row, (p, k) in enumerate(rows) if k == 0 and p.prev_aim is not None]
        n_probed = len(probed)
        if probed:
            pend = [rows[r][0] for r in probed]
            back = times[probed] - np.array([p.cmd_dt_s for p in pend])
            shooter = np.concatenate([shooter, shooter[probed], shooter[probed]])
            origin = np.concatenate([origin, origin[probed], origin[probed]])
            direction = np.concatenate([direction, np.array([_crosshair(*p.view, *p.punch) for p in pend]),
                                        np.array([_crosshair(*p.prev_aim) for p in pend])])
            times = np.concatenate([times, times[probed], np.maximum(0.0, back)])
            weapon_ids = np.concatenate([weapon_ids, weapon_ids[probed], weapon_ids[probed]])
        batch = ShotBatch.build(
            shooter=shooter,
            origin=origin,
            direction=direction,
            time_s=times,
            max_range=np.array([WEAPONS[WeaponId(int(w))].max_range_m for w in weapon_ids]),
            weapon=weapon_ids,
            pellet=np.array([k for _, k in rows] + [0] * (2 * n_probed), dtype=np.int16),
        )
        hits = register_shots(batch, self.history, self.geometry, now_s, self.config.hitreg, baits=self._bait_targets())
        claimed_pos = self._claimed_victims(rows, times)
        first_contact: dict[int, bool] = {}
        for j, row in enumerate(probed):
            now_on = int(hits.victim[len(rows) + j])
            if now_on >= 0:
                first_contact[row] = int(hits.victim[len(rows) + n_probed + j]) != now_on
        damage = np.zeros(len(weapon_ids))
        has_victim = hits.victim >= 0
        for w_id in np.unique(weapon_ids[has_victim]):
            sel = has_victim & (weapon_ids == w_id)
            damage[sel] = WEAPONS[WeaponId(int(w_id))].damage_at(hits.bone[sel], hits.distance[sel])
        w = self.world
        for row, (p, k) in enumerate(rows):
            victim = int(hits.victim[row])
            dealt = float(damage[row]) if victim >= 0 and w.alive[victim] else 0.0
            claim = self._claim(p)
            result = to_shot_result(
                batch, hits, row, claim=claim, tick=self.tick, time_s=now_s,
                decision=decision_of(int(codes[row])), damage=dealt, first_contact=first_contact.get(row),
                claimed_victim_pos=claimed_pos.get(row),
            )
            self._tick_events.append(result)
            if victim < 0 or dealt <= 0.0:
                continue
            if k == 0 or not any(int(hits.victim[r]) == victim for r in range(row - k, row)):
                p.session.hits += 1
            w.health[victim] = max(0.0, float(w.health[victim]) - dealt)
            if w.health[victim] <= 0.0:
                self._kill(p.session, victim, int(p.shot.weapon), int(hits.bone[row]), float(hits.distance[row]), now_s)

    def _claimed_victims(self, rows: list[tuple[_PendingShot, int]], times: np.ndarray) -> dict[int, tuple[float, float, float]]:
        """Rewound feet of each claimed victim (pellet 0 rows whose claims name a victim and a hit
        point), by row: where the victim the client says it hit really was at the rewind time."""
        cap = self.config.max_clients
        claimed = [r for r, (p, k) in enumerate(rows)
                   if k == 0 and p.shot.claimed_hit_point is not None and p.shot.claimed_victim is not None
                   and 0 <= p.shot.claimed_victim < cap]
        if not claimed or len(self.history) == 0:
            return {}
        slots = np.array([rows[r][0].shot.claimed_victim for r in claimed], dtype=np.intp)
        b = self.history.bracket(times[claimed])
        st = self.history.pairs(b.ring, b.frac, slots)
        return {r: _vec(st.pos[i]) for i, r in enumerate(claimed) if st.alive[i]}

    def _claim(self, p: _PendingShot) -> ShotClaim:
        s = p.shot
        return ShotClaim(
            shooter=p.session.slot,
            weapon=s.weapon,
            yaw_deg=s.yaw_deg,
            pitch_deg=s.pitch_deg,
            view_time_s=s.view_time_s,
            claimed_victim=s.claimed_victim,
            claimed_hit_point=s.claimed_hit_point,
            claimed_bone=s.claimed_bone,
            recoil_pitch_deg=p.recoil[0],
            recoil_yaw_deg=p.recoil[1],
            seq=s.cmd_seq,
            view=p.view,
            prev_view=None if p.prev_aim is None else p.prev_aim[:2],
        )

    def _kill(self, killer: ClientSession, victim: int, weapon_id: int, bone: int, distance: float, now_s: float) -> None:
        w = self.world
        victim_pos = w.pos[victim].copy()
        w.kill(victim)
        killer.kills += 1
        victim_session = self.by_slot.get(victim)
        if victim_session is not None:
            victim_session.deaths += 1
            victim_session.respawn_at_s = now_s + self.config.respawn_delay_s
        event = KillEvent(
            killer=killer.slot, victim=victim, tick=self.tick, time_s=now_s, weapon=weapon_id, bone=bone,
            distance_m=distance, killer_stance=int(w.stance[killer.slot]), headshot=bone == int(Bone.HEAD),
        )
        self._tick_events.append(event)
        self.bus.publish(event)
        if self.config.bait.enabled:
            self._place_bait(killer.slot, victim_pos, now_s)

    def _place_bait(self, shooter: int, victim_pos: np.ndarray, now_s: float) -> None:
        used = {b.entity_id for b in self._baits}
        for _ in range(56):
            candidate = self._next_bait_id
            self._next_bait_id = 200 + (self._next_bait_id - 199) % 56
            if candidate not in used:
                centre = (float(victim_pos[0]), float(victim_pos[1]), float(victim_pos[2] + self.config.bait.height_m))
                self._baits.append(_Bait(candidate, shooter, centre, now_s + self.config.bait.duration_s))
                self.counters["baits_placed"] += 1
                return

    def _bait_targets(self) -> BaitTargets | None:
        if not self._baits:
            return None
        return BaitTargets.spheres(
            np.array([b.centre for b in self._baits]),
            self.config.bait.radius_m,
            np.array([b.shooter for b in self._baits]),
        )

    # ---------------------------------------------------------- 3. detect

    def _connection_samples(self, now_s: float) -> None:
        if now_s < self._next_conn_sample_s:
            return
        self._next_conn_sample_s = now_s + self.config.connection_sample_interval_s
        for session in self.by_slot.values():
            s = self.netstats.sample(session.slot, now_s)
            self._tick_events.append(
                ConnectionSample(
                    player=session.slot, time_s=now_s, rtt_ms=s.rtt_ms, jitter_ms=s.jitter_ms,
                    loss=s.loss, since_update_s=s.since_update_s,
                )
            )

    def _detect(self) -> list[Detection]:
        if self.pipeline is None:
            return []
        found: list[Detection] = []
        for event in self._tick_events:
            found.extend(self.pipeline.feed(event))
        for d in found:
            counter = self.detections.get(d.player)
            if counter is not None:
                counter[f"{d.detector}:{d.kind}"] += 1
            self.bus.publish(d)
        return found

    # ---------------------------------------------------------- 5. snapshot

    def _send_snapshots(self, now_s: float) -> None:
        w = self.world
        for session in self.by_slot.values():
            slot = session.slot
            targets = np.flatnonzero(self.culler.visible[slot] & w.active)
            baits = [b for b in self._baits if b.shooter == slot]
            for datagram in self.snapshots.build(
                w, self.weapons, slot, targets, baits=[(b.entity_id, b.centre) for b in baits],
                tick=self.tick, server_time_s=now_s, last_cmd_seq=session.last_applied_seq,
            ):
                self._out.append((session.address, datagram))
            self.netstats.on_snapshot_sent(slot, self.tick, now_s)

    def _send(self, session: ClientSession, message: Any) -> None:
        self._out.append((session.address, proto.encode(message, self.config.protocol)))

    # ---------------------------------------------------------- helpers

    def _latency_s(self, slot: int, now_s: float) -> float:
        """Age of the client's view when its command arrives, less interpolation (s): the smoothed
        round trip. The client renders what the server sent one downstream trip ago and its
        command takes an upstream trip back; Source's "outgoing latency" is measured send-to-ack,
        a round trip too."""
        return self.netstats.sample(slot, now_s).rtt_ms / 1000.0

    def _rtt_array(self, now_s: float) -> np.ndarray:
        rtt = np.zeros(self.config.max_clients)
        for slot in self.by_slot:
            rtt[slot] = self.netstats.sample(slot, now_s).rtt_ms / 1000.0
        return rtt

    def report(self) -> dict[str, Any]:
        """What the server recorded: per player and for the server itself (plain JSON-able data)."""
        players = []
        for session in sorted(self.by_slot.values(), key=lambda s: s.slot):
            s = self.netstats.sample(session.slot, self.time_s)
            sanction = None
            if self.pipeline is not None and self.pipeline.policy is not None:
                decision = self.pipeline.evaluate(self.pipeline.key_of(session.slot))
                if decision is not None:
                    sanction = {"recommended": decision.recommended.name.lower(), "applied": decision.applied.name.lower(),
                                "score": round(decision.score, 3), "needs_review": decision.needs_review}
            players.append(
                {
                    "slot": session.slot, "name": session.name,
                    "rtt_ms": round(s.rtt_ms, 1), "jitter_ms": round(s.jitter_ms, 1), "loss": round(s.loss, 4),
                    "shots": session.shots_fired, "hits": session.hits, "kills": session.kills, "deaths": session.deaths,
                    "commands": session.commands_applied,
                    "corrections": int(self.validator.desyncs[session.slot]),
                    "detections": dict(self.detections.get(session.slot, {})),
                    "sanction": sanction,
                }
            )
        return {
            "tick": self.tick,
            "time_s": self.time_s,
            "players": players,
            "rejections": dict(self.rejections),
            "counters": dict(self.counters),
            "tick_stats": self.tick_stats.summary(),
            "visibility_rays": self.culler.rays_cast,
        }

    def close(self) -> None:
        """End of the match: detectors deliver what they still hold (recorded like any tick's
        detections, so a replay re-run ends the same way), then the recording is closed."""
        if self.pipeline is not None:
            held = self.pipeline.flush()
            for d in held:
                counter = self.detections.get(d.player)
                if counter is not None:
                    counter[f"{d.detector}:{d.kind}"] += 1
                self.bus.publish(d)
            if held and self.recorder is not None:
                self.recorder.write_tick(self.tick, self.time_s, held)
        if self.recorder is not None:
            self.recorder.close()


def _vec(v: np.ndarray) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


__all__ = ["Outgoing", "ServerCore"]
