"""Apply inputs (ARCHITECTURE.md, "A tick", step 1): each client's queued commands pass the timer
balance, are applied in rounds (one command per player per round), their movement simulated in
batches ahead of the rounds' weapon actions, every claim validated after the last round
(corrections sent), weapon switches, reloads and shots on the command clock, and an aim sample
per command. Also the re-sending of an unacknowledged correction. Every function takes the
server core (:class:`~server.core_state.CoreState`)."""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from lagcomp.rewind_policy import rewind_times
from physics.buttons import Buttons
from physics.movement import MoveCommands, simulate_sequence
from physics.validation import Verdict
from server import protocol as proto
from server.aim_samples import aim_kernels, append_aim_samples
from server.core_state import CoreState, send, vec3
from server.crosshair_probe import probe_crosshairs
from server.input_kernel import round_to_world
from server.session import ClientSession
from server.shots import PendingShot, fire, latency_s
from server.tick_commands import NO_ROWS, PITCH, Round, TickCommands, round_rows
from world.weapons import WEAPONS

_RELOAD = int(Buttons.RELOAD)
_MAX_SKIPPED_S = 1.0
"""At most this much time (s) of missing commands widens the judgement of the claim after them."""
"""An int, not the flag: ``int & IntFlag`` goes through the enum's Python operator."""
_PENDING = int(Verdict.PENDING)
"""An int: comparing a numpy int8 with the IntEnum goes through the enum's Python operator."""
_EMPTY_HAND_SPEED_M_S = 6.0


def _move_speeds() -> np.ndarray:
    """Move speed (m/s) by held weapon id, an empty hand (id 0) included."""
    speeds = np.full(max(int(w) for w in WEAPONS) + 1, _EMPTY_HAND_SPEED_M_S)
    for wid, spec in WEAPONS.items():
        speeds[int(wid)] = spec.move_speed_m_s
    return speeds


MOVE_SPEED_M_S = _move_speeds()
"""Move speed (m/s) by held weapon id."""


def warm_kernels(core: CoreState) -> None:
    """Load (or compile) the phase's kernels now, not in the middle of the first tick needing them."""
    w = core.world
    aim_kernels(w, core.culler.visible, np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0, bool),
                np.zeros((2, 2, 0)), 0, np.zeros((0, 3)), np.zeros(0, np.int8), np.zeros((0, 3)), np.zeros(0, bool))
    warm = TickCommands(*proto.command_arrays(b""), np.arange(0), [], [], w)
    round_to_world(0, 0, warm.slots, warm.yaw, warm.numbers[PITCH], warm.alive, warm.pos, warm.vel, warm.ground,
                   warm.stance, warm.pressed, w.yaw, w.pitch, w.pos, w.vel, w.on_ground, w.stance,
                   np.empty(0, dtype=np.intp))


def resend_corrections(core: CoreState, now_s: float) -> None:
    """While a client has not acknowledged a setback or respawn, send it the current
    authoritative state again every ``correction_resend_s``: UDP may have lost the last one, and
    the per-command corrections in between are suppressed (they would repeat the same news)."""
    w = core.world
    resend_s = core.config.correction_resend_s
    due = [s for s in core.by_slot.values() if now_s - s.last_correction_s >= resend_s]
    if not due:
        return
    # Sending changes neither who is alive nor who awaits an ack: both are read once.
    alive = w.alive.tolist()
    waiting = core.validator.awaiting_acks(now_s).tolist()
    for session in due:
        slot = session.slot
        if not alive[slot] or not waiting[slot]:
            continue
        core.counters["corrections_resent"] += 1
        session.last_correction_s = now_s
        # Stamped with the newest applied command: an older stamp is dropped by the client as stale.
        send(core, session, proto.Correction(cmd_seq=max(session.last_applied_seq, 0), pos=vec3(w.pos[slot]),
                                             vel=vec3(w.vel[slot])))


