"""A UDP match's bots in a process of their own.

One Python process cannot run the server at 64 Hz and sixteen bots at 64 Hz each in real time on a
two-core machine: the bots fall behind, their commands bunch up and measured round trips climb to
hundreds of milliseconds. ``testbed.match.run_udp`` therefore puts the bots, with their link
proxies, in a child process (``multiprocessing``, spawn start method: no inherited event loop or
sockets) and keeps the server alone in the parent, so the two share nothing but loopback UDP,
like a real server and its clients.

Handshake over a pipe: the child builds its bots (the slow part: imports, maps, navigation
graphs) and reports ``ready``; the parent then starts the server and sends ``go`` with the
server's address; the child plays for the scenario's duration and reports ``done`` with each
group's totals (``bot_totals``: bots, commands, ticks skipped), or ``error`` with a message.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testbed.bot_factory import DefaultBotFactory
from testbed.link_proxy import LinkProxy, ProxyConfig
from testbed.scenario import Scenario

__all__ = ["BotProcess", "BotProcessError", "bot_totals"]

log = logging.getLogger(__name__)

Address = tuple[str, int]


class BotProcessError(RuntimeError):
    """The bot process failed or did not answer in time."""


@dataclass(frozen=True, slots=True)
class _Plan:
    scenario: Scenario
    link_seeds: tuple[int, ...]
    log_level: int


def _child(conn: multiprocessing.connection.Connection, plan: _Plan) -> None:
    """Entry point of the bot process."""
    logging.basicConfig(level=plan.log_level, format="%(levelname)s %(name)s[bots]: %(message)s")
    try:
        from testbed.match import build_bots, server_config, testbed_streams
        from world.geometry import MapGeometry

        scenario = plan.scenario
        specs = scenario.players()
        game_map = scenario.load_map()
        _, bots_rng, _, _ = testbed_streams(scenario.seed)
        bots = build_bots(specs, bots_rng, DefaultBotFactory(), game_map, MapGeometry(game_map),
                          server_config(scenario).tick_rate_hz)
        conn.send(("ready", len(bots)))
        msg = conn.recv()
        if msg[0] != "go":
            return
        upstream: Address = msg[1]
        groups = [[bot for spec, bot in zip(specs, bots, strict=True) if spec.group == g]
                  for g in range(len(scenario.bots))]
        stats = asyncio.run(_play(scenario, upstream, plan.link_seeds, groups))
        conn.send(("done", stats))
    except BaseException as exc:  # report everything to the parent, which decides
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except (OSError, ValueError):
            pass
        raise
    finally:
        conn.close()


async def _play(scenario: Scenario, upstream: Address, link_seeds: Sequence[int], groups: list[list[Any]]) -> list[Any]:
    from bots.udp import run_bots

    proxies: list[LinkProxy] = []
    try:
        for group, seed in zip(scenario.bots, link_seeds, strict=True):
            proxy = LinkProxy(ProxyConfig(upstream=upstream, default=group.path(), seed=seed))
            await proxy.start()
            proxies.append(proxy)
        results = await asyncio.gather(
            *(run_bots(proxy.address, members, scenario.duration_s) for proxy, members in zip(proxies, groups, strict=True)),
            return_exceptions=True,
        )
    finally:
        for proxy in proxies:
            await proxy.stop()
    out = []
    for g, r in enumerate(results):
        if isinstance(r, BaseException):
            log.error("bot group %d failed: %r", g, r)
            out.append(None)
        else:
            out.append(bot_totals(r))
    return out


def bot_totals(stats: Sequence[Any]) -> dict[str, int]:
    """A group's ``bots.client.ClientStats`` summed: bots, commands sent, ticks skipped (a
    starved process plays fewer ticks than real time asks for)."""
    return {"bots": len(stats), "commands": sum(s.commands for s in stats),
            "ticks_skipped": sum(s.ticks_skipped for s in stats)}


class BotProcess:
    """The parent's handle on the bot process (use ``start``, ``go``, ``finish``)."""

    def __init__(self, scenario: Scenario, link_seeds: Sequence[int]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        plan = _Plan(scenario, tuple(int(s) for s in link_seeds), logging.getLogger().getEffectiveLevel())
        self._proc = ctx.Process(target=_child, args=(child_conn, plan), name="referee-bots", daemon=True)
        self._child_conn = child_conn

    async def _recv(self, timeout_s: float) -> tuple[Any, ...]:
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(None, self._conn.poll, timeout_s)
        if not ready:
            raise BotProcessError(f"bot process silent for {timeout_s:.0f} s")
        try:
            msg = self._conn.recv()
        except EOFError as exc:
            raise BotProcessError(f"bot process ended (exit code {self._proc.exitcode})") from exc
        if msg[0] == "error":
            raise BotProcessError(f"bot process failed: {msg[1]}")
        return tuple(msg)

    async def start(self, timeout_s: float = 120.0) -> int:
        """Start the process and wait until its bots are built; returns how many."""
        self._proc.start()
        self._child_conn.close()
        msg = await self._recv(timeout_s)
        return int(msg[1])

    def go(self, upstream: Address) -> None:
        """Let the bots connect to the server at ``upstream`` and play."""
        self._conn.send(("go", upstream))

    async def finish(self, timeout_s: float) -> list[Any]:
        """Wait for the bots' end (at most ``timeout_s``); the process is stopped either way."""
        try:
            msg = await self._recv(timeout_s)
            return list(msg[1])
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the process now if it still runs."""
        if self._proc.pid is None:
            return
        try:
            self._conn.send(("stop",))
        except (OSError, ValueError):
            pass
        self._proc.join(timeout=2.0)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=2.0)
        self._conn.close()
