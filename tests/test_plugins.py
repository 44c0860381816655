"""Profiles and aim models from outside Referee: the registries, entry points, ``module:callable``
references, scenarios and matches that name them, the example plugin, and the aim-model hook
(whose default must leave the honest aim exactly as it was)."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import bots.registry as reg
from bots.aim import (
    AimController,
    AimModel,
    AimOutput,
    AimTarget,
    MinimumJerkFitts,
    MovementKind,
    MovementRequest,
    SubMovement,
    angular_size_deg,
    fitts_time_s,
    min_jerk,
)
from bots.aim_models import builtin_aim_models, default_aim_models
from bots.build import ground_truth, make_bot
from bots.client import BotClient, ClientConfig
from bots.honest import HonestBrain
from bots.profiles import PROFILES, AimModelBrain, HonestParams, ProfileSpec
from bots.registry import ProfileRegistry, default_registry
from bots.skill import Skill, preset, sample_skill
from testbed.bot_factory import DefaultBotFactory, scenario_profiles
from testbed.evaluation import evaluate
from testbed.scenario import ScenarioError, parse_scenario_text
from world.geometry import MapGeometry
from world.mapfile import GameMap, parse_map

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "referee_example_plugin"
DT = 1.0 / 64.0
EYE = (0.0, 0.0, 1.64)

CUSTOM_MODULE = "referee_test_custom_profiles"
CUSTOM_SOURCE = '''
from dataclasses import dataclass

from bots.aim import MinimumJerkFitts
from bots.cheats import CheatHooks
from bots.cheats.params import NoParams
from bots.profiles import ProfileSpec


class Counting(CheatHooks):
    """Counts the ticks it sees (proof that the hooks really played)."""

    name = "counting_cheat"

    def __init__(self, params, ctx):
        super().__init__(ctx)
        self.ticks = 0

    def intent(self, p, honest, rng):
        self.ticks += 1
        return honest


def _hooks(params, ctx):
    return Counting(params, ctx)


def counting():
    return ProfileSpec("counting_cheat", "counts its ticks", NoParams, _hooks, blatant=False)


SPEC = counting()


def twin():
    return ProfileSpec("counting_cheat", "another profile of the same name", NoParams, _hooks, blatant=True)


def impostor():
    return ProfileSpec("lock_aimbot", "not the real lock aimbot", NoParams, _hooks)


def not_a_spec():
    return 42


def broken():
    raise RuntimeError("boom")


class Slow(MinimumJerkFitts):
    """Every movement twice as long as the built-in model's."""

    def plan(self, request, skill, rng):
        move = super().plan(request, skill, rng)
        return None if move is None else type(move)(move.start_s, 2.0 * move.duration_s, move.dyaw_deg, move.dpitch_deg)
