"""End to end over real UDP on 127.0.0.1, through the user-space link emulator.

Two real bot clients (the sans-IO client on asyncio-dgram) play behind 100 ms of one-way latency:
one runs back and forth, the other stands still and shoots at where its snapshots show the runner
(at its view time, 100 ms interpolation behind). The server registers hits only because lag
compensation rewinds the runner by latency + interpolation; with lag compensation switched off
the same shots mostly miss.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np

from bots.client import BotClient
from bots.perception import Intent, Perception
from bots.udp import run_bots
from lagcomp.config import RewindPolicy
from physics.buttons import Buttons
from server.config import ServerConfig
from server.core import ServerCore
from server.transport import TransportConfig, UdpServer
from testbed.link import LinkConfig, PathConfig
from testbed.link_proxy import LinkProxy, ProxyConfig
from tests.server_harness import arena_map
from world.weapons import WeaponId

SHOOTER = (10.0, 30.0)
RUNNER = (25.0, 30.0)


class Runner:
    """Runs north and south across the shooter's line of fire, turning every 1.2 s."""

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        north = int(p.now_s / 1.2) % 2 == 0
        return Intent(forward=1.0, yaw_deg=90.0 if north else -90.0)


class Marksman:
    """Stands still with the pistol and fires at the runner's chest as rendered, every 0.7 s."""

    def __init__(self) -> None:
        self.next_fire_s = 0.0

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        if p.weapon != int(WeaponId.PISTOL):
            return Intent(weapon_switch=int(WeaponId.PISTOL), yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg)
        seen = [e for e in p.entities if e.alive and e.rendered]
        if not seen:
            return Intent(yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg)
        target = seen[0]
        dx, dy = target.pos[0] - p.pos[0], target.pos[1] - p.pos[1]
        dz = (target.pos[2] + 1.26) - (p.pos[2] + 1.64)
        yaw = math.degrees(math.atan2(dy, dx))
        pitch = math.degrees(math.atan2(dz, math.hypot(dx, dy)))
        fire = p.alive and p.ammo > 0 and p.now_s >= self.next_fire_s
        if fire:
            self.next_fire_s = p.now_s + 0.7
        return Intent(yaw_deg=yaw, pitch_deg=pitch, buttons=int(Buttons.FIRE) if fire else 0, aim_target=target.slot)


async def _duel(lag_compensation: bool) -> tuple[int, int, ServerCore]:
    game_map = arena_map()
    config = ServerConfig(rewind=RewindPolicy(enabled=lag_compensation), respawn_delay_s=0.5,
                          primaries=(int(WeaponId.PISTOL),))
    core = ServerCore(config, game_map, secret=b"e" * 32, seed=3)
    link = PathConfig.symmetric(LinkConfig(latency_ms=100.0))
    shooter = BotClient("marksman", Marksman(), game_map, np.random.default_rng(1))
    runner = BotClient("runner", Runner(), game_map, np.random.default_rng(2))
    async with UdpServer(core, TransportConfig()) as server:
        async with LinkProxy(ProxyConfig(upstream=server.address, default=link, seed=4)) as proxy:
            bots = asyncio.create_task(run_bots(proxy.address, [shooter, runner], duration_s=9.0))
            # Once both are in, put them where the duel happens (a server-side teleport: the
            # clients are corrected like after a respawn).
            while len(core.by_slot) < 2 or any(s.respawn_at_s is not None for s in core.by_slot.values()):
                await asyncio.sleep(0.05)
            slots = {s.name: s.slot for s in core.by_slot.values()}
            for name, xy in (("marksman", SHOOTER), ("runner", RUNNER)):
                core.world.teleport(slots[name], (xy[0], xy[1], 0.0))
                core.validator.reset(slots[name], core.time_s)
            core.world.health[slots["runner"]] = 1e6  # the runner must survive to keep running
            await asyncio.sleep(1.5)  # let prediction settle and the runner get going
            before = core.by_slot[slots["marksman"]]
            shots0, hits0 = before.shots_fired, before.hits
            await bots
    session = core.by_slot.get(slots["marksman"])
    shots = (session.shots_fired if session else before.shots_fired) - shots0
    hits = (session.hits if session else before.hits) - hits0
    return shots, hits, core


async def test_hit_registers_through_lag_compensation_under_100ms_latency() -> None:
    shots, hits, core = await _duel(lag_compensation=True)
    assert shots >= 4
    assert hits / shots >= 0.6, (shots, hits)
    assert core.rejections.get("internal_error", 0) == 0
    shots_off, hits_off, _ = await _duel(lag_compensation=False)
    assert shots_off >= 4
    # Without rewinding, the runner has moved on by ~1.2 m when the shot arrives: mostly misses.
    assert hits_off / shots_off <= 0.35 and hits_off / shots_off < hits / shots, (shots_off, hits_off)
