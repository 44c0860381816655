"""``referee serve --admin-port``: the command line's wiring, end to end in a child process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def _serve(*extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "serve", "--port", "0", "--duration", "6", "--admin-port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, **(env or {})},
    )


def _admin_line(proc: subprocess.Popen[str]) -> tuple[str, list[str]]:
    """The 'admin page on' line of stderr, and every line read until it."""
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line)
        if "admin page on" in line:
            return line, lines
    raise AssertionError("serve never announced the admin page:\n" + "".join(lines))


def test_serve_generates_a_token_prints_it_once_and_the_api_takes_it() -> None:
    proc = _serve()
    try:
        line, before = _admin_line(proc)
        match = re.search(r"admin page on (http://127\.0\.0\.1:\d+/); token (\S+)", line)
        assert match, line
        url, token = match.groups()
        assert httpx.get(f"{url}api/players").status_code == 401
        answer = httpx.get(f"{url}api/state", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200 and answer.json()["overview"]["tick"] > 0
        out, rest = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, rest
    assert ("".join(before) + rest + out).count(token) == 1


def test_serve_takes_the_token_from_the_environment() -> None:
    token = "t" * 24
    proc = _serve(env={"REFEREE_ADMIN_TOKEN": token})
    try:
        line, _ = _admin_line(proc)
        assert token not in line
        url = re.search(r"(http://\S+/)", line).group(1)  # type: ignore[union-attr]
        assert httpx.get(f"{url}api/players", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0


def test_serve_refuses_a_short_token() -> None:
    proc = _serve("--admin-token", "short")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "--admin-token" in err and "16 characters" in err
