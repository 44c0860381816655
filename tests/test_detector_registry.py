"""Detectors added by registration: in code and by an installed package's entry point."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from anticheat.detector import NO_DETECTIONS, Detector
from anticheat.events import AimSample, Detection
from anticheat.registry import DetectorPlugin, DetectorRegistry, entry_point_plugins
from anticheat.skip import SkipBook
from anticheat.suite import BUILTIN_DETECTORS, build_pipeline, default_registry, resolve_configs


@dataclass(frozen=True, slots=True)
class PitchConfig:
    max_pitch_deg: float = 80.0


class PitchDetector(Detector):
    """Flags a view pitched past ``max_pitch_deg`` (a toy rule, enough to see it run)."""

    name = "pitch"

    def __init__(self, config: PitchConfig) -> None:
        self.config = config

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        if abs(sample.pitch_deg) <= self.config.max_pitch_deg:
            return NO_DETECTIONS
        return [Detection(player=sample.player, tick=sample.tick, time_s=sample.time_s, detector=self.name,
                          kind="steep", value=sample.pitch_deg, severity=0.5, reason="steep", evidence={})]


PLUGIN = DetectorPlugin("pitch", PitchConfig(), PitchDetector)


def _sample(pitch: float) -> AimSample:
    return AimSample(0, 1, 0.1, 1, 0.0, pitch, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0, True, 0.0, None, 180.0, 0.0)


def test_a_registered_detector_runs_in_the_pipeline_with_its_own_tolerances() -> None:
    registry = default_registry().with_detectors(PLUGIN)
    assert registry.names()[: len(BUILTIN_DETECTORS)] == tuple(p.name for p in BUILTIN_DETECTORS)
    pipe = build_pipeline({"pitch": {"max_pitch_deg": 85.0}, "skip": {"require_connection": False}},
                          model=None, registry=registry)
    assert pipe.feed(_sample(83.0)) == []  # within the overridden limit
    found = pipe.feed(_sample(88.0))
    assert [(d.detector, d.kind) for d in found] == [("pitch", "steep")]
    # Without the plugin its section is unknown, as a typo would be.
    with pytest.raises(Exception, match="unknown tolerance sections"):
        resolve_configs({"pitch": {"max_pitch_deg": 85.0}})


def test_names_are_unique_and_reserved_sections_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        default_registry().with_detectors(DetectorPlugin("trigger", PitchConfig(), PitchDetector))
    with pytest.raises(ValueError, match="reserved"):
        DetectorPlugin("sanctions", PitchConfig(), PitchDetector)
    with pytest.raises(ValueError, match="dataclass"):
        DetectorPlugin("pitch", {"max_pitch_deg": 1.0}, PitchDetector)


def test_an_installed_entry_point_is_loaded_and_a_broken_one_skipped(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # A real installed distribution (its dist-info on sys.path), as `pip install` leaves it.
    (tmp_path / "pitchplug.py").write_text(textwrap.dedent("""
        from tests.test_detector_registry import PLUGIN
        def make():
            return PLUGIN
        BROKEN = 42
    """))
    info = tmp_path / "pitchplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pitchplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[referee.detectors]\npitch = pitchplug:make\nbad = pitchplug:BROKEN\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pitchplug", raising=False)
    loaded = entry_point_plugins(DetectorRegistry(BUILTIN_DETECTORS))
    assert "pitch" in loaded and "bad" not in loaded
    assert "detector plugin skipped: entry point 'bad'" in caplog.text
