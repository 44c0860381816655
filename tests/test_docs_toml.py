"""Every TOML snippet in the documents loads with the loader it is written for.

Each ```toml fenced block of README.md, MAPS.md, PROTOCOL.md, ARCHITECTURE.md and
examples/**/README.md is classified by its keys and loaded the way Referee loads that kind of
file: a scenario (``[[bots]]``) with ``testbed.scenario.parse_scenario_text`` and the profile
registry, then its tolerance tables as ``referee match`` checks them; a lab corpus spec
(``honest_per_match`` or ``[[cheats]]``) with ``testbed.lab.spec.parse_spec``; a tolerance file
(only known detector sections) with ``anticheat.tolerances.load_overrides`` and
``anticheat.suite.resolve_configs``; a ``pyproject.toml`` entry-points snippet with ``tomllib``
(its values must be ``module:attribute`` references). A block that fits none of them fails.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anticheat.suite import default_configs, resolve_configs
from anticheat.tolerances import load_overrides
from bots.registry import default_registry
from testbed.lab.spec import parse_spec
from testbed.scenario import parse_scenario_text

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "MAPS.md", "PROTOCOL.md", "ARCHITECTURE.md")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced TOML block: its document (relative path), first line number and text."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def documents() -> list[Path]:
    """The documents whose TOML snippets are checked."""
    found = [ROOT / name for name in DOCUMENTS if (ROOT / name).is_file()]
    found += sorted((ROOT / "examples").glob("**/README.md"))
    return found


def toml_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The ```toml fenced blocks of a Markdown file (CommonMark fences: ``` or ~~~, closed by a
    fence of the same character at least as long; the info string's first word is the language),
    named by their path relative to ``root``."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(root).as_posix()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        language = (m["info"].split() or [""])[0].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) and not close["info"].strip():
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if language == "toml":
            blocks.append(Block(rel, i + 1, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


ALL_BLOCKS = [block for path in documents() for block in toml_blocks(path)]


def kind_of(data: dict[str, Any]) -> str | None:
    """Which loader a decoded snippet is meant for, by its keys (None: none fits)."""
    if set(data) == {"project"} and isinstance(data["project"], dict) and set(data["project"]) == {"entry-points"}:
        return "entry-points"
    if "honest_per_match" in data or "cheats" in data:
        return "lab spec"
    if "bots" in data:
        return "scenario"
    if data and all(isinstance(v, dict) for v in data.values()) and set(data) <= set(default_configs()):
        return "tolerances"
    return None


def load_block(block: Block) -> str:
    """Load ``block`` with its loader; returns its kind. Raises whatever the loader raises."""
    data = tomllib.loads(block.text)
    kind = kind_of(data)
    source = str(block)
    if kind == "scenario":
        scenario = parse_scenario_text(block.text, source, default_registry(), base_dir=ROOT)
        resolve_configs(scenario.tolerances)  # what `referee match` checks before playing
    elif kind == "lab spec":
        parse_spec(data, source, default_registry())
    elif kind == "tolerances":
        resolve_configs(load_overrides(block.text))
    elif kind == "entry-points":
        for group, entries in data["project"]["entry-points"].items():
            assert isinstance(entries, dict) and entries, f"{source}: [project.entry-points.{group!r}] is empty"
            for name, ref in entries.items():
                assert isinstance(ref, str) and re.fullmatch(r"[\w.]+:[\w.]+", ref), f"{source}: {group}.{name} = {ref!r}"
    else:
        raise AssertionError(f"{source}: a TOML block that is no scenario, lab spec, tolerance file or entry-points snippet")
    return kind


def test_the_documents_have_toml_blocks() -> None:
    """The extraction finds the snippets (so the test below cannot pass on an empty list)."""
    where = {b.path for b in ALL_BLOCKS}
    assert {"README.md", "examples/referee_example_plugin/README.md"} <= where
    assert len(ALL_BLOCKS) >= 3


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=str)
def test_toml_block_loads(block: Block) -> None:
    load_block(block)


def test_the_classifier_and_loaders_refuse_bad_snippets(tmp_path: Path) -> None:
    """The checks would catch what they are for: a misplaced key, and a block of no known kind."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "text\n\n```toml\nname = \"x\"\nmap = \"open\"\nduration_s = 5\ntick_rate_hz = 64\nseed = 1\n"
        "[[bots]]\ncount = 1\n\n[tolerances.bustaim]\nmax_ping_ms = 400\n```\n\n"
        "~~~toml\n[no_such_section]\nx = 1\n~~~\n\n```sh\nreferee match\n```\n"
    )
    scenario, unknown = toml_blocks(readme, root=tmp_path)
    assert (scenario.line, unknown.line) == (3, 16)
    from anticheat.tolerances import ToleranceError

    with pytest.raises(ToleranceError, match=r"\[bustaim\] unknown key 'max_ping_ms'"):
        load_block(scenario)
    with pytest.raises(AssertionError, match="no scenario, lab spec"):
        load_block(unknown)

