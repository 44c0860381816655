"""A match: one server core and a scenario's bots, in virtual time or over real UDP.

The orchestration lives here, on top of ``server/`` and ``bots/`` (DESIGN: neither imports the
other). Both modes build the same things from a scenario and its seed:

* the server core with the full detector suite (``anticheat.suite``) and, on request, a replay
  recorder whose header carries the scenario, the server config and every bot's ground truth;
* one bot client per scenario bot, made by a bot factory (default: ``bots.client.BotClient``
  with the profile's hooks), each behind its own emulated link.

Virtual mode runs them in ``testbed.virtual.VirtualNetwork`` (deterministic: the same seed gives
the same replay file byte for byte). UDP mode serves the core with ``server.transport.UdpServer``,
puts one ``LinkProxy`` per bot group in front of it (one ``LinkPair`` per bot), and runs the
bots on their own sockets with ``bots.udp.run_bots``, in real time.

After the match the replay header is completed with the slot bindings seen during the match
(who held which slot, when), which the events themselves, keyed by slot, do not carry; the
rewrite is atomic, and a match cut off before it leaves a valid replay without them.

Seeds: everything derives from ``scenario.seed``: the core gets it as is, and the testbed's own
streams (links, bots, start phases, the HMAC secret in virtual mode) come from a ``SeedSequence``
with a spawn key of their own, so they never coincide with the core's children.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anticheat.events import Detection, KillEvent
from anticheat.judgement.operator import Operator
from anticheat.judgement.store import open_store
from anticheat.pipeline import DetectionPipeline
from anticheat.suite import build_pipeline
from anticheat.tolerances import apply_overrides
from server.config import ServerConfig
from server.core import ServerCore
from server.events import EventBus, PlayerConnected, PlayerDisconnected
from server.player_sessions import PlayerSessions
from server.recording import ReplayWriter
from server.transport import TransportConfig, UdpServer
from testbed.bot_factory import BotFactory, DefaultBotFactory
from testbed.bot_process import BotProcess, BotProcessError, bot_totals
from testbed.link_proxy import LinkProxy, ProxyConfig
from testbed.report import NO_SANCTION, DetectionRecord, MatchResult, PlayerResult, detection_counts
from testbed.scenario import Scenario, ScenarioError, thaw
from testbed.virtual import ClientEndpoint, VirtualNetwork, VirtualProgress
from world.geometry import MapGeometry

__all__ = [
    "Deadline",
    "MatchBook",
    "MatchProgress",
    "MatchSetup",
    "ServerClock",
    "plain",
    "run_udp",
    "run_virtual",
    "build_bots",
    "server_config",
    "testbed_streams",
    "transport_stats",
]

log = logging.getLogger(__name__)

_TESTBED_SPAWN_KEY = (0x7E57BED,)
"""Spawn key of the testbed's seed sequence (the core spawns children (0,), (1,), (2,))."""
REPLAY_KIND = "referee-match"


# --- progress and bookkeeping ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchProgress:
    """Live figures of a running match.

    Attributes: now_s (match time, s), duration_s (s), wall_s (s since the match started),
        connected (players in the server), kills, detections (so far), mode.
    """

    now_s: float
    duration_s: float
    wall_s: float
    connected: int
    kills: int
    detections: int
    mode: str

    @property
    def speedup(self) -> float:
        """Match seconds per wall second so far."""
        return self.now_s / self.wall_s if self.wall_s > 0 else math.inf


ProgressCallback = Callable[[MatchProgress], None]


