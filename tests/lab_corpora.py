"""Small corpora the lab commands' end-to-end tests build from a spec's TOML."""

from __future__ import annotations

import tomllib
from pathlib import Path

from testbed.lab.corpus import build_corpus
from testbed.lab.spec import parse_spec
from testbed.lab.store import open_store


def build_tiny_corpus(directory: Path, spec_toml: str, source: str) -> Path:
    """Play every match of the spec into ``directory`` (one worker) and return it; each spec
    used here has exactly one match."""
    store = open_store(directory)
    try:
        report = build_corpus(parse_spec(tomllib.loads(spec_toml), source), store, workers=1)
    finally:
        store.close()
    assert report.played == 1
    return directory


def one_cheat_spec(name: str, seed: int, profile: str, *, duration_s: float = 60.0, map_name: str = "open",
                   label: str = "", params: str = "") -> str:
    """A one-match spec's TOML: three honest players (average, high, pro) on a 30 ms link and one
    cheater of ``profile`` (labelled ``label``, with ``params`` as TOML lines of its table), for
    ``duration_s`` seconds on ``map_name``."""
    return f"""
name = "{name}"
duration_s = {duration_s}
maps = ["{map_name}"]
seed = {seed}
honest_per_match = 3
cheaters_per_match = 1
honest_player_hours = 0.0
cheater_engagements = 1
skills = ["average", "high", "pro"]

[[links]]
name = "lan"
ping_ms = 30.0

[[cheats]]
profile = "{profile}"
""" + (f'label = "{label}"\n' if label else "") + (f"[cheats.params]\n{params}\n" if params else "")
