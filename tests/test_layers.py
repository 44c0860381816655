"""The layering of DESIGN.md holds: each package imports only the packages above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("world", "physics", "lagcomp", "anticheat", "server", "bots", "testbed")

FORBIDDEN: dict[str, set[str]] = {
    "world": {"physics", "lagcomp", "anticheat", "server", "bots", "testbed"},
    "physics": {"lagcomp", "anticheat", "server", "bots", "testbed"},
    "lagcomp": {"anticheat", "server", "bots", "testbed"},
    "anticheat": {"server", "bots", "testbed"},
    "server": {"bots", "testbed"},
    "bots": {"anticheat", "testbed"},
    "testbed": set(),
}
# A bot is a client: of the server it knows only the wire format.
BOTS_MAY_IMPORT_FROM_SERVER = {"server.protocol", "server.entity_block"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_respect_the_layers(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
            if package == "bots" and top == "server" and name not in BOTS_MAY_IMPORT_FROM_SERVER:
                bad.append(f"{path.relative_to(ROOT)} imports server internals: {name}")
    assert not bad, "\n".join(bad)


# Inside anticheat/: the pipeline and its contracts at the top, detectors/ and judgement/ below.
# Only the suite (which assembles a pipeline) knows the detectors; a detector knows only the
# contracts and its fellow detectors; judgement knows no detector; the pipeline routes
# detections to judgement's policy and store, and judgement's operator drives a pipeline.
ANTICHEAT_CONTRACTS = ("events", "detector", "skip", "tolerances", "codec")
ANTICHEAT_FORBIDDEN: dict[str, set[str]] = {
    **{f"anticheat/{m}.py": {"anticheat.detectors", "anticheat.judgement", "anticheat.pipeline", "anticheat.suite"}
       for m in ANTICHEAT_CONTRACTS},
    "anticheat/pipeline.py": {"anticheat.detectors", "anticheat.suite"},
    "anticheat/detectors": {"anticheat.judgement", "anticheat.pipeline", "anticheat.suite", "anticheat.codec"},
    "anticheat/judgement": {"anticheat.detectors", "anticheat.suite"},
}


@pytest.mark.parametrize("part", sorted(ANTICHEAT_FORBIDDEN))
def test_anticheat_concerns_respect_their_layers(part: str) -> None:
    where = ROOT / part
    paths = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
    assert paths and all(p.exists() for p in paths), part
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in ANTICHEAT_FORBIDDEN[part])
    ]
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_tests_or_the_testbed_from_below() -> None:
    for package in PACKAGES[:-1]:
        for path in (ROOT / package).rglob("*.py"):
            assert not any(n.split(".")[0] in {"tests", "testbed"} for n in _imports(path)), path