def apply_inputs(core: CoreState, now_s: float) -> list[PendingShot]:
    """Apply the queued commands at server time ``now_s`` (s); returns the accepted shots, to be
    resolved once every command has been applied."""
    sessions = [s for s in core.by_slot.values() if s.queued]
    if not sessions:
        return []
    taken, missing = take_commands(core, sessions, now_s)
    if not any(taken):
        core.weapons.sync_to(core.world)
        return []
    commands, rounds = build_rounds(core, sessions, taken)
    pending: list[PendingShot] = []
    moved = 0
    for k, round_ in enumerate(rounds):
        if k == moved:
            moved = simulate_rounds(core, rounds, k, commands)
        pending.extend(apply_round(core, round_, commands, now_s))
    validate_moves(core, rounds, commands, now_s, missing)
    core.weapons.sync_to(core.world)
    return pending


def take_commands(
    core: CoreState, sessions: list[ClientSession], now_s: float
) -> tuple[list[list[bytes]], dict[int, list[int]]]:
    """Each session's command records to apply this tick (the timer check's share of its queue),
    and per slot with any, the sequence numbers missing before each taken command
    (``ClientSession.missing_before``)."""
    for s in sessions:
        if s.last_applied_seq < 0:
            # The client's first commands: it may have learnt its spawn only now (a lost ACCEPT
            # delays everything), so the wait for its acknowledgement starts here, not at spawn.
            core.validator.reset(s.slot, now_s)
    slots = np.array([s.slot for s in sessions], dtype=np.intp)
    counts = [len(s.queued) for s in sessions]
    net = core.netstats
    # Each player's measured delay jitter widens its timer allowance (bunched honest commands).
    jitter = np.array([net.client(s.slot).jitter_s if s.slot in net else 0.0 for s in sessions])
    # The timer runs on the later of the tick's time and the commands' arrival: a late server
    # catching up ticks at their nominal times must not see a stall's worth of commands arrive
    # within one tick.
    arrived = np.array([s.commands_arrived_s for s in sessions])
    accepted, evidence = core.timer.on_commands_batch(
        slots, np.array(counts, dtype=np.int64), core.tick_dt_s, now_s, core.tick, positions=core.world.pos[slots],
        jitter_s=jitter, arrived_s=arrived,
    )
    core._tick_events.extend(evidence)
    taken: list[list[bytes]] = []
    missing: dict[int, list[int]] = {}
    for session, n_ok, n in zip(sessions, accepted.tolist(), counts, strict=True):
        if n_ok < n:
            core.rejections["timer_dropped"] += n - n_ok
        gaps = session.missing_before(n - n_ok, n_ok)
        if gaps is not None:
            missing[session.slot] = gaps
        records = session.take(n_ok, drop_oldest=n - n_ok)
        session.commands_applied += len(records)
        taken.append(records)
    return taken, missing


def build_rounds(
    core: CoreState, sessions: list[ClientSession], taken: list[list[bytes]]
) -> tuple[TickCommands, list[Round]]:
    """The taken records as the tick's command arrays, in rounds: one command per player per
    round, round k holding the k-th commands in session order (their movement is batched
    across rounds by :func:`simulate_rounds`). Advances each session's command clock."""
    lens = [len(records) for records in taken]
    words, halves = proto.command_arrays(b"".join(chain.from_iterable(taken)))
    # The command clock, each player's commands in turn: nothing reads it while the tick's
    # commands are applied.
    durations = words[:, proto.CMD_DURATION].tolist()
    times: list[float] = []
    shots: list[bool] = []
    first = 0
    for session, n in zip(sessions, lens, strict=True):
        t = session.cmd_time_s
        for duration in durations[first : first + n]:
            t += duration
            times.append(t)
        first += n
        session.cmd_time_s = t
        shots += [bool(session.shots)] * n
    members, rows = round_rows(lens)
    if rows is None:
        order = np.arange(len(times))
    else:
        order = np.array(rows, dtype=np.intp)
        times = [times[r] for r in rows]
        shots = [shots[r] for r in rows]
    them_all = [[sessions[i] for i in them] for them in members]
    commands = TickCommands(words, halves, order, [s.slot for them in them_all for s in them], times, core.world)
    switch, buttons = commands.switch, commands.buttons
    acting_rows = [r for r, shot in enumerate(shots) if shot or switch[r] or buttons[r] & _RELOAD]
    rounds: list[Round] = []
    start = 0
    for them in them_all:
        stop = start + len(them)
        acting = [r - start for r in acting_rows if start <= r < stop]
        switches = any(switch[start + i] for i in acting)
        rounds.append(Round(them, start, stop, acting, switches, NO_ROWS))
        start = stop
    return commands, rounds


