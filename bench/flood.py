"""A flood from one source against a real server with honest players: today's receive settings vs
the new ones, in one run.

Each arm runs a real ``UdpServer`` (the full core, with the detector suite when
``--detectors`` is given; uvloop when available) on 127.0.0.1 with ``--players`` honest bots in
a spawned process (64 Hz inputs). Once they play, a forked process floods the server from one socket as fast as it can, bounded by
``--flood-s`` seconds and ``--max-datagrams`` datagrams: INPUT datagrams with a token the server
never issued (``--kind input``, decoded and refused as ``unknown_session``) or bytes that are not
msgpack (``--kind garbage``). Over the flood window the bench reads:

- the kernel's drops at the server's socket (``/proc/net/udp``), absolute and as a share of every
  datagram that reached the socket (read + dropped);
- the datagrams the server read and how many of them the per-source limit cut before decoding;
- the honest players' ticks: how late each tick's snapshots left after the tick was due (p99,
  ms) and the tick's own processing time (p99, ms);
- the honest players' commands the server applied, against 64 per player-second, and the
  server's own packet-loss estimate for them;
- the server process's CPU time, as a share of one core.

Arms: ``today`` (the kernel's default receive buffer, one datagram read per wake-up, no
per-source limit: the receive settings before issue 16) and ``new`` (``TransportConfig``'s
defaults). Ratios are new / today.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import multiprocessing.connection
import os
import socket
import time
from dataclasses import replace
from typing import Any

import numpy as np

from server import protocol as proto
from server.config import ServerConfig
from server.core import ServerCore
from server.transport import TransportConfig, UdpServer
from world.mapfile import builtin_map

try:
    import uvloop
except ImportError:  # pragma: no cover - non-Linux
    uvloop = None

TODAY = TransportConfig(receive_buffer_bytes=None, reads_per_wakeup=1, source_rate_factor=None)
"""The receive settings before issue 16: kernel default buffer, one datagram per wake-up, no
per-source limit in front of the core."""
NEW = TransportConfig()


def _flood_payload(kind: str) -> bytes:
    if kind == "garbage":
        return b"\xc1" + b"\x00" * 99
    cmd = proto.Command(seq=1, client_tick=1, view_time_s=0.0, duration_s=1 / 64, forward=1.0, side=0.0,
                        yaw_deg=0.0, pitch_deg=0.0, buttons=0, weapon_switch=0, recoil_pitch_deg=0.0,
                        recoil_yaw_deg=0.0, pos=(1.0, 1.0, 0.0))
    return proto.encode(proto.Input.with_commands(os.urandom(16), 1, 1.0, None, [cmd]))


def _flooder(target: tuple[str, int], payload: bytes, max_datagrams: int, max_s: float,
             conn: multiprocessing.connection.Connection) -> None:
    """Send ``payload`` to ``target`` as fast as possible, at most ``max_datagrams`` times and
    ``max_s`` seconds; report (sent, seconds) on ``conn``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(target)
    send = sock.send
    sent = 0
    t0 = time.monotonic()
    end = t0 + max_s
    while sent < max_datagrams:
        for _ in range(1024):
            try:
                send(payload)
            except (BlockingIOError, ConnectionRefusedError):
                continue
            sent += 1
        if time.monotonic() >= end:
            break
    conn.send((sent, time.monotonic() - t0))
    sock.close()


def _players(address: tuple[str, int], map_name: str, count: int, duration_s: float) -> None:
    """Honest bots against ``address`` (runs in a spawned process)."""
    from testbed.standalone import run_bot_swarm

    coro = run_bot_swarm(address, builtin_map(map_name), count=count, duration_s=duration_s, name_prefix="honest")
    if uvloop is not None:
        uvloop.run(coro)
    else:  # pragma: no cover - non-Linux
        asyncio.run(coro)


def _commands(core: ServerCore) -> dict[int, int]:
    return {s.slot: s.commands_applied for s in core.by_slot.values()}


