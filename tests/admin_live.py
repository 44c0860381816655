"""A live server with the admin page for the admin tests: a real core behind a real UDP socket,
real bots (a speed hacker and an honest player) over loopback, and the admin API on uvicorn on
the same event loop, reached over TCP with httpx."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from anticheat.judgement.operator import Operator
from anticheat.suite import build_pipeline
from server.admin.config import AdminConfig, generate_token
from server.admin.server import AdminServer
from server.admin.view import AdminView
from server.config import ServerConfig
from server.core import ServerCore
from server.transport import TransportConfig, UdpServer
from testbed.match import ServerClock
from testbed.standalone import run_bot_swarm
from world.mapfile import builtin_map

REVIEW_EARLY: Mapping[str, Mapping[str, Any]] = {"sanctions": {"monitor_threshold": 0.1, "kick_threshold": 0.2}}
"""The default policy caps one evidence family at 0.6, below its 0.7 KICK: a lone speed hacker
never reaches review. A low KICK threshold lets its first movement detection (within seconds)
open a review item."""

CHEATER = "cheater-1"
HONEST = "honest-1"


@dataclass
class LiveAdmin:
    """The running parts, and an httpx client that sends the token."""

    core: ServerCore
    operator: Operator
    view: AdminView
    udp: UdpServer
    admin: AdminServer
    token: str
    client: httpx.AsyncClient
    bots: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.admin.url

    async def get(self, path: str) -> Any:
        response = await self.client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    async def slot_of(self, name: str) -> int:
        players = await self.get("/api/players")
        return next(p["slot"] for p in players if p["name"] == name)

    async def pending_item(self, player: str) -> dict[str, Any]:
        """The pending review item of ``player``, once there is one."""

        async def found() -> dict[str, Any] | None:
            review = await self.get("/api/review")
            return next((i for i in review["pending"] if i["player"] == player), None)

        return await wait_for(found, f"a pending review item for {player}")


async def wait_for(probe: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 90.0) -> Any:
    """Poll ``probe`` every 0.2 s until it returns something truthy; fail after ``timeout_s`` s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def live_admin(duration_s: float = 300.0, map_name: str = "corridors") -> AsyncIterator[LiveAdmin]:
    """Start the server, the admin and the two bots; stop everything on exit."""
    game_map = builtin_map(map_name)
    clock = ServerClock()
    # AimDetect is left out: these tests are about the admin, not a model file's version.
    pipeline = build_pipeline(REVIEW_EARLY, model=None, clock=clock)
    operator = Operator(pipeline)
    core = ServerCore(ServerConfig(tick_rate_hz=64), game_map, secret=secrets.token_bytes(32), seed=3,
                      pipeline=pipeline)
    clock.source = lambda: core.time_s
    udp = UdpServer(core, TransportConfig(host="127.0.0.1", port=0))
    await udp.start()
    view = AdminView(core, operator)
    token = generate_token()
    admin = AdminServer(view, AdminConfig(host="127.0.0.1", port=0, token=token))
    await admin.start()
    # A fresh connection per request: uvicorn closes a connection idle for 5 s, and a request
    # sent on it as it closes fails with "Server disconnected" (browsers retry such a request;
    # httpx does not). CI met it once, the probe idle while the browser worked.
    client = httpx.AsyncClient(base_url=admin.url, headers={"Authorization": f"Bearer {token}"}, timeout=10.0,
                               limits=httpx.Limits(max_keepalive_connections=0))
    live = LiveAdmin(core, operator, view, udp, admin, token, client)
    for profile, prefix in (("speedhack", "cheater"), ("honest", "honest")):
        live.bots.append(asyncio.create_task(run_bot_swarm(
            udp.address, game_map, count=1, profile=profile, duration_s=duration_s, name_prefix=prefix, seed=7)))
    try:
        # Both bots connected first: on a cold numba cache their first ticks compile kernels and
        # hold the shared event loop for seconds, long enough for uvicorn to drop an idle
        # keep-alive connection under a test's second request.
        async def connected() -> bool:
            return len(core.live_players()) >= 2

        await wait_for(connected, "both bots connected", timeout_s=180.0)
        yield live
    finally:
        for task in live.bots:
            task.cancel()
        await asyncio.gather(*live.bots, return_exceptions=True)
        await client.aclose()
        await admin.stop()
        view.close()
        await udp.stop()
        core.close()
