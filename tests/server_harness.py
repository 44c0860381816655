"""A minimal scripted protocol client and a harness that drives ServerCore in-process (tests only)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from server import protocol as proto
from server.config import ServerConfig
from server.core import ServerCore
from server.entity_block import decode_entities
from world.mapfile import GameMap, parse_map


def arena_map(walls: list[dict] | None = None) -> GameMap:
    """A 60 x 60 m arena with the given walls and spawns along the west and east edges."""
    return parse_map(
        {
            "format": "referee-map/1",
            "name": "arena",
            "bounds": [0, 0, 60, 60],
            "walls": walls or [],
            "spawns": [{"id": f"s{i}", "pos": [5 + (i % 2) * 50, 5 + 5 * i], "yaw": 0.0} for i in range(8)],
        },
        source="arena",
    )


@dataclass
class ScriptedClient:
    """Speaks the protocol by hand: handshake, then one INPUT per tick with the last 4 commands."""

    name: str
    address: tuple[str, int]
    token: bytes = b""
    slot: int = -1
    seq: int = 0
    packet_seq: int = 0
    own: proto.OwnState | None = None
    last_tick: int | None = None
    snapshots: list[proto.Snapshot] = field(default_factory=list)
    corrections: list[proto.Correction] = field(default_factory=list)
    history: list[proto.Command] = field(default_factory=list)

    def connect(self, core: ServerCore, now_s: float) -> None:
        nonce = os.urandom(16)
        replies = core.receive(self.address, proto.encode(proto.Connect(nonce=nonce, name=self.name)), now_s)
        challenge = proto.decode_server(replies[0][1])
        assert isinstance(challenge, proto.Challenge)
        resp = proto.ChallengeResponse(cookie=challenge.cookie, nonce=nonce, name=self.name)
        replies = core.receive(self.address, proto.encode(resp), now_s)
        accept = proto.decode_server(replies[0][1])
        assert isinstance(accept, proto.Accept)
        self.token, self.slot = accept.token, accept.slot

    def deliver(self, datagrams: list[tuple[tuple[str, int], bytes]]) -> None:
        for addr, data in datagrams:
            if addr != self.address:
                continue
            msg = proto.decode_server(data)
            if isinstance(msg, proto.Snapshot):
                self.snapshots.append(msg)
                self.own = msg.own
                self.last_tick = msg.tick
            elif isinstance(msg, proto.Correction):
                self.corrections.append(msg)

    def command(self, now_s: float, yaw: float = 0.0, pitch: float = 0.0, buttons: int = 0,
                shots: tuple[proto.Shot, ...] = (), view_time_s: float | None = None) -> bytes:
        self.seq += 1
        self.packet_seq += 1
        pos = self.own.pos if self.own is not None else (0.0, 0.0, 0.0)
        cmd = proto.Command(
            seq=self.seq, client_tick=self.seq, view_time_s=now_s if view_time_s is None else view_time_s,
            duration_s=1 / 64, forward=0.0, side=0.0, yaw_deg=yaw, pitch_deg=pitch, buttons=buttons,
            weapon_switch=0, recoil_pitch_deg=0.0, recoil_yaw_deg=0.0, pos=pos,
        )
        self.history.append(cmd)
        shots = tuple(s._replace(cmd_seq=self.seq) for s in shots)
        msg = proto.Input.with_commands(self.token, self.packet_seq, now_s, self.last_tick, self.history[-4:], shots)
        return proto.encode(msg)

    def seen_slots(self) -> set[int]:
        if not self.snapshots:
            return set()
        return {int(s) for s in decode_entities(self.snapshots[-1].entities)["slot"]}


def make_core(game_map: GameMap | None = None, **overrides: object) -> ServerCore:
    cfg = ServerConfig(**overrides)  # type: ignore[arg-type]
    return ServerCore(cfg, game_map or arena_map(), secret=b"k" * 32, seed=1)


def joined(core: ServerCore, name: str, port: int, ticks: int = 3) -> ScriptedClient:
    """A scripted client connected at time 0 (address 127.0.0.1:``port``), then ``ticks`` ticks
    run with no input from it and nothing delivered to it."""
    client = ScriptedClient(name, ("127.0.0.1", port))
    client.connect(core, 0.0)
    for _ in range(ticks):
        core.step(core.next_tick_s())
    return client


def place(core: ServerCore, slot: int, xy: tuple[float, float], yaw: float, client: ScriptedClient) -> None:
    """Teleport a player (test setup) and tell its scripted client where it now stands."""
    core.world.teleport(slot, (xy[0], xy[1], 0.0))
    core.world.set_view(slot, yaw, 0.0)
    core.validator.reset(slot, core.time_s)
    if client.own is not None:
        client.own = client.own._replace(pos=(xy[0], xy[1], 0.0))
    else:
        client.own = proto.OwnState((xy[0], xy[1], 0.0), (0.0, 0.0, 0.0), yaw, 0.0, 100.0, 0, 0, 0, 0, True, True)


def run_ticks(core: ServerCore, clients: list[ScriptedClient], n: int, per_tick=None) -> None:
    """Advance n ticks: each client sends one INPUT (from ``per_tick(client, now)`` if given)."""
    for _ in range(n):
        now = core.next_tick_s()
        for c in clients:
            data = per_tick(c, now) if per_tick else c.command(now)
            if data is not None:
                core.receive(c.address, data, now - 0.001)
        out = core.step(now)
        for c in clients:
            c.deliver(out)


def weapon_ready(core: ServerCore, slot: int, weapon: int) -> None:
    """Give a player only ``weapon`` with a full magazine, ready to fire."""
    core.weapons.spawn(slot, [weapon], core.by_slot[slot].cmd_time_s)
    core.weapons.sync_to(core.world)


__all__ = ["ScriptedClient", "arena_map", "joined", "make_core", "np", "place", "run_ticks", "weapon_ready"]
