"""Run the admin application with uvicorn on the game server's own event loop.

uvicorn's ``Server.serve()`` runs as one more task of the loop that ticks the game, so a request
handler never runs during a tick (see :mod:`server.admin.app`). The socket is bound here (port 0
picks a free one, and the address is known before the first request); uvicorn's own signal
handling is switched off, because the game server owns Ctrl-C, and so is its access log, because
the page's first address may carry the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator

import uvicorn

from server.admin.app import create_app
from server.admin.config import AdminConfig
from server.admin.view import AdminView

__all__ = ["AdminConfig", "AdminServer"]

log = logging.getLogger(__name__)


class _LoopServer(uvicorn.Server):
    """uvicorn's server without its signal handlers (the game server handles signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class AdminServer:
    """The admin API and page over ``view``, served on the running loop.

    Use ``await start()`` / ``await stop()`` or ``async with``.
    """

    def __init__(self, view: AdminView, config: AdminConfig) -> None:
        self.view = view
        self.config = config
        self.app = create_app(view, config.token)
        self._server: _LoopServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._address: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        if self._address is None:
            raise RuntimeError("admin server not started")
        return self._address

    @property
    def url(self) -> str:
        """The page's address (without the token)."""
        host, port = self.address
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    async def start(self) -> None:
        """Bind and start serving; returns once uvicorn accepts connections."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.config.host, self.config.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        family, kind, proto, _, sockaddr = infos[0]
        # The protocol number matters: asyncio sets TCP_NODELAY only on sockets whose proto is
        # IPPROTO_TCP, and without it every response waits ~40 ms (Nagle against delayed ACKs).
        sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(64)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._address = sock.getsockname()[:2]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            access_log=False,
            log_config=None,
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        server = _LoopServer(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="admin-http")
        while not server.started:
            if self._task.done():
                sock.close()
                self._task.result()  # raises what stopped it
                raise RuntimeError("the admin server stopped while starting")
            await asyncio.sleep(0.01)
        log.info("admin page on %s", self.url)

    async def stop(self) -> None:
        """Stop serving (open connections get a second to finish)."""
        server, task = self._server, self._task
        self._server = self._task = None
        if server is None or task is None:
            return
        server.should_exit = True
        try:
            await asyncio.wait_for(task, timeout=5.0)
        except asyncio.TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> AdminServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
