"""Bots take the server's map: a real server on 127.0.0.1 running a built-in map, bots started
without a map, with the server's, with another built-in one and with map files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import bots.client as client_module
from bots.udp import MapMismatch, probe_server, server_map
from server.config import ServerConfig
from server.core import ServerCore
from server.transport import TransportConfig, UdpServer
from testbed.standalone import run_bot_swarm
from world.mapfile import builtin_map, dump_map, load_map


def _core(map_name: str) -> ServerCore:
    return ServerCore(ServerConfig(), builtin_map(map_name), secret=b"m" * 32, seed=3)


def _names(core: ServerCore) -> set[str]:
    return {p["name"] for p in core.report()["players"]}


@pytest.fixture(autouse=True)
def _fresh_mismatch_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "_MAP_MISMATCH", client_module.RepeatedWarning(client_module.log))


async def test_probe_reads_the_servers_map_and_leaves() -> None:
    core = _core("open")
    async with UdpServer(core, TransportConfig()) as server:
        info = await probe_server(server.address, name="looker", timeout_s=5.0)
        await asyncio.sleep(0.1)  # the DISCONNECT is handled
    assert info.map_name == "open" and info.tick_rate_hz == 64
    assert not core.by_slot  # the probe left again
    assert _names(core) == {"looker"}


async def test_bots_without_a_map_play_the_servers_builtin_map() -> None:
    core = _core("open")
    async with UdpServer(core, TransportConfig()) as server:
        stats = await run_bot_swarm(server.address, count=2, duration_s=1.0, name_prefix="b")
    assert all(s.slot is not None and s.snapshots > 0 for s in stats)
    assert client_module.map_mismatches() == {}  # no bot met another map than its own
    assert _names(core) == {"b-1", "b-2", "b-probe"}


async def test_bots_given_another_builtin_map_are_refused_before_playing() -> None:
    core = _core("open")
    async with UdpServer(core, TransportConfig()) as server:
        with pytest.raises(MapMismatch, match=r"server runs map 'open', not 'corridors' .*leave out --map"):
            await run_bot_swarm(server.address, builtin_map("corridors"), count=2, duration_s=1.0, name_prefix="b")
    assert _names(core) == {"b-probe"}  # no bot connected


async def test_a_map_file_must_carry_the_servers_map_name(tmp_path: Path) -> None:
    same = tmp_path / "open-copy.json"
    same.write_text(dump_map(builtin_map("open")))
    other = tmp_path / "arena.json"
    doc = json.loads(dump_map(builtin_map("open")))
    doc["name"] = "arena"
    other.write_text(json.dumps(doc))
    core = _core("open")
    async with UdpServer(core, TransportConfig()) as server:
        with pytest.raises(MapMismatch, match=r"server runs map 'open', not 'arena' \(from .*arena\.json\)"):
            await run_bot_swarm(server.address, load_map(other), count=1, duration_s=1.0)
        stats = await run_bot_swarm(server.address, load_map(same), count=1, duration_s=0.5)
    assert stats[0].slot is not None


def test_server_map_rules() -> None:
    assert server_map("city", None).source == "builtin:city"
    corridors = builtin_map("corridors")
    assert server_map("corridors", corridors) is corridors
    with pytest.raises(MapMismatch, match=r"'arena', which is not built in .*--map FILE"):
        server_map("arena", None)
    with pytest.raises(MapMismatch, match=r"pass the file of map 'arena' with --map"):
        server_map("arena", corridors)
