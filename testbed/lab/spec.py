"""Corpus specs: which labelled matches a corpus holds, and their expansion into match jobs.

A spec is a TOML file that crosses maps, link classes, honest skill levels and cheat profiles
(with parameter grids or ranges) and says how much play to collect::

    name = "standard"
    duration_s = 600.0            # every match's length (s), at most 1800
    tick_rate_hz = 64
    maps = ["corridors", "city", "open"]
    seed = 100000                 # match i plays seed + i: tuning and evaluation corpora use
                                  # disjoint seed ranges
    honest_per_match = 10
    cheaters_per_match = 3
    honest_player_hours = 20.0    # at least this much honest play
    cheater_engagements = 60      # at least this many cheater-matches (0: one per setting)
    skills = ["low", "average", "high", "pro"]
    honest_profiles = ["honest"]  # honest variants (a plugin's "module:callable" too), cycled

    [[links]]                     # link classes, honest and cheating bots cycle through them
    name = "lan"
    ping_ms = 20.0                # round trip (ms)
    jitter_ms = 2.0               # per direction, sd (ms)
    loss = 0.0                    # per direction, fraction

    [[cheats]]
    profile = "smooth_aimbot"     # a registered profile or "module:callable"
    skill = "average"
    [cheats.params]
    strength = [0.2, 0.5, 1.0]    # an array is a grid: one setting per value
    noise_deg = { min = 0.0, max = 0.2, bins = 2 }   # a range: drawn per engagement, reported in bins

    [tolerances.aimdetect]        # optional: the detector tolerances the corpus is played with
    alpha = 0.01

Expansion is deterministic: the same spec gives the same jobs (ids, seeds, bots, parameters)
whoever expands it, so a resumed or distributed build plays exactly the matches an
uninterrupted one would. Every bot is its own scenario group (count 1), named ``hNN`` (honest)
or ``cNN`` (cheating) so that names say nothing about ground truth.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from testbed.scenario import ProfileLookup, Scenario, ScenarioError, parse_scenario

__all__ = [
    "CheatSetting",
    "CorpusSpec",
    "LinkClass",
    "MatchJob",
    "ParamRange",
    "SpecError",
    "builtin_spec_names",
    "load_spec",
    "parse_spec",
]

MAX_DURATION_S = 1800.0
"""A corpus match lasts at most 30 minutes."""
HONEST = "honest"
_SPEC_DIR = "specs"
_TOP_KEYS = frozenset({"name", "description", "duration_s", "tick_rate_hz", "maps", "seed", "honest_per_match",
                       "cheaters_per_match", "honest_player_hours", "cheater_engagements", "skills",
                       "honest_profiles", "links", "cheats", "tolerances", "server"})
_LINK_KEYS = frozenset({"name", "ping_ms", "jitter_ms", "loss", "duplicate", "reorder"})
_CHEAT_KEYS = frozenset({"profile", "skill", "params", "label"})
_RANGE_KEYS = frozenset({"min", "max", "bins"})
_SPAWN_KEY = (0x1AB,)
"""The range parameters' generator: its own stream, never one a match uses."""


class SpecError(ValueError):
    """A corpus spec is malformed; the message names the file, the item and the problem."""


@dataclass(frozen=True, slots=True)
class LinkClass:
    """One link class: round trip ``ping_ms`` (ms), per-direction ``jitter_ms`` (sd, ms),
    ``loss``/``duplicate``/``reorder`` (per-direction fractions)."""

    name: str
    ping_ms: float
    jitter_ms: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0


@dataclass(frozen=True, slots=True)
class ParamRange:
    """A parameter drawn uniformly from [low, high] per engagement, reported in ``bins`` equal bins."""

    low: float
    high: float
    bins: int

    def draw(self, rng: np.random.Generator) -> float:
        """One value (rounded to 4 decimals so labels and replays read cleanly)."""
        return round(float(rng.uniform(self.low, self.high)), 4)

    def bin_label(self, value: float) -> str:
        """``[a, b)`` of the bin ``value`` falls in."""
        width = (self.high - self.low) / self.bins
        k = min(self.bins - 1, max(0, int((value - self.low) / width))) if width > 0 else 0
        return f"[{self.low + k * width:g},{self.low + (k + 1) * width:g})"


@dataclass(frozen=True, slots=True)
class CheatSetting:
    """One cheat profile at fixed grid values; ``ranges`` are drawn per engagement.

    Attributes: profile (registry name or ``module:callable``), skill, fixed (parameter values),
        ranges (parameter ranges), label (the profile's name in reports; default the profile).
    """

    profile: str
    skill: str
    fixed: Mapping[str, Any]
    ranges: Mapping[str, ParamRange]
    label: str


