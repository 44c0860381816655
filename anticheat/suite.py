"""The default detector suite: every detector with its anchor defaults, TOML overrides applied.

The server, the testbed and offline replay analysis all build the suite here, so a replay re-run
with the same tolerances yields the same detections as the live match did.
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
from anticheat.detectors.trigger import TriggerConfig, TriggerDetector
from anticheat.detectors.wallhack import WallhackConfig, WallhackDetector

log = logging.getLogger(__name__)


def default_configs() -> dict[str, Any]:
    """Every tunable section of the suite at its anchor defaults, keyed by TOML section name."""
    return {
        "skip": SkipConfig(),
        "bustaim": BustAimConfig(),
        "cbug": CbugConfig(),
        "iw4m": IW4MConfig(),
        "aimstats": AimStatsConfig(),
        "aimdetect": AimDetectConfig(),
        "fire": FireConfig(),
        "movement": MovementDetectorConfig(),
        "recoil": RecoilConfig(),
        "trigger": TriggerConfig(),
        "population": PopulationConfig(),
        "wallhack": WallhackConfig(),
        "sanctions": SanctionConfig(**shipped_sanction_calibration()),
    }


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
    }


def resolve_configs(overrides: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Defaults with ``overrides`` (parsed TOML tables) applied; unknown sections are an error."""
    configs = default_configs()
    if not overrides:
        return configs
    unknown = sorted(set(overrides) - set(configs))
    if unknown:
        raise ToleranceError(f"unknown tolerance sections {unknown}; known: {sorted(configs)}")
    return apply_all(configs, overrides)


def build_detectors(configs: Mapping[str, Any], model: TrainedModel | None) -> list[Detector]:
    """One instance of every detector; AimDetect only when a trained model is available."""
    detectors: list[Detector] = [
        BustAim(configs["bustaim"]),
        CbugDetector(configs["cbug"]),
        IW4MDetector(configs["iw4m"]),
        AimStatsDetector(configs["aimstats"]),
        FireDetector(configs["fire"]),
        MovementDetector(configs["movement"]),
        RecoilDetector(configs["recoil"]),
        TriggerDetector(configs["trigger"]),
        PopulationDetector(configs["population"]),
        WallhackDetector(configs["wallhack"]),
    ]
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
) -> DetectionPipeline:
    """The full pipeline: skip book, every detector, the sanction policy, optional store.

    Args:
        overrides: TOML tolerance tables (``[skip] max_ping_ms = 400``...).
        model: an AimDetect model, None to leave AimDetect out, or "shipped" for the packaged one.
        store: SQLite persistence (None: in memory only).
        clock: wall clock for sanction recency (epoch s); the virtual testbed passes its own.
    """
    configs = resolve_configs(overrides)
    trained = shipped_model_or_none() if model == "shipped" else model
    assert trained is None or isinstance(trained, TrainedModel)
    return DetectionPipeline(
        build_detectors(configs, trained),
        SkipBook(configs["skip"]),
        policy=SanctionPolicy(configs["sanctions"]),
        store=store,
        clock=clock,
    )
