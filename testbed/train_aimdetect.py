"""Train AimDetect's per-kill SVM on labelled bot matches (``referee train-aimdetect``).

Virtual matches of honest bots and aim cheats are recorded; every kill in the recordings becomes
one row of AimDetect's eight features (computed by the same extractor the live detector uses),
labelled by the killer's ground truth. Kills by cheats that do not touch aim (speed, teleport,
fake lag...) are left out: they are neither honest aim nor aimbot aim. The model is trained on a
stratified split and its held-out TPR/FPR become the sequential test's theta1/theta0. Everything
derives from one seed, so the command is reproducible.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anticheat.detectors.aimdetect.features import FEATURE_NAMES, FeatureExtractor
from anticheat.detectors.aimdetect.model import TrainedModel, save_model, train
from anticheat.events import AimSample, KillEvent, SessionEvent, ShotResult, SpawnEvent
from server.recording import ReplayReader
from testbed.match import run_virtual
from testbed.scenario import Scenario, parse_scenario_text

log = logging.getLogger(__name__)

AIM_CHEATS: tuple[str, ...] = ("lock_aimbot", "rage_aimbot", "smooth_aimbot", "silent_aim", "triggerbot", "wallhack")
"""Profiles whose kills are labelled as aimbot kills."""

DEFAULT_MODEL_PATH = Path(__file__).resolve().parent.parent / "anticheat" / "models" / "aimdetect.npz"


@dataclass(frozen=True, slots=True)
class TrainingSet:
    """Per-kill features (n, 8), labels (n,) 1 = aimbot kill, and where each row came from."""

    features: np.ndarray
    labels: np.ndarray
    sources: tuple[str, ...]


def training_scenario(seed: int, duration_s: float, map_name: str, honest: int, per_cheat: int) -> Scenario:
    """A match of ``honest`` honest bots and ``per_cheat`` bots of every aim cheat (mixed pings)."""
    groups = [
        f'[[bots]]\ncount = {max(1, honest // 2)}\nprofile = "honest"\nname_prefix = "honest-avg"\nskill = "average"\nping_ms = 40\n',
        f'[[bots]]\ncount = {max(1, honest - honest // 2)}\nprofile = "honest"\nname_prefix = "honest-high"\nskill = "high"\nping_ms = 120\njitter_ms = 8\nloss = 0.01\n',
    ]
    for k, name in enumerate(AIM_CHEATS):
        strength = '\n[bots.params]\nstrength = 0.5\n' if name == "smooth_aimbot" else ""
        groups.append(f'[[bots]]\ncount = {per_cheat}\nprofile = "{name}"\nping_ms = {40 + 30 * (k % 3)}\n{strength}')
    text = (
        f'name = "aimdetect-training-{seed}"\nmap = "{map_name}"\nduration_s = {duration_s}\n'
        f"tick_rate_hz = 64\nseed = {seed}\n\n" + "\n".join(groups)
    )
    return parse_scenario_text(text, f"<training {seed}>")


def kill_rows(replay: Path, labels: dict[str, str]) -> tuple[list[np.ndarray], list[int]]:
    """Features and labels of every kill in a replay whose killer is honest or an aim cheat."""
    extractor = FeatureExtractor()
    names: dict[int, str] = {}
    rows: list[np.ndarray] = []
    ys: list[int] = []
    for event in ReplayReader(replay).events():
        if isinstance(event, AimSample):
            extractor.on_aim(event)
        elif isinstance(event, ShotResult):
            extractor.on_shot(event)
        elif isinstance(event, SpawnEvent):
            extractor.on_spawn(event)
        elif isinstance(event, SessionEvent):
            if event.kind == "connect":
                extractor.reset_player(event.player)
                names[event.player] = event.name
        elif isinstance(event, KillEvent):
            features = extractor.on_kill(event)
            profile = labels.get(names.get(event.killer, ""), "")
            if profile == "honest" or profile in AIM_CHEATS:
                rows.append(features.as_array())
                ys.append(int(profile != "honest"))
    return rows, ys


def collect(
    matches: int, seed: int, duration_s: float, map_name: str, honest: int, per_cheat: int,
    progress: Callable[[str], None] | None = None,
) -> TrainingSet:
    """Play ``matches`` labelled virtual matches (seeds seed, seed+1, ...) and extract kill rows."""
    xs: list[np.ndarray] = []
    ys: list[int] = []
    sources: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(matches):
            scenario = training_scenario(seed + i, duration_s, map_name, honest, per_cheat)
            replay = Path(tmp) / f"train-{i}.replay"
            result = run_virtual(scenario, replay_path=replay)
            labels = {p.name: p.profile for p in result.players}
            rows, labs = kill_rows(replay, labels)
            xs.extend(rows)
            ys.extend(labs)
            sources.extend([scenario.name] * len(rows))
            if progress is not None:
                progress(f"match {i + 1}/{matches}: {len(rows)} kills ({sum(labs)} by aim cheats), "
                         f"{result.wall_s:.0f} s wall")
    x = np.vstack(xs) if xs else np.zeros((0, len(FEATURE_NAMES)))
    return TrainingSet(features=x, labels=np.asarray(ys, dtype=np.int64), sources=tuple(sources))


def train_and_save(data: TrainingSet, seed: int, out: Path = DEFAULT_MODEL_PATH) -> TrainedModel:
    """Fit the SVM on ``data`` (stratified split, held-out rates) and save it next to ``out``."""
    model = train(data.features, data.labels, seed, feature_names=tuple(FEATURE_NAMES))
    save_model(model, out)
    return model


def summary(model: TrainedModel, data: TrainingSet) -> Sequence[str]:
    """Human-readable lines about a trained model."""
    return (
        f"{len(data.labels)} kills: {int(data.labels.sum())} by aim cheats, {int((data.labels == 0).sum())} honest",
        f"held-out TPR {model.tpr:.3f} (theta1), FPR {model.fpr:.3f} (theta0); "
        f"confusion tp={model.tp} fn={model.fn} fp={model.fp} tn={model.tn}",
    )
