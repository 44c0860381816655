"""Simulated seconds per wall second for a 10-bot match in virtual time.

The baseline is real time itself (1 simulated second per wall second): the figure is the ratio.
Also reported: how the wall time splits between the server core and everything else (bots,
links, scheduler), from the core's own tick statistics.
"""

from __future__ import annotations

import argparse
from typing import Any

from testbed.bot_factory import profile_names
from testbed.match import run_virtual
from testbed.scenario import parse_scenario_text


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench sim")
    parser.add_argument("--bots", type=int, default=10)
    parser.add_argument("--duration", type=float, default=20.0, help="simulated seconds")
    parser.add_argument("--map", default="corridors")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    text = f"""
name = "bench-sim"
map = "{args.map}"
duration_s = {args.duration}
tick_rate_hz = 64
seed = {args.seed}
[[bots]]
count = {args.bots}
profile = "honest"
ping_ms = 80
jitter_ms = 5
loss = 0.01
"""
    result = run_virtual(parse_scenario_text(text, "bench-sim.toml", profile_names()))
    ticks = result.server["tick_stats"]["ticks"]
    core_s = ticks * result.server["tick_stats"]["p50_ms"] / 1000.0
    speed = result.duration_s / result.wall_s
    print(f"{args.bots} bots on {args.map}: {result.duration_s:.0f} simulated s in {result.wall_s:.1f} wall s "
          f"= {speed:.2f}x real time (core ~{core_s / result.wall_s:.0%} of wall time)")
    return {
        "bots": args.bots,
        "map": args.map,
        "simulated_s": result.duration_s,
        "wall_s": round(result.wall_s, 3),
        "sim_per_wall": round(speed, 3),
        "baseline_real_time": 1.0,
        "core_share": round(core_s / result.wall_s, 3),
        "kills": sum(p.kills for p in result.players),
    }
