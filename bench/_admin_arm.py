"""``python -m bench tick --admin``: what the admin page costs the tick, against no admin.

Real time over real UDP (the admin is an HTTP server on the game server's event loop, which a
virtual-time match does not have): the bots play in a process of their own
(``testbed.bot_process``), the server alone in this one, as ``referee match`` runs them. Two arms
alternate, ``rounds`` times each, on the same scenario (honest bots and one speed hacker, so the
page has detections and a review item to show):

- ``none``: the server with its operator, no admin;
- ``admin``: the same plus ``server.admin`` on the loop, and a client in another process that
  polls what the open page polls, once a second: ``/api/state``, the open player's
  ``/api/players/{slot}`` and ``/api/detections?limit=12``.

Per arm: the tick's processing time (``core.tick_stats``: ``ServerCore.step`` only) and the
tick's completion lag (how long after its due time each tick's datagrams were out: what a
request handler that runs when a tick is due delays). Ratios are admin / none from the same run.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import secrets
from typing import Any

import numpy as np

from anticheat.judgement.operator import Operator
from bench._admin_poll import poll_page
from server.admin.config import AdminConfig, generate_token
from server.transport import TransportConfig, UdpServer
from testbed.bot_factory import profile_names
from testbed.bot_process import BotProcess
from testbed.match import Deadline, MatchSetup
from testbed.scenario import Scenario, parse_scenario_text

__all__ = ["admin_arms"]


def _scenario(bots: int, rate: int, duration_s: float, map_name: str, seed: int) -> Scenario:
    text = f"""
