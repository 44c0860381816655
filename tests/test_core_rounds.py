"""Several commands per player in one tick: each moves at the speed of the weapon held when it is
applied, after a weapon switch of an earlier command too, and every command leaves an aim sample
in round order."""

from __future__ import annotations

import numpy as np

from anticheat.events import AimSample
from physics.movement import MoveCommands, simulate
from server import protocol as proto
from server.inputs import MOVE_SPEED_M_S as _MOVE_SPEED_M_S
from tests.server_harness import ScriptedClient, make_core, run_ticks
from world.weapons import WeaponId

DT = 1 / 192


def _burst(client: ScriptedClient, now_s: float, switches: list[int]) -> bytes:
    """One INPUT with a new command per entry of ``switches`` (its weapon_switch), all running forward."""
    pos = client.own.pos if client.own is not None else (0.0, 0.0, 0.0)
    for k, switch in enumerate(switches):
        client.seq += 1
        client.history.append(proto.Command(
            seq=client.seq, client_tick=client.seq, view_time_s=now_s, duration_s=DT, forward=1.0, side=0.0,
            yaw_deg=10.0 * k, pitch_deg=0.0, buttons=0, weapon_switch=switch, recoil_pitch_deg=0.0,
            recoil_yaw_deg=0.0, pos=pos,
        ))
    client.packet_seq += 1
    msg = proto.Input.with_commands(client.token, client.packet_seq, now_s, client.last_tick, client.history[-4:], ())
    return proto.encode(msg)


def test_a_switch_sets_the_speed_of_the_players_later_commands_in_the_tick() -> None:
    core = make_core()
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    b = ScriptedClient("bob", ("127.0.0.1", 5002))
    for c in (a, b):
        c.connect(core, 0.0)
    run_ticks(core, [a, b], 3)
    w = core.world
    # Running: the held weapon's speed caps the velocity (from a standstill it would not show).
    w.vel[[a.slot, b.slot]] = (7.0, 0.0, 0.0)
    held = {c.slot: int(core.weapons.weapon[c.slot]) for c in (a, b)}
    assert held[a.slot] != int(WeaponId.PISTOL)
    start = {c.slot: (w.pos[c.slot].copy(), w.vel[c.slot].copy(), bool(w.on_ground[c.slot]), int(w.stance[c.slot]))
             for c in (a, b)}
    plans = {a.slot: [0, int(WeaponId.PISTOL), 0], b.slot: [0, 0]}
    # The switch comes after its own command's movement.
    speeds = {a.slot: [held[a.slot], held[a.slot], int(WeaponId.PISTOL)], b.slot: [held[b.slot]] * 2}
    now = core.next_tick_s()
    for c in (a, b):
        core.receive(c.address, _burst(c, now, plans[c.slot]), now - 0.001)
    core.step(now)
    assert int(core.weapons.weapon[a.slot]) == int(WeaponId.PISTOL)
    for c in (a, b):
        pos, vel, ground, stance = start[c.slot]
        p, v, g, s = pos[None], vel[None], np.array([ground]), np.array([stance], dtype=np.int8)
        for k, weapon in enumerate(speeds[c.slot]):
            r = simulate(p, v, g, s, MoveCommands.single(1.0, 0.0, 10.0 * k, 0, DT), _MOVE_SPEED_M_S[weapon],
                         core.geometry, core.config.movement)
            p, v, g, s = r.pos, r.vel, r.on_ground, r.stance
        assert w.pos[c.slot].tobytes() == p[0].tobytes() and w.vel[c.slot].tobytes() == v[0].tobytes()
    samples = [(e.player, e.seq, e.weapon) for e in core._tick_events if isinstance(e, AimSample)]
    first = {c.slot: c.seq - len(plans[c.slot]) + 1 for c in (a, b)}
    order = sorted((k, slot) for slot, plan in plans.items() for k in range(len(plan)))
    # A sample follows its command's weapon action: alice holds the pistol from her second command on.
    assert samples == [(slot, first[slot] + k, int(WeaponId.PISTOL) if slot == a.slot and k else held[slot])
                       for k, slot in order]