class MatchBook:
    """Follows the server's event bus: slot bindings, kills and detections by player name.

    A detection about a slot whose player left (the detectors' flush at the end delivers late)
    counts for that player as long as nobody else took the slot.
    """

    def __init__(self, bus: EventBus) -> None:
        self.names: dict[int, str] = {}
        self.slots: dict[str, int] = {}
        self.former: dict[int, str] = {}
        """Slot -> the name of the player who last left it (until someone takes it)."""
        self.rows: dict[str, list[tuple[str, str, float]]] = {}
        self.details: dict[str, list[DetectionRecord]] = {}
        """Every detection by player name, in arrival order, with reason, value and evidence."""
        self.kills = 0
        self.detections = 0
        bus.subscribe(PlayerConnected, self._connected)
        bus.subscribe(PlayerDisconnected, self._disconnected)
        bus.subscribe(KillEvent, self._kill)
        bus.subscribe(Detection, self._detection)

    def _connected(self, e: PlayerConnected) -> None:
        self.names[e.slot] = e.name
        self.slots[e.name] = e.slot
        self.former.pop(e.slot, None)

    def _disconnected(self, e: PlayerDisconnected) -> None:
        name = self.names.pop(e.slot, None)
        if name is not None:
            self.former[e.slot] = name

    def _kill(self, _: KillEvent) -> None:
        self.kills += 1

    def _detection(self, d: Detection) -> None:
        self.detections += 1
        name = self.names.get(d.player) or self.former.get(d.player) or f"slot:{d.player}"
        self.rows.setdefault(name, []).append((d.detector, d.kind, d.time_s))
        self.details.setdefault(name, []).append(DetectionRecord.of(d))


class ServerClock:
    """The pipeline's clock: the server's time, readable before the core exists."""

    def __init__(self) -> None:
        self.source: Callable[[], float] = lambda: 0.0

    def __call__(self) -> float:
        return self.source()


# --- setup ------------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """Msgpack/JSON-able copy of configs: dataclasses to dicts, enums to values, sets to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def server_config(scenario: Scenario) -> ServerConfig:
    """The server configuration of a scenario: its tick rate and its ``[server]`` overrides."""
    base = ServerConfig(tick_rate_hz=scenario.tick_rate_hz, max_clients=max(64, scenario.bot_count))
    try:
        return apply_overrides(base, thaw(scenario.server), "server")
    except ValueError as exc:
        raise ScenarioError(f"{scenario.source}: {exc}") from exc


def testbed_streams(seed: int) -> tuple[np.random.Generator, ...]:
    """The testbed's generators for a scenario seed: links, bots, start phases, HMAC secret."""
    root = np.random.SeedSequence(seed, spawn_key=_TESTBED_SPAWN_KEY)
    return tuple(np.random.default_rng(ss) for ss in root.spawn(4))


def build_bots(specs: Sequence[Any], bots_rng: np.random.Generator, factory: BotFactory, game_map: Any,
               geometry: MapGeometry, tick_rate_hz: int) -> list[ClientEndpoint]:
    """One client per bot spec, each with its own generator spawned from ``bots_rng`` in order."""
    rngs = bots_rng.spawn(len(specs))
    return [
        factory(spec, game_map=game_map, geometry=geometry, tick_rate_hz=tick_rate_hz, rng=rng)
        for spec, rng in zip(specs, rngs, strict=True)
    ]


