"""Server tick time with N bots at 64 Hz and 128 Hz in virtual mode, as a fraction of the budget.

``--alone`` also feeds every datagram the server received, at the same virtual instants, to a
second server built the same way, alone in the process (no bots running between its ticks, as
in a dedicated server process), and reports its tick times too. The two servers' reports are
compared: the second one must have recorded exactly what the first did. ``--repeat R`` replays
the same datagrams into R fresh lone servers and keeps each tick's shortest time: every replay
does exactly the same work, so the minimum is that work's cost with the least of what the shared
host added (another process on the core, a preempted thread); its percentiles are the steadiest
figure this machine gives. Every replay must record exactly what the played server did.

The core's own ``tick_stats`` time only ``ServerCore.step`` (bots run in the same process but
outside it), in wall time (the goal's figure) and in the server thread's CPU time (what the
host's other work cannot inflate, though cold caches after the bots' turn still can). The same-run baseline is the tick of an empty server on the same map: the ratio
shows what the players cost on this machine, whatever its speed today.

``--phantom`` measures what the phantom bait (``server.phantoms``) costs the tick: the played
match's datagrams are replayed ``--repeat`` times into lone servers with phantoms on and as many
with phantoms off (``[server.phantom] enabled = false``), alternated, each tick's shortest time
kept per arm; it prints both arms' p50/p99 and their ratio, and the time inside
``Phantoms.update`` and ``VisibilityCuller.refresh`` per tick (the methods wrapped here, for the
replays only; each tick's shortest over the replays).

``--crosshair`` measures the same way what the crosshair probe (``server.crosshair_probe``) costs:
lone replays with ``[server.crosshair] enabled`` true and false, alternated, and the time inside
``probe_crosshairs`` per tick.

``--admin`` measures instead what the admin page costs the tick: the server in real time with
and without ``server.admin`` (the page's API polled once a second), both arms in one run, the
ratio printed (``bench._admin_arm``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from server.config import ServerConfig
from server.core import ServerCore
from server.tick_stats import PHASES
from testbed.bot_factory import profile_names
from testbed.match import MatchSetup, run_virtual
from testbed.scenario import parse_scenario_text
from world.mapfile import builtin_map


def _scenario(bots: int, rate: int, duration_s: float, map_name: str, seed: int, off: str | None = None) -> Any:
    """The bench's scenario; ``off``: a ``[server.X]`` section switched off (``enabled = false``)."""
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
    if off is not None:
        text += f"[server.{off}]\nenabled = false\n"
    return parse_scenario_text(text, "bench-tick.toml", profile_names())


