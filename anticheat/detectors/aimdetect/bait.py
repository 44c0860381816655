"""Which bait shots are evidence: only those aimed at a world in which the bait existed.

The server places a bait when a player kills (``server.shots.place_bait``) and shows it to the
killer only. A shot is registered against the world its client was showing when it fired, the
lag-compensated ``ShotResult.rewind_time_s``. A shot whose view time precedes the killer's latest
kill was aimed while the victim still stood on the killer's screen: an automatic weapon's spray
climbing on through the kill, which no human chose after seeing it. Such a shot may touch the bait,
but it says nothing about aim at the bait.
"""

from __future__ import annotations

from collections import deque

__all__ = ["KillClock", "aimed_before_kill"]

_KEPT = 4
"""Kill times kept per player: a bait lives one second, and nobody kills four times in one."""


class KillClock:
    """Each player's latest kill times (server time, s)."""

    def __init__(self) -> None:
        self._kills: dict[int, deque[float]] = {}

    def on_kill(self, killer: int, time_s: float) -> None:
        """``killer`` killed at ``time_s`` (s)."""
        kills = self._kills.get(killer)
        if kills is None:
            kills = self._kills[killer] = deque(maxlen=_KEPT)
        kills.append(time_s)

    def latest_before(self, player: int, time_s: float) -> float:
        """The time (s) of ``player``'s latest kill strictly before ``time_s`` (s); -inf for none.
        A kill in the shot's own tick placed its bait after that tick's rays were cast."""
        for t in reversed(self._kills.get(player, ())):
            if t < time_s:
                return t
        return float("-inf")

    def forget(self, player: int) -> None:
        """Drop ``player``'s kills (slot reused)."""
        self._kills.pop(player, None)


def aimed_before_kill(clock: KillClock, shooter: int, time_s: float, rewind_time_s: float) -> bool:
    """True when a shot at server time ``time_s`` (s), aimed at the view of ``rewind_time_s`` (s),
    was aimed before ``shooter``'s latest kill: not evidence of aim at that kill's bait."""
    return rewind_time_s < clock.latest_before(shooter, time_s)