class MatchSetup:
    """Everything a match builds from a scenario, before any clock runs.

    Attributes: scenario, specs (the bots), config, game_map, geometry, pipeline, bus, core,
        recorder (None without a replay), links_rng / bots_rng / phase_rng: the testbed's streams;
        store, operator, sessions: the persistence (None without a database).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        mode: str,
        replay_path: str | os.PathLike[str] | None = None,
        secret: bytes | None = None,
        db: str | os.PathLike[str] | None = None,
    ) -> None:
        self.scenario = scenario
        self.mode = mode
        self.specs = scenario.players()
        self.config = server_config(scenario)
        self.game_map = scenario.load_map()
        self.geometry = MapGeometry(self.game_map)
        self.links_rng, self.bots_rng, self.phase_rng, secret_rng = testbed_streams(scenario.seed)
        if secret is None:
            secret = secret_rng.bytes(32)
        self.clock = ServerClock()
        # With a database, stored times are epoch seconds: match time from the wall time at setup.
        started = time.time() if db is not None else 0.0
        self.clock.source = lambda: started
        self.store = None if db is None else open_store(db)
        self.pipeline: DetectionPipeline = build_pipeline(thaw(scenario.tolerances), clock=self.clock, store=self.store)
        self.bus = EventBus()
        self.operator = None
        self.sessions = None
        if self.store is not None:
            self.operator = Operator(self.pipeline, follow_sessions=True)
            # Session times on the pipeline's clock: in virtual time, match time from the start.
            self.sessions = PlayerSessions(
                self.bus, self.store, f"match-{scenario.name}-{secrets.token_hex(6)}", wall_clock=self.clock
            )
        self.book = MatchBook(self.bus)
        self.replay_path = None if replay_path is None else Path(replay_path)
        self.recorder = None if self.replay_path is None else ReplayWriter(self.replay_path, self.header())
        try:
            self.core = ServerCore(
                self.config,
                self.game_map,
                secret=secret,
                seed=scenario.seed,
                pipeline=self.pipeline,
                recorder=self.recorder,
                bus=self.bus,
                geometry=self.geometry,
            )
        except BaseException:
            if self.recorder is not None:
                self.recorder.close()
            if self.operator is not None:
                self.operator.close()
            raise
        core = self.core
        self.clock.source = lambda: started + core.time_s

    def header(self) -> dict[str, Any]:
        """The replay header: what was played, with which settings, and who was who."""
        s = self.scenario
        return {
            "kind": REPLAY_KIND,
            "mode": self.mode,
            "scenario": s.summary(),
            "map": self.game_map.name,
            "map_source": self.game_map.source,
            "seed": s.seed,
            "tick_rate_hz": s.tick_rate_hz,
            "duration_s": s.duration_s,
            "config": plain(self.config),
            "tolerances": thaw(s.tolerances),
            "labels": [spec.label() for spec in self.specs],
        }

    def make_bots(self, factory: BotFactory) -> list[ClientEndpoint]:
        """One client per bot, each with its own generator (spawned in scenario order)."""
        return build_bots(self.specs, self.bots_rng, factory, self.game_map, self.geometry, self.config.tick_rate_hz)

    def progress(self, now_s: float, wall_s: float) -> MatchProgress:
        """Live figures at match time ``now_s``."""
        return MatchProgress(
            now_s=now_s,
            duration_s=self.scenario.duration_s,
            wall_s=wall_s,
            connected=len(self.book.names),
            kills=self.book.kills,
            detections=self.book.detections,
            mode=self.mode,
        )

    def close(self) -> None:
        """Close the core (detectors flushed, replay completed), then the sessions and the store."""
        self.core.close()
        if self.sessions is not None:
            self.sessions.close()
        if self.operator is not None:
            self.operator.close()

    def finish(self, duration_s: float, wall_s: float, extra_server: Mapping[str, Any] | None = None) -> MatchResult:
        """Close the core, the replay and the store; the result table's data."""
        self.close()
        report = self.core.report()
        # Everyone the server saw, those who left included; a player still connected at the end
        # wins over an earlier stay under the same name, a later stay over an earlier one.
        by_name: dict[str, dict[str, Any]] = {}
        for rec in sorted(report.get("players", []), key=lambda r: (bool(r.get("connected", True)), r.get("left_s") or 0.0)):
            by_name[rec["name"]] = rec
        players = []
        for spec in self.specs:
            rec = by_name.get(spec.name)
            sanction = (rec or {}).get("sanction") or {}
            players.append(
                PlayerResult(
                    name=spec.name,
                    profile=spec.profile,
                    skill=spec.skill,
                    ping_ms=spec.ping_ms,
                    jitter_ms=spec.jitter_ms,
                    loss=spec.loss,
                    slot=self.book.slots.get(spec.name),
                    connected=spec.name in self.book.slots,
                    rtt_ms=None if rec is None else rec.get("rtt_ms"),
                    measured_loss=None if rec is None else rec.get("loss"),
                    shots=int((rec or {}).get("shots", 0)),
                    hits=int((rec or {}).get("hits", 0)),
                    kills=int((rec or {}).get("kills", 0)),
                    deaths=int((rec or {}).get("deaths", 0)),
                    detections=detection_counts(self.book.rows.get(spec.name, [])),
                    sanction=_sanction_name(sanction, bool(self.book.rows.get(spec.name))),
                    sanction_score=sanction.get("score"),
                    left_s=None if rec is None or rec.get("connected", True) else rec.get("left_s"),
                    detection_list=tuple(self.book.details.get(spec.name, ())),
                )
            )
        server = {k: v for k, v in report.items() if k != "players"}
        if extra_server:
            server.update(extra_server)
        return MatchResult(
            scenario=self.scenario.name,
            source=self.scenario.source,
            mode=self.mode,
            map=self.game_map.name,
            seed=self.scenario.seed,
            tick_rate_hz=self.config.tick_rate_hz,
            duration_s=duration_s,
            wall_s=wall_s,
            players=tuple(players),
            server=server,
            replay=None if self.replay_path is None else os.fspath(self.replay_path),
        )


