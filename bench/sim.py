"""Simulated seconds per wall second for a 10-bot match in virtual time.

The baseline is real time itself (1 simulated second per wall second): the figure is the ratio.
Also reported: how the wall time splits between the server core and everything else (bots,
links, scheduler), from the core's own tick statistics. ``--parts`` times the bots' two calls as
well (a timer around every call: the run gets a little slower) and splits the wall time into bot
steps, bot receives (snapshot decoding included), server core ticks and the rest (the server's
receive path, links, scheduler).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from testbed.bot_factory import DefaultBotFactory, profile_names
from testbed.match import run_virtual
from testbed.scenario import parse_scenario_text


class _TimedFactory:
    """The default bots, each with a wall-clock timer around ``step`` and ``receive`` (s)."""

    def __init__(self) -> None:
        self._make = DefaultBotFactory()
        self.step_s = 0.0
        self.receive_s = 0.0

    def __call__(self, spec: Any, **kwargs: Any) -> Any:
        bot = self._make(spec, **kwargs)
        bot.step = self._timed(bot.step, "step_s")
        bot.receive = self._timed(bot.receive, "receive_s")
        return bot

    def _timed(self, call: Callable[..., Any], total: str) -> Callable[..., Any]:
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            t0 = clock()
            try:
                return call(*args)
            finally:
                setattr(self, total, getattr(self, total) + clock() - t0)

        return timed


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench sim")
    parser.add_argument("--bots", type=int, default=10)
    parser.add_argument("--duration", type=float, default=20.0, help="simulated seconds")
    parser.add_argument("--map", default="corridors")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--parts", action="store_true", help="also time the bots' calls (slows the run a little)")
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
    factory = _TimedFactory() if args.parts else None
    result = run_virtual(parse_scenario_text(text, "bench-sim.toml", profile_names()), bot_factory=factory)
    ticks = result.server["tick_stats"]["ticks"]
    core_s = ticks * result.server["tick_stats"]["p50_ms"] / 1000.0
    speed = result.duration_s / result.wall_s
    print(f"{args.bots} bots on {args.map}: {result.duration_s:.0f} simulated s in {result.wall_s:.1f} wall s "
          f"= {speed:.2f}x real time (core ~{core_s / result.wall_s:.0%} of wall time)")
    parts: dict[str, float] = {}
    if factory is not None:
        wall = result.wall_s
        parts = {
            "bot_step_s": round(factory.step_s, 3),
            "bot_receive_s": round(factory.receive_s, 3),
            "core_tick_s": round(core_s, 3),
            "rest_s": round(wall - factory.step_s - factory.receive_s - core_s, 3),
        }
        print("  " + ", ".join(f"{k[:-2].replace('_', ' ')} {v:.2f} s ({v / wall:.0%})" for k, v in parts.items()))
    return {
        **parts,
        "bots": args.bots,
        "map": args.map,
        "simulated_s": result.duration_s,
        "wall_s": round(result.wall_s, 3),
        "sim_per_wall": round(speed, 3),
        "baseline_real_time": 1.0,
        "core_share": round(core_s / result.wall_s, 3),
        "kills": sum(p.kills for p in result.players),
    }
