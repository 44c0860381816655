"""An honest client whose uplink stalls and then flushes its queue is corrected, never flagged.

A client machine that hitches (or a link that holds datagrams) delivers 400 ms of commands at
once. The server keeps only the newest 16 and the timer check may drop more; the first
applied command's claim is displaced from the previous claim by the dropped commands' movement
too. Judged over one command's 15.6 ms that looked like running at several times the top speed:
three such flushes in 10 s made a ``movement:speed`` detection on honest players (seen in UDP
matches on a loaded machine). The displacement is judged over the dropped commands' time as well.
"""

from __future__ import annotations

from anticheat.detector import Detector
from anticheat.events import MovementEvidence
from anticheat.pipeline import DetectionPipeline
from anticheat.skip import SkipBook
from bots.prediction import MoveState, Predictor, state_from_correction
from server import protocol as proto
from tests.server_harness import ScriptedClient, joined, make_core, place
from server.inputs import MOVE_SPEED_M_S

DT = 1.0 / 64


class _MovementLog(Detector):
    """Keeps every piece of movement evidence it is fed."""

    name = "movelog"

    def __init__(self) -> None:
        self.evidence: list[MovementEvidence] = []

    def on_movement(self, evidence, skip):  # type: ignore[no-untyped-def]
        self.evidence.append(evidence)
        return ()


class _Runner:
    """A client running east at full speed with the bots' own prediction: it claims its predicted
    position in every command and replays its pending commands on a correction."""

    def __init__(self, core, client: ScriptedClient) -> None:  # type: ignore[no-untyped-def]
        self.core, self.client = core, client
        self.predictor = Predictor(core.geometry, MoveState((10.0, 30.0, 0.0), (0.0, 0.0, 0.0), True, 0))
        self.history: list[proto.Command] = []
        self.corrections_seen = 0

    def receive(self, datagrams) -> None:  # type: ignore[no-untyped-def]
        self.client.deliver(datagrams)
        for corr in self.client.corrections[self.corrections_seen:]:
            self.predictor.reconcile(corr.cmd_seq, state_from_correction(corr.pos, corr.vel, 0), force=True)
        self.corrections_seen = len(self.client.corrections)

    def command(self, now_s: float) -> bytes:
        core, c = self.core, self.client
        speed = float(MOVE_SPEED_M_S[core.weapons.weapon[c.slot]])
        c.seq += 1
        state, _ = self.predictor.predict(c.seq, 1.0, 0.0, 0.0, 0.0, 0, DT, speed)
        c.packet_seq += 1
        self.history.append(proto.Command(
            seq=c.seq, client_tick=c.seq, view_time_s=now_s - 0.05, duration_s=DT, forward=1.0, side=0.0,
            yaw_deg=0.0, pitch_deg=0.0, buttons=0, weapon_switch=0, recoil_pitch_deg=0.0, recoil_yaw_deg=0.0,
            pos=state.pos,
        ))
        return proto.encode(proto.Input.with_commands(c.token, c.packet_seq, now_s, c.last_tick, self.history[-4:], ()))


def _play(stalls: int) -> tuple[int, list[MovementEvidence], int]:
    """Run east for 3 s with ``stalls`` 400 ms uplink stalls, each flushed at once; returns the
    commands dropped unapplied (the queue's limit, then the timer check), the movement evidence
    and the corrections sent."""
    core = make_core()
    log = _MovementLog()
    core.pipeline = DetectionPipeline([log], SkipBook())
    client = joined(core, "runner", 5001)
    place(core, client.slot, (10.0, 30.0), 0.0, client)
    runner = _Runner(core, client)
    held: list[bytes] = []
    stall_ticks = {t for k in range(stalls) for t in range(40 + 60 * k, 66 + 60 * k)}
    for t in range(192):
        now = core.next_tick_s()
        data = runner.command(now)
        if t in stall_ticks:
            held.append(data)
        else:
            for d in held + [data]:
                core.receive(client.address, d, now - 0.001)
            held = []
        runner.receive(core.step(now))
    assert core.world.pos[client.slot][0] > 20.0  # it ran
    dropped = core.rejections["timer_dropped"] + core.rejections["queue_overflow"]
    return int(dropped), log.evidence, int(core.counters["corrections"])


def test_a_steady_runner_is_never_dropped_or_flagged() -> None:
    dropped, evidence, corrections = _play(stalls=0)
    assert (dropped, evidence, corrections) == (0, [], 0)


def test_flushes_after_uplink_stalls_are_corrected_without_evidence() -> None:
    dropped, evidence, corrections = _play(stalls=3)
    # Each flush is 26 commands (406 ms) at once: the queue keeps 16, the timer accepts 240 ms.
    assert dropped >= 3 * 10
    assert corrections >= 3  # the dropped movement is put right by the server...
    assert evidence == []  # ...and is no evidence of a speed hack


def test_a_respawn_leaves_the_timer_balance_alone() -> None:
    """A respawn does not change the client's clock. Resetting the balance there re-based it on a
    moment the client was lagging, and its catch-up then read as a lead (timer evidence on an
    honest cable player in a UDP match)."""
    from server.respawns import respawn_due

    core = make_core()
    client = joined(core, "lagger", 5002)
    slot, now = client.slot, core.time_s
    core.timer.balance_s[slot], core.timer.last_now_s[slot] = -0.1, now
    core.by_slot[slot].respawn_at_s = now
    respawn_due(core, now)
    assert core.by_slot[slot].respawn_at_s is None  # it did respawn
    assert (core.timer.balance_s[slot], core.timer.last_now_s[slot]) == (-0.1, now)


def test_a_server_that_stalls_and_catches_up_flags_nobody() -> None:
    """The server's own process stalls for 250 ms while a client keeps sending one command per
    tick. The transport then runs the missed ticks back to back at their nominal times, as
    ``server.transport`` does. The commands arrived spread over the stall, and the timer check
    runs on arrival times, not on the catch-up ticks' nominal ones: no evidence."""
    core = make_core()
    log = _MovementLog()
    core.pipeline = DetectionPipeline([log], SkipBook())
    client = ScriptedClient("steady", ("127.0.0.1", 5002))
    client.connect(core, 0.0)
    clock = 0.0
    stalled_until = -1.0
    for i in range(300):
        clock = (i + 1) * DT
        core.receive(client.address, client.command(clock), clock)
        if i in (100, 200):
            stalled_until = clock + 0.25
        if clock < stalled_until:
            continue
        while core.next_tick_s() <= clock:  # catch up at nominal times
            client.deliver(core.step(core.next_tick_s()))
    assert core.tick >= 295
    # The batch still counts as arriving at its newest command's time, after a 265 ms gap: the lag
    # floor clamps and a command or so is dropped, forgiven as a client stall's would be.
    assert core.rejections.get("timer_dropped", 0) <= 2
    assert log.evidence == []