def simulate_rounds(core: CoreState, rounds: list[Round], first: int, commands: TickCommands) -> int:
    """Simulate the movement of rounds ``first`` up to the next one with a weapon switch, in one
    call (each player's commands in turn), and find what each command's aim sample sees;
    returns the round after them. A switch changes the move speed of the player's later
    commands, so those move once the switch happened."""
    last = first
    while last < len(rounds) - 1 and not rounds[last].switches:
        last += 1
    a, b = rounds[first].start, rounds[last].stop
    rows = slice(a, b) if commands.all_alive else a + np.flatnonzero(commands.alive[a:b])
    ls = commands.slots[rows]
    w = core.world
    if ls.size:
        move = MoveCommands.from_block(commands.numbers[:, rows])
        if first == 0 and last == len(rounds) - 1:
            commands.move = move
        speed = MOVE_SPEED_M_S[core.weapons.weapon[ls]]
        result, prev_pos, prev_vel, prev_ground = simulate_sequence(
            ls, w.pos, w.vel, w.on_ground, w.stance, move, speed, core.geometry, core.config.movement
        )
        commands.prev_pos[rows] = prev_pos
        commands.prev_vel[rows] = prev_vel
        commands.prev_ground[rows] = prev_ground
        commands.speed[rows] = speed
        commands.pos[rows] = result.pos
        commands.vel[rows] = result.vel
        commands.ground[rows] = result.on_ground
        commands.stance[rows] = result.stance
        commands.pressed[rows] = result.crouch_pressed
    stops = np.array([r.stop - a for r in rounds[first : last + 1]], dtype=np.intp)
    floats, ints, ground = aim_kernels(
        w, core.culler.visible, commands.slots[a:b], stops, commands.alive[a:b], commands.cos_sin, a,
        commands.pos[a:b], commands.stance[a:b], commands.vel[a:b], commands.ground[a:b], core.culler.in_sight,
    )
    for column, values in zip(commands.aim, (*floats.tolist(), *ints.tolist(), ground.tolist()), strict=True):
        column[a:b] = values
    return last + 1


def apply_round(core: CoreState, round_: Round, commands: TickCommands, now_s: float) -> list[PendingShot]:
    """One round into the world (its movement was simulated ahead), then its weapon actions on
    the command clock and its aim samples; returns the round's accepted shots."""
    w = core.world
    a, b = round_.start, round_.stop
    slots = commands.slots[a:b]
    core.weapons.advance_slots(slots, commands.times[a:b])
    # The kept position is always the simulated one, whatever the claim's verdict.
    live = np.empty(b - a, dtype=np.intp)
    n_live, n_pressed = round_to_world(
        a, b, commands.slots, commands.yaw, commands.numbers[PITCH], commands.alive, commands.pos, commands.vel,
        commands.ground, commands.stance, commands.pressed, w.yaw, w.pitch, w.pos, w.vel, w.on_ground, w.stance,
        live,
    )
    round_.live = live = live[:n_live]
    if n_live:
        round_.mark = len(core._tick_events)
        if n_pressed:
            pressed = commands.pressed
            for i in live.tolist():
                if pressed[a + i]:
                    core.weapons.note_crouch_presses(slots[i : i + 1], float(commands.times[a + i]))
    # The rewind times depend on the link and the claims only: one computation serves the
    # crosshair probe and the phantom angles.
    view_s = (rewind_view_times(core, slots, commands.view_time[a:b], now_s)
              if core.phantoms.active or core.config.crosshair.enabled else None)
    # Before the weapon actions: the crosshair as it was when the command could fire.
    crosshair = probe_crosshairs(core, round_, commands, now_s, view_s)
    pending: list[PendingShot] = []
    for i in round_.acting:
        session, cmd = round_.sessions[i], commands.command(a + i)
        t_cmd = float(commands.times[a + i])
        if cmd.weapon_switch:
            core.weapons.switch_weapon(session.slot, cmd.weapon_switch, t_cmd)
        if cmd.buttons & _RELOAD:
            core.weapons.start_reload(session.slot, t_cmd)
        for shot in session.shots.pop(cmd.seq, ()):
            p = fire(core, session, cmd, shot, t_cmd, now_s)
            if p is not None:
                pending.append(p)
    append_aim_samples(round_, commands, core.weapons, core.tick, now_s, core._tick_events, core.phantoms, w,
                       view_s if core.phantoms.active else None, crosshair)
    return pending


