"""Per-kill rows of a corpus: AimDetect's features for every kill, labelled by the killer's truth.

The corpus keeps each match's event stream; the feature extractor the live detector uses runs
over it, so a row is exactly what the server computed for that kill. Rows carry the match id
(held-out rates are measured on whole matches, never on kills of a match the model saw) and a
stratum: ``honest:<skill>`` for honest players, the profile name for cheaters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from anticheat.detectors.aimdetect.features import FEATURE_NAMES, FeatureExtractor
from anticheat.events import AimSample, KillEvent, SessionEvent, ShotResult, SpawnEvent
from testbed.lab.store import LabStore
from testbed.lab.stream_map import map_streams, stream_events

__all__ = ["AIM_ASSIST_PROFILES", "KillRows", "corpus_kill_rows", "stream_kills"]

AIM_ASSIST_PROFILES: tuple[str, ...] = (
    "lock_aimbot", "rage_aimbot", "smooth_aimbot", "smooth_aimbot_no_bait", "silent_aim", "proaim",
)
"""Profiles whose kills are aim-assisted: the positive class. Cheats that leave aim human (ESP,
triggerbot, movement and network cheats) are left out of both classes: their kills are neither
honest aim nor an aimbot's."""


@dataclass(frozen=True, slots=True)
class KillRows:
    """Features (n, len(FEATURE_NAMES)), labels (n,) 1 = aim-assisted, match ids (n,) and
    strata (n,) such as ``honest:pro`` or ``smooth_aimbot``."""

    features: np.ndarray
    labels: np.ndarray
    matches: np.ndarray
    strata: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def stream_kills(events: Iterable[object]) -> Iterator[tuple[str, KillEvent, np.ndarray]]:
    """(killer's name, kill, features) of every kill in an event stream, in order."""
    extractor = FeatureExtractor()
    names: dict[int, str] = {}
    for event in events:
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
            if event.killer != event.victim:
                yield names.get(event.killer, ""), event, features.as_array()


def _match_kills(job: tuple[int, str, bytes]) -> list[tuple[str, np.ndarray]]:
    return [(name, features) for name, _kill, features in stream_kills(stream_events(*job))]


def corpus_kill_rows(store: LabStore, positive: Iterable[str] = AIM_ASSIST_PROFILES) -> KillRows:
    """Every labelled kill of the corpus in ``store``: honest killers' kills (label 0) and those
    of the ``positive`` profiles (label 1)."""
    wanted = set(positive)
    who = {(m, n): (p, bool(c), s) for m, n, p, c, s in
           store.con.execute("SELECT match_id, name, profile, cheat, skill FROM players").fetchall()}
    xs: list[np.ndarray] = []
    ys: list[int] = []
    matches: list[int] = []
    strata: list[str] = []
    # One stream decoded at a time (``store.streams()`` would hold every stream's bytes at once).
    for match_id, kills in map_streams(store, _match_kills):
        for name, features in kills:
            info = who.get((match_id, name))
            if info is None:
                continue
            profile, cheat, skill = info
            if cheat and profile not in wanted:
                continue
            xs.append(features)
            ys.append(int(cheat))
            matches.append(match_id)
            strata.append(profile if cheat else f"honest:{skill}")
    width = len(FEATURE_NAMES)
    return KillRows(
        features=np.vstack(xs) if xs else np.zeros((0, width)),
        labels=np.asarray(ys, dtype=np.int64),
        matches=np.asarray(matches, dtype=np.int64),
        strata=np.asarray(strata, dtype=str),
    )