@dataclass(frozen=True, slots=True)
class MatchJob:
    """One match of a corpus: its id (position in the spec), the scenario to play and each bot's
    lab labels (``name -> {"link": ..., "param_bin": ...}``)."""

    match_id: int
    scenario: Scenario
    labels: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class CorpusSpec:
    """A validated corpus spec (see the module docstring for the fields and their units)."""

    name: str
    duration_s: float
    tick_rate_hz: int
    maps: tuple[str, ...]
    seed: int
    honest_per_match: int
    cheaters_per_match: int
    honest_player_hours: float
    cheater_engagements: int
    skills: tuple[str, ...]
    links: tuple[LinkClass, ...]
    cheats: tuple[CheatSetting, ...]
    honest_profiles: tuple[str, ...] = (HONEST,)
    description: str = ""
    tolerances: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    server: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "<memory>"
    base_dir: Path | None = None

    @property
    def match_count(self) -> int:
        """Matches needed for both the honest play and the engagements asked for."""
        honest_s = self.honest_per_match * self.duration_s
        by_honest = math.ceil(self.honest_player_hours * 3600.0 / honest_s) if honest_s > 0 else 0
        engagements = max(self.cheater_engagements, len(self.cheats)) if self.cheats else 0
        by_cheats = math.ceil(engagements / self.cheaters_per_match) if self.cheaters_per_match else 0
        return max(1, by_honest, by_cheats)

    @property
    def player_hours(self) -> float:
        """Simulated player-hours of the whole corpus, cheaters included."""
        return self.match_count * (self.honest_per_match + self.cheaters_per_match) * self.duration_s / 3600.0

    def digest(self) -> str:
        """A hash of what the spec plays (not of its file's layout): a corpus directory is tied to it."""
        text = json.dumps(self.raw, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def with_seed(self, seed: int) -> CorpusSpec:
        """The same corpus played on other seeds (a held-out corpus for tuned tolerances)."""
        raw = dict(self.raw)
        raw["seed"] = seed
        return dataclasses.replace(self, seed=seed, raw=MappingProxyType(raw))

    def jobs(self, profiles: ProfileLookup = None) -> list[MatchJob]:
        """Every match of the corpus, in id order (deterministic)."""
        return [self.job(i, profiles) for i in range(self.match_count)]

    def job(self, match_id: int, profiles: ProfileLookup = None) -> MatchJob:
        """Match ``match_id``: map, seed, bots, links and parameters (deterministic)."""
        h, c = self.honest_per_match, self.cheaters_per_match
        groups: list[dict[str, Any]] = []
        labels: dict[str, dict[str, str]] = {}
        nl = len(self.links)
        for j in range(h):
            k = match_id * h + j
            link = self.links[k % nl]
            skill = self.skills[(k // nl) % len(self.skills)]
            profile = self.honest_profiles[(k // (nl * len(self.skills))) % len(self.honest_profiles)]
            name = f"h{j:02d}"
            groups.append({"count": 1, "profile": profile, "skill": skill, "name_prefix": name, **_link_fields(link)})
            labels[f"{name}-1"] = {"link": link.name, "param_bin": ""}
        for j in range(c):
            e = match_id * c + j
            setting = self.cheats[e % len(self.cheats)]
            # Cheaters cycle through the links offset from the honest bots, so that each setting
            # meets every link class as the engagements grow.
            link = self.links[(e // len(self.cheats) + e) % nl]
            rng = np.random.default_rng(np.random.SeedSequence(self.seed + match_id, spawn_key=(*_SPAWN_KEY, j)))
            params = dict(setting.fixed)
            bins = [f"{k}={v}" for k, v in sorted(setting.fixed.items()) if _varied(self, setting.profile, k)]
            for key, rng_range in sorted(setting.ranges.items()):
                params[key] = rng_range.draw(rng)
                bins.append(f"{key}={rng_range.bin_label(params[key])}")
            name = f"c{j:02d}"
            groups.append({"count": 1, "profile": setting.profile, "skill": setting.skill, "name_prefix": name,
                           "params": params, **_link_fields(link)})
            labels[f"{name}-1"] = {"link": link.name, "param_bin": " ".join(bins), "label": setting.label}
        table: dict[str, Any] = {
            "name": f"{self.name}-{match_id:05d}",
            "map": self.maps[match_id % len(self.maps)],
            "duration_s": self.duration_s,
            "tick_rate_hz": self.tick_rate_hz,
            "seed": self.seed + match_id,
            "bots": groups,
        }
        if self.tolerances:
            table["tolerances"] = _plain(self.tolerances)
        if self.server:
            table["server"] = _plain(self.server)
        if profiles is None:
            from bots.registry import default_registry

            # With a registry, a plugin named by reference is labelled with its profile's name.
            profiles = default_registry()
        try:
            # The source names the corpus, not the spec's file: it is recorded in every stream,
            # and the same spec must give the same streams wherever its file lives.
            scenario = parse_scenario(table, f"lab:{self.name}#{match_id}", profiles, self.base_dir)
        except ScenarioError as exc:
            raise SpecError(f"{self.source}: {exc}") from exc
        # Plain dicts: a job travels to worker processes, and mapping proxies do not pickle.
        return MatchJob(match_id, scenario, labels)


def _varied(spec: CorpusSpec, profile: str, key: str) -> bool:
    """A fixed parameter is part of the bin label when the spec plays the profile at several values."""
    values = {json.dumps(s.fixed.get(key), sort_keys=True) for s in spec.cheats if s.profile == profile}
    return len(values) > 1


def _link_fields(link: LinkClass) -> dict[str, float]:
    return {"ping_ms": link.ping_ms, "jitter_ms": link.jitter_ms, "loss": link.loss,
            "duplicate": link.duplicate, "reorder": link.reorder}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --- parsing ----------------------------------------------------------------------------------


def _err(source: str, item: str, problem: str) -> SpecError:
    return SpecError(f"{source}: {item}: {problem}" if item else f"{source}: {problem}")


def _check_keys(source: str, item: str, table: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise _err(source, item, f"unknown keys {unknown}; known: {sorted(known)}")


def _num(source: str, item: str, value: Any, lo: float, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not lo <= value <= hi:
        raise _err(source, item, f"expected a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _int(source: str, item: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _err(source, item, f"expected an integer in [{lo}, {hi}], got {value!r}")
    return value


def _parse_link(source: str, i: int, raw: Any) -> LinkClass:
    item = f"links[{i}]"
    if not isinstance(raw, Mapping):
        raise _err(source, item, "expected a table")
    _check_keys(source, item, raw, _LINK_KEYS)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _err(source, f"{item}.name", "expected a non-empty string")
    return LinkClass(
        name=name,
        ping_ms=_num(source, f"{item}.ping_ms", raw.get("ping_ms", 50.0), 0.0, 2000.0),
        jitter_ms=_num(source, f"{item}.jitter_ms", raw.get("jitter_ms", 0.0), 0.0, 1000.0),
        loss=_num(source, f"{item}.loss", raw.get("loss", 0.0), 0.0, 0.5),
        duplicate=_num(source, f"{item}.duplicate", raw.get("duplicate", 0.0), 0.0, 0.5),
        reorder=_num(source, f"{item}.reorder", raw.get("reorder", 0.0), 0.0, 0.5),
    )


def _parse_cheat(source: str, i: int, raw: Any) -> list[CheatSetting]:
    item = f"cheats[{i}]"
    if not isinstance(raw, Mapping):
        raise _err(source, item, "expected a table")
    _check_keys(source, item, raw, _CHEAT_KEYS)
    profile = raw.get("profile")
    if not isinstance(profile, str) or not profile or profile == HONEST:
        raise _err(source, f"{item}.profile", f"expected a cheat profile name, got {profile!r}")
    skill = raw.get("skill", "average")
    label = raw.get("label", profile.rpartition(":")[2])
    params = raw.get("params", {})
    if not isinstance(params, Mapping):
        raise _err(source, f"{item}.params", "expected a table")
    grids: list[tuple[str, list[Any]]] = []
    ranges: dict[str, ParamRange] = {}
    for key, value in params.items():
        where = f"{item}.params.{key}"
        if isinstance(value, list):
            if not value:
                raise _err(source, where, "an empty grid")
            grids.append((key, value))
        elif isinstance(value, Mapping):
            _check_keys(source, where, value, _RANGE_KEYS)
            lo = _num(source, f"{where}.min", value.get("min"), -1e9, 1e9)
            hi = _num(source, f"{where}.max", value.get("max"), lo, 1e9)
            ranges[key] = ParamRange(lo, hi, _int(source, f"{where}.bins", value.get("bins", 1), 1, 100))
        else:
            grids.append((key, [value]))
    out = []
    for combo in itertools.product(*(values for _, values in grids)):
        fixed = {key: v for (key, _), v in zip(grids, combo, strict=True)}
        out.append(CheatSetting(profile, str(skill), MappingProxyType(fixed), MappingProxyType(ranges), str(label)))
    return out


def parse_spec(data: Mapping[str, Any], source: str = "<spec>", profiles: ProfileLookup = None) -> CorpusSpec:
    """A validated spec from decoded TOML; every job's scenario is checked too (SpecError)."""
    _check_keys(source, "", data, _TOP_KEYS)
    maps = data.get("maps", ["corridors"])
    if isinstance(maps, str):
        maps = [maps]
    if not isinstance(maps, list) or not maps or not all(isinstance(m, str) for m in maps):
        raise _err(source, "maps", "expected a non-empty array of map names or paths")
    base = None if source.startswith("<") or source.startswith("builtin:") else Path(source).parent
    links_raw = data.get("links") or [{"name": "default", "ping_ms": 50.0}]
    if not isinstance(links_raw, list):
        raise _err(source, "links", "expected an array of tables ([[links]])")
    links = tuple(_parse_link(source, i, raw) for i, raw in enumerate(links_raw))
    if len({link.name for link in links}) != len(links):
        raise _err(source, "links", "link class names must be unique")
    cheats_raw = data.get("cheats", [])
    if not isinstance(cheats_raw, list):
        raise _err(source, "cheats", "expected an array of tables ([[cheats]])")
    cheats = tuple(s for i, raw in enumerate(cheats_raw) for s in _parse_cheat(source, i, raw))
    skills = data.get("skills", ["average"])
    if not isinstance(skills, list) or not skills or not all(isinstance(s, str) for s in skills):
        raise _err(source, "skills", "expected a non-empty array of skill names")
    honest_profiles = data.get("honest_profiles", [HONEST])
    if not isinstance(honest_profiles, list) or not honest_profiles or not all(isinstance(s, str) and s for s in honest_profiles):
        raise _err(source, "honest_profiles", "expected a non-empty array of profile names")
    tol = data.get("tolerances", {})
    server = data.get("server", {})
    if not isinstance(tol, Mapping) or not isinstance(server, Mapping):
        raise _err(source, "tolerances", "tolerances and server must be tables")
    spec = CorpusSpec(
        name=str(data.get("name") or Path(source).stem or "corpus"),
        description=str(data.get("description", "")),
        duration_s=_num(source, "duration_s", data.get("duration_s", 600.0), 1.0, MAX_DURATION_S),
        tick_rate_hz=_int(source, "tick_rate_hz", data.get("tick_rate_hz", 64), 64, 128),
        maps=tuple(maps),
        seed=_int(source, "seed", data.get("seed", 0), 0, 2**62),
        honest_per_match=_int(source, "honest_per_match", data.get("honest_per_match", 10), 0, 150),
        cheaters_per_match=_int(source, "cheaters_per_match", data.get("cheaters_per_match", 2 if cheats else 0), 0, 50),
        honest_player_hours=_num(source, "honest_player_hours", data.get("honest_player_hours", 1.0), 0.0, 1e6),
        cheater_engagements=_int(source, "cheater_engagements", data.get("cheater_engagements", 0), 0, 10**7),
        skills=tuple(skills),
        links=links,
        cheats=cheats,
        honest_profiles=tuple(honest_profiles),
        tolerances=MappingProxyType(dict(tol)),
        server=MappingProxyType(dict(server)),
        raw=MappingProxyType(dict(data)),
        source=source,
        base_dir=base,
    )
    if spec.cheats and spec.cheaters_per_match == 0:
        raise _err(source, "cheaters_per_match", "cheats are listed but no match has a cheater")
    if spec.honest_per_match + spec.cheaters_per_match == 0:
        raise _err(source, "honest_per_match", "a match needs at least one bot")
    # Every distinct bot setting must make a valid scenario: check the first matches now rather
    # than in a worker an hour into the build.
    for i in range(min(spec.match_count, max(1, len(spec.cheats)))):
        spec.job(i, profiles)
    return spec


def load_spec(path_or_name: str | os.PathLike[str], profiles: ProfileLookup = None) -> CorpusSpec:
    """A spec from a file, or a built-in one by name (``standard``, ``smoke``...)."""
    text: str
    source = os.fspath(path_or_name)
    if source in builtin_spec_names():
        text = resources.files("testbed.lab").joinpath(_SPEC_DIR, f"{source}.toml").read_text(encoding="utf-8")
        source = f"builtin:{source}"
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot read corpus spec {source!r}: {exc} (built-in specs: {', '.join(builtin_spec_names())})") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: invalid TOML: {exc}") from exc
    return parse_spec(data, source, profiles)


def builtin_spec_names() -> tuple[str, ...]:
    """Names of the specs shipped in ``testbed/lab/specs``."""
    folder = resources.files("testbed.lab").joinpath(_SPEC_DIR)
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml")))

