"""The default detector suite: every detector with its anchor defaults, TOML overrides applied.

The server, the testbed and offline replay analysis all build the suite here, so a replay re-run
with the same tolerances yields the same detections as the live match did. The detectors come from
a :class:`~anticheat.registry.DetectorRegistry`: :func:`default_registry` holds the built-ins and
every installed ``referee.detectors`` entry point (``anticheat.registry`` says how to add one).
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
import time
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from anticheat.detectors.aimdetect.detector import AimDetectConfig, AimDetectDetector
from anticheat.detectors.aimdetect.model import ModelMissingError, TrainedModel, load_shipped_model
from anticheat.detectors.aimstats import AimStatsConfig, AimStatsDetector
from anticheat.detectors.bustaim import BustAim, BustAimConfig
from anticheat.detectors.cbug import CbugConfig, CbugDetector
from anticheat.detectors.choke import ChokeConfig, ChokeDetector
from anticheat.detector import Detector
from anticheat.detectors.fire import FireConfig, FireDetector
from anticheat.detectors.iw4m.detector import IW4MDetector
from anticheat.detectors.iw4m.thresholds import IW4MConfig
from anticheat.detectors.movement import MovementConfig as MovementDetectorConfig
from anticheat.detectors.movement import MovementDetector
from anticheat.pipeline import DetectionPipeline
from anticheat.detectors.population import PopulationConfig, PopulationDetector
from anticheat.detectors.recoil import RecoilConfig, RecoilDetector
from anticheat.judgement.sanctions import SanctionConfig, SanctionPolicy
from anticheat.skip import SkipBook, SkipConfig
from anticheat.judgement.store import DetectionStore
from anticheat.tolerances import ToleranceError, apply_all
from anticheat.detectors.aimsnap import AimSnapConfig, AimSnapDetector
from anticheat.detectors.trigger import TriggerConfig, TriggerDetector
from anticheat.detectors.wallhack import WallhackConfig, WallhackDetector
from anticheat.registry import DetectorPlugin, DetectorRegistry, entry_point_plugins

log = logging.getLogger(__name__)


BUILTIN_DETECTORS: tuple[DetectorPlugin, ...] = (
    DetectorPlugin("bustaim", BustAimConfig(), BustAim),
    DetectorPlugin("cbug", CbugConfig(), CbugDetector),
    DetectorPlugin("iw4m", IW4MConfig(), IW4MDetector),
    DetectorPlugin("aimstats", AimStatsConfig(), AimStatsDetector),
    DetectorPlugin("fire", FireConfig(), FireDetector),
    DetectorPlugin("movement", MovementDetectorConfig(), MovementDetector),
    DetectorPlugin("recoil", RecoilConfig(), RecoilDetector),
    DetectorPlugin("trigger", TriggerConfig(), TriggerDetector),
    DetectorPlugin("population", PopulationConfig(), PopulationDetector),
    DetectorPlugin("wallhack", WallhackConfig(), WallhackDetector),
    DetectorPlugin("aimsnap", AimSnapConfig(), AimSnapDetector),
    DetectorPlugin("choke", ChokeConfig(), ChokeDetector),
)
"""The built-in detectors in build order (AimDetect, built from its trained model, aside)."""


@functools.lru_cache(maxsize=1)
def default_registry() -> DetectorRegistry:
    """The built-ins plus every installed ``referee.detectors`` entry point (read once)."""
    return entry_point_plugins(DetectorRegistry(BUILTIN_DETECTORS))


def default_configs(registry: DetectorRegistry | None = None) -> dict[str, Any]:
    """Every tunable section of the suite at its anchor defaults, keyed by TOML section name:
    the skip rules, every registered detector's, AimDetect's and the sanction policy's."""
    configs: dict[str, Any] = {"skip": SkipConfig()}
    configs.update((plugin.name, plugin.config) for plugin in (registry or default_registry()))
    configs["aimdetect"] = AimDetectConfig()
    configs["sanctions"] = SanctionConfig(**shipped_sanction_calibration())
    return configs


@functools.lru_cache(maxsize=1)
def shipped_sanction_calibration() -> dict[str, Any]:
    """The sanction policy's ``kind_weights`` and ``kind_rates`` as calibrated in the lab
    (``anticheat/models/sanctions.toml``, written by ``referee lab calibrate --out``); empty when
    the file is not shipped."""
    resource = importlib.resources.files("anticheat.models").joinpath("sanctions.toml")
    if not resource.is_file():
        return {}
    table = tomllib.loads(resource.read_text(encoding="utf-8")).get("sanctions", {})
    return {
        "kind_weights": tuple((str(kind), float(w)) for kind, w in table.get("kind_weights", [])),
        "kind_rates": tuple((str(kind), float(h), float(c)) for kind, h, c in table.get("kind_rates", [])),
        "kind_profile_rates": tuple((str(kind), float(c)) for kind, c in table.get("kind_profile_rates", [])),
    }


def resolve_configs(overrides: Mapping[str, Mapping[str, Any]] | None = None,
                    registry: DetectorRegistry | None = None) -> dict[str, Any]:
    """Defaults with ``overrides`` (parsed TOML tables) applied; unknown sections are an error."""
    configs = default_configs(registry)
    if not overrides:
        return configs
    unknown = sorted(set(overrides) - set(configs))
    if unknown:
        raise ToleranceError(f"unknown tolerance sections {unknown}; known: {sorted(configs)}")
    return apply_all(configs, overrides)


def build_detectors(configs: Mapping[str, Any], model: TrainedModel | None,
                    registry: DetectorRegistry | None = None) -> list[Detector]:
    """One instance of every registered detector, with ``configs[name]`` (its default when the
    section is missing); AimDetect only when a trained model is available."""
    detectors: list[Detector] = [plugin.build(configs.get(plugin.name, plugin.config))
                                 for plugin in (registry or default_registry())]
    if model is not None:
        detectors.append(AimDetectDetector(model, configs["aimdetect"]))
    return detectors


def shipped_model_or_none() -> TrainedModel | None:
    """The shipped AimDetect model, or None (logged) when none has been trained yet."""
    try:
        return load_shipped_model()
    except ModelMissingError as exc:
        log.warning("AimDetect disabled: %s", exc)
        return None


def build_pipeline(
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    model: TrainedModel | None | str = "shipped",
    store: DetectionStore | None = None,
    clock: Callable[[], float] = time.time,
    registry: DetectorRegistry | None = None,
) -> DetectionPipeline:
    """The full pipeline: skip book, every detector, the sanction policy, optional store.

    Args:
        overrides: TOML tolerance tables (``[skip] max_ping_ms = 400``...).
        model: an AimDetect model, None to leave AimDetect out, or "shipped" for the packaged one.
        store: SQLite persistence (None: in memory only).
        clock: wall clock for sanction recency (epoch s); the virtual testbed passes its own.
        registry: the detectors to run (default: :func:`default_registry`).
    """
    configs = resolve_configs(overrides, registry)
    trained = shipped_model_or_none() if model == "shipped" else model
    assert trained is None or isinstance(trained, TrainedModel)
    return DetectionPipeline(
        build_detectors(configs, trained, registry),
        SkipBook(configs["skip"]),
        policy=SanctionPolicy(configs["sanctions"]),
        store=store,
        clock=clock,
    )
