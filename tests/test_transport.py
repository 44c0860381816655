"""The real-time UDP transport on 127.0.0.1: handshake, ticking, snapshots, a bounded flood."""

from __future__ import annotations

import asyncio
import os

import asyncio_dgram

from server import protocol as proto
from server.transport import TransportConfig, UdpServer
from tests.server_harness import make_core


async def _handshake(client: asyncio_dgram.aio.DatagramClient, name: str) -> proto.Accept:
    nonce = os.urandom(16)
    await client.send(proto.encode(proto.Connect(nonce=nonce, name=name)))
    challenge = proto.decode_server((await asyncio.wait_for(client.recv(), 2.0))[0])
    assert isinstance(challenge, proto.Challenge)
    await client.send(proto.encode(proto.ChallengeResponse(cookie=challenge.cookie, nonce=nonce, name=name)))
    accept = proto.decode_server((await asyncio.wait_for(client.recv(), 2.0))[0])
    assert isinstance(accept, proto.Accept)
    return accept


async def test_udp_handshake_ticks_and_snapshots() -> None:
    core = make_core()
    async with UdpServer(core, TransportConfig(port=0)) as server:
        client = await asyncio_dgram.connect(server.address)
        accept = await _handshake(client, "udp-alice")
        assert accept.tick_rate_hz == 64
        snapshots = 0
        deadline = asyncio.get_running_loop().time() + 1.0
        while asyncio.get_running_loop().time() < deadline and snapshots < 10:
            data, _ = await asyncio.wait_for(client.recv(), 1.0)
            if isinstance(proto.decode_server(data), proto.Snapshot):
                snapshots += 1
        client.close()
    assert snapshots >= 10
    assert core.tick >= 10  # the loop really ticked in real time


async def test_flood_is_bounded_and_honest_clients_keep_playing() -> None:
    core = make_core(max_datagrams_per_tick=64)
    # No per-source limit: this is the core's per-tick budget under test (one flooding source
    # is the limiter's job, tests/test_transport_drain.py).
    async with UdpServer(core, TransportConfig(port=0, source_rate_factor=None)) as server:
        honest = await asyncio_dgram.connect(server.address)
        await _handshake(honest, "honest")
        flooder = await asyncio_dgram.connect(server.address)
        junk = b"\x93\x01\x03" + b"\x00" * 200
        # Bursts of 100, paced so the kernel's socket buffer does not drop them before we can:
        # what is under test is that the core's tick budget bounds the work and counts every drop.
        for _ in range(30):
            for _ in range(100):
                await flooder.send(junk)
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.3)
        # The honest client still receives snapshots after the flood.
        got = False
        for _ in range(50):
            data, _ = await asyncio.wait_for(honest.recv(), 1.0)
            if isinstance(proto.decode_server(data), proto.Snapshot):
                got = True
                break
        honest.close()
        flooder.close()
    assert got
    assert sum(core.rejections.values()) >= 2000  # the flood reached the core and was counted
    assert core.rejections["tick_budget"] > 0  # beyond the budget, not even decoded
    assert "internal_error" not in core.rejections
