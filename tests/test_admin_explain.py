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
