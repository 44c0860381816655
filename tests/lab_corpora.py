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
