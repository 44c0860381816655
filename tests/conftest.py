"""Shared test fixtures."""

from __future__ import annotations

from collections.abc import Iterator
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
def _warm_kernel_cache(_private_data_home: None) -> Iterator[None]:
    """On a fresh checkout, fill numba's on-disk kernel cache from a second process while the
    first tests run: a short virtual match compiles what the server, the bots and the detectors
    use (minutes of compiling on a small machine) on the core pytest leaves idle, so the tests
    and the servers and matches they start in subprocesses load kernels instead of compiling
    each their own. Nothing waits for it; it is stopped at the end of the session."""
    import os
    import subprocess
    import sys

    from testbed.kernel_cache import cold_modules

    # Under pytest-xdist every worker runs session fixtures: one warmer is enough.
    if not cold_modules() or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        yield
        return
    warmer = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "match", "--virtual", "--duration", "20", "--json", "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ),
    )
    try:
        yield
    finally:
        if warmer.poll() is None:
            warmer.kill()
        warmer.wait()


@pytest.fixture(scope="session", autouse=True)
def _private_data_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``referee serve`` stores in ``$XDG_DATA_HOME/referee/referee.db`` by default: tests (and
    the servers they start) write into a directory of their own, never the user's."""
    import os

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
