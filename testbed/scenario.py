"""Scenario files: what a match is (map, duration, tick rate, seed, bots and their links).

A scenario is a TOML file (stdlib ``tomllib``)::

    name = "duel"                 # optional, defaults to the file's stem
    description = "..."           # optional
    map = "corridors"             # a built-in map name, or a map file path (relative to this file)
    duration_s = 120.0            # simulated (virtual) or real seconds
    tick_rate_hz = 64             # 64 or 128
    seed = 7                      # root of every random choice of the match

    [tolerances.skip]             # optional detector tolerance overrides (anticheat.tolerances)
    max_ping_ms = 400.0

    [server]                      # optional ServerConfig overrides (nested tables for sub-configs)
    respawn_delay_s = 3.0

    [[bots]]
    count = 8
    profile = "honest"            # "honest", a cheat profile name, or "module:callable"
    skill = "average"             # low | average | high | pro
    ping_ms = 60.0                # round trip (ms); each direction gets half
    jitter_ms = 5.0               # per direction, sd (ms)
    loss = 0.02                   # per direction, fraction 0..1
    duplicate = 0.0               # per direction, fraction 0..1
    reorder = 0.0                 # per direction, fraction 0..1
    name_prefix = "honest"        # names are "<prefix>-1", "<prefix>-2", ...
    [bots.params]                 # profile parameters, e.g. the smooth aimbot's strength
    strength = 0.5

Every problem is reported as a :class:`ScenarioError` naming the file, the item and the problem,
e.g. ``default.toml: bots[2].loss: expected a fraction in [0, 1], got 1.5``. Which profile names
exist is not known here (the registry lives in ``bots/``): the loader takes the registry (or a
lookup function) as an argument.

Given a registry (an object with ``resolve(name) -> ProfileSpec``, e.g.
``bots.registry.default_registry()``), a group's profile may be a ``"module:callable"`` reference:
it is resolved while loading (a failure is a ScenarioError with the registry's message), the
group's ``profile`` becomes the spec's own name (the ground-truth label, and the default name
prefix) and ``ref`` keeps the reference the bots are built from.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from bots.skill import SkillLevel
from testbed.link import PathConfig

__all__ = [
    "BotGroup",
    "BotSpec",
    "ProfileLookup",
    "Scenario",
    "ScenarioError",
    "builtin_scenario",
    "builtin_scenario_names",
    "default_scenario",
    "load_scenario",
    "parse_scenario",
]

ProfileLookup = Collection[str] | Callable[[str], bool] | None
"""Known profile names: a collection (a registry mapping works, and resolves ``module:callable``
references), a predicate, or None (no check)."""

TICK_RATES_HZ: tuple[int, ...] = (64, 128)
MAX_BOTS = 200
"""Bots per scenario at most (the server's slot ceiling)."""
MAX_NAME_BYTES = 32
"""A player name's UTF-8 length limit (PROTOCOL.md, CONNECT)."""

_TOP_KEYS = frozenset({"name", "description", "map", "duration_s", "tick_rate_hz", "seed", "tolerances", "server", "bots"})
_BOT_KEYS = frozenset(
    {"count", "profile", "skill", "ping_ms", "jitter_ms", "loss", "duplicate", "reorder", "name_prefix", "params"}
)
_SCENARIO_PACKAGE = "testbed"
_SCENARIO_DIR = "scenarios"


class ScenarioError(ValueError):
    """A scenario is malformed; the message names the file, the item and the problem."""


def _freeze(value: Any) -> Any:
    """Read-only view of decoded TOML (tables become mapping proxies, arrays tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain dicts and lists again (for JSON, msgpack and ``apply_overrides``)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _rebuild(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**{k: _freeze(v) for k, v in fields.items()})


def _reduce(obj: Any) -> tuple[Any, ...]:
    """Pickle support: mapping proxies do not pickle, and worker processes (``referee evaluate``)
    receive scenarios. Fields travel thawed and are frozen again on arrival."""
    return (_rebuild, (type(obj), {f.name: thaw(getattr(obj, f.name)) for f in dataclasses.fields(obj)}))


@dataclass(frozen=True, slots=True)
class BotGroup:
    """``count`` bots sharing a profile, a skill level and link conditions.

    Attributes:
        count: number of bots (>= 1).
        profile: ground truth: ``"honest"`` or a cheat profile's name.
        skill: honest aim skill preset (low, average, high, pro); cheat profiles build on it.
        ping_ms: round-trip latency (ms); each direction gets ``ping_ms / 2``.
        jitter_ms: per-direction delay noise, standard deviation (ms).
        loss: per-direction independent loss probability (0..1).
        duplicate: per-direction duplication probability (0..1).
        reorder: per-direction reorder probability (0..1).
        name_prefix: bots are named ``<prefix>-<k>`` (k from 1); defaults to the profile name.
        params: profile parameters (read-only mapping), e.g. ``{"strength": 0.5}``.
        ref: the ``"module:callable"`` reference the profile was given by when its name differs
            from it (the bots are built from it); ``""`` when ``profile`` is a registered name.
    """

    count: int
    profile: str = "honest"
    skill: str = "average"
    ping_ms: float = 50.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    name_prefix: str = ""
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    ref: str = ""

    __reduce__ = _reduce

    @property
    def reference(self) -> str:
        """What the profile is resolved from: ``ref``, or the profile name itself."""
        return self.ref or self.profile

    @property
    def prefix(self) -> str:
        """The name prefix in effect."""
        return self.name_prefix or self.profile

    def path(self) -> PathConfig:
        """The link impairments of each bot of the group (both directions alike)."""
        return PathConfig.from_ping(
            self.ping_ms, jitter_ms=self.jitter_ms, loss=self.loss, duplicate=self.duplicate, reorder=self.reorder
        )


@dataclass(frozen=True, slots=True)
class BotSpec:
    """One bot of an expanded scenario.

    Attributes:
        index: position in the scenario (0-based, groups in file order), used for seeds and
            virtual addresses. name: unique player name. group: the group's index.
        profile, skill, params: as in the group (``profile`` is the ground-truth label).
        path: its link impairments.
        ping_ms, jitter_ms, loss: the configured link conditions (ground truth, for reports).
        ref: the group's ``module:callable`` reference, ``""`` for a registered profile.
    """

    index: int
    name: str
    group: int
    profile: str
    skill: str
    params: Mapping[str, Any]
    path: PathConfig
    ping_ms: float
    jitter_ms: float
    loss: float
    ref: str = ""

    @property
    def reference(self) -> str:
        """What a registry resolves this bot's profile from: ``ref``, or the profile name."""
        return self.ref or self.profile

    def label(self) -> dict[str, Any]:
        """Ground-truth label for replay headers and reports (plain, msgpack/JSON-able); ``ref``
        only for a profile given by reference (so existing replays' headers stay as they were)."""
        out = {
            "index": self.index,
            "name": self.name,
            "profile": self.profile,
            "skill": self.skill,
            "ping_ms": self.ping_ms,
            "jitter_ms": self.jitter_ms,
            "loss": self.loss,
            "params": thaw(self.params),
        }
        if self.ref:
            out["ref"] = self.ref
        return out


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario.

    Attributes:
        name: label. description: free text. map: built-in map name or map file path (a path
            is already resolved against the scenario's folder). duration_s: match length (s).
        tick_rate_hz: server tick rate (Hz). seed: root seed. bots: the groups in file order.
        tolerances: detector override tables ``{detector: {key: value}}`` (read-only), as for
            ``anticheat.tolerances.apply_all``. server: ServerConfig override table (read-only).
        source: where it came from (a path or ``builtin:<name>``).
    """

    name: str
    map: str
    duration_s: float
    tick_rate_hz: int
    seed: int
    bots: tuple[BotGroup, ...]
    description: str = ""
    tolerances: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    server: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "<memory>"

    __reduce__ = _reduce

    def players(self) -> tuple[BotSpec, ...]:
        """Every bot, groups in file order, numbered within each group."""
        out: list[BotSpec] = []
        for g, group in enumerate(self.bots):
            for k in range(group.count):
                out.append(
                    BotSpec(
                        index=len(out),
                        name=f"{group.prefix}-{k + 1}",
                        group=g,
                        profile=group.profile,
                        skill=group.skill,
                        params=group.params,
                        path=group.path(),
                        ping_ms=group.ping_ms,
                        jitter_ms=group.jitter_ms,
                        loss=group.loss,
                        ref=group.ref,
                    )
                )
        return tuple(out)

    @property
    def bot_count(self) -> int:
        """Number of bots."""
        return sum(g.count for g in self.bots)

    @property
    def tick_dt_s(self) -> float:
        """Tick duration (s)."""
        return 1.0 / self.tick_rate_hz

    def replace(self, **changes: Any) -> Scenario:
        """A copy with fields changed (e.g. ``duration_s``, ``seed``), re-validated."""
        candidate = dataclasses.replace(self, **changes)
        _validate_scenario(candidate)
        return candidate

    def with_tolerances(self, overrides: Mapping[str, Mapping[str, Any]]) -> Scenario:
        """A copy whose tolerance tables are merged with ``overrides`` (``overrides`` win per key)."""
        merged = {k: dict(v) for k, v in self.tolerances.items()}
        for section, table in overrides.items():
            merged.setdefault(section, {}).update(table)
        return dataclasses.replace(self, tolerances=_freeze(merged))

    def load_map(self) -> Any:
        """The ``world.mapfile.GameMap`` this scenario plays on (MapError / OSError when broken)."""
        from world.mapfile import builtin_map, builtin_map_names, load_map

        if self.map in builtin_map_names():
            return builtin_map(self.map)
        return load_map(self.map)

    def summary(self) -> dict[str, Any]:
        """Plain description for replay headers and JSON output."""
        return {
            "name": self.name,
            "source": self.source,
            "map": self.map,
            "duration_s": self.duration_s,
            "tick_rate_hz": self.tick_rate_hz,
            "seed": self.seed,
            "bots": [
                {**{f.name: getattr(g, f.name) for f in dataclasses.fields(g) if f.name not in ("params", "ref")},
                 "params": thaw(g.params), **({"ref": g.ref} if g.ref else {})}
                for g in self.bots
            ],
            "tolerances": thaw(self.tolerances),
            "server": thaw(self.server),
        }


# --- validation -----------------------------------------------------------------------------


class _Where:
    """Builds ``<source>: <item>: <problem>`` errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, item: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {item}: {problem}" if item else f"{self.source}: {problem}")


def _type_name(value: object) -> str:
    return type(value).__name__


def _check_keys(where: _Where, item: str, table: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise where.error(item, f"unknown key(s) {', '.join(map(repr, unknown))}; known keys: {', '.join(sorted(known))}")


def _number(where: _Where, item: str, value: object, *, minimum: float = 0.0, maximum: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(item, f"expected a number, got {_type_name(value)} {value!r}")
    number = float(value)
    if not (math.isfinite(number) and minimum <= number <= maximum):
        hi = "" if maximum == math.inf else f", <= {maximum:g}"
        raise where.error(item, f"expected a finite number >= {minimum:g}{hi}, got {value!r}")
    return number


def _fraction(where: _Where, item: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= float(value) <= 1.0):
        raise where.error(item, f"expected a fraction in [0, 1], got {value!r}")
    return float(value)


def _integer(where: _Where, item: str, value: object, *, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(item, f"expected an integer, got {_type_name(value)} {value!r}")
    if not minimum <= value <= maximum:
        raise where.error(item, f"expected an integer in [{minimum}, {maximum}], got {value}")
    return value


def _string(where: _Where, item: str, value: object, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise where.error(item, f"expected a string, got {_type_name(value)} {value!r}")
    if not allow_empty and not value.strip():
        raise where.error(item, "must not be empty")
    return value


def _table(where: _Where, item: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.error(item, f"expected a table, got {_type_name(value)} {value!r}")
    return value


def _profile_known(profiles: ProfileLookup, name: str) -> bool:
    if profiles is None:
        return True
    if callable(profiles) and not isinstance(profiles, Collection):
        return bool(profiles(name))
    return name in profiles


def _profile_names(profiles: ProfileLookup) -> str:
    if isinstance(profiles, Collection):
        return "; known profiles: " + ", ".join(sorted(profiles))
    return ""


def _resolve_profile(where: _Where, item: str, profiles: ProfileLookup, profile: str) -> tuple[str, str]:
    """(ground-truth label, reference) of a group's profile: with a resolving registry a
    ``module:callable`` reference becomes its spec's name, the reference kept to build from."""
    resolve = getattr(profiles, "resolve", None)
    if callable(resolve) and ":" in profile:
        try:
            spec = resolve(profile)
        except ValueError as exc:
            raise where.error(item, str(exc)) from None
        if spec.name == profile or (isinstance(profiles, Mapping) and spec.name in profiles):
            # The registry knows the spec by its name (it refuses a different one of that name).
            return spec.name, ""
        return spec.name, profile
    if not _profile_known(profiles, profile):
        raise where.error(item, f"unknown profile {profile!r}{_profile_names(profiles)}")
    return profile, ""


def _parse_bot_group(where: _Where, item: str, raw: object, profiles: ProfileLookup) -> BotGroup:
    table = _table(where, item, raw)
    _check_keys(where, item, table, _BOT_KEYS)
    if "count" not in table:
        raise where.error(item, "missing required key 'count'")
    count = _integer(where, f"{item}.count", table["count"], minimum=1, maximum=MAX_BOTS)
    profile, ref = _resolve_profile(
        where, f"{item}.profile", profiles, _string(where, f"{item}.profile", table.get("profile", "honest"))
    )
    skill = _string(where, f"{item}.skill", table.get("skill", "average"))
    levels = [level.value for level in SkillLevel]
    if skill not in levels:
        raise where.error(f"{item}.skill", f"unknown skill {skill!r}; known: {', '.join(levels)}")
    ping_ms = _number(where, f"{item}.ping_ms", table.get("ping_ms", 50.0), maximum=5000.0)
    jitter_ms = _number(where, f"{item}.jitter_ms", table.get("jitter_ms", 0.0), maximum=5000.0)
    loss = _fraction(where, f"{item}.loss", table.get("loss", 0.0))
    duplicate = _fraction(where, f"{item}.duplicate", table.get("duplicate", 0.0))
    reorder = _fraction(where, f"{item}.reorder", table.get("reorder", 0.0))
    prefix = _string(where, f"{item}.name_prefix", table.get("name_prefix", profile))
    params = _table(where, f"{item}.params", table.get("params", {}))
    group = BotGroup(
        count=count,
        profile=profile,
        skill=skill,
        ping_ms=ping_ms,
        jitter_ms=jitter_ms,
        loss=loss,
        duplicate=duplicate,
        reorder=reorder,
        name_prefix=prefix,
        params=_freeze(params),
        ref=ref,
    )
    # Longest generated name must fit the protocol's name field.
    longest = f"{group.prefix}-{count}"
    if len(longest.encode("utf-8")) > MAX_NAME_BYTES:
        raise where.error(f"{item}.name_prefix", f"names like {longest!r} exceed {MAX_NAME_BYTES} UTF-8 bytes")
    return group


def _validate_scenario(s: Scenario) -> None:
    where = _Where(s.source)
    _number(where, "duration_s", s.duration_s, minimum=0.0)
    if s.duration_s <= 0:
        raise where.error("duration_s", f"must be > 0, got {s.duration_s!r}")
    if s.tick_rate_hz not in TICK_RATES_HZ:
        raise where.error("tick_rate_hz", f"must be one of {', '.join(map(str, TICK_RATES_HZ))}, got {s.tick_rate_hz!r}")
    _integer(where, "seed", s.seed, minimum=0, maximum=2**63 - 1)
    if not s.bots:
        raise where.error("bots", "at least one [[bots]] group is required")
    if s.bot_count > MAX_BOTS:
        raise where.error("bots", f"{s.bot_count} bots in all, at most {MAX_BOTS}")
    seen: dict[str, int] = {}
    for g, group in enumerate(s.bots):
        if group.prefix in seen:
            raise where.error(
                f"bots[{g}].name_prefix",
                f"prefix {group.prefix!r} already used by bots[{seen[group.prefix]}]; names must be unique",
            )
        seen[group.prefix] = g
    # A ground-truth label must mean one profile: two references to specs of the same name, or a
    # reference named like a registered profile that another group names directly, are refused.
    origin: dict[str, tuple[int, str]] = {}
    for g, group in enumerate(s.bots):
        first = origin.setdefault(group.profile, (g, group.reference))
        if first[1] != group.reference:
            raise where.error(
                f"bots[{g}].profile",
                f"{group.reference!r} is a profile named {group.profile!r}, as is {first[1]!r} of bots[{first[0]}]; "
                "one name cannot label two profiles",
            )


def _resolve_map(where: _Where, value: object, base: Path | None) -> str:
    from world.mapfile import builtin_map_names

    name = _string(where, "map", value)
    if name in builtin_map_names():
        return name
    path = Path(name)
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.is_file():
        raise where.error(
            "map", f"{name!r} is neither a built-in map ({', '.join(builtin_map_names())}) nor an existing file"
        )
    return os.fspath(path)


def _check_tolerances(where: _Where, raw: object) -> Mapping[str, Mapping[str, Any]]:
    table = _table(where, "tolerances", raw)
    for section, sub in table.items():
        _table(where, f"tolerances.{section}", sub)
    return table


def parse_scenario(
    data: Mapping[str, Any], source: str = "<scenario>", profiles: ProfileLookup = None, base_dir: Path | None = None
) -> Scenario:
    """Validate decoded TOML as a scenario.

    Args:
        data: the decoded document.
        source: names the file in error messages.
        profiles: known profile names (see :data:`ProfileLookup`); None accepts any name.
        base_dir: folder that relative map paths are resolved against.

    Raises:
        ScenarioError: with the file, the item and the problem.
    """
    where = _Where(source)
    _check_keys(where, "", data, _TOP_KEYS)
    for key in ("map", "duration_s", "tick_rate_hz", "seed", "bots"):
        if key not in data:
            raise where.error(key, "missing required key")
    default_name = Path(source.removeprefix("builtin:")).stem if not source.startswith("<") else "scenario"
    name = _string(where, "name", data.get("name", default_name))
    description = _string(where, "description", data.get("description", ""), allow_empty=True)
    game_map = _resolve_map(where, data["map"], base_dir)
    duration_s = _number(where, "duration_s", data["duration_s"], minimum=0.0)
    tick_rate_hz = _integer(where, "tick_rate_hz", data["tick_rate_hz"], minimum=1, maximum=1024)
    seed = _integer(where, "seed", data["seed"], minimum=0, maximum=2**63 - 1)
    raw_bots = data["bots"]
    if not isinstance(raw_bots, list):
        raise where.error("bots", f"expected an array of tables ([[bots]]), got {_type_name(raw_bots)}")
    groups = tuple(_parse_bot_group(where, f"bots[{i}]", raw, profiles) for i, raw in enumerate(raw_bots))
    tolerances = _check_tolerances(where, data.get("tolerances", {}))
    server = _table(where, "server", data.get("server", {}))
    scenario = Scenario(
        name=name,
        map=game_map,
        duration_s=duration_s,
        tick_rate_hz=tick_rate_hz,
        seed=seed,
        bots=groups,
        description=description,
        tolerances=_freeze(tolerances),
        server=_freeze(server),
        source=source,
    )
    _validate_scenario(scenario)
    return scenario


def parse_scenario_text(text: str, source: str = "<scenario>", profiles: ProfileLookup = None, base_dir: Path | None = None) -> Scenario:
    """Parse TOML text as a scenario (see :func:`parse_scenario`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: invalid TOML: {exc}") from exc
    return parse_scenario(data, source, profiles, base_dir)


def load_scenario(path: str | os.PathLike[str], profiles: ProfileLookup = None) -> Scenario:
    """Load and validate a scenario file; map paths inside are relative to the file's folder."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    return parse_scenario_text(text, source, profiles, Path(source).parent)


def builtin_scenario_names() -> tuple[str, ...]:
    """Names of the scenarios shipped in ``testbed/scenarios`` (sorted)."""
    folder = resources.files(_SCENARIO_PACKAGE).joinpath(_SCENARIO_DIR)
    return tuple(sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml")))


def builtin_scenario(name: str, profiles: ProfileLookup = None) -> Scenario:
    """The shipped scenario ``name``; its source is ``builtin:<name>``."""
    names = builtin_scenario_names()
    if name not in names:
        raise ScenarioError(f"no built-in scenario {name!r}; available: {', '.join(names)}")
    text = resources.files(_SCENARIO_PACKAGE).joinpath(_SCENARIO_DIR, f"{name}.toml").read_text(encoding="utf-8")
    # Built-in scenarios name built-in maps only, so there is no folder to resolve against.
    return parse_scenario_text(text, f"builtin:{name}", profiles)


def default_scenario(profiles: ProfileLookup = None) -> Scenario:
    """The scenario ``referee match`` plays when none is given."""
    return builtin_scenario("default", profiles)
