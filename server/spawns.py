"""Spawn point choice: far from living enemies, with a little randomness so spawns are not predictable."""

from __future__ import annotations

import numpy as np

from world.mapfile import GameMap, Spawn
from world.state import WorldState


def choose_spawn(game_map: GameMap, world: WorldState, slot: int, rng: np.random.Generator, among: int = 3) -> Spawn:
    """A spawn for ``slot``: drawn from the ``among`` spawns farthest from every other living player.

    Distances in meters; with nobody alive, any spawn is drawn uniformly.
    """
    spawns = game_map.spawns
    others = world.live_slots()
    others = others[others != slot]
    if others.size == 0:
        return spawns[int(rng.integers(len(spawns)))]
    xy = np.array([(s.x, s.y) for s in spawns])
    d = np.linalg.norm(xy[:, None, :] - world.pos[others][None, :, :2], axis=2).min(axis=1)
    best = np.argsort(-d)[: max(1, min(among, len(spawns)))]
    return spawns[int(best[rng.integers(best.size)])]
