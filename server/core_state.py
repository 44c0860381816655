"""What the tick's phases see of the server core: :class:`CoreState`, the core's parts and the
tick's running state, so that the phase modules (``clients``, ``inputs``, ``shots``,
``detection``, ``snapshot_send``...) take the core as an argument without importing it.

The attributes with a leading underscore are the core's internals shared with its phases only
(the tick's events and outgoing datagrams, the baits...); everything else is public on
``server.core.ServerCore``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from anticheat.events import SessionEvent
from anticheat.pipeline import DetectionPipeline
from lagcomp.history import TickHistory
from lagcomp.hitreg import BaitTargets
from physics.validation import MovementValidator, TimerBalance
from physics.weapon_state import WeaponState
from server import protocol as proto
from server.config import ServerConfig
from server.events import EventBus
from server.handshake import Handshake
from server.netstats import NetStats
from server.phantoms import Phantoms
from server.recording import ReplayWriter
from server.session import Address, ClientSession
from server.snapshots import SnapshotBuilder
from server.tick_stats import TickStats
from server.visibility import VisibilityCuller
from world.geometry import MapGeometry
from world.mapfile import GameMap
from world.state import WorldState

if TYPE_CHECKING:
    from server.clients import DepartedPlayer
    from server.shots import Bait

Outgoing = list[tuple[Address, bytes]]
"""Datagrams to send: (address, datagram) pairs."""


class CoreState(Protocol):
    """The server core as its phases use it (``server.core.ServerCore`` is the one implementation)."""

    config: ServerConfig
    map: GameMap
    geometry: MapGeometry
    world: WorldState
    weapons: WeaponState
    validator: MovementValidator
    timer: TimerBalance
    history: TickHistory
    culler: VisibilityCuller
    phantoms: Phantoms
    netstats: NetStats
    handshake: Handshake
    snapshots: SnapshotBuilder
    pipeline: DetectionPipeline | None
    recorder: ReplayWriter | None
    bus: EventBus
    sessions: dict[Address, ClientSession]
    by_slot: dict[int, ClientSession]
    rejections: Counter[str]
    counters: Counter[str]
    detections: dict[int, Counter[str]]
    departed: list[DepartedPlayer]
    tick: int
    time_s: float
    tick_dt_s: float
    tick_stats: TickStats
    _spawn_rng: np.random.Generator
    _spread_rng: np.random.Generator
    _baits: list[Bait]
    _bait_room: int
    _bait_cache: BaitTargets | None
    _next_bait_id: int
    _max_packet_jump: int
    _next_conn_sample_s: float
    _datagrams_this_tick: int
    _tick_events: list[Any]
    """The tick's events in order, what the pipeline is fed and the replay records."""
    _session_events: list[SessionEvent]
    """Connects and disconnects since the last tick: the next tick's first events."""
    _out: Outgoing
    """The tick's datagrams to send."""
    _kicks: dict[int, str]
    """Slots to disconnect at the next tick's start, with the departure reason."""


def send(core: CoreState, session: ClientSession, message: Any) -> None:
    """Queue ``message`` for ``session`` with the tick's datagrams."""
    core._out.append((session.address, proto.encode(message, core.config.protocol)))


def vec3(v: np.ndarray) -> tuple[float, float, float]:
    """A 3-vector's components as Python floats."""
    return (float(v[0]), float(v[1]), float(v[2]))
