"""Shared test fixtures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from world.geometry import MapGeometry


@pytest.fixture(scope="session")
def city_geometry() -> MapGeometry:
    """Prepared geometry of the dense built-in map (built once: it is the slowest to prepare)."""
    from world.geometry import MapGeometry
    from world.mapfile import builtin_map

    return MapGeometry(builtin_map("city"))


@pytest.fixture(scope="session")
def open_geometry() -> MapGeometry:
    """Prepared geometry of the open built-in map."""
    from world.geometry import MapGeometry
    from world.mapfile import builtin_map

    return MapGeometry(builtin_map("open"))
