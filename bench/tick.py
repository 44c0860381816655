"""Server tick time with N bots at 64 Hz and 128 Hz in virtual mode, as a fraction of the budget.

The core's own ``tick_stats`` time only ``ServerCore.step`` (bots run in the same process but
outside it), in wall time (the goal's figure) and in the server thread's CPU time (what the
host's other work cannot inflate, though cold caches after the bots' turn still can). The same-run baseline is the tick of an empty server on the same map: the ratio
shows what the players cost on this machine, whatever its speed today.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from server.config import ServerConfig
from server.core import ServerCore
from testbed.bot_factory import profile_names
from testbed.match import run_virtual
from testbed.scenario import parse_scenario_text
from world.mapfile import builtin_map


def _scenario(bots: int, rate: int, duration_s: float, map_name: str, seed: int) -> Any:
    text = f"""
name = "bench-tick-{rate}"
map = "{map_name}"
duration_s = {duration_s}
tick_rate_hz = {rate}
seed = {seed}
[[bots]]
count = {bots}
profile = "honest"
ping_ms = 60
jitter_ms = 5
"""
    return parse_scenario_text(text, "bench-tick.toml", profile_names())


def _empty_tick_s(map_name: str, rate: int, ticks: int = 400) -> float:
    core = ServerCore(ServerConfig(tick_rate_hz=rate), builtin_map(map_name), secret=b"t" * 32, seed=1)
    t0 = time.perf_counter()
    for _ in range(ticks):
        core.step(core.next_tick_s())
    return (time.perf_counter() - t0) / ticks


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench tick")
    parser.add_argument("--bots", type=int, default=64)
    parser.add_argument("--duration", type=float, default=3.0, help="simulated seconds per rate")
    parser.add_argument("--map", default="city")
    parser.add_argument("--rates", default="64,128")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"bots": args.bots, "map": args.map, "duration_s": args.duration}
    for rate in (int(r) for r in args.rates.split(",")):
        result = run_virtual(_scenario(args.bots, rate, args.duration, args.map, args.seed))
        stats = result.server["tick_stats"]
        empty = _empty_tick_s(args.map, rate)
        budget_ms = 1000.0 / rate
        print(
            f"{rate:>4} Hz, {args.bots} bots: p50 {stats['p50_ms']:.2f} ms ({stats['p50_budget']:.0%} of {budget_ms:.2f} ms), "
            f"p99 {stats['p99_ms']:.2f} ms ({stats['p99_budget']:.0%}), overruns {stats['overruns']}/{stats['ticks']}, "
            f"empty tick {empty * 1e3:.3f} ms"
        )
        print(f"      server CPU time per tick: p50 {stats['cpu_p50_ms']:.2f} ms, p99 {stats['cpu_p99_ms']:.2f} ms "
              f"({stats['cpu_p99_ms'] / budget_ms:.0%}); wall above CPU is time the host took away")
        out[f"cpu_p50_ms_{rate}"] = round(stats["cpu_p50_ms"], 3)
        out[f"cpu_p99_ms_{rate}"] = round(stats["cpu_p99_ms"], 3)
        out[f"p50_budget_{rate}"] = round(stats["p50_budget"], 3)
        out[f"p99_budget_{rate}"] = round(stats["p99_budget"], 3)
        out[f"p50_ms_{rate}"] = round(stats["p50_ms"], 3)
        out[f"p99_ms_{rate}"] = round(stats["p99_ms"], 3)
        out[f"empty_tick_ms_{rate}"] = round(empty * 1e3, 4)
        out[f"p99_vs_empty_{rate}"] = round(stats["p99_ms"] / (empty * 1e3), 1)
        phases = stats["phase_mean_ms"]
        print("      mean ms per phase: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
        out[f"phase_mean_ms_{rate}"] = {k: round(v, 3) for k, v in phases.items()}
    return out
