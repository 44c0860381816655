"""The admin's plain-language table and its configuration, without a server."""

from __future__ import annotations

import pytest

from anticheat.detectors.bustaim import KIND_OF_WARNING
from physics.evidence import MovementKind
from server.admin.config import AdminConfig
from server.admin.explain import EXPLANATIONS, explain


def test_short_tokens_are_refused() -> None:
    with pytest.raises(ValueError):
        AdminConfig(token="short")
    assert "hidden" in repr(AdminConfig(token="z" * 20)) and "z" * 20 not in repr(AdminConfig(token="z" * 20))


def test_every_movement_and_bustaim_kind_has_its_own_sentence() -> None:
    for kind in MovementKind:
        assert f"movement:{kind.value}" in EXPLANATIONS
    for kind in KIND_OF_WARNING.values():
        assert f"bustaim:{kind}" in EXPLANATIONS
    # Odd evidence never breaks the page: the detector's general sentence stands in.
    assert explain("movement", "speed", 9.0, {"limit": "n/a"}).startswith("The server's movement check")
    assert "55%" in explain("movement", "speed", 7.75, {"limit": 5.0, "count": 3, "window_s": 10.0})
    assert explain("newdetector", "odd", float("nan"), {}) == "The newdetector detector found odd."


def test_backtrack_and_takes_say_which_evidence_decided() -> None:
    clock = explain("fire", "backtrack", 0.45, {"rule": "view_clock", "behind_clock": 2, "of": 8, "behind_s": 0.21})
    assert "2 of the last 8 shots" in clock and "210 ms older than the frame" in clock
    latency = explain("fire", "backtrack", 0.45, {"rule": "latency", "stale": 5, "of": 8, "behind_s": 0.0})
    assert "5 of the last 8" in latency and "450 ms" in latency
    takes = explain("trigger", "takes", 0.9, {"taken": 18, "opportunities": 20})
    assert "18 of 20 times (90%)" in takes
    delay = explain("trigger", "delay", 0.8, {"in_range": 8, "pulls": 10, "range_commands": [5, 7]})
    assert "78-109 ms" in delay and "8 of 10 times (80%)" in delay
    assert "a fixed time" in explain("trigger", "delay", 0.8, {"in_range": 8, "pulls": 10})