name = "bench-tick-admin-{rate}"
map = "{map_name}"
duration_s = {duration_s}
tick_rate_hz = {rate}
seed = {seed}
[[bots]]
count = {max(1, bots - 1)}
profile = "honest"
ping_ms = 60
jitter_ms = 5
[[bots]]
count = 1
profile = "speedhack"
ping_ms = 60
jitter_ms = 5
"""
    return parse_scenario_text(text, "bench-tick-admin.toml", profile_names())


async def _arm(scenario: Scenario, admin: bool, poll_every_s: float) -> dict[str, Any]:
    setup = MatchSetup(scenario, mode="udp", secret=secrets.token_bytes(32))
    operator = Operator(setup.pipeline)  # both arms: ``referee serve`` always has one
    core = setup.core
    link_seeds = [int(setup.links_rng.integers(0, 2**63 - 1)) for _ in scenario.bots]
    child = BotProcess(scenario, link_seeds)
    deadline = Deadline(scenario.duration_s)
    lags: list[float] = []
    udp: UdpServer

    def on_tick(c: Any) -> None:
        lags.append(udp.now_s() - c.time_s)
        deadline(c)

    udp = UdpServer(core, TransportConfig(host="127.0.0.1", port=0), on_tick=on_tick)
    admin_server = poller = stop = results = None
    try:
        await child.start()
        if admin:
            # Everything the admin arm starts (the app, the poller process and its first request)
            # is running before the first tick: only the steady state is compared.
            from server.admin.server import AdminServer
            from server.admin.view import AdminView

            token = generate_token()
            admin_server = AdminServer(AdminView(core, operator), AdminConfig(token=token))
            await admin_server.start()
            ctx = multiprocessing.get_context("spawn")
            stop, ready, results = ctx.Event(), ctx.Event(), ctx.Queue()
            poller = ctx.Process(target=poll_page, args=(admin_server.url, token, poll_every_s, stop, ready, results),
                                 daemon=True)
            poller.start()
            if not await asyncio.to_thread(ready.wait, 60.0):
                raise RuntimeError("the admin poller never answered")
        await udp.start()
        child.go(udp.address)
        await deadline.wait()
    finally:
        await udp.stop()
        await child.finish(timeout_s=20.0)
        polled: tuple[list[float], int] = ([], 0)
        if poller is not None and stop is not None and results is not None:
            stop.set()
            polled = await asyncio.to_thread(results.get, True, 10.0)
            poller.join(5.0)
        if admin_server is not None:
            await admin_server.stop()
            admin_server.view.close()
        core.close()
    return {
        "durations_s": core.tick_stats.durations_s(),
        "lags_s": np.asarray(lags),
        "overruns": core.tick_stats.overruns,
        "ticks": core.tick_stats.ticks,
        "detections": sum(sum(c.values()) for c in core.detections.values()),
        "polls": len(polled[0]),
        "poll_failures": polled[1],
        "poll_ms": float(np.mean(polled[0]) * 1e3) if polled[0] else None,
    }


def _p(values: list[np.ndarray], q: float) -> float:
    return float(np.percentile(np.concatenate(values), q)) * 1e3


def admin_arms(bots: int, rate: int, duration_s: float, rounds: int, map_name: str, seed: int,
               poll_every_s: float = 1.0) -> dict[str, Any]:
    """Alternate the two arms ``rounds`` times; print and return p50/p99 (ms) and the ratios."""
    scenario = _scenario(bots, rate, duration_s, map_name, seed)
    arms: dict[str, list[dict[str, Any]]] = {"none": [], "admin": []}
    for _ in range(rounds):
        for name in ("none", "admin"):
            arms[name].append(asyncio.run(_arm(scenario, name == "admin", poll_every_s)))
    out: dict[str, Any] = {"bots": bots, "map": map_name, "rate": rate, "arm_duration_s": duration_s,
                           "rounds": rounds, "poll_every_s": poll_every_s}
    for name, runs in arms.items():
        ticks = [r["durations_s"] for r in runs]
        lags = [r["lags_s"] for r in runs]
        out[f"{name}_tick_p50_ms"] = round(_p(ticks, 50), 3)
        out[f"{name}_tick_p99_ms"] = round(_p(ticks, 99), 3)
        out[f"{name}_lag_p50_ms"] = round(_p(lags, 50), 3)
        out[f"{name}_lag_p99_ms"] = round(_p(lags, 99), 3)
        out[f"{name}_overruns"] = sum(r["overruns"] for r in runs)
        out[f"{name}_ticks"] = sum(r["ticks"] for r in runs)
        out[f"{name}_detections"] = sum(r["detections"] for r in runs)
    polls = arms["admin"]
    out["admin_polls"] = sum(r["polls"] for r in polls)
    out["admin_poll_failures"] = sum(r["poll_failures"] for r in polls)
    poll_ms = [r["poll_ms"] for r in polls if r["poll_ms"] is not None]
    out["admin_poll_ms"] = round(float(np.mean(poll_ms)), 2) if poll_ms else None
    out["tick_p99_ratio"] = round(out["admin_tick_p99_ms"] / out["none_tick_p99_ms"], 3)
    out["lag_p99_ratio"] = round(out["admin_lag_p99_ms"] / out["none_lag_p99_ms"], 3)
    budget_ms = 1000.0 / rate
    print(f"{rate:>4} Hz, {bots} bots, {rounds} x {duration_s:g} s per arm, page polled every {poll_every_s:g} s:")
    for name in ("none", "admin"):
        print(f"      {name:>5}: tick p50 {out[f'{name}_tick_p50_ms']:.2f} ms, p99 {out[f'{name}_tick_p99_ms']:.2f} ms "
              f"({out[f'{name}_tick_p99_ms'] / budget_ms:.0%} of {budget_ms:.2f} ms); completion lag p50 "
              f"{out[f'{name}_lag_p50_ms']:.2f} ms, p99 {out[f'{name}_lag_p99_ms']:.2f} ms; "
              f"overruns {out[f'{name}_overruns']}/{out[f'{name}_ticks']}")
    print(f"      admin/none: tick p99 x{out['tick_p99_ratio']:.2f}, completion lag p99 x{out['lag_p99_ratio']:.2f}; "
          f"{out['admin_polls']} polls ({out['admin_poll_failures']} failed), {out['admin_poll_ms']} ms per poll")
    return out
