"""Every limit the codec enforces (:class:`ProtocolLimits`) and the defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np

from server.entity_block import EntityLimits
from server.protocol.commands import COMMAND_WORDS
from world.state import PITCH_LIMIT_DEG, WorldLimits


def _command_bounds(limits: ProtocolLimits) -> np.ndarray:
    """(13, 2) [low, high] per 8-byte word of a record, for the float words (the two integer
    words' rows are unused). duration_s also has to be > 0, which the check adds."""
    bounds = np.zeros((COMMAND_WORDS, 2))
    max_time, yaw, pitch = limits.max_time_s, limits.yaw_limit_deg, limits.pitch_limit_deg
    recoil, coord = limits.recoil_limit_deg, limits.coord_limit_m
    rows = {
        1: (0.0, max_time), 2: (0.0, limits.max_command_duration_s), 3: (-1.0, 1.0), 4: (-1.0, 1.0),
        5: (-yaw, yaw), 6: (-pitch, pitch), 8: (-recoil, recoil), 9: (-recoil, recoil),
        10: (-coord, coord), 11: (-coord, coord), 12: (-coord, coord),
    }
    for word, row in rows.items():
        bounds[word] = row
    return bounds


@dataclass(frozen=True)
class ProtocolLimits:
    """Every limit the codec enforces, with its unit and anchor.

    Not slotted: the INPUT command block check keeps its bounds array in a plain attribute, derived
    state rather than a field, so that configuration dumps (replay headers) hold only the limits.

    Attributes:
        max_datagram_bytes: largest datagram accepted or produced (bytes); netcode.io's 1200.
        min_unauth_request_bytes: CONNECT and CHALLENGE_RESPONSE are padded to at least this many
            bytes, which exceeds the largest reply to them (ACCEPT, ~150 bytes): no amplification.
        max_commands: commands per INPUT; Quake 3 re-sends the last 3 commands with the new one.
            Less than 256 (the command block check reports a record index in 8 bits).
        max_shots: shots per INPUT; 4 commands of 0.1 s at the minigun's 0.05 s interval fire 8.
        max_name_bytes, max_map_name_bytes, max_notice_text_bytes: UTF-8 lengths (bytes).
        max_notice_numbers: numbers in a NOTICE.
        max_snapshot_parts: a snapshot may span this many datagrams (29 entities fit in one).
        coord_limit_m: |position component| (m); WorldLimits' 10,000 m.
        speed_limit_m_s: |velocity component| (m/s); WorldLimits' 100 m/s.
        pitch_limit_deg: |pitch| (deg); Source's 89.
        yaw_limit_deg: |yaw| (deg); 360 so an unwrapped angle just past +/-180 still passes.
        recoil_limit_deg: |reported recoil component| (deg); far beyond any weapon's kick.
        max_command_duration_s: a command covers (0, this] seconds; 0.1 s is 10 Hz, the slowest client.
        max_time_s: time fields lie in [0, this] (s); 1e10 s admits Unix epoch clocks.
        max_slots: slots must be below this; 256 is what one byte holds.
        max_health: health field upper bound (hit points); what one entity byte holds.
        max_ammo: ammo and reserve upper bound (rounds); what a uint16 holds.
        max_tick_rate_hz: ACCEPT tick rate upper bound (Hz).
        notice_number_limit: |NOTICE number| bound.
    """

    max_datagram_bytes: int = 1200
    min_unauth_request_bytes: int = 256
    max_commands: int = 4
    max_shots: int = 8
    max_name_bytes: int = 32
    max_map_name_bytes: int = 32
    max_notice_text_bytes: int = 120
    max_notice_numbers: int = 8
    max_snapshot_parts: int = 8
    coord_limit_m: float = WorldLimits().coord_limit_m
    speed_limit_m_s: float = WorldLimits().speed_limit_m_s
    pitch_limit_deg: float = PITCH_LIMIT_DEG
    yaw_limit_deg: float = 360.0
    recoil_limit_deg: float = 180.0
    max_command_duration_s: float = 0.1
    max_time_s: float = 1e10
    max_slots: int = 256
    max_health: float = 255.0
    max_ammo: int = 0xFFFF
    max_tick_rate_hz: int = 1000
    notice_number_limit: float = 1e12
    _entity_limits: EntityLimits = field(init=False, repr=False, compare=False)
    if TYPE_CHECKING:
        _command_bounds: np.ndarray

    def __post_init__(self) -> None:
        if not 1 <= self.max_commands <= 255:
            raise ValueError(f"ProtocolLimits.max_commands must lie in 1..255, got {self.max_commands}")
        entity = EntityLimits(
            max_slots=self.max_slots,
            coord_limit_m=self.coord_limit_m,
            speed_limit_m_s=self.speed_limit_m_s,
            yaw_limit_deg=self.yaw_limit_deg,
            pitch_limit_deg=self.pitch_limit_deg,
        )
        object.__setattr__(self, "_entity_limits", entity)
        object.__setattr__(self, "_command_bounds", _command_bounds(self))

    def entity_limits(self) -> EntityLimits:
        """The same ranges for the SNAPSHOT entity block."""
        return self._entity_limits


DEFAULT_LIMITS: Final = ProtocolLimits()