async def _arm(name: str, transport: TransportConfig, args: argparse.Namespace) -> dict[str, Any]:
    from anticheat.suite import build_pipeline
    from testbed.match import ServerClock

    clock = ServerClock()
    pipeline = build_pipeline(None, clock=clock) if args.detectors else None
    core = ServerCore(ServerConfig(tick_rate_hz=64), builtin_map(args.map), secret=os.urandom(32), seed=1,
                      pipeline=pipeline)
    clock.source = lambda: core.time_s
    loop = asyncio.get_running_loop()
    lateness: list[float] = []
    measuring = False

    def on_tick(c: ServerCore) -> None:
        if measuring:
            lateness.append(server.now_s() - c.time_s)

    server = UdpServer(core, transport, on_tick=on_tick)
    await server.start()
    players = mp.get_context("spawn").Process(
        target=_players, args=(server.address, args.map, args.players, 300.0), daemon=True)
    players.start()
    try:
        deadline = loop.time() + 90.0
        while len(core.by_slot) < args.players and loop.time() < deadline:
            await asyncio.sleep(0.2)
        if len(core.by_slot) < args.players:
            raise RuntimeError(f"{name}: only {len(core.by_slot)} of {args.players} players connected")
        await asyncio.sleep(args.warmup_s)

        before = server.stats()
        commands0, ticks0, cpu0, t0 = _commands(core), core.tick_stats.ticks, time.process_time(), loop.time()
        rejected0 = sum(core.rejections.values())
        measuring = True
        receiver, sender = mp.Pipe(duplex=False)
        flood = mp.get_context("fork").Process(
            target=_flooder, args=(server.address, _flood_payload(args.kind), args.max_datagrams, args.flood_s, sender))
        flood.start()
        while not receiver.poll():
            await asyncio.sleep(0.05)
        sent, flood_s = receiver.recv()
        flood.join()
        await asyncio.sleep(0.25)  # what the kernel still holds is read (or was dropped)
        measuring = False
        window_s = loop.time() - t0
        cpu_s = time.process_time() - cpu0
        after = server.stats()
        commands1 = _commands(core)
        n_ticks = core.tick_stats.ticks - ticks0
        durations = core.tick_stats.durations_s()[-n_ticks:] if n_ticks else np.zeros(1)
        loss = [p["loss"] for p in core.report()["players"] if p["connected"]]
        rejected = sum(core.rejections.values()) - rejected0
    finally:
        if players.is_alive():
            players.terminate()
        players.join(5.0)
        await server.stop()
        core.close()

    drops = after["kernel_drops"] - before["kernel_drops"]
    read = after["datagrams_received"] - before["datagrams_received"]
    applied = sum(commands1.get(slot, 0) - n for slot, n in commands0.items())
    expected = 64.0 * window_s * len(commands0)
    result = {
        "rcvbuf_bytes": after["rcvbuf_bytes"],
        "flood_sent": sent,
        "flood_per_s": round(sent / flood_s),
        "kernel_drops": drops,
        "kernel_drop_pct": round(100.0 * drops / max(drops + read, 1), 2),
        "datagrams_read": read,
        "source_limited": after["source_limited"] - before["source_limited"],
        "core_rejections": rejected,
        "tick_late_p99_ms": round(1000.0 * float(np.percentile(lateness, 99)) if lateness else float("nan"), 2),
        "tick_p99_ms": round(1000.0 * float(np.percentile(durations, 99)), 3),
        "honest_commands_applied_pct": round(100.0 * applied / max(expected, 1.0), 1),
        "honest_loss_max": max(loss) if loss else None,
        "server_cpu_pct": round(100.0 * cpu_s / window_s, 1),
        "wakeups": after["wakeups"] - before["wakeups"],
    }
    print(f"{name:>6}: rcvbuf {result['rcvbuf_bytes']:>9} B | flood {sent} sent ({result['flood_per_s']}/s) | "
          f"kernel drops {drops} ({result['kernel_drop_pct']} %) | read {read}, source-limited "
          f"{result['source_limited']} | tick late p99 {result['tick_late_p99_ms']} ms, tick p99 "
          f"{result['tick_p99_ms']} ms | honest commands applied {result['honest_commands_applied_pct']} %, "
          f"loss max {result['honest_loss_max']} | server CPU {result['server_cpu_pct']} %")
    return result


def _ratio(new: float, old: float) -> float | None:
    return round(new / old, 3) if old else None


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench flood")
    parser.add_argument("--players", type=int, default=4, help="honest bots (default 4)")
    parser.add_argument("--flood-s", type=float, default=10.0, help="flood duration bound (s, default 10)")
    parser.add_argument("--max-datagrams", type=int, default=1_500_000, help="flood size bound (default 1.5 M)")
    parser.add_argument("--kind", choices=("input", "garbage"), default="input", help="what the flood sends")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="play before the flood (s, default 2)")
    parser.add_argument("--map", default="corridors")
    parser.add_argument("--detectors", action="store_true",
                        help="run the detector suite in the server too (its tick work is bench tick's subject)")
    parser.add_argument("--rcvbuf", type=int, default=NEW.receive_buffer_bytes,
                        help="new arm's receive buffer as asked (bytes)")
    args = parser.parse_args(argv)
    new = replace(NEW, receive_buffer_bytes=args.rcvbuf)

    def run(config: TransportConfig, name: str) -> dict[str, Any]:
        coro = _arm(name, config, args)
        return uvloop.run(coro) if uvloop is not None else asyncio.run(coro)

    today = run(TODAY, "today")
    ours = run(new, "new")
    out: dict[str, Any] = {"loop": "uvloop" if uvloop is not None else "asyncio", "players": args.players,
                           "kind": args.kind, "detectors": args.detectors}
    for key, value in today.items():
        out[f"today_{key}"] = value
    for key, value in ours.items():
        out[f"new_{key}"] = value
    for key in ("kernel_drop_pct", "tick_late_p99_ms", "tick_p99_ms", "honest_commands_applied_pct",
                "server_cpu_pct", "datagrams_read"):
        out[f"ratio_{key}"] = _ratio(ours[key], today[key])
    return out
