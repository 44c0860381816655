"""Server receive cost per datagram vs a plain recvfrom loop, measured in the same run.

A forked sender process blasts N INPUT datagrams (4 commands each, the real wire format) at the
receiver over 127.0.0.1. By default each INPUT brings one new command and re-sends the 3 before it,
as a client sending one INPUT per command does (``--new-commands 4``: every command new, no
re-sends). The receiver's CPU time (``time.process_time``: idle waiting costs
nothing) divided by the datagrams it received is the cost per datagram, for three receivers:

- ``raw``: a blocking ``socket.recvfrom`` loop (the baseline);
- ``transport``: our transport's receive path (asyncio-dgram's socket, uvloop when available,
  datagrams dispatched to the core as they arrive) handing bytes to a no-op;
- ``server``: the full UdpServer: transport + decode + authentication + replay window + rate
  limit + command queue, with the tick loop running.
Ratios are against ``raw`` from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import socket
import time
from typing import Any

from server import protocol as proto
from server.config import ServerConfig
from server.core import ServerCore
from server.rate_limit import RateLimitConfig
from server.transport import TransportConfig, UdpServer
from world.mapfile import builtin_map

try:
    import uvloop
except ImportError:  # pragma: no cover - non-Linux
    uvloop = None


def _sender(fd: int, target: tuple[str, int], payloads: list[bytes], pace_every: int) -> None:
    sock = socket.socket(fileno=fd)
    for i, p in enumerate(payloads):
        sock.sendto(p, target)
        if pace_every and i % pace_every == pace_every - 1:
            time.sleep(0.0005)  # keep the kernel's receive buffer from overflowing
    sock.close()


def _inputs(token: bytes, n: int, new_per_input: int = 1) -> list[bytes]:
    """``n`` INPUT datagrams of 4 commands each; ``new_per_input`` of them (the newest) are new."""
    out = []
    for k in range(1, n + 1):
        newest = 3 + k * new_per_input
        cmds = [
            proto.Command(seq=seq, client_tick=seq, view_time_s=seq / 64, duration_s=1 / 64, forward=1.0,
                          side=0.0, yaw_deg=10.0, pitch_deg=-2.0, buttons=0, weapon_switch=0,
                          recoil_pitch_deg=0.0, recoil_yaw_deg=0.0, pos=(5.0, 5.0, 0.0))
            for seq in range(newest - 3, newest + 1)
        ]
        out.append(proto.encode(proto.Input.with_commands(token, k, k / 64, None, cmds)))
    return out


def _start_sender(sock: socket.socket, target: tuple[str, int], payloads: list[bytes], pace: int) -> mp.Process:
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_sender, args=(sock.fileno(), target, payloads, pace))
    proc.start()
    return proc


def _raw(payloads: list[bytes], pace: int, timeout_s: float) -> tuple[float, int]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(timeout_s)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    proc = _start_sender(tx, rx.getsockname(), payloads, pace)
    got = 0
    cpu0 = time.process_time()
    with contextlib.suppress(TimeoutError):
        while got < len(payloads):
            rx.recvfrom(2048)
            got += 1
    cpu = time.process_time() - cpu0
    proc.join()
    rx.close()
    tx.close()
    return cpu, got


async def _served(payloads_for: Any, pace: int, timeout_s: float, full: bool) -> tuple[float, int]:
    cfg = ServerConfig(rate_limit=RateLimitConfig(packets_per_s=1e6, packet_burst=1e6, bytes_per_s=1e9, byte_burst=1e9),
                       max_datagrams_per_tick=10**9)
    core = ServerCore(cfg, builtin_map("open"), secret=b"b" * 32, seed=1)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    addr = tx.getsockname()
    nonce = os.urandom(16)
    challenge = proto.decode_server(core.receive(addr, proto.encode(proto.Connect(nonce=nonce, name="bench")), 0.0)[0][1])
    accept = proto.decode_server(core.receive(
        addr, proto.encode(proto.ChallengeResponse(cookie=challenge.cookie, nonce=nonce, name="bench")), 0.0)[0][1])
    payloads = payloads_for(accept.token)
    state = {"n": 0, "last_cpu": 0.0}
    # The tick loop is off: its work is not receive cost (bench tick measures it).
    server = UdpServer(core, TransportConfig(port=0, run_ticks=False))
    real_receive = core.receive

    def counted(addr_: tuple[str, int], data: bytes, now_s: float) -> list[tuple[tuple[str, int], bytes]]:
        state["n"] += 1
        out = real_receive(addr_, data, now_s) if full else []
        state["last_cpu"] = time.process_time()
        return out

    core.receive = counted  # type: ignore[method-assign]
    await server.start()
    proc = _start_sender(tx, server.address, payloads, pace)
    cpu0 = time.process_time()
    state["last_cpu"] = cpu0
    deadline = time.monotonic() + timeout_s
    # Wait (cheaply) for the sender to finish and the queue to drain; CPU is read at the last datagram.
    while proc.is_alive() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    idle_n = -1
    while state["n"] != idle_n and state["n"] < len(payloads):
        idle_n = state["n"]
        await asyncio.sleep(0.2)
    cpu = state["last_cpu"] - cpu0
    proc.join()
    await server.stop()
    tx.close()
    if full:
        assert core.rejections.get("internal_error", 0) == 0
    return cpu, state["n"]


def _run_async(coro: Any) -> Any:
    if uvloop is not None:
        return uvloop.run(coro)
    return asyncio.run(coro)


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench udp")
    parser.add_argument("--datagrams", type=int, default=20_000)
    parser.add_argument("--pace", type=int, default=64, help="sender sleeps 0.5 ms every N datagrams")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-commands", type=int, choices=(1, 4), default=1,
                        help="new commands per 4-command INPUT (1: a client's usual re-sends; 4: none re-sent)")
    args = parser.parse_args(argv)
    n = args.datagrams
    fresh = args.new_commands
    results: dict[str, list[float]] = {"raw": [], "transport": [], "server": []}
    received: dict[str, int] = {}
    for _ in range(args.rounds):
        cpu, got = _raw(_inputs(b"\0" * 16, n, fresh), args.pace, 2.0)
        results["raw"].append(cpu / max(got, 1))
        received["raw"] = got
        cpu, got = _run_async(_served(lambda tok: _inputs(tok, n, fresh), args.pace, 30.0, full=False))
        results["transport"].append(cpu / max(got, 1))
        received["transport"] = got
        cpu, got = _run_async(_served(lambda tok: _inputs(tok, n, fresh), args.pace, 30.0, full=True))
        results["server"].append(cpu / max(got, 1))
        received["server"] = got
    best = {k: min(v) * 1e6 for k, v in results.items()}
    for k in ("raw", "transport", "server"):
        print(f"{k:>9}: {best[k]:7.2f} us/datagram  ({received[k]} of {n} received)")
    return {
        "loop": "uvloop" if uvloop is not None else "asyncio",
        "datagrams": n,
        "new_commands_per_input": fresh,
        "raw_us": round(best["raw"], 3),
        "transport_us": round(best["transport"], 3),
        "server_us": round(best["server"], 3),
        "transport_ratio": round(best["transport"] / best["raw"], 2),
        "server_ratio": round(best["server"] / best["raw"], 2),
    }
