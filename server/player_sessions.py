"""Each player's sessions on this server, written to the detection store.

A row per stay: the player key (the name the client gave), name, slot, address, this server's
``server_id``, wall-clock connect and disconnect times and the reason for leaving. Sessions still
open when the server closes are closed with reason ``shutdown``; a server killed outright leaves
them open (``disconnected_at`` NULL), which is how a reader tells a crash from a departure.
The writes go through the store's buffer (no database access inside the tick).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from anticheat.judgement.store import DetectionStore
from server.events import EventBus, PlayerConnected, PlayerDisconnected

__all__ = ["PlayerSessions"]


class PlayerSessions:
    """Writes PlayerConnected / PlayerDisconnected of ``bus`` as sessions of ``server_id`` to ``store``.

    Args:
        bus: the core's event bus. store: where the rows go.
        server_id: names this server run or match in every row.
        wall_clock: epoch seconds (injected for tests).
    """

    def __init__(
        self,
        bus: EventBus,
        store: DetectionStore,
        server_id: str,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.server_id = server_id
        self._wall = wall_clock
        self._open: dict[int, str] = {}
        self._unsubscribe = [
            bus.subscribe(PlayerConnected, self._connected),
            bus.subscribe(PlayerDisconnected, self._disconnected),
        ]

    def _connected(self, e: PlayerConnected) -> None:
        session_id = uuid.uuid4().hex
        self._open[e.slot] = session_id
        self.store.open_session(session_id, e.name, e.name, e.slot, e.address, self.server_id, self._wall())

    def _disconnected(self, e: PlayerDisconnected) -> None:
        session_id = self._open.pop(e.slot, None)
        if session_id is not None:
            self.store.close_session(session_id, self._wall(), e.reason)

    def close(self) -> None:
        """Close the sessions still open (reason ``shutdown``) and stop listening."""
        now = self._wall()
        for session_id in self._open.values():
            self.store.close_session(session_id, now, "shutdown")
        self._open.clear()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
