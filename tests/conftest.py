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


@pytest.fixture(scope="session")
def postgres_server():  # type: ignore[no-untyped-def]
    """A throwaway PostgreSQL server for the session (``tests.pg_server``): skipped without
    PostgreSQL's binaries, failed instead when ``REFEREE_REQUIRE_POSTGRES=1`` (CI)."""
    from tests.pg_server import pg_server

    with pg_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server) -> str:  # type: ignore[no-untyped-def]
    """The URL of a fresh, empty database on the session's PostgreSQL server."""
    return postgres_server.create_database()


@pytest.fixture(scope="session", autouse=True)
def _private_data_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``referee serve`` stores in ``$XDG_DATA_HOME/referee/referee.db`` by default: tests (and
    the servers they start) write into a directory of their own, never the user's."""
    import os

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
