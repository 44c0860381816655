"""Bait shots of a corpus: who touched an AimDetect bait, and whether AimDetect counted it.

Every stream is walked; each shot (not pellet) that touched a bait becomes a row with its
shooter's truth, the weapon, how long after the shooter's latest kill it was fired, and where its
view time lay against that kill (``anticheat.detectors.aimdetect.bait``: a shot aimed at a view
from before the kill is not counted). ``referee lab baits DIR...`` prints, per group (honest
players, each cheat profile), the bait shots, how many were counted and how many were aimed before
the kill, with rates per player-hour. It reproduces the figures in AimDetect's docstring.

Times are seconds of server time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from anticheat.detectors.aimdetect.bait import KillClock, aimed_before_kill
from anticheat.events import KillEvent, SessionEvent, ShotResult
from testbed.lab.store import LabStore
from testbed.lab.stream_map import map_streams, stream_events

__all__ = ["BaitGroup", "BaitShot", "corpus_bait_shots", "group_hours", "groups", "stream_bait_shots"]

HONEST = "honest"


@dataclass(frozen=True, slots=True)
class BaitShot:
    """One shot through a bait. since_kill_s: after the shooter's latest kill (s; None: no kill
    yet). view_after_kill_s: the shot's view time minus that kill's time (s; negative: aimed
    before the kill). counted: AimDetect counts it."""

    group: str
    match_id: int
    name: str
    time_s: float
    weapon: int
    since_kill_s: float | None
    view_after_kill_s: float | None
    counted: bool


def stream_bait_shots(events: Iterable[object]) -> Iterator[tuple[str, float, int, float | None, float | None, bool]]:
    """``(name, time_s, weapon, since_kill_s, view_after_kill_s, counted)`` of every bait shot of
    an event stream (one per shooter and tick, as AimDetect counts them)."""
    clock = KillClock()
    names: dict[int, str] = {}
    last_tick: dict[int, int] = {}
    for event in events:
        if isinstance(event, ShotResult):
            if not event.bait_hit or last_tick.get(event.shooter) == event.tick:
                continue
            last_tick[event.shooter] = event.tick
            kill_s = clock.latest_before(event.shooter, event.time_s)
            known = kill_s != float("-inf")
            yield (names.get(event.shooter, ""), event.time_s, event.weapon,
                   event.time_s - kill_s if known else None,
                   event.rewind_time_s - kill_s if known else None,
                   not aimed_before_kill(clock, event.shooter, event.time_s, event.rewind_time_s))
        elif isinstance(event, KillEvent):
            clock.on_kill(event.killer, event.time_s)
        elif isinstance(event, SessionEvent):
            clock.forget(event.player)
            last_tick.pop(event.player, None)
            if event.kind == "connect":
                names[event.player] = event.name


def _match_bait_shots(job: tuple[int, str, bytes]) -> list[tuple[str, float, int, float | None, float | None, bool]]:
    return list(stream_bait_shots(stream_events(*job)))


def corpus_bait_shots(store: LabStore, *, jobs: int = 1,
                      on_match: Callable[[int, int], object] | None = None) -> list[BaitShot]:
    """Every bait shot by a labelled player of the corpus in ``store``; group: ``honest`` or the
    cheat profile."""
    truth = {(int(m), str(n)): (str(p) if c else HONEST) for m, n, p, c in
             store.con.execute("SELECT match_id, name, profile, cheat FROM players").fetchall()}
    out: list[BaitShot] = []
    for match_id, rows in map_streams(store, _match_bait_shots, jobs=jobs, on_match=on_match):
        for name, time_s, weapon, since, view_after, counted in rows:
            group = truth.get((match_id, name))
            if group is not None:
                out.append(BaitShot(group, match_id, name, time_s, weapon, since, view_after, counted))
    return out


@dataclass(frozen=True, slots=True)
class BaitGroup:
    """One group's bait shots. hours: the group's play (player-hours). weapons: shots per weapon
    id. before_kill_view_s: (least, most) of view_after_kill_s over the shots aimed before the
    kill, or None."""

    group: str
    hours: float
    shots: int
    counted: int
    aimed_before_kill: int
    weapons: dict[int, int]
    before_kill_view_s: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "player_hours": self.hours, "shots": self.shots, "counted": self.counted,
                "aimed_before_kill": self.aimed_before_kill, "weapons": {str(k): v for k, v in self.weapons.items()},
                "before_kill_view_s": self.before_kill_view_s}


def groups(shots: Sequence[BaitShot], hours: dict[str, float]) -> list[BaitGroup]:
    """Per group (honest first, then profiles by name) with its player-hours from ``hours``;
    groups with play but no bait shot are listed too."""
    names = sorted(set(hours) | {s.group for s in shots}, key=lambda g: (g != HONEST, g))
    out = []
    for g in names:
        mine = [s for s in shots if s.group == g]
        before = [s.view_after_kill_s for s in mine if not s.counted and s.view_after_kill_s is not None]
        weapons: dict[int, int] = {}
        for s in mine:
            weapons[s.weapon] = weapons.get(s.weapon, 0) + 1
        out.append(BaitGroup(g, hours.get(g, 0.0), len(mine), sum(s.counted for s in mine),
                             sum(not s.counted for s in mine), dict(sorted(weapons.items())),
                             (min(before), max(before)) if before else None))
    return out


def group_hours(store: LabStore) -> dict[str, float]:
    """Player-hours of play per group (``honest`` or the cheat profile)."""
    rows = store.con.execute(
        "SELECT CASE WHEN cheat THEN profile ELSE 'honest' END, sum(play_s) / 3600.0 FROM players GROUP BY 1"
    ).fetchall()
    return {str(g): float(h or 0.0) for g, h in rows}
