"""Skip conditions shared by every detector, so that lag never looks like cheating.

BustAim skips its checks when either player's packet loss exceeds 5 % or ping exceeds 600 ms,
when the victim is a bot or paused (no update for more than 1 s), and for blacklisted weapons.
We keep its ping and pause limits but skip only above 15 % loss (see ``SkipConfig.max_loss``).
The book keeps the latest connection sample per player; detectors ask it before judging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from anticheat.events import ConnectionSample
from world.weapons import WeaponId


class SkipReason(str, Enum):
    """Why a check was skipped."""

    HIGH_PING = "high_ping"
    HIGH_LOSS = "high_loss"
    PAUSED = "paused"
    EXEMPT = "exempt"
    WEAPON = "weapon"
    UNKNOWN = "unknown_connection"


@dataclass(frozen=True, slots=True)
class SkipConfig:
    """Shared skip thresholds (BustAim's, but for loss).

    Attributes:
        max_ping_ms: skip when a player's smoothed RTT is above this (BustAim 600 ms).
        max_loss: skip when a player's packet loss fraction is above this (0.15; BustAim 5 %).
            Every INPUT carries the newest four commands with their shots, so a command is lost
            only when four datagrams in a row are: 6e-6 of them at 5 % loss, 5e-4 at 15 %
            (independent losses). BustAim's 5 % sat in the middle of a 300 ms satellite link's
            measured loss (4-9 %), so such a player went unjudged most of the time: a teleport
            cheat on that link jumped 40-140 m every 3-8 s and was detected 5 times in 600 s, a
            smooth aimbot never. On the lab's training corpus (``lab/standard2``, 26.7 honest h)
            15 % found every smooth aimbot at strength 0.5 or more within 120 s (8/10 at 5 %)
            and 21 of 24 blatant cheats within 30 s (19); no honest satellite player was flagged.
        paused_after_s: a player with no packet for longer than this is paused/AFK (BustAim 1000 ms).
        skipped_weapons: weapon ids never analysed (BustAim skips the minigun).
        exempt_players: slots exempted by configuration (e.g. server-side bots).
        require_connection: skip players with no connection sample yet (True in the live server;
            offline analysis of old recordings may set False).
    """

    max_ping_ms: float = 600.0
    max_loss: float = 0.15
    paused_after_s: float = 1.0
    skipped_weapons: frozenset[int] = field(default_factory=lambda: frozenset({int(WeaponId.MINIGUN)}))
    exempt_players: frozenset[int] = frozenset()
    require_connection: bool = True


class SkipBook:
    """Latest connection quality per player, and the shared skip decision."""

    def __init__(self, config: SkipConfig | None = None) -> None:
        self.config = config or SkipConfig()
        self._latest: dict[int, ConnectionSample] = {}

    def record(self, sample: ConnectionSample) -> None:
        """Remember ``sample`` as the player's current connection quality."""
        self._latest[sample.player] = sample

    def forget(self, player: int) -> None:
        """Drop what is known about ``player`` (disconnect)."""
        self._latest.pop(player, None)

    def connection(self, player: int) -> ConnectionSample | None:
        """The latest sample of ``player``, if any."""
        return self._latest.get(player)

    def player_reason(self, player: int) -> SkipReason | None:
        """Why ``player``'s actions should not be judged now (per the latest sample), or None."""
        cfg = self.config
        if player in cfg.exempt_players:
            return SkipReason.EXEMPT
        sample = self._latest.get(player)
        if sample is None:
            return SkipReason.UNKNOWN if cfg.require_connection else None
        if sample.exempt:
            return SkipReason.EXEMPT
        if sample.rtt_ms > cfg.max_ping_ms:
            return SkipReason.HIGH_PING
        if sample.loss > cfg.max_loss:
            return SkipReason.HIGH_LOSS
        # The server emits samples several times a second and whenever a player goes quiet, so the
        # latest sample's own figure is current enough; adding the sample's age would wrongly
        # count a talking player as paused between two samples.
        if sample.since_update_s > cfg.paused_after_s:
            return SkipReason.PAUSED
        return None

    def shot_reason(self, shooter: int, victim: int | None, weapon: int) -> SkipReason | None:
        """Why a shot by ``shooter`` on ``victim`` with ``weapon`` should not be judged, or None."""
        if weapon in self.config.skipped_weapons:
            return SkipReason.WEAPON
        reason = self.player_reason(shooter)
        if reason is not None or victim is None:
            return reason
        return self.player_reason(victim)