def _sanction_name(sanction: Mapping[str, Any], has_evidence: bool) -> str:
    level = sanction.get("recommended")
    if not level or (level == "log" and not has_evidence):
        return NO_SANCTION
    return str(level)


# --- the two modes --------------------------------------------------------------------------


def run_virtual(
    scenario: Scenario,
    replay_path: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    *,
    bot_factory: BotFactory | None = None,
    progress_every_s: float = 1.0,
    db: str | os.PathLike[str] | None = None,
) -> MatchResult:
    """Play ``scenario`` in virtual time, as fast as the CPU allows.

    Args:
        scenario: what to play. replay_path: where to record (None: no recording).
        progress: called every ``progress_every_s`` of match time (s).
        bot_factory: builds each bot's client (default: :class:`DefaultBotFactory`).
        db: persist the anti-cheat's conclusions and the sessions there (path or URL; None: not).
    """
    setup = MatchSetup(scenario, mode="virtual", replay_path=replay_path, db=db)
    bots = setup.make_bots(bot_factory or DefaultBotFactory())
    net = VirtualNetwork(setup.core, setup.links_rng)
    dt = setup.config.tick_dt_s
    for spec, bot in zip(setup.specs, bots, strict=True):
        # A phase within one tick so that the bots do not all send in lock-step.
        net.add_client(bot, spec.path, start_s=float(setup.phase_rng.uniform(0.0, dt)))

    def on_progress(p: VirtualProgress) -> None:
        if progress is not None:
            progress(setup.progress(p.now_s, p.wall_s))

    try:
        stats = net.run(scenario.duration_s, progress=on_progress if progress else None, progress_every_s=progress_every_s)
    except BaseException:
        # Keep what was recorded: the replay stays readable up to its last complete frame.
        setup.close()
        raise
    return setup.finish(
        scenario.duration_s,
        stats.wall_s,
        {
            "virtual": {
                "client_steps": stats.client_steps,
                "datagrams_up": stats.datagrams_up,
                "datagrams_down": stats.datagrams_down,
                "unroutable": stats.unroutable,
                "dropped_up": sum(up.dropped for up, _ in stats.links),
                "dropped_down": sum(down.dropped for _, down in stats.links),
            }
        },
    )


class Deadline:
    """``on_tick`` hook of ``server.transport.UdpServer``: fires once the core reaches a time.

    Attributes: duration_s: server time (s) to stop at (None: never); reached: set at the tick
        whose time is ``duration_s`` or later.
    """

    def __init__(self, duration_s: float | None) -> None:
        self.duration_s = duration_s
        self.reached = asyncio.Event()

    def __call__(self, core: ServerCore) -> None:
        # Tick times are multiples of 1/64 or 1/128 s, exact in binary: no tolerance needed.
        if self.duration_s is not None and core.time_s >= self.duration_s:
            self.reached.set()

    async def wait(self, stop: asyncio.Event | None = None) -> None:
        """Until the deadline is reached or ``stop`` is set."""
        waiters = [asyncio.ensure_future(self.reached.wait())]
        if stop is not None:
            waiters.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)


def transport_stats(server: UdpServer) -> dict[str, Any]:
    """The real-time transport's counters and its socket's kernel figures, plain
    (``UdpServer.stats``: datagrams read and source-limited, receive buffer, kernel drops)."""
    host, port = server.address
    return {"address": f"{host}:{port}", **server.stats()}


