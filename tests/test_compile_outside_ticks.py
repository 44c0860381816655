"""No compiled kernel is compiled (or loaded from numba's cache) inside a server tick.

Every kernel the server calls is warmed when the server is built, with the argument types the
tick passes. A kernel that meets a new type, layout or read-only flag inside a tick compiles a
second specialisation there: one tick of several milliseconds (it happened with np.nonzero's
strided columns). This plays a match with kills, baits, reloads and cheaters, watching every
dispatcher's signature count across each ServerCore.step.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from numba.core.registry import CPUDispatcher

from server.core import ServerCore
from testbed.bot_factory import profile_names
from testbed.match import run_virtual
from testbed.scenario import load_scenario

_SCENARIOS = Path(__file__).resolve().parent.parent / "testbed" / "scenarios"


def _dispatchers() -> list[CPUDispatcher]:
    return [o for o in gc.get_objects() if isinstance(o, CPUDispatcher)]


def test_no_kernel_compiles_inside_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load_scenario(_SCENARIOS / "blatant_aim.toml", profile_names()).replace(duration_s=8.0)
    step = ServerCore.step
    watched: list[CPUDispatcher] = []
    compiled_in: list[tuple[int, list[str]]] = []
    ticks = [0]

    def watched_step(self: ServerCore, now_s: float) -> object:
        if not watched:
            watched.extend(_dispatchers())
        before = [len(d.signatures) for d in watched]
        out = step(self, now_s)
        ticks[0] += 1
        grew = [d.py_func.__qualname__ for d, n in zip(watched, before, strict=True) if len(d.signatures) != n]
        if grew:
            compiled_in.append((self.tick, grew))
        return out

    monkeypatch.setattr(ServerCore, "step", watched_step)
    result = run_virtual(scenario)
    assert ticks[0] > 400 and watched
    assert sum(p.kills for p in result.players) > 0  # the kill, bait and respawn paths ran
    assert compiled_in == []
