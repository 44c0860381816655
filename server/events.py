"""Events for operators: a small publish/subscribe API so a game mode can react in code.

Subscribers are plain callables, called synchronously inside the tick in subscription order. A
subscriber that raises is logged and counted, never allowed to break the tick.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PlayerConnected:
    """A client completed the handshake and got ``slot``."""

    slot: int
    name: str
    address: str
    time_s: float


@dataclass(frozen=True, slots=True)
class PlayerDisconnected:
    """A client left (``reason``: ``client``, ``timeout``, ``kicked``, ``shutdown``)."""

    slot: int
    name: str
    reason: str
    time_s: float


Handler = Callable[[Any], None]


class EventBus:
    """Typed publish/subscribe: ``subscribe(KillEvent, fn)`` or ``subscribe(None, fn)`` for all events."""

    def __init__(self) -> None:
        self._handlers: dict[type | None, list[Handler]] = {}
        self.errors: Counter[str] = Counter()

    def subscribe(self, event_type: type | None, handler: Handler) -> Callable[[], None]:
        """Call ``handler(event)`` for every published event of ``event_type`` (None: every event).

        Returns a function that removes the subscription.
        """
        self._handlers.setdefault(event_type, []).append(handler)

        def unsubscribe() -> None:
            handlers = self._handlers.get(event_type, [])
            if handler in handlers:
                handlers.remove(handler)

        return unsubscribe

    def has_subscribers(self) -> bool:
        """True when anyone listens (lets the tick skip building events nobody reads)."""
        return any(self._handlers.values())

    def publish(self, event: Any) -> None:
        """Deliver ``event`` to its type's subscribers, then to catch-all subscribers."""
        for key in (type(event), None):
            for handler in self._handlers.get(key, ()):
                try:
                    handler(event)
                except Exception:  # a game mode's bug must not stop the server
                    self.errors[type(event).__name__] += 1
                    log.exception("event subscriber failed on %s", type(event).__name__)