async def run_udp(
    scenario: Scenario,
    host: str = "127.0.0.1",
    port: int = 0,
    replay_path: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    *,
    bot_factory: BotFactory | None = None,
    bot_process: bool = True,
    progress_every_s: float = 0.5,
    db: str | os.PathLike[str] | None = None,
) -> MatchResult:
    """Play ``scenario`` over real UDP in real time (takes ``duration_s`` seconds).

    The server runs in ``server.transport.UdpServer`` on ``(host, port)``. Each bot group talks
    to its own ``LinkProxy`` (loopback) that forwards to the server through the group's emulated
    link, one ``LinkPair`` per bot; the bots run in ``bots.udp.run_bots``: in a process of their
    own (``testbed.bot_process``, the default) or, with ``bot_process=False`` or a custom
    ``bot_factory``, in this process beside the server. ``db``: as for :func:`run_virtual`.
    """
    from bots.udp import run_bots

    setup = MatchSetup(scenario, mode="udp", replay_path=replay_path, secret=secrets.token_bytes(32), db=db)
    link_seeds = [int(setup.links_rng.integers(0, 2**63 - 1)) for _ in scenario.bots]
    duration = scenario.duration_s
    child = BotProcess(scenario, link_seeds) if bot_process and bot_factory is None else None
    bots = [] if child is not None else setup.make_bots(bot_factory or DefaultBotFactory())
    deadline = Deadline(duration)
    server = UdpServer(setup.core, TransportConfig(host=host, port=port), on_tick=deadline)
    proxies: list[LinkProxy] = []
    stats: dict[str, Any] = {}
    try:
        if child is not None:
            await child.start()
        await server.start()
        wall_start = time.perf_counter()
        host_bound, port_bound = server.address
        upstream = ("127.0.0.1", port_bound) if host_bound in ("0.0.0.0", "::") else (host_bound, port_bound)
        bot_tasks = []
        if child is not None:
            child.go(upstream)
        else:
            for g, group in enumerate(scenario.bots):
                proxy = LinkProxy(ProxyConfig(upstream=upstream, default=group.path(), seed=link_seeds[g]))
                await proxy.start()
                proxies.append(proxy)
                members = [bot for spec, bot in zip(setup.specs, bots, strict=True) if spec.group == g]
                bot_tasks.append(asyncio.create_task(run_bots(proxy.address, members, duration), name=f"match-bots-{g}"))
        progress_task = None
        if progress is not None:
            progress_task = asyncio.create_task(
                _report_progress(setup, wall_start, progress, progress_every_s), name="match-progress"
            )
        finished = False
        try:
            await deadline.wait()
            finished = True
        finally:
            await server.stop()
            stats = transport_stats(server)
            if not finished:
                for task in bot_tasks:
                    task.cancel()
                if child is not None:
                    child.stop()
            # Normally the bots end on their own, within moments of the server's last tick.
            results: list[Any] = list(await asyncio.gather(*bot_tasks, return_exceptions=True))
            if child is not None and finished:
                try:
                    results = await child.finish(timeout_s=10.0)
                except BotProcessError as exc:
                    results = [exc]
            if progress_task is not None:
                progress_task.cancel()
                await asyncio.gather(progress_task, return_exceptions=True)
            totals = []
            for g, r in enumerate(results):
                if isinstance(r, BaseException) or r is None:
                    log.error("bot group %d failed: %r", g, r)
                else:
                    totals.append(r if isinstance(r, dict) else bot_totals(r))
            stats["bot_commands"] = sum(t["commands"] for t in totals)
            stats["bot_ticks_skipped"] = sum(t["ticks_skipped"] for t in totals)
    except BaseException:
        if child is not None:
            child.stop()
        setup.close()
        raise
    finally:
        for proxy in proxies:
            await proxy.stop()
        await server.stop()
    wall_s = time.perf_counter() - wall_start
    if progress is not None:
        progress(setup.progress(duration, wall_s))
    return setup.finish(duration, wall_s, {"udp": {**stats, "bot_process": child is not None}})


async def _report_progress(setup: MatchSetup, wall_start: float, progress: ProgressCallback, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        now = min(setup.core.time_s, setup.scenario.duration_s)
        progress(setup.progress(now, time.perf_counter() - wall_start))
