"""A throwaway PostgreSQL server for tests, run from Debian's binaries (package ``postgresql``).

The cluster lives in a fresh temporary directory and listens on 127.0.0.1 at a free port (and a
unix socket in that directory), with ``trust`` authentication for a superuser ``referee``.
PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` system user (the
Debian package creates it) through ``runuser``. Binaries are found through ``$REFEREE_PG_BINDIR``,
``pg_config --bindir``, or ``/usr/lib/postgresql/*/bin``.

Without the binaries, tests needing the server are skipped with a reason, unless
``REFEREE_REQUIRE_POSTGRES=1`` (set in CI): then they fail, naming the package to install.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PgServer", "find_bindir", "pg_server", "require_or_skip"]

SUPERUSER = "referee"
_RUN_AS_WHEN_ROOT = "postgres"


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, or None when PostgreSQL is not installed."""
    candidates: list[str] = []
    if os.environ.get("REFEREE_PG_BINDIR"):
        candidates.append(os.environ["REFEREE_PG_BINDIR"])
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
            candidates.append(out.stdout.strip())
    # Newest version first.
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").is_file() and (path / "postgres").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def require_or_skip(reason: str) -> None:
    """Fail (``REFEREE_REQUIRE_POSTGRES=1``, CI) or skip the test for ``reason``."""
    if os.environ.get("REFEREE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{reason} (REFEREE_REQUIRE_POSTGRES=1: install Debian's 'postgresql' package)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class PgServer:
    """A running throwaway cluster: ``port`` on 127.0.0.1, superuser ``referee`` (trust)."""

    bindir: Path
    root: Path
    port: int
    run_as: str | None
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL of ``database`` on this server."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _command(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def start(self) -> None:
        """initdb, then run the server and wait until it accepts connections (<= 30 s)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        subprocess.run(
            self._command(str(self.bindir / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
                          "-E", "UTF8", "--no-sync"),
            check=True, capture_output=True,
        )
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - the server's stderr, closed with it
        self.process = subprocess.Popen(
            # fsync off: a test cluster that dies with its test has nothing to keep.
            self._command(str(self.bindir / "postgres"), "-D", str(self.data), "-h", "127.0.0.1",
                          "-p", str(self.port), "-k", str(self.root), "-c", "fsync=off",
                          "-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        self._wait_ready(30.0)

    def _wait_ready(self, timeout_s: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.process.returncode}): {self.log_tail()}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres not ready after {timeout_s} s: {self.log_tail()}") from None
                time.sleep(0.1)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "server.log").read_text(errors="replace")[-2000:]
        return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete the cluster."""
        if self.process is not None and self.process.poll() is None:
            subprocess.run(self._command(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                         "-w", "stop"), capture_output=True, check=False)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # a generated identifier
        return self.url(name)


@contextlib.contextmanager
def pg_server() -> Iterator[PgServer]:
    """Start a throwaway server (skipping or failing the test when PostgreSQL is missing)."""
    bindir = find_bindir()
    if bindir is None:
        require_or_skip("PostgreSQL server binaries (initdb, postgres, pg_ctl) not found")
    assert bindir is not None
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_RUN_AS_WHEN_ROOT)
        except KeyError:
            require_or_skip(f"running as root and there is no {_RUN_AS_WHEN_ROOT!r} user to run PostgreSQL as")
        if shutil.which("runuser") is None:
            require_or_skip("running as root and runuser (util-linux) is missing")
        run_as = _RUN_AS_WHEN_ROOT
    # Not pytest's tmp_path: its parents are private to the current user, and the server may run as another.
    root = Path(tempfile.mkdtemp(prefix="referee-pg-"))
    os.chmod(root, 0o700)
    server = PgServer(bindir, root, _free_port(), run_as)
    try:
        server.start()
        yield server
    finally:
        server.stop()