def _played_then_alone(scenario: Any, repeat: int) -> tuple[Any, dict[str, Any], bool]:
    """(the match result, the lone servers' tick times, whether every lone server's report agrees
    with the played one's). The tick times: p50/p99 (ms and fraction of the budget) of each tick's
    shortest time over ``repeat`` lone replays."""
    log: list[tuple[Any, bytes | None, float]] = []
    played: list[ServerCore] = []
    receive, step = ServerCore.receive, ServerCore.step

    def logged_receive(self: ServerCore, addr: Any, datagram: bytes, now_s: float) -> Any:
        log.append((addr, datagram, now_s))
        return receive(self, addr, datagram, now_s)

    def logged_step(self: ServerCore, now_s: float) -> Any:
        if not played:
            played.append(self)
        log.append((None, None, now_s))
        return step(self, now_s)

    # For the one match only: the log is the server's whole input, in order.
    ServerCore.receive, ServerCore.step = logged_receive, logged_step  # type: ignore[method-assign]
    try:
        result = run_virtual(scenario)
    finally:
        ServerCore.receive, ServerCore.step = receive, step  # type: ignore[method-assign]
    theirs = {k: v for k, v in played[0].report().items() if k != "tick_stats"}
    same = True
    durations: list[np.ndarray] = []
    for _ in range(repeat):
        lone = MatchSetup(scenario, mode="virtual").core
        for addr, datagram, now_s in log:
            if datagram is None:
                lone.step(now_s)
            else:
                lone.receive(addr, datagram, now_s)
        lone.close()  # as the match closed the first one: detectors deliver what they hold
        mine = lone.report()
        same = same and {k: v for k, v in mine.items() if k != "tick_stats"} == theirs
        durations.append(lone.tick_stats.durations_s())
    shortest = np.min(np.stack(durations), axis=0)
    budget_s = 1.0 / scenario.tick_rate_hz
    p50, p99 = (float(np.percentile(shortest, q)) for q in (50, 99))
    alone = {"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "p50_budget": p50 / budget_s, "p99_budget": p99 / budget_s}
    return result, alone, same


def _ab_arms(scenario: Any, scenario_off: Any, repeat: int, timed_parts: dict[str, tuple[Any, str]]) -> dict[str, float]:
    """The played match's datagrams replayed ``repeat`` times into lone servers with a feature on
    (``scenario``) and off (``scenario_off``), alternated: each arm's p50/p99 (ms) of each
    tick's shortest time, and the time (ms) per tick inside each of ``timed_parts`` (name:
    (module or class, attribute)), each tick's shortest over the replays (mean and p99)."""
    log: list[tuple[Any, bytes | None, float]] = []
    receive, step = ServerCore.receive, ServerCore.step

    def logged_receive(self: ServerCore, addr: Any, datagram: bytes, now_s: float) -> Any:
        log.append((addr, datagram, now_s))
        return receive(self, addr, datagram, now_s)

    def logged_step(self: ServerCore, now_s: float) -> Any:
        log.append((None, None, now_s))
        return step(self, now_s)

    ServerCore.receive, ServerCore.step = logged_receive, logged_step  # type: ignore[method-assign]
    try:
        run_virtual(scenario)
    finally:
        ServerCore.receive, ServerCore.step = receive, step  # type: ignore[method-assign]
    originals = {name: getattr(owner, attr) for name, (owner, attr) in timed_parts.items()}
    inner: dict[str, list[float]] = {name: [] for name in timed_parts}

    def timed(name: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            inner[name].append(time.perf_counter() - t0)
            return out
        return wrapped

    ticks: dict[bool, list[np.ndarray]] = {True: [], False: []}
    phases: dict[bool, dict[str, float]] = {}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in timed_parts}
    for name, (owner, attr) in timed_parts.items():
        setattr(owner, attr, timed(name, originals[name]))
    try:
        for _ in range(repeat):
            for on in (True, False):
                lone = MatchSetup(scenario if on else scenario_off, mode="virtual").core
                for times in inner.values():
                    times.clear()
                for addr, datagram, now_s in log:
                    if datagram is None:
                        lone.step(now_s)
                    else:
                        lone.receive(addr, datagram, now_s)
                lone.close()
                ticks[on].append(lone.tick_stats.durations_s())
                phases[on] = {k: v / len(ticks[on][-1]) for k, v in lone.tick_stats.phase_totals_s().items()}
                if on:
                    for name, times in inner.items():
                        parts[name].append(np.array(times))
    finally:
        for name, (owner, attr) in timed_parts.items():
            setattr(owner, attr, originals[name])
    out: dict[str, float] = {}
    for on, arm in ((True, "on"), (False, "off")):
        shortest = np.min(np.stack(ticks[on]), axis=0)
        out[f"{arm}_p50_ms"], out[f"{arm}_p99_ms"] = (float(np.percentile(shortest, q)) * 1e3 for q in (50, 99))
        for phase, seconds in phases[on].items():
            out[f"{arm}_{phase}_ms"] = seconds * 1e3
    for name, runs in parts.items():
        shortest = np.min(np.stack(runs), axis=0)
        out[f"{name}_mean_ms"] = float(shortest.mean()) * 1e3
        out[f"{name}_p99_ms"] = float(np.percentile(shortest, 99)) * 1e3
    return out


def _empty_tick_s(map_name: str, rate: int, ticks: int = 400) -> float:
    core = ServerCore(ServerConfig(tick_rate_hz=rate), builtin_map(map_name), secret=b"t" * 32, seed=1)
    t0 = time.perf_counter()
    for _ in range(ticks):
        core.step(core.next_tick_s())
    return (time.perf_counter() - t0) / ticks


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench tick")
    parser.add_argument("--bots", type=int, help="bots (default: 64; 16 with --admin, which plays in real time)")
    parser.add_argument("--duration", type=float, default=3.0, help="simulated seconds per rate")
    parser.add_argument("--map", default="city")
    parser.add_argument("--rates", default="64,128")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--alone", action="store_true",
                        help="also time a second server fed the same datagrams, alone in the process")
    parser.add_argument("--repeat", type=int, default=3,
                        help="with --alone: lone replays; each tick's shortest time is kept")
    parser.add_argument("--phantom", action="store_true",
                        help="lone replays with phantoms on and off: tick p50/p99, their ratio, Phantoms.update's time")
    parser.add_argument("--crosshair", action="store_true",
                        help="lone replays with the crosshair probe on and off: tick p50/p99, their ratio, the probe's time")
    parser.add_argument("--admin", action="store_true",
                        help="tick p99 with the admin page polled once a second against no admin (real time, UDP)")
    parser.add_argument("--admin-duration", type=float, default=20.0, help="with --admin: seconds per arm and round")
    parser.add_argument("--admin-rounds", type=int, default=2, help="with --admin: rounds of the two arms, alternated")
    args = parser.parse_args(argv)
    if args.admin:
        from bench._admin_arm import admin_arms

        rate = int(args.rates.split(",")[0])
        return admin_arms(args.bots or 16, rate, args.admin_duration, max(1, args.admin_rounds), args.map, args.seed)
    args.bots = args.bots or 64
    repeat = max(1, args.repeat)
    out: dict[str, Any] = {"bots": args.bots, "map": args.map, "duration_s": args.duration}
    for rate in (int(r) for r in args.rates.split(",")):
        scenario = _scenario(args.bots, rate, args.duration, args.map, args.seed)
        if args.crosshair:
            import server.inputs

            arms = _ab_arms(scenario, _scenario(args.bots, rate, args.duration, args.map, args.seed, "crosshair"), repeat,
                            {"probe": (server.inputs, "probe_crosshairs")})
            print(
                f"{rate:>4} Hz, {args.bots} bots, lone replays, shortest of {repeat} per tick: crosshair probe on "
                f"p50 {arms['on_p50_ms']:.3f} ms p99 {arms['on_p99_ms']:.3f} ms, off p50 {arms['off_p50_ms']:.3f} ms "
                f"p99 {arms['off_p99_ms']:.3f} ms; on/off p50 {arms['on_p50_ms'] / arms['off_p50_ms']:.3f}, "
                f"p99 {arms['on_p99_ms'] / arms['off_p99_ms']:.3f}"
            )
            print(f"      per tick: probe_crosshairs mean {arms['probe_mean_ms']:.3f} ms (p99 {arms['probe_p99_ms']:.3f})")
            out.update({f"crosshair_{k}_{rate}": round(v, 4) for k, v in arms.items()})
            out[f"crosshair_on_off_p50_{rate}"] = round(arms["on_p50_ms"] / arms["off_p50_ms"], 3)
            out[f"crosshair_on_off_p99_{rate}"] = round(arms["on_p99_ms"] / arms["off_p99_ms"], 3)
            continue
        if args.phantom:
            from server.phantoms import Phantoms
            from server.visibility import VisibilityCuller

            arms = _ab_arms(scenario, _scenario(args.bots, rate, args.duration, args.map, args.seed, "phantom"), repeat,
                            {"phantoms": (Phantoms, "update"), "culler": (VisibilityCuller, "refresh")})
            print(
                f"{rate:>4} Hz, {args.bots} bots, lone replays, shortest of {repeat} per tick: phantoms on "
                f"p50 {arms['on_p50_ms']:.3f} ms p99 {arms['on_p99_ms']:.3f} ms, off p50 {arms['off_p50_ms']:.3f} ms "
                f"p99 {arms['off_p99_ms']:.3f} ms; on/off p50 {arms['on_p50_ms'] / arms['off_p50_ms']:.3f}, "
                f"p99 {arms['on_p99_ms'] / arms['off_p99_ms']:.3f}"
            )
            print(f"      per tick: Phantoms.update mean {arms['phantoms_mean_ms']:.3f} ms (p99 {arms['phantoms_p99_ms']:.3f}), "
                  f"culler refresh mean {arms['culler_mean_ms']:.3f} ms (p99 {arms['culler_p99_ms']:.3f}); "
                  f"phantoms / culler {arms['phantoms_mean_ms'] / arms['culler_mean_ms']:.2f}")
            print("      mean ms per phase, on / off (last replay): " + ", ".join(
                f"{p} {arms[f'on_{p}_ms']:.3f} / {arms[f'off_{p}_ms']:.3f}" for p in PHASES))
            out.update({f"phantom_{k}_{rate}": round(v, 4) for k, v in arms.items()})
            out[f"phantom_on_off_p50_{rate}"] = round(arms["on_p50_ms"] / arms["off_p50_ms"], 3)
            out[f"phantom_on_off_p99_{rate}"] = round(arms["on_p99_ms"] / arms["off_p99_ms"], 3)
            out[f"phantom_vs_culler_{rate}"] = round(arms["phantoms_mean_ms"] / arms["culler_mean_ms"], 3)
            continue
        if args.alone:
            result, alone, same = _played_then_alone(scenario, repeat)
        else:
            result = run_virtual(scenario)
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
        if args.alone:
            print(f"      server alone, same datagrams, shortest of {repeat} replays per tick: "
                  f"p50 {alone['p50_ms']:.2f} ms ({alone['p50_budget']:.0%}), "
                  f"p99 {alone['p99_ms']:.2f} ms ({alone['p99_budget']:.0%}); same report as with bots: {same}")
            out[f"alone_p50_ms_{rate}"] = round(alone["p50_ms"], 3)
            out[f"alone_p99_ms_{rate}"] = round(alone["p99_ms"], 3)
            out[f"alone_p99_budget_{rate}"] = round(alone["p99_budget"], 3)
            out[f"alone_same_report_{rate}"] = same
            out["alone_repeat"] = repeat
        phases = stats["phase_mean_ms"]
        print("      mean ms per phase: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
        out[f"phase_mean_ms_{rate}"] = {k: round(v, 3) for k, v in phases.items()}
    return out