'''


@pytest.fixture
def custom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of custom profiles, importable as ``CUSTOM_MODULE``."""
    folder = tmp_path / "custom"
    folder.mkdir()
    (folder / f"{CUSTOM_MODULE}.py").write_text(CUSTOM_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, CUSTOM_MODULE, raising=False)
    importlib.invalidate_caches()
    yield CUSTOM_MODULE
    sys.modules.pop(CUSTOM_MODULE, None)


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> str:
    """The example plugin importable by reference (not installed)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    return "referee_example_plugin"


@pytest.fixture
def fresh_defaults() -> Iterator[None]:
    """Forget the cached default registries before and after (the test changes sys.path)."""
    default_registry.cache_clear()
    default_aim_models.cache_clear()
    yield
    default_registry.cache_clear()
    default_aim_models.cache_clear()


@pytest.fixture(scope="module")
def game_map() -> GameMap:
    return parse_map(
        {
            "format": "referee-map/1",
            "name": "tiny",
            "bounds": [0, 0, 60, 40],
            "walls": [{"id": "wall", "polygon": [[30, 5], [32, 5], [32, 35], [30, 35]], "height": 4}],
            "spawns": [{"id": "a", "pos": [5, 20], "yaw": 0}, {"id": "b", "pos": [50, 20], "yaw": 180}],
        }
    )


@pytest.fixture(scope="module")
def geometry(game_map: GameMap) -> MapGeometry:
    return MapGeometry(game_map)


# ------------------------------------------------------------------------------- registry


def test_builtin_profiles_resolve_and_the_registry_is_immutable() -> None:
    registry = reg.builtin_registry()
    assert registry.names()[0] == "honest"
    assert set(registry.names()) == set(PROFILES)
    assert registry.resolve("lock_aimbot") is PROFILES["lock_aimbot"]
    assert registry.is_builtin("honest") and "honest" in registry and "wizard" not in registry
    assert not registry["honest"].cheat and not registry["honest"].blatant
    assert registry["lock_aimbot"].cheat
    with pytest.raises(TypeError):
        registry["x"] = PROFILES["honest"]  # type: ignore[index]
    with pytest.raises(ValueError, match=r"unknown profile 'wizard' \(known: honest, lock_aimbot"):
        registry.resolve("wizard")


def test_with_profiles_makes_a_new_registry_and_refuses_taken_names(custom: str) -> None:
    registry = reg.builtin_registry()
    spec = importlib.import_module(custom).SPEC
    more = registry.with_profiles(spec)
    assert isinstance(more, ProfileRegistry) and more is not registry
    assert "counting_cheat" in more and "counting_cheat" not in registry
    assert more.names()[: len(registry)] == registry.names() and more.names()[-1] == "counting_cheat"
    assert not more.is_builtin("counting_cheat")
    with pytest.raises(ValueError, match="'lock_aimbot' is already a built-in profile"):
        registry.with_profiles(dataclasses.replace(spec, name="lock_aimbot"))
    with pytest.raises(ValueError, match="'counting_cheat' is already a registered profile"):
        more.with_profiles(spec)


def test_module_callable_references_resolve_with_clear_errors(custom: str) -> None:
    registry = reg.builtin_registry()
    spec = registry.resolve(f"{custom}:counting")
    assert spec.name == "counting_cheat" and spec.cheat and not spec.blatant
    assert registry.resolve(f"{custom}:SPEC") == spec  # a ProfileSpec itself is taken as it is
    assert f"{custom}:counting" in registry
    assert ground_truth(f"{custom}:counting") == "counting_cheat"
    cases = {
        "no_such_module_xyz:make": r"profile reference 'no_such_module_xyz:make': cannot import 'no_such_module_xyz'",
        f"{custom}:missing": rf"profile reference '{custom}:missing': '{custom}' has no attribute 'missing'",
        f"{custom}:not_a_spec": rf"profile reference '{custom}:not_a_spec' returned int, expected a bots.profiles.ProfileSpec",
        f"{custom}:broken": rf"profile reference '{custom}:broken' raised RuntimeError: boom",
        f"{custom}:impostor": rf"'{custom}:impostor' returns a profile named 'lock_aimbot', which is already registered",
    }
    for ref, message in cases.items():
        with pytest.raises(ValueError, match=message):
            registry.resolve(ref)
        assert ref not in registry
    with pytest.raises(ValueError, match="params must be a dataclass"):
        ProfileSpec("x", "bad", dict, lambda p, c: None)
    with pytest.raises(ValueError, match="without ':'"):
        dataclasses.replace(spec, name="a:b")
    with pytest.raises(ValueError, match="cannot be blatant"):
        dataclasses.replace(spec, cheat=False, blatant=True)


def _fake_distribution(site: Path, name: str, entry_points: str, module: str, source: str) -> None:
    """An installed distribution as importlib.metadata sees it: a dist-info folder with an
    ``entry_points.txt``, and the module its entry points name (nothing is installed)."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (site / f"{module}.py").write_text(source)


def test_entry_points_register_profiles_and_aim_models_and_broken_ones_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fresh_defaults: None
) -> None:
    site = tmp_path / "site"
    module = "referee_test_ep_plugin"
    _fake_distribution(site, "referee_test_ep_plugin", f"""
        [referee.profiles]
        counting_cheat = {module}:counting
        counting_spec = {module}:SPEC
        broken_import = referee_no_such_module_q:make
        not_a_spec = {module}:not_a_spec
        lock_aimbot = {module}:impostor

        [referee.aim_models]
        slow = {module}:Slow
        bad_model = {module}:not_a_spec
    """, module, CUSTOM_SOURCE)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, module, raising=False)
    importlib.invalidate_caches()
    with caplog.at_level(logging.WARNING, logger="bots.registry"):
        registry = default_registry()
        models = default_aim_models()
    assert "counting_cheat" in registry.names() and registry["counting_cheat"].cheat
    assert registry["lock_aimbot"] is PROFILES["lock_aimbot"]  # a plugin cannot replace a built-in
    assert not registry.is_builtin("counting_cheat")
    assert "slow" in models.names() and "bad_model" not in models.names()
    assert type(models.create("slow")).__name__ == "Slow"
    text = caplog.text
    assert "broken_import" in text and "referee_no_such_module_q" in text
    assert "not_a_spec" in text and "returned int" in text
    assert "'lock_aimbot' is already a built-in profile" in text
    # 'counting_spec' names the same spec as 'counting_cheat': logged, not registered twice.
    assert "already a registered profile" in text
    # Cached: the broken entry points are not loaded (nor logged) again.
    caplog.clear()
    assert default_registry() is registry and caplog.text == ""
    # A scenario names the entry-point profile like a built-in one; the factory builds it.
    scenario = parse_scenario_text(
        'map = "corridors"\nduration_s = 1.0\ntick_rate_hz = 64\nseed = 1\n[[bots]]\ncount = 1\n'
        'profile = "counting_cheat"\n[[bots]]\ncount = 1\nprofile = "honest"\n[bots.params]\naim_model = "slow"\n',
        profiles=registry,
    )
    game_map = scenario.load_map()
    geometry = MapGeometry(game_map)
    factory = DefaultBotFactory()
    bots = [factory(s, game_map=game_map, geometry=geometry, tick_rate_hz=64, rng=np.random.default_rng(i))
            for i, s in enumerate(scenario.players())]
    assert type(bots[0].hooks).__name__ == "Counting"
    assert type(bots[1].brain.aim.model).__name__ == "Slow"  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------- scenarios


SCENARIO_HEAD = 'map = "corridors"\nduration_s = 8.0\ntick_rate_hz = 64\nseed = 4\n'


def test_scenarios_label_referenced_profiles_with_their_names(custom: str) -> None:
    registry = default_registry()
    text = SCENARIO_HEAD + f'[[bots]]\ncount = 2\nprofile = "{custom}:counting"\n[[bots]]\ncount = 1\n'
    scenario = parse_scenario_text(text, "x.toml", profiles=registry)
    group = scenario.bots[0]
    assert group.profile == "counting_cheat" and group.ref == f"{custom}:counting"
    assert [b.name for b in scenario.players()] == ["counting_cheat-1", "counting_cheat-2", "honest-1"]
    first = scenario.players()[0]
    assert first.reference == f"{custom}:counting"
    assert first.label()["profile"] == "counting_cheat" and first.label()["ref"] == f"{custom}:counting"
    assert scenario.summary()["bots"][0]["ref"] == f"{custom}:counting"
    assert scenario_profiles(scenario)["counting_cheat"].name == "counting_cheat"
    # A scenario of registered profiles keeps its replay header exactly as before: no "ref".
    honest = scenario.players()[2]
    assert "ref" not in honest.label() and "ref" not in scenario.summary()["bots"][1]
    # Errors name the file, the item and the reference.
    with pytest.raises(ScenarioError, match=rf"x.toml: bots\[0\].profile: profile reference '{custom}:broken' raised"):
        parse_scenario_text(SCENARIO_HEAD + f'[[bots]]\ncount = 1\nprofile = "{custom}:broken"\n', "x.toml", registry)
    with pytest.raises(ScenarioError, match=r"x.toml: bots\[0\].profile: unknown profile 'wizard'; known profiles: "):
        parse_scenario_text(SCENARIO_HEAD + '[[bots]]\ncount = 1\nprofile = "wizard"\n', "x.toml", registry)
    with pytest.raises(ScenarioError, match="one name cannot label two profiles"):
        parse_scenario_text(SCENARIO_HEAD + f'[[bots]]\ncount = 1\nprofile = "{custom}:counting"\n'
                            f'[[bots]]\ncount = 1\nprofile = "{custom}:twin"\nname_prefix = "t"\n', "x.toml", registry)


def test_factory_builds_honest_bots_exactly_as_before(game_map: GameMap, geometry: MapGeometry) -> None:
    """``honest`` now goes through the registry; the client must be the one the factory built
    before: the skill from the first spawned generator, the default ClientConfig, no hooks."""
    scenario = parse_scenario_text(
        'map = "corridors"\nduration_s = 1.0\ntick_rate_hz = 128\nseed = 1\n[[bots]]\ncount = 1\nskill = "high"\n',
        profiles=default_registry(),
    )
    (spec,) = scenario.players()
    factory = DefaultBotFactory()
    bot = factory(spec, game_map=game_map, geometry=geometry, tick_rate_hz=128, rng=np.random.default_rng(5))
    # What DefaultBotFactory._honest did.
    skill_rng, client_rng = np.random.default_rng(5).spawn(2)
    brain = HonestBrain(sample_skill(skill_rng, "high"), nav=factory.nav(geometry), geometry=geometry)
    legacy = BotClient(spec.name, brain, game_map, client_rng, geometry=geometry)
    assert isinstance(bot, BotClient) and isinstance(bot.brain, HonestBrain)
    assert bot.brain.skill == legacy.brain.skill and bot.brain.nav is legacy.brain.nav
    assert bot.config == legacy.config == ClientConfig()
    assert type(bot.hooks) is type(legacy.hooks) and type(bot.brain.aim.model) is MinimumJerkFitts
    assert bot.rng.bit_generator.state == legacy.rng.bit_generator.state
    assert bot.start(0.0) == legacy.start(0.0)
    # A cheat still gets the server's tick rate from the start.
    cheat = make_bot("lock_aimbot", name="c", game_map=game_map, geometry=geometry, tick_rate_hz=128,
                     rng=np.random.default_rng(5))
    assert cheat.config.default_tick_rate_hz == 128


def test_a_virtual_match_plays_custom_and_example_profiles_by_reference(custom: str, example: str) -> None:
    from testbed.match import run_virtual

    text = (SCENARIO_HEAD
            + '[[bots]]\ncount = 1\nprofile = "honest"\n'
            + f'[[bots]]\ncount = 1\nprofile = "{custom}:counting"\n'
            + f'[[bots]]\ncount = 1\nprofile = "{example}:honest_overshoot"\n'
            + f'[[bots]]\ncount = 1\nprofile = "{example}:snap_after_delay"\n[bots.params]\ndelay_s = 0.2\n')
    scenario = parse_scenario_text(text, "plugins.toml", profiles=default_registry())
    built: list[BotClient] = []
    factory = DefaultBotFactory()

    def capture(spec, **kwargs):  # type: ignore[no-untyped-def]
        built.append(factory(spec, **kwargs))
        return built[-1]

    result = run_virtual(scenario, bot_factory=capture).with_profiles(scenario_profiles(scenario))
    assert [p.profile for p in result.players] == ["honest", "counting_cheat", "honest_overshoot", "snap_after_delay"]
    assert all(p.connected for p in result.players)
    assert [p.honest for p in result.players] == [True, False, True, False]
    # The custom hooks ran every client tick of the match, the example profiles are theirs.
    assert built[1].hooks.ticks > 0.8 * scenario.duration_s * 64  # type: ignore[attr-defined]
    assert type(built[2].brain.aim.model).__name__ == "Overshoot"  # type: ignore[attr-defined]
    assert type(built[3].hooks).__name__ == "SnapAfterDelay"
    (outcome,) = evaluate([scenario], jobs=1).scenarios
    assert outcome.honest == 2
    assert [(c.profile, c.blatant) for c in outcome.cheaters] == [("counting_cheat", False), ("snap_after_delay", False)]


def test_example_plugin_files_declare_what_the_references_give(example: str) -> None:
    import tomllib

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    eps = project["project"]["entry-points"]
    registry = reg.builtin_registry()
    for name, ref in eps["referee.profiles"].items():
        assert registry.resolve(ref).name == name
    assert not registry.resolve(eps["referee.profiles"]["honest_overshoot"]).cheat
    for name, ref in eps["referee.aim_models"].items():
        assert isinstance(builtin_aim_models().create(ref), AimModel), name
    # Both example scenarios validate (the installed names need the entry points).
    with_plugin = registry.with_profiles(*(registry.resolve(r) for r in eps["referee.profiles"].values()))
    from testbed.scenario import load_scenario

    installed = load_scenario(EXAMPLE / "scenario.toml", with_plugin)
    by_reference = load_scenario(EXAMPLE / "scenario_by_reference.toml", registry)
    assert [g.profile for g in installed.bots] == [g.profile for g in by_reference.bots]


# ------------------------------------------------------------------------------- aim models


def _target_at(yaw_deg: float, pitch_deg: float = 0.0, distance_m: float = 10.0, slot: int = 1) -> AimTarget:
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    point = (EYE[0] + distance_m * math.cos(p) * math.cos(y), EYE[1] + distance_m * math.cos(p) * math.sin(y),
             EYE[2] + distance_m * math.sin(p))
    return AimTarget(slot=slot, point_m=point, eye_m=EYE, width_deg=angular_size_deg(0.45, distance_m))


def _run(aim: AimController, rng: np.random.Generator, seconds: float = 9.0) -> list[AimOutput]:
    """Engagements with a fast-moving target (catch-ups), pauses with look-around turns, a second
    target."""
    aim.reset(0.0, 0.0)
    out = []
    for i in range(int(seconds * 64)):
        t = i * DT
        phase = (i // 128) % 3
        tgt = (_target_at(40.0 + 30.0 * math.sin(3.0 * t), 5.0) if phase == 0 else None if phase == 1
               else _target_at(-120.0 + (30.0 * t) % 50.0, -3.0, 25.0, slot=2))
        look = (100.0 * math.sin(0.3 * t), 0.0) if tgt is None else None
        out.append(aim.step(t, DT, tgt, rng, look=look, punch=(0.5 * (i % 7 == 0), 0.1)))
    return out


class _Recording:
    """A user model that delegates to the built-in one and records what it was asked."""

    def __init__(self) -> None:
        self.base = MinimumJerkFitts()
        self.kinds: list[MovementKind] = []

    def plan(self, request: MovementRequest, skill: Skill, rng: np.random.Generator) -> SubMovement | None:
        self.kinds.append(request.kind)
        return self.base.plan(request, skill, rng)


def _legacy_plan(request: MovementRequest, sk: Skill, rng: np.random.Generator) -> SubMovement | None:
    """``AimController._plan`` as it was before the model hook (constants per kind inlined as the
    callers passed them), the reference the default model must equal bit for bit."""
    a_s, undershoot, along_sd, across_sd, min_s = {
        MovementKind.FLICK: (sk.fitts_a_s, sk.undershoot, sk.amplitude_sd, sk.direction_sd, sk.min_flick_s),
        MovementKind.CORRECTION: (sk.correction_a_s, sk.undershoot, sk.correction_error_sd,
                                  0.5 * sk.correction_error_sd, 0.5 * sk.min_flick_s),
        MovementKind.CATCHUP: (sk.correction_a_s, sk.undershoot, sk.correction_error_sd,
                               0.5 * sk.correction_error_sd, 0.5 * sk.min_flick_s),
        MovementKind.LOOK: (sk.fitts_a_s, 0.0, sk.amplitude_sd, sk.direction_sd, sk.min_flick_s),
    }[request.kind]
    hy, hp = request.hand_yaw_deg, request.hand_pitch_deg
    cosp = max(math.cos(math.radians(hp)), 0.05)
    dx = ((request.goal_yaw_deg - hy + 180.0) % 360.0 - 180.0) * cosp
    dy = request.goal_pitch_deg - hp
    dist = math.hypot(dx, dy)
    z0, z1 = rng.standard_normal(2).tolist()
    if dist < sk.mouse_count_deg:
        return None
    ux, uy = dx / dist, dy / dist
    along = dist * (1.0 - undershoot + along_sd * z0)
    across = dist * across_sd * z1
    ex, ey = ux * along - uy * across, uy * along + ux * across
    duration = max(min_s, fitts_time_s(dist, request.width_deg, a_s, sk.fitts_b_s_per_bit))
    return SubMovement(start_s=request.t_s, duration_s=duration, dyaw_deg=ex / cosp, dpitch_deg=ey)


def test_the_default_model_plans_exactly_as_the_controller_did() -> None:
    sk = sample_skill(np.random.default_rng(3), "average")
    draws = np.random.default_rng(8)
    model = MinimumJerkFitts()
    for i in range(400):
        kind = list(MovementKind)[i % 4]
        hy, hp = draws.uniform(-400.0, 400.0), draws.uniform(-89.0, 89.0)
        gy = hy + draws.normal(0.0, 60.0) * (i % 5 != 0) + draws.normal(0.0, 0.01)
        request = MovementRequest(kind, float(i), hy, hp, gy, float(draws.uniform(-89.0, 89.0)), float(draws.uniform(0.5, 12.0)))
        new, old = np.random.default_rng(i), np.random.default_rng(i)
        assert model.plan(request, sk, new) == _legacy_plan(request, sk, old)
        assert new.bit_generator.state == old.bit_generator.state


def test_every_movement_goes_through_the_model_and_a_pass_through_changes_nothing() -> None:
    recording = _Recording()
    for seed, level in enumerate(("low", "average", "high", "pro")):
        sk = sample_skill(np.random.default_rng(seed), level)
        default = _run(AimController(sk), np.random.default_rng(seed + 10))
        assert _run(AimController(sk, model=recording), np.random.default_rng(seed + 10)) == default
    assert set(recording.kinds) == set(MovementKind)


def test_a_custom_model_changes_the_flick(example: str) -> None:
    from referee_example_plugin.overshoot import Overshoot, OvershootParams, OvershootProfile

    sk = dataclasses.replace(preset("average"), tremor_amp_deg=0.0, drift_sd_deg=0.0, motor_noise_deg=0.0,
                             mouse_count_deg=1e-6)
    trajectories = {}
    for label, model in (("default", None), ("overshoot", Overshoot(OvershootParams(overshoot_sd=0.0)))):
        aim = AimController(sk, model=model)
        aim.reset(0.0, 0.0)
        rng = np.random.default_rng(4)
        target = _target_at(60.0)
        yaws = [aim.step(i * DT, DT, target, rng).yaw_deg for i in range(64)]
        assert aim.flick is not None
        # The view while the flick moves the hand (corrections after it may go further).
        during = [y for i, y in enumerate(yaws) if aim.flick.start_s <= i * DT <= aim.flick.end_s]
        trajectories[label] = (np.array(during), aim.flick)
    (plain, plain_flick), (over, over_flick) = trajectories["default"], trajectories["overshoot"]
    assert over_flick.profile == OvershootProfile(0.15, 0.7)
    assert over_flick.duration_s == pytest.approx(plain_flick.duration_s / 0.7)
    assert not np.array_equal(plain, over)
    # The built-in flick approaches the target without passing where it stops; the overshooting
    # one passes its own endpoint by about 15 % of the flick, then comes back.
    assert plain.max() <= plain_flick.dyaw_deg + 1e-6
    assert over.max() > over_flick.dyaw_deg + 0.1 * abs(over_flick.dyaw_deg)
    # The profile starts at 0 and ends at 1, so the hand ends exactly at the planned endpoint.
    assert over_flick.fraction(over_flick.start_s) == 0.0 and over_flick.fraction(over_flick.end_s) == 1.0
    assert over_flick.offset(over_flick.end_s) == pytest.approx((over_flick.dyaw_deg, over_flick.dpitch_deg))


def test_a_movement_profile_sets_the_peak_speed() -> None:
    plain = SubMovement(0.0, 0.4, 30.0, -40.0)
    same = dataclasses.replace(plain, profile=lambda tau: float(min_jerk(tau)))
    assert same.peak_speed_deg_s() == pytest.approx(plain.peak_speed_deg_s(), rel=1e-3)
    assert same.offset(0.2) == pytest.approx(plain.offset(0.2))
    linear = dataclasses.replace(plain, profile=lambda tau: tau)
    assert linear.peak_speed_deg_s() == pytest.approx(50.0 / 0.4, rel=1e-6)


def test_aim_models_are_selected_by_name_reference_or_brain(example: str, game_map: GameMap, geometry: MapGeometry) -> None:
    models = builtin_aim_models()
    assert models.names() == ("minimum_jerk_fitts",)
    assert type(models.create("minimum_jerk_fitts")) is MinimumJerkFitts
    ref = f"{example}.overshoot:Overshoot"
    assert ref in models and type(models.create(ref)).__name__ == "Overshoot"
    assert models.create(ref) is not models.create(ref)  # one model per bot
    with pytest.raises(ValueError, match=r"unknown aim model 'wobbly'"):
        models.resolve("wobbly")
    with pytest.raises(ValueError, match=r"aim model reference 'bots.aim:min_jerk' raised TypeError"):
        models.resolve("bots.aim:min_jerk")
    with pytest.raises(ValueError, match=r"'bots.aim:PITCH_LIMIT_DEG' is a float, neither an AimModel nor a callable"):
        models.resolve("bots.aim:PITCH_LIMIT_DEG")
    with pytest.raises(ValueError, match="already registered"):
        models.with_models({"minimum_jerk_fitts": MinimumJerkFitts})
    # The honest profile's aim_model parameter picks the model; an unknown one is an error.
    bot = make_bot("honest", name="h", params={"aim_model": ref}, game_map=game_map, geometry=geometry,
                   rng=np.random.default_rng(2))
    assert type(bot.brain.aim.model).__name__ == "Overshoot"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown aim model 'wobbly'"):
        HonestParams(aim_model="wobbly")
    # A profile can fix its model in its brain.
    spec = dataclasses.replace(PROFILES["honest"], name="honest_slow_hand", brain=AimModelBrain(MinimumJerkFitts))
    bot = make_bot(spec, name="s", game_map=game_map, geometry=geometry, rng=np.random.default_rng(2))
    assert type(bot.brain.aim.model) is MinimumJerkFitts  # type: ignore[attr-defined]