def rewind_view_times(core: CoreState, slots: np.ndarray, view_time_s: list[float], now_s: float) -> np.ndarray:
    """The server time (s) each command's client was drawing, as lag compensation rewinds a shot
    to it (the claimed ``view_time_s`` if it agrees with the measured round trip, else the
    estimate, never more than ``max_unlag_s`` back): the phantom that client drew is the one its
    aim is judged against, and the world its crosshair is probed in."""
    latency = np.array([latency_s(core, s) for s in slots.tolist()])
    times, _ = rewind_times(now_s, latency, np.asarray(view_time_s, dtype=np.float64), core.config.rewind)
    return times


def validate_moves(
    core: CoreState, rounds: list[Round], commands: TickCommands, now_s: float, missing: dict[int, list[int]]
) -> None:
    """Validate every round's claims (in round order, one validator call), send the
    corrections, and put each round's movement evidence where the round left room for it.
    ``missing``: per slot, the sequence numbers missing before each of its commands this tick."""
    moved = [r for r in rounds if r.live.size]
    if not moved:
        return
    skipped: np.ndarray | None = None
    if missing:
        # A claim after missing commands (dropped by the timer or the queue, or lost) is displaced
        # from the previous claim by their movement too: judged over their time as well, capped
        # at a second (a stalled client's flush, not a licence to claim anything).
        skipped = np.zeros(len(commands.slots))
        for k, r in enumerate(rounds):
            for i, session in enumerate(r.sessions):
                gaps = missing.get(session.slot)
                if gaps is not None and gaps[k]:
                    skipped[r.start + i] = min(gaps[k] * core.tick_dt_s, _MAX_SKIPPED_S)
    columns = (commands.slots, commands.prev_pos, commands.prev_vel, commands.prev_ground, commands.pos,
               commands.claimed, commands.speed)
    if commands.all_alive:
        # Every row: the columns themselves, not views of them (a numpy call each).
        move = commands.move if commands.move is not None else MoveCommands.from_block(commands.numbers)
    else:
        rows = np.flatnonzero(commands.alive)
        move = commands.move if commands.move is not None else MoveCommands.from_block(commands.numbers[:, rows])
        columns = tuple(c[rows] for c in columns)
        if skipped is not None:
            skipped = skipped[rows]
    slots, prev_pos, prev_vel, prev_ground, pos, claimed, speed = columns
    verdicts = core.validator.validate_batches(
        [r.live.size for r in moved], slots, prev_pos, prev_vel, prev_ground, move, pos, claimed, speed,
        core.geometry, core.tick, now_s, skipped,
    )
    resend_s = core.config.correction_resend_s
    placed: list[tuple[int, tuple[Any, ...]]] = []
    for r, verdict in zip(moved, verdicts, strict=True):
        if verdict.evidence:
            placed.append((r.mark, verdict.evidence))
        # (A comprehension over the few flags of a round costs less than np.flatnonzero.)
        for j in [j for j, back in enumerate(verdict.setback.tolist()) if back]:
            i = int(r.live[j])
            session, seq = r.sessions[i], commands.seq[r.start + i]
            if verdict.verdict[j] == _PENDING and now_s - session.last_correction_s < resend_s:
                # Still awaiting the ack of a correction just sent: it already carries this news.
                core.counters["corrections_suppressed"] += 1
                continue
            session.last_correction_seq = seq
            session.last_correction_s = now_s
            core.counters["corrections"] += 1
            send(core, session, proto.Correction(cmd_seq=seq, pos=vec3(verdict.pos[j]),
                                                 vel=vec3(commands.vel[r.start + i])))
    # Last first, so that the earlier marks still point where they did.
    for mark, evidence in reversed(placed):
        core._tick_events[mark:mark] = evidence