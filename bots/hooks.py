"""Cheat hooks: the points where a cheat sits inside a game client, and the honest identity.

A cheat is a modified client. :class:`bots.client.BotClient` calls one :class:`ClientHooks`
object at fixed points of every client tick; the default ``ClientHooks()`` changes nothing, so a
client built without hooks is honest. Cheat profiles subclass it and override the points they
need, which keeps every cheat a small, testable layer over the same honest client:

* ``attach(client)``: once, when the client is built (keep it to read RTT, the world...);
* ``perceive(p)``: each tick, on the Perception before the brain sees it (ESP);
* ``intent(p, honest, rng)``: each tick, on the brain's Intent (aimbot, triggerbot);
* ``commands_this_step(now_s, rng)``: how many commands this tick generates, normally 1
  (speed hack through the timer);
* ``command(cmd, p)``: every command before it is stored and sent (teleport, noclip, speed
  claims, no-recoil reports);
* ``shots(shots, p, rng)``: each tick, on the shots of this tick's commands (silent aim, proaim
  claims, backtrack view times, rapid fire's extra shots, triggerbot shots);
* ``hold_packet(now_s, rng)``: each tick with datagrams to send: hold them back? (fake lag);
* ``bypass_fire_interval``: the client's own weapon prediction never refuses a FIRE as too
  early (rapid fire, C-bug scripts).

Order inside one client tick: perceive -> brain.think -> intent -> commands_this_step -> per
command (movement prediction, weapon prediction, shot claims, ``command``) -> ``shots`` ->
``hold_packet``. Hooks may keep their own state; all their randomness comes from the ``rng``
argument (the client's generator), so a cheating bot stays reproducible for a seed.

Hooks never see the server's internals: only what the client itself knows (see
:class:`ClientView`). Units: meters, seconds, degrees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from bots.perception import Intent, Perception
from server.protocol import Command, Shot

if TYPE_CHECKING:
    from bots.prediction import MoveState
    from bots.world_model import ShotClaim, WorldModel


class ClientView(Protocol):
    """What a hook may read from its client (a read-only view of :class:`bots.client.BotClient`)."""

    @property
    def slot(self) -> int | None:
        """Own player slot, None before ACCEPT."""
        ...

    @property
    def rtt_s(self) -> float | None:
        """Smoothed round-trip time measured with PING/PONG (s), None before the first PONG."""
        ...

    @property
    def tick_rate_hz(self) -> int:
        """Client tick rate (Hz): the server's tick rate from ACCEPT."""
        ...

    @property
    def world(self) -> WorldModel:
        """The snapshot buffer: past frames (for backtracking), interpolation, ray casts."""
        ...

    def view_time_at(self, now_s: float) -> float | None:
        """The server time (s) the client renders at client time ``now_s`` (s)."""
        ...

    @property
    def predicted(self) -> MoveState:
        """Own predicted movement state after the newest command."""
        ...

    def claim_shot(
        self,
        yaw_deg: float,
        pitch_deg: float,
        weapon: int,
        view_time_s: float,
        punch: tuple[float, float] = (0.0, 0.0),
        include_hidden: bool = False,
    ) -> ShotClaim:
        """The client's own hit detection for other angles or another view time (see
        ``BotClient.claim_shot``): silent aim and backtrack build their claims with it."""
        ...


class ClientHooks:
    """The honest identity: every hook returns its input unchanged.

    Attributes:
        bypass_fire_interval: when True the client's own weapon prediction never holds a FIRE
            back because it comes too soon after the previous shot (a rapid-fire or C-bug script
            ignoring the fire interval). Ammo, reloads, switching and death still gate it.
        name: label for logs and reports ("honest" for this class).
    """

    bypass_fire_interval: bool = False
    name: str = "honest"

    def attach(self, client: ClientView) -> None:
        """Called once by the client that owns these hooks (keep ``client`` to read RTT etc.)."""

    def perceive(self, p: Perception) -> Perception:
        """What the brain sees this tick; ESP may add or keep entities a human would not notice."""
        return p

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        """The intent actually executed; ``honest`` is the brain's. Aimbots replace the angles,
        triggerbots add FIRE."""
        return honest

    def commands_this_step(self, now_s: float, rng: np.random.Generator) -> int:
        """Commands to generate this tick (each covers one tick's duration); > 1 runs the game
        faster than real time (speed hack through the timer). Values < 1 count as 1."""
        return 1

    def command(self, cmd: Command, p: Perception) -> Command:
        """The command as sent. Changing ``pos`` changes the claim (teleport, noclip, speed); the
        client then believes itself there and predicts on from it until the server corrects it."""
        return cmd

    def shots(self, shots: list[Shot], p: Perception, rng: np.random.Generator) -> list[Shot]:
        """The shots sent for this tick's commands. Silent aim edits angles and claims, proaim
        edits the claims, backtrack moves ``view_time_s`` back, rapid fire adds shots. Each must
        name the ``cmd_seq`` of a command the next INPUT carries (the newest 4); others are
        dropped and counted. At most 8 shots travel per INPUT, the newest first."""
        return shots

    def hold_packet(self, now_s: float, rng: np.random.Generator) -> bool:
        """True holds this tick's datagrams back; the first tick answering False sends every held
        datagram first, in order, as one burst (fake lag)."""
        return False

