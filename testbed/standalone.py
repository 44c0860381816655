"""The server alone and bots alone, over real UDP: what ``referee serve`` and ``referee bots`` run.

``serve`` runs the server core with the full detector suite behind a UDP socket until its
duration is over or it is cancelled (Ctrl-C), optionally recording a replay. ``run_bot_swarm``
connects N bots of one profile to any server (ours or another implementation of PROTOCOL.md),
through a loopback ``LinkProxy`` when link impairments are asked for.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from anticheat.judgement.operator import Operator
from anticheat.judgement.store import StoreConfig, open_store
from anticheat.suite import build_pipeline
from server.activity_log import ActivityLog
from server.admin.config import AdminConfig
from server.config import ServerConfig
from server.core import ServerCore
from server.events import EventBus
from server.metrics import MetricsConfig, MetricsServer
from server.player_sessions import PlayerSessions
from server.recording import ReplayWriter
from server.transport import TransportConfig, UdpServer
from testbed.link import PathConfig
from testbed.link_proxy import LinkProxy, ProxyConfig
from testbed.bot_factory import DefaultBotFactory
from testbed.match import (
    Deadline,
    MatchBook,
    ServerClock,
    plain,
    transport_stats,
)
from testbed.scenario import BotSpec
from world.geometry import MapGeometry
from world.mapfile import GameMap

__all__ = ["ServeStatus", "run_bot_swarm", "serve"]

log = logging.getLogger(__name__)

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ServeStatus:
    """Live figures of a running server: time_s (server time, s), players, kills, detections."""

    time_s: float
    players: int
    kills: int
    detections: int


async def serve(
    game_map: GameMap,
    *,
    tick_rate_hz: int = 64,
    bind: Address = ("127.0.0.1", 0),
    duration_s: float | None = None,
    seed: int = 0,
    replay_path: str | os.PathLike[str] | None = None,
    tolerances: Mapping[str, Mapping[str, Any]] | None = None,
    on_listening: Callable[[Address], None] | None = None,
    status: Callable[[ServeStatus], None] | None = None,
    status_every_s: float = 1.0,
    stop_on_sigint: bool = False,
    metrics: MetricsConfig | None = None,
    on_metrics_listening: Callable[[Address], None] | None = None,
    admin: AdminConfig | None = None,
    on_admin_listening: Callable[[str], None] | None = None,
    db: str | os.PathLike[str] | None = None,
    server_id: str | None = None,
) -> dict[str, Any]:
    """Run a server until ``duration_s`` (None: until cancelled); returns the core's report.

    Args:
        game_map: the map. tick_rate_hz: 64 or 128. bind: (host, port) to listen on.
        seed: the core's seed (spawns, spread). replay_path: record here (None: no recording).
        tolerances: detector override tables. on_listening: called with the bound address.
        status: called every ``status_every_s`` seconds with live figures.
        stop_on_sigint: Ctrl-C ends the run cleanly (report, replay completed) instead of
            interrupting it (Unix event loops only).
        metrics: serve Prometheus metrics there (``server.metrics``; None: no endpoint).
        on_metrics_listening: called with the metrics endpoint's bound address.
        admin: serve the admin API and page there (``server.admin``, on this event loop; None: none).
        on_admin_listening: called with the admin page's address (without the token).
        db: persist detections, decisions, reviews, lifetime profiles and sessions there (a
            path, ``sqlite:///`` or ``postgresql://`` URL; None: nothing persisted). With a
            database the pipeline's clock is wall time (epoch s), as stored times outlive the run;
            writes are committed within about half a second, and at the end.
        server_id: names this run in the stored sessions (default: ``serve-`` and a random id).

    Connects, disconnects, detections and sanction changes are logged at INFO on the
    ``server.activity_log`` logger. The report's ``udp`` holds the transport's counters
    (datagrams and bytes sent among them) and the kernel's drop count at the socket.
    """
    config = ServerConfig(tick_rate_hz=tick_rate_hz)
    clock = ServerClock()
    store = None if db is None else open_store(db, StoreConfig(flush_interval_s=0.5))
    if store is not None:
        clock.source = time.time
        log.info("detection store: %s", store.path)
    pipeline = build_pipeline(tolerances, clock=clock, store=store)
    operator = Operator(pipeline, follow_sessions=True)
    bus = EventBus()
    sessions = None if store is None else PlayerSessions(bus, store, server_id or f"serve-{secrets.token_hex(6)}")
    book = MatchBook(bus)
    recorder = None
    if replay_path is not None:
        header = {
            "kind": "referee-serve",
            "mode": "udp",
            "map": game_map.name,
            "map_source": game_map.source,
            "seed": seed,
            "tick_rate_hz": tick_rate_hz,
            "config": plain(config),
            "tolerances": plain(dict(tolerances or {})),
            "labels": [],
        }
        recorder = ReplayWriter(replay_path, header)
    core = ServerCore(
        config, game_map, secret=secrets.token_bytes(32), seed=seed, pipeline=pipeline, recorder=recorder, bus=bus
    )
    if store is None:
        clock.source = lambda: core.time_s
    deadline = Deadline(duration_s)
    server = UdpServer(core, TransportConfig(host=bind[0], port=bind[1]), on_tick=deadline)
    activity = ActivityLog(bus, pipeline)
    exporter = None
    admin_server = None
    try:
        await server.start()
        if metrics is not None:
            exporter = MetricsServer(core, server, metrics)
        if admin is not None:
            from server.admin.server import AdminServer  # the web stack only when asked for
            from server.admin.view import AdminView

            admin_server = AdminServer(AdminView(core, operator), admin)
            await admin_server.start()
    except BaseException:
        if admin_server is not None:
            await admin_server.stop()
            admin_server.view.close()
        await server.stop()
        activity.close()
        core.close()
        if sessions is not None:
            sessions.close()
        operator.close()
        raise
    if on_listening is not None:
        on_listening(server.address)
    if exporter is not None and on_metrics_listening is not None:
        on_metrics_listening(exporter.address)
    if admin_server is not None and on_admin_listening is not None:
        on_admin_listening(admin_server.url)

    async def report_status() -> None:
        while True:
            await asyncio.sleep(status_every_s)
            if status is not None:
                status(ServeStatus(core.time_s, len(book.names), book.kills, book.detections))

    ticker = asyncio.create_task(report_status(), name="serve-status") if status is not None else None

    async def persist() -> None:
        # On the loop's thread, between ticks: detector state is read where it is written.
        while True:
            await asyncio.sleep(0.25)
            operator.poll()

    saver = asyncio.create_task(persist(), name="serve-persist") if store is not None else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop_on_sigint:
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        await deadline.wait(stop)
    finally:
        if stop_on_sigint:
            loop.remove_signal_handler(signal.SIGINT)
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        if saver is not None:
            saver.cancel()
            await asyncio.gather(saver, return_exceptions=True)
        if exporter is not None:
            await asyncio.to_thread(exporter.close)
        if admin_server is not None:
            await admin_server.stop()
            admin_server.view.close()
        await server.stop()
        core.close()
        activity.close()
        if sessions is not None:
            sessions.close()
        operator.close()  # saves connected players' profiles, commits, closes the store
        report = core.report()
    report["udp"] = transport_stats(server)
    return report


async def run_bot_swarm(
    server: Address,
    game_map: GameMap | None = None,
    *,
    count: int,
    profile: str = "honest",
    skill: str = "average",
    ping_ms: float = 0.0,
    jitter_ms: float = 0.0,
    loss: float = 0.0,
    duration_s: float = 60.0,
    seed: int = 0,
    name_prefix: str | None = None,
    params: Mapping[str, Any] | None = None,
    connect_timeout_s: float | None = 5.0,
) -> list[Any]:
    """Connect ``count`` bots of ``profile`` to ``server`` for ``duration_s`` seconds.

    The bots play the server's map: one short handshake first (``bots.udp.probe_server``, a
    session named ``PREFIX-probe`` that leaves at once) reads the map the server runs. Without
    ``game_map`` the bots take that map if it is built in; a given ``game_map`` must carry the
    server's map name (``bots.udp.server_map``).

    With any impairment (ping, jitter, loss) the bots talk to a loopback ``LinkProxy`` that
    forwards to ``server``. Returns each bot's final ``bots.client.ClientStats``.

    Args:
        connect_timeout_s: give up (``bots.udp.NoAnswer``) when the server has answered no
            bot's handshake within this many seconds (s); None waits for the bots' own
            handshake timeout. Over an emulated link the handshake needs a round trip, and
            its resends (1 s, then 1.5x longer each) must get through the emulated loss.

    Raises:
        bots.udp.UnresolvedHost: the server's host name does not resolve (checked first).
        bots.udp.NoAnswer: no answer within ``connect_timeout_s``, naming ``server``.
        bots.udp.MapMismatch: the server runs another map than ``game_map``, or, without one,
            a map that is not built in.
        bots.udp.Refused: the server refused the probe's handshake (full, banned...).
    """
    from bots.client import ClientConfig
    from bots.udp import NoAnswer, probe_server, resolve_address, run_bots, server_map

    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    server = await resolve_address(server)
    prefix = name_prefix or profile
    probe_timeout_s = connect_timeout_s if connect_timeout_s is not None else ClientConfig().handshake_timeout_s
    info = await probe_server(server, name=f"{prefix[:26]}-probe", timeout_s=probe_timeout_s)
    game_map = server_map(info.map_name, game_map)
    path = PathConfig.from_ping(ping_ms, jitter_ms=jitter_ms, loss=loss)
    geometry = MapGeometry(game_map)
    factory = DefaultBotFactory()
    rngs = np.random.default_rng(seed).spawn(count + 1)
    bots = [
        factory(
            BotSpec(
                index=i,
                name=f"{prefix}-{i + 1}",
                group=0,
                profile=profile,
                skill=skill,
                params=dict(params or {}),
                path=path,
                ping_ms=ping_ms,
                jitter_ms=jitter_ms,
                loss=loss,
            ),
            game_map=game_map,
            geometry=geometry,
            tick_rate_hz=64,
            rng=rngs[i],
        )
        for i in range(count)
    ]
    impaired = ping_ms > 0 or jitter_ms > 0 or loss > 0
    if not impaired:
        return await run_bots(server, bots, duration_s, connect_timeout_s=connect_timeout_s)  # type: ignore[arg-type]
    (proxy_seed,) = rngs[count].integers(0, 2**63 - 1, size=1).tolist()
    async with LinkProxy(ProxyConfig(upstream=server, default=path, seed=proxy_seed)) as proxy:
        try:
            stats = await run_bots(proxy.address, bots, duration_s, connect_timeout_s=connect_timeout_s)  # type: ignore[arg-type]
        except NoAnswer as exc:
            raise NoAnswer(server, exc.waited_s) from None  # the server's address, not the proxy's
        # The bots' DISCONNECTs are still in the emulated link: let them arrive before the
        # proxy closes, or the server only notices the bots left when they time out.
        await asyncio.sleep(ping_ms / 2000.0 + 4.0 * jitter_ms / 1000.0 + 0.05)
        return stats
