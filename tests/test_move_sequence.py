"""simulate_sequence: several commands per player in one call, equal to simulate called round by round."""

from __future__ import annotations

import numpy as np
import pytest

from physics import movement
from physics.config import MovementConfig
from physics.movement import MoveCommands, simulate, simulate_sequence
from tests.test_movement import held_commands, random_state
from world.geometry import MapGeometry


def _rounds(rng: np.random.Generator, players: int, rounds: int) -> tuple[list[np.ndarray], MoveCommands]:
    """Rounds of commands as a server forms them: round k holds the k-th command of the players
    that sent at least k + 1, in slot order; the commands, row after row, as one batch."""
    counts = rng.integers(1, rounds + 1, players)
    order = [np.flatnonzero(counts > k) for k in range(rounds)]
    order = [r for r in order if r.size]
    cmds = [held_commands(rng, len(r), None) for r in order]
    flat = MoveCommands(*(np.concatenate([getattr(c, f) for c in cmds]) for f in
                          ("forward_move", "side_move", "yaw_deg", "pitch_deg", "buttons", "dt_s")))
    return order, flat


def _by_rounds(
    order: list[np.ndarray], state: tuple[np.ndarray, ...], cmd: MoveCommands, speed: np.ndarray, geometry: MapGeometry,
    cfg: MovementConfig,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """simulate once per round on a copy of the per-slot state: (starts, results) by field, row after row."""
    pos, vel, ground, stance = (a.copy() for a in state)
    starts: list[list[np.ndarray]] = [[], [], []]
    results: list[list[np.ndarray]] = [[], [], [], [], [], []]
    a = 0
    for slots in order:
        rows = slice(a, a + len(slots))
        a += len(slots)
        part = MoveCommands(cmd.forward_move[rows], cmd.side_move[rows], cmd.yaw_deg[rows], cmd.pitch_deg[rows],
                            cmd.buttons[rows], cmd.dt_s[rows])
        for have, arr in zip(starts, (pos, vel, ground), strict=True):
            have.append(arr[slots].copy())
        r = simulate(pos[slots], vel[slots], ground[slots], stance[slots], part, speed[rows], geometry, cfg)
        for have, arr in zip(results, (r.pos, r.vel, r.on_ground, r.stance, r.crouch_pressed, r.touched_wall), strict=True):
            have.append(arr)
        pos[slots], vel[slots], ground[slots], stance[slots] = r.pos, r.vel, r.on_ground, r.stance
    return [np.concatenate(s) for s in starts], [np.concatenate(r) for r in results]


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_sequence_equals_rounds(seed: int, kernel: bool, city_geometry: MapGeometry, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bits as simulate round after round (the server's rounds), in the kernel and
    through the numpy fallback, and the inputs untouched."""
    if kernel and not movement._KERNEL_EXACT:
        pytest.skip("movement kernel disabled on this platform")
    monkeypatch.setattr(movement, "_KERNEL_EXACT", kernel)
    rng = np.random.default_rng(seed)
    cfg = MovementConfig()
    players = 12
    state = random_state(rng, city_geometry, players)
    order, cmd = _rounds(rng, players, 4)
    speed = rng.uniform(0.0, 10.0, len(cmd))
    slots = np.concatenate(order)
    kept = tuple(a.copy() for a in state)
    result, *starts = simulate_sequence(slots, *state, cmd, speed, city_geometry, cfg)
    want_starts, want = _by_rounds(order, state, cmd, speed, city_geometry, cfg)
    got = (result.pos, result.vel, result.on_ground, result.stance, result.crouch_pressed, result.touched_wall)
    for a, b in zip((*starts, *got), (*want_starts, *want), strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    for a, b in zip(state, kept, strict=True):
        assert a.tobytes() == b.tobytes()


def test_sequence_refuses_bad_input(city_geometry: MapGeometry) -> None:
    rng = np.random.default_rng(1)
    state = random_state(rng, city_geometry, 3)
    cmd = held_commands(rng, 2, None)
    with pytest.raises(ValueError, match="slots"):
        simulate_sequence(np.array([0, 3]), *state, cmd, np.ones(2), city_geometry)
    with pytest.raises(ValueError, match="weapon_speed"):
        simulate_sequence(np.array([0, 1]), *state, cmd, np.array([1.0, -1.0]), city_geometry)
    bad = state[0].copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        simulate_sequence(np.array([0, 1]), bad, *state[1:], cmd, np.ones(2), city_geometry)


def test_from_block_refuses_button_values_beyond_int64_and_keeps_the_check_order() -> None:
    block = np.vstack([np.full(4, 1 / 64), np.zeros((4, 4)), np.zeros(4)])
    for value in (1e19, -1e19, 2.0**63, -(2.0**63)):
        bad = block.copy()
        bad[5, 2] = value
        with pytest.raises(ValueError, match="buttons"):
            MoveCommands.from_block(bad)
    bad = block.copy()
    bad[0, 3], bad[5, 1], bad[2, 0] = 0.0, 0.5, np.nan
    with pytest.raises(ValueError, match="NaN"):
        MoveCommands.from_block(bad)
    bad[2, 0] = 0.0
    with pytest.raises(ValueError, match="dt_s"):
        MoveCommands.from_block(bad)
