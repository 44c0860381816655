"""``Detector.scores``: every detector's continuous statistics, normalised so 1.0 is where it fires.

Each scenario drives a detector with the event builders of its own tests, through a probe that
reads the scores after every event: at every detection the matching score is >= 1.0, honest
streams stay below 1.0, and reading the scores changes nothing the detector does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import tests.test_aimdetect as aimdetect_t
import tests.test_aimstats as aimstats_t
import tests.test_bustaim as bustaim_t
import tests.test_cbug as cbug_t
import tests.test_fire_movement as fire_t
import tests.test_iw4m as iw4m_t
import tests.test_recoil_trigger as recoil_t
from anticheat.detector import NO_SCORES, Detector, over_limit
from anticheat.detectors.aimdetect.detector import AimDetectDetector
from anticheat.detectors.aimdetect.model import TrainedModel
from anticheat.detectors.aimstats import AimStatsConfig, AimStatsDetector
from anticheat.detectors.bustaim import BustAim
from anticheat.detectors.cbug import CbugConfig, CbugDetector
from anticheat.detectors.fire import FireDetector
from anticheat.detectors.iw4m.detector import IW4MDetector
from anticheat.detectors.movement import MovementDetector
from anticheat.detectors.population import PopulationDetector, leave_one_out_z
from anticheat.detectors.recoil import RecoilDetector
from anticheat.detectors.trigger import (
    LOG_LR,
    TriggerConfig,
    TriggerDetector,
    range_band,
    shot_category,
)
from anticheat.events import (
    Buttons,
    Detection,
    FireEvidence,
    FireKind,
    MovementKind,
    SpawnEvent,
)
from anticheat.pipeline import DetectionPipeline
from anticheat.skip import SkipBook
from anticheat.suite import build_detectors, default_configs
from tests.synthetic import make_shot

UNKNOWN = 4321


class Probe:
    """Stands in for a detector in the drivers of the detectors' own tests: forwards everything,
    and around every hook call reads the detector's scores for ``player`` (twice before, once
    after; none at all when ``read`` is off). ``steps`` holds, per hook call, the detections it
    returned and the scores read after it."""

    def __init__(self, det: Detector, player: int, *, read: bool = True) -> None:
        self.det = det
        self.player = player
        self.read = read
        self.steps: list[tuple[list[Detection], dict[str, float]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.det, name)
        if not name.startswith("on_"):
            return attr

        def hook(event: object, skip: SkipBook) -> list[Detection]:
            if self.read:
                self.det.scores(self.player)
                self.det.scores(self.player)
            found = list(attr(event, skip))
            self.steps.append((found, dict(self.det.scores(self.player)) if self.read else {}))
            return found

        return hook

    def detections(self) -> list[tuple[int, Detection]]:
        """Every detection with the index of the hook call that returned it."""
        return [(i, d) for i, (found, _) in enumerate(self.steps) for d in found]


@dataclass(frozen=True)
class Scenario:
    """A detector, a driver feeding it one player's events, and how detection kinds map to keys."""

    name: str
    make: Callable[[TrainedModel], Detector]
    drive: Callable[[Any], None]
    player: int
    key: Callable[[str], str]
    kinds: frozenset[str]  # the detection kinds the stream must produce (empty: an honest stream)


def same(kind: str) -> str:
    return kind


# --- drivers, built from the detectors' own test helpers --------------------------------------------


def bustaim_stream(**kw: Any) -> Callable[[Any], None]:
    return lambda det: bustaim_t.run(det, [bustaim_t.shot(t, **kw) for t in range(1, 25)])


def bustaim_honest(det: Any) -> None:
    """Runs of nine hits, each ended by a miss short of every warning: on moving victims
    (continuous 9 of 10), four of each run off the aim ray (random aim 4 of 6), then two far
    ones (out of range 2 of 3)."""
    shots = []
    for t in range(1, 61):
        if t % 10 == 0:
            shots.append(bustaim_t.shot(t, victim=None))
        else:
            shots.append(bustaim_t.shot(t, yaw_off=4.0 if t % 2 else 12.0, speed=2.0 if t < 30 else 0.0))
    shots += [bustaim_t.shot(t, dist=60.0, speed=0.0) for t in (70, 71)] + [bustaim_t.shot(72, victim=None)]
    bustaim_t.run(det, shots)


def cbug_cheat(det: Any) -> None:
    feed = cbug_t.Feed(det)
    for i in range(14):
        feed.classic_cycle(0.3 * i)


def cbug_honest(det: Any) -> None:
    feed = cbug_t.Feed(det)
    t = 0.0
    for _ in range(20):
        feed.fire(t)
        feed.cmd(t + 0.1)
        t += 0.7
    for _ in range(6):  # one crouch-cancel now and then: the score decays and clears in between
        feed.classic_cycle(t)
        t += 3.0
    for _ in range(5):
        feed.fire(t)
        feed.cmd(t + 1.7, cbug_t.C)
        feed.cmd(t + 1.8)
        t += 2.0


def iw4m_bone(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    for _ in range(15):
        sim.kill()
    for _ in range(45):
        sim.plain_hit(iw4m_t.HEAD, gap_cmds=3)


def iw4m_chest(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    for _ in range(62):
        sim.plain_hit(iw4m_t.UPPER, gap_cmds=3)


def iw4m_offset(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    yaw = 0.0
    for i in range(1, 62):
        yaw = iw4m_t._tracking_hit(sim, yaw, silent=4.0, victim=i % 7 + 1)


def iw4m_strain(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    for i in range(8):
        for _ in range(3):
            sim.cmd(0.0, 0.0)
        yaw = 90.0 * (i % 2)
        sim.cmd(0.0, yaw, int(Buttons.FIRE))
        sim.hit(iw4m_t.UPPER, 0.0, yaw, distance=30.0, victim=i + 1)


def iw4m_snap(jump: float) -> Callable[[Any], None]:
    def drive(det: Any) -> None:
        sim = iw4m_t.Sim(det)
        for i in range(31):
            iw4m_t._snap_hit(sim, victim=i % 2 + 1, jump=jump)
            sim.cmd(0.0, 0.0)

    return drive


def iw4m_recoil(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    for _ in range(6):
        sim.kill()
    iw4m_t._recoil_hits(sim, 16, kick=0.0)


def iw4m_button(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    for _ in range(6):
        iw4m_t._button_hit(sim, fire=False)


def iw4m_honest(det: Any) -> None:
    sim = iw4m_t.Sim(det)
    head, neck, upper, lower = iw4m_t.HEAD, iw4m_t.NECK, iw4m_t.UPPER, iw4m_t.LOWER
    pattern = [head, upper, lower, 6, 7, 12, 13, lower, upper, 8, 14, 15, lower, 9, 17, 10, 11, 16, neck, 13]
    for i in range(120):
        sim.plain_hit(pattern[i % len(pattern)], gap_cmds=40)
        if i % 2 == 0:
            sim.kill()
    yaw = 0.0
    for i in range(60):
        yaw = iw4m_t._tracking_hit(sim, yaw, silent=0.0, bone=pattern[i % len(pattern)], victim=i % 5 + 1)
    for _ in range(10):
        iw4m_t._button_hit(sim, fire=True)


def aimstats_feed(stream: Callable[[], list[Any]]) -> Callable[[Any], None]:
    return lambda det: aimstats_t.feed(det, aimstats_t.good_book(1), stream())


def fire_shots(shots: Callable[[], list[Any]]) -> Callable[[Any], None]:
    return lambda det: fire_t.fire_all(det, fire_t.book(), shots())


def fire_refusals(det: Any) -> None:
    skip = fire_t.book()
    for i in range(6):
        t = 1.0 + i
        det.on_fire(FireEvidence(player=1, tick=round(t * 64), time_s=t, weapon=fire_t.PISTOL,
                                 kind=FireKind.TOO_SOON, interval_s=0.1, allowed_s=0.6), skip)


def fire_angles(det: Any) -> None:
    skip = fire_t.book()
    for k in range(4):
        s = make_shot(t=1.0 + 1.0 * k)
        det.on_shot(dataclasses.replace(s, claim=dataclasses.replace(
            s.claim, yaw_deg=31.0, pitch_deg=-3.0, view=(10.2, 0.0), prev_view=(10.0, 0.0))), skip)


def fire_forged(det: Any) -> None:
    skip = fire_t.book()
    for i in range(3):
        s = fire_t.shot(1.0 + i, hit=(45.0, 5.0, 1.3))
        det.on_shot(dataclasses.replace(s, claimed_victim_pos=(20.0, 5.0, 0.0),
                                        claim=dataclasses.replace(s.claim, claimed_victim=2)), skip)


def fire_honest(det: Any) -> None:
    skip = fire_t.book()
    shots = [fire_t.shot(1.0 + 0.6 * i, hit=(15.0, 5.0, 1.5), view_time_s=1.0 + 0.6 * i - 0.14) for i in range(40)]
    shots += [fire_t.shot(30.0 + 0.26 * i) for i in range(2)] + [fire_t.shot(40.0 + 0.2 * i) for i in range(3)]
    shots += [fire_t.shot(50.0 + 0.075 * i, weapon=fire_t.SMG) for i in range(30)]
    fire_t.fire_all(det, skip, shots)
    fire_t.fire_all(det, skip, [fire_t.shot(60.0, hit=(0.0, 0.0, 0.0))])  # once is a client bug


def movement(kind: MovementKind, times: Sequence[float], value: float = 9.0, limit: float = 6.0
             ) -> Callable[[Any], None]:
    return lambda det: fire_t.move_all(det, fire_t.book(), [fire_t.ev(kind, t, value, limit) for t in times])


def movement_honest(det: Any) -> None:
    skip = fire_t.book()
    fire_t.move_all(det, skip, [fire_t.ev(MovementKind.SPEED, t) for t in (10.0, 16.0, 22.0, 33.0, 40.0)])
    det.on_spawn(SpawnEvent(player=1, tick=64 * 50, time_s=50.0), skip)
    fire_t.move_all(det, skip, [fire_t.ev(MovementKind.TELEPORT, 50.2, 60.0, 40.0)])  # the respawn itself
    fire_t.move_all(det, skip, [fire_t.ev(MovementKind.WALL_CLIP, 60.0), fire_t.ev(MovementKind.TIMER, 61.0)])


def recoil_spray(n: int, scale: float) -> Callable[[Any], None]:
    return lambda det: recoil_t.spray(det, recoil_t.book(), n, report_scale=scale)


def recoil_honest(det: Any) -> None:
    skip = recoil_t.book()
    recoil_t.spray(det, skip, 400, report_scale=1.0)
    recoil_t.spray(det, skip, 400, report_scale=0.9, start=1000)
    recoil_t.spray(det, skip, 8, report_scale=0.0, start=2000)  # a bad spell, then a new life
    det.on_spawn(SpawnEvent(player=1, tick=2100, time_s=2100 / 64.0), skip)
    recoil_t.spray(det, skip, 8, report_scale=0.0, start=2200)


def trigger_pattern(pattern: str) -> Callable[[Any], None]:
    return lambda det: recoil_t.run(det, recoil_t.book(), pattern)


TRIGGER_NEED = recoil_t.trigger_need()


def aimdetect_aimbot(det: Any) -> None:
    events: list[Any] = []
    for k in range(8):
        events += aimdetect_t.aimbot_kill(1, 10 + k, 100 * k)
    aimdetect_t.run(det, aimdetect_t.book(1, *range(10, 20)), events)


def aimdetect_bait(det: Any) -> None:
    skip = aimdetect_t.book(1)
    blast = [aimdetect_t.shot(1, 100, None, weapon=4, pellet=k, bait=True) for k in range(8)]
    aimdetect_t.run(det, skip, [*blast, aimdetect_t.shot(1, 200, None, bait=True),
                                aimdetect_t.shot(1, 300, None, bait=True)])


def aimdetect_honest(det: Any) -> None:
    rng = np.random.default_rng(8)
    events: list[Any] = []
    for k in range(30):
        events += aimdetect_t.honest_kill(1, 10 + k, 100 * k, rng)
    skip = aimdetect_t.book(1, *range(10, 40))
    aimdetect_t.run(det, skip, events)
    # Two bait shots, too far apart to be a pattern.
    aimdetect_t.run(det, skip, [aimdetect_t.shot(1, 4000, None, bait=True),
                                aimdetect_t.shot(1, 4000 + 64 * 200, None, bait=True)])


def aimdetect_key(kind: str) -> str:
    return {"aimbot": "llr", "bait_hit": "bait_hit"}[kind]


def kinds(*names: str) -> frozenset[str]:
    return frozenset(names)


HONEST = frozenset[str]()


def fresh(cls: Callable[[], Detector]) -> Callable[[TrainedModel], Detector]:
    """A factory of detectors at their default tolerances (the AimDetect model unused)."""
    return lambda _model: cls()


BUST, CBUG, IW4M, STATS = fresh(BustAim), fresh(CbugDetector), fresh(IW4MDetector), fresh(AimStatsDetector)
FIRE, MOVE, RECOIL = fresh(FireDetector), fresh(MovementDetector), fresh(RecoilDetector)
TRIGGER, POPULATION = fresh(TriggerDetector), fresh(PopulationDetector)
AIMDETECT: Callable[[TrainedModel], Detector] = AimDetectDetector

SCENARIOS = [
    Scenario("bustaim_continuous", BUST, bustaim_stream(), bustaim_t.SHOOTER, same, kinds("continuous_shots")),
    Scenario("bustaim_out_of_range", BUST, bustaim_stream(dist=60.0, speed=0.0), bustaim_t.SHOOTER, same,
             kinds("out_of_range")),
    Scenario("bustaim_teleport", BUST, bustaim_stream(speed=0.0, claimed=(20.0, 30.0, 1.0)), bustaim_t.SHOOTER,
             same, kinds("proaim_teleport")),
    Scenario("bustaim_random_aim", BUST, bustaim_stream(speed=0.0, yaw_off=30.0), bustaim_t.SHOOTER, same,
             kinds("random_aim")),
    Scenario("bustaim_honest", BUST, bustaim_honest, bustaim_t.SHOOTER, same, HONEST),
    Scenario("cbug", CBUG, cbug_cheat, cbug_t.P, lambda k: "score", kinds("classic")),
    Scenario("cbug_honest", CBUG, cbug_honest, cbug_t.P, lambda k: "score", HONEST),
    Scenario("iw4m_bone", IW4M, iw4m_bone, iw4m_t.P, str.lower, kinds("Bone")),
    Scenario("iw4m_chest", IW4M, iw4m_chest, iw4m_t.P, str.lower, kinds("Chest")),
    Scenario("iw4m_offset", IW4M, iw4m_offset, iw4m_t.P, str.lower, kinds("Offset")),
    Scenario("iw4m_strain", IW4M, iw4m_strain, iw4m_t.P, str.lower, kinds("Strain")),
    Scenario("iw4m_snap_ban", IW4M, iw4m_snap(25.0), iw4m_t.P, str.lower, kinds("Snap")),
    Scenario("iw4m_snap_flag", IW4M, iw4m_snap(9.0), iw4m_t.P, str.lower, kinds("Snap")),  # 7.6 < 9 < 11.7
    Scenario("iw4m_recoil", IW4M, iw4m_recoil, iw4m_t.P, str.lower, kinds("Recoil")),
    Scenario("iw4m_button", IW4M, iw4m_button, iw4m_t.P, str.lower, kinds("Button")),
    Scenario("iw4m_honest", IW4M, iw4m_honest, iw4m_t.P, str.lower, HONEST),
    Scenario("aimstats", STATS, aimstats_feed(lambda: aimstats_t.aimbot_stream(640)), 1, lambda k: "score",
             kinds("aim_stats")),
    Scenario("aimstats_honest", STATS,
             aimstats_feed(lambda: aimstats_t.honest_stream(1280, np.random.default_rng(3))), 1,
             lambda k: "score", HONEST),
    Scenario("fire_auto_c", FIRE, fire_shots(lambda: [fire_t.shot(1.0 + 0.2 * i) for i in range(4)]), 1, same,
             kinds("auto_c")),
    Scenario("fire_rapid_interval", FIRE,
             fire_shots(lambda: [fire_t.shot(1.0 + 0.04 * i, weapon=fire_t.SMG) for i in range(5)]), 1, same,
             kinds("rapid_fire")),
    Scenario("fire_rapid_refused", FIRE, fire_refusals, 1, same, kinds("rapid_fire")),
    Scenario("fire_geometry", FIRE,
             fire_shots(lambda: [fire_t.shot(1.0, hit=(0.0, 0.0, 0.0)),
                                 fire_t.shot(2.0, hit=(fire_t.ORIGIN[0] + 0.005, *fire_t.ORIGIN[1:]))]), 1, same,
             kinds("silent_aim_geometry")),
    Scenario("fire_angles", FIRE, fire_angles, 1, same, kinds("silent_aim_angles")),
    Scenario("fire_forged_hit", FIRE, fire_forged, 1, same, kinds("forged_hit")),
    Scenario("fire_ghost", FIRE,
             fire_shots(lambda: [fire_t.shot(1.0 + i, claimed_origin=(fire_t.ORIGIN[0] + 20.0, *fire_t.ORIGIN[1:]),
                                             hit=(40.0, 5.0, 1.6)) for i in range(2)]), 1, same,
             kinds("afk_ghost")),
    Scenario("fire_backtrack", FIRE,
             fire_shots(lambda: [fire_t.shot(1.0 + i, view_time_s=1.0 + i - 0.4) for i in range(20)]), 1, same,
             kinds("backtrack")),
    Scenario("fire_honest", FIRE, fire_honest, 1, same, HONEST),
    Scenario("movement_speed", MOVE, movement(MovementKind.SPEED, (10.0, 12.0, 14.0)), 1, same, kinds("speed")),
    Scenario("movement_teleport", MOVE, movement(MovementKind.TELEPORT, (5.0,), 60.0, 40.0), 1, same,
             kinds("teleport")),
    Scenario("movement_wall_clip", MOVE, movement(MovementKind.WALL_CLIP, (5.0, 6.0)), 1, same, kinds("wall_clip")),
    Scenario("movement_timer", MOVE, movement(MovementKind.TIMER, (5.0, 6.0, 7.0, 30.0, 31.0, 32.0)), 1, same,
             kinds("timer")),
    Scenario("movement_honest", MOVE, movement_honest, 1, same, HONEST),
    Scenario("recoil", RECOIL, recoil_spray(200, 0.0), 1, same, kinds("recoil_report")),
    Scenario("recoil_honest", RECOIL, recoil_honest, 1, same, HONEST),
    Scenario("trigger", TRIGGER, trigger_pattern("T" * TRIGGER_NEED), 1, lambda k: "llr", kinds("on_target")),
    Scenario("trigger_after_honest", TRIGGER, trigger_pattern("...." + "T" * 60), 1, lambda k: "llr",
             kinds("on_target")),
    Scenario("trigger_honest", TRIGGER, trigger_pattern("oT.." * 100 + ("T" * 8 + "." * 12) * 20), 1,
             lambda k: "llr", HONEST),
    Scenario("aimdetect_aimbot", AIMDETECT, aimdetect_aimbot, 1, aimdetect_key, kinds("aimbot")),
    Scenario("aimdetect_bait", AIMDETECT, aimdetect_bait, 1, aimdetect_key, kinds("bait_hit")),
    Scenario("aimdetect_honest", AIMDETECT, aimdetect_honest, 1, aimdetect_key, HONEST),
]
CHEATS = [s for s in SCENARIOS if s.kinds]
HONESTS = [s for s in SCENARIOS if not s.kinds]


@pytest.fixture(scope="module")
def model() -> TrainedModel:
    return aimdetect_t.synthetic_model()


def probed(scenario: Scenario, model: TrainedModel, *, read: bool = True) -> Probe:
    probe = Probe(scenario.make(model), scenario.player, read=read)
    scenario.drive(probe)
    return probe


# --- the contract on every scenario -----------------------------------------------------------------


@pytest.mark.parametrize("scenario", CHEATS, ids=lambda s: s.name)
def test_the_matching_score_is_at_least_one_at_every_detection(scenario: Scenario, model: TrainedModel) -> None:
    probe = probed(scenario, model)
    found = probe.detections()
    assert {d.kind for _, d in found} >= scenario.kinds
    for i, d in found:
        scores = probe.steps[i][1]
        assert scores[scenario.key(d.kind)] >= 1.0, (d.kind, d.reason, scores)
    # Exact from below too: until the first detection of a kind, its score stays under 1.0.
    for kind in scenario.kinds:
        first = min(i for i, d in found if d.kind == kind)
        before = [s[scenario.key(kind)] for _, s in probe.steps[:first] if s]
        assert all(v < 1.0 for v in before), (kind, max(before))


@pytest.mark.parametrize("scenario", HONESTS, ids=lambda s: s.name)
def test_honest_streams_stay_below_one(scenario: Scenario, model: TrainedModel) -> None:
    probe = probed(scenario, model)
    assert probe.detections() == []
    last = probe.steps[-1][1]
    assert last and all(0.0 <= v < 1.0 for v in last.values()), last
    assert all(v < 1.0 for _, scores in probe.steps for v in scores.values())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scores_are_finite_and_keep_their_keys(scenario: Scenario, model: TrainedModel) -> None:
    probe = probed(scenario, model)
    keys = {frozenset(scores) for _, scores in probe.steps if scores}
    assert len(keys) == 1, keys
    assert all(math.isfinite(v) for _, scores in probe.steps for v in scores.values())
    assert set(map(scenario.key, scenario.kinds)) <= next(iter(keys))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_reading_scores_changes_nothing(scenario: Scenario, model: TrainedModel) -> None:
    quiet = probed(scenario, model, read=False)
    busy = probed(scenario, model)
    assert busy.detections() == quiet.detections()
    assert quiet.det.scores(scenario.player) == busy.det.scores(scenario.player)
    assert list(quiet.det.flush()) == list(busy.det.flush())


@pytest.mark.parametrize("make", [BUST, CBUG, IW4M, STATS, FIRE, MOVE, RECOIL, TRIGGER, AIMDETECT, POPULATION])
def test_unknown_players_have_no_scores(make: Callable[[TrainedModel], Detector], model: TrainedModel) -> None:
    det = make(model)
    assert det.scores(UNKNOWN) == {}
    assert det.scores(UNKNOWN) is NO_SCORES


NO_EVIDENCE = [
    ("bustaim", BUST, lambda det: bustaim_t.run(det, [bustaim_t.shot(1, victim=None)]), bustaim_t.SHOOTER),
    ("cbug", CBUG, lambda det: cbug_t.Feed(det).fire(0.0), cbug_t.P),
    # A lower-torso hit: a negative verdict of both CUSUMs (headshot and Chest), which stay at 0.
    ("iw4m", IW4M, lambda det: iw4m_t.Sim(det).plain_hit(iw4m_t.LOWER), iw4m_t.P),
    ("aimstats", STATS, aimstats_feed(lambda: aimstats_t.aimbot_stream(600)[:99]), 1),
    ("fire", FIRE, fire_shots(lambda: [fire_t.shot(1.0, hit=(15.0, 5.0, 1.5), view_time_s=0.86)]), 1),
    ("movement", MOVE, lambda det: det.on_spawn(SpawnEvent(player=1, tick=64, time_s=1.0), fire_t.book()), 1),
    ("recoil", RECOIL, recoil_spray(40, 1.0), 1),
    ("trigger", TRIGGER, trigger_pattern("...."), 1),
    ("aimdetect", AIMDETECT, lambda det: aimdetect_t.run(det, aimdetect_t.book(1, 10), aimdetect_t.honest_kill(
        1, 10, 0, np.random.default_rng(8))), 1),
]


@pytest.mark.parametrize(("name", "make", "drive", "player"), NO_EVIDENCE, ids=[n[0] for n in NO_EVIDENCE])
def test_a_known_player_without_evidence_scores_zero(name: str, make: Callable[[TrainedModel], Detector],
                                                     drive: Callable[[Any], None], player: int,
                                                     model: TrainedModel) -> None:
    det = make(model)
    drive(det)
    scores = det.scores(player)
    assert scores and set(scores.values()) == {0.0}, scores
    det.reset_player(player)
    assert det.scores(player) == {}


def test_every_detector_of_the_suite_reports_scores(model: TrainedModel) -> None:
    detectors = build_detectors(default_configs(), model)
    assert {d.name for d in detectors} == {"bustaim", "cbug", "iw4m", "aimstats", "fire", "movement", "recoil",
                                          "trigger", "population", "aimdetect", "wallhack", "aimsnap", "choke"}
    for det in detectors:
        assert type(det).scores is not Detector.scores, det.name


# --- what each detector reports: the statistic and its running maximum -----------------------------


def test_bustaim_streaks_are_kept_after_the_miss_that_ends_them() -> None:
    det = BustAim()
    shots = [bustaim_t.shot(t) for t in range(1, 10)] + [bustaim_t.shot(10, victim=None)]
    shots += [bustaim_t.shot(t) for t in range(11, 15)]
    assert bustaim_t.run(det, shots) == []
    assert det.continuous_shots(bustaim_t.SHOOTER) == 4
    assert det.scores(bustaim_t.SHOOTER)["continuous_shots"] == pytest.approx(9 / 20)
    bustaim_t.run(det, [bustaim_t.shot(t, dist=60.0, speed=0.0) for t in (20, 21)] + [bustaim_t.shot(22, victim=None)])
    # Two out-of-range hits in a row, three would warn.
    assert det.scores(bustaim_t.SHOOTER)["out_of_range"] == pytest.approx(2 / 3)


def test_cbug_score_is_the_highest_suspicion_against_the_threshold() -> None:
    det = CbugDetector(CbugConfig(threshold=10.0))
    feed = cbug_t.Feed(det)
    feed.classic_cycle(0.0)
    feed.classic_cycle(1.0)
    assert det.score(cbug_t.P) == pytest.approx(7.5)
    assert det.scores(cbug_t.P) == {"score": pytest.approx(0.75)}
    feed.classic_cycle(5.0)  # the idle reset cleared the score: 4.0 now, 7.5 was the highest
    assert det.score(cbug_t.P) == pytest.approx(4.0)
    assert det.scores(cbug_t.P) == {"score": pytest.approx(0.75)}


def test_iw4m_scores_are_each_type_against_its_flag_limit() -> None:
    from anticheat.detectors.iw4m.ratios import chest_thresholds

    sim = iw4m_t.Sim(IW4MDetector(iw4m_t.RATIO_CHEST))
    for _ in range(29):
        sim.plain_hit(iw4m_t.UPPER, gap_cmds=3)
    assert sim.det.scores(iw4m_t.P)["chest"] == 0.0  # Chest needs 30 upper-torso hits
    sim.plain_hit(iw4m_t.UPPER, gap_cmds=3)
    assert sim.det.scores(iw4m_t.P)["chest"] == pytest.approx(30.0 / chest_thresholds(30, sim.det.config)[0])
    strain = iw4m_t.Sim()
    iw4m_strain(strain.det)
    scores = strain.det.scores(iw4m_t.P)
    assert scores["strain"] == pytest.approx(strain.det.session_stats(iw4m_t.P)["max_strain"] / 0.36)
    assert scores["button"] == 0.0 and scores["recoil"] == 0.0 and scores["bone"] == 0.0


def test_iw4m_ratio_that_falls_back_under_its_limit_keeps_its_crossing() -> None:
    from anticheat.detectors.iw4m.ratios import chest_thresholds

    sim = iw4m_t.Sim(IW4MDetector(iw4m_t.RATIO_CHEST))
    for _ in range(30):
        sim.plain_hit(iw4m_t.UPPER, gap_cmds=3)
    assert [d.reason for d in sim.found("Chest")] == ["Chest-30.00@30"]
    crossed = sim.det.scores(iw4m_t.P)["chest"]
    assert crossed == pytest.approx(30.0 / chest_thresholds(30, sim.det.config)[0])
    for _ in range(40):
        sim.plain_hit(iw4m_t.LOWER, gap_cmds=3)
    assert 30 / 40 < chest_thresholds(30, sim.det.config)[0]  # the ratio itself is back under its limit
    assert sim.det.scores(iw4m_t.P)["chest"] == crossed


def test_iw4m_zero_recoil_is_the_largest_score() -> None:
    sim = iw4m_t.Sim()
    for _ in range(6):
        sim.kill()
    iw4m_t._recoil_hits(sim, 14, kick=0.0)
    assert sim.det.scores(iw4m_t.P)["recoil"] == 0.0  # one hit short of the 15 the ban needs
    iw4m_t._recoil_hits(sim, 1, kick=0.0)
    assert sim.det.scores(iw4m_t.P)["recoil"] == pytest.approx(1.7976931348623157e308)
    honest = iw4m_t.Sim()
    for _ in range(6):
        honest.kill()
    iw4m_t._recoil_hits(honest, 20, kick=2.0)
    mean = honest.det.session_stats(iw4m_t.P)["recoil_mean"]
    assert honest.det.scores(iw4m_t.P)["recoil"] == pytest.approx(1e-9 / mean)


def test_iw4m_lifetime_profile_counts_and_a_crossing_is_kept() -> None:
    sim = iw4m_t.Sim()
    profile = sim.det.export_profile(iw4m_t.P)
    profile.update(hits=150, kills=150, bones={str(iw4m_t.HEAD): 120, str(iw4m_t.UPPER): 30})
    sim.det.import_profile(iw4m_t.P, profile)
    sim.plain_hit(iw4m_t.HEAD)
    assert sim.found("Bone", "ban", "lifetime")
    assert sim.det.scores(iw4m_t.P)["bone"] >= 1.0
    # A new session keeps the lifetime profile and the crossing; reset_player forgets both.
    sim.det.reset_session(iw4m_t.P)
    assert sim.det.scores(iw4m_t.P)["bone"] >= 1.0
    sim.det.reset_player(iw4m_t.P)
    assert sim.det.scores(iw4m_t.P) == {}


def test_aimstats_reads_the_analysed_window_without_analysing_what_is_pending() -> None:
    det = AimStatsDetector()
    book = aimstats_t.good_book(1)
    stream = aimstats_t.aimbot_stream(400)
    aimstats_t.feed(det, book, stream[:150])  # player 1's first batch is 159 samples
    assert det.scores(1) == {"score": 0.0}
    assert det._players[1].m == 150
    found = aimstats_t.feed(det, book, stream[150:])
    assert [(d.tick, d.value) for d in found] == [(99, pytest.approx(1.0))]  # every part saturated
    assert det.scores(1) == {"score": pytest.approx(1.0 / 0.7)}


def test_aimstats_detection_inside_a_batch_is_kept_when_the_window_cools() -> None:
    cfg = AimStatsConfig(batch_samples=64)
    det = AimStatsDetector(cfg)
    book = aimstats_t.good_book(1)
    found = aimstats_t.feed(det, book, aimstats_t.aimbot_stream(200))
    found += aimstats_t.feed(det, book, aimstats_t.honest_stream(2000, np.random.default_rng(1))[200:])
    assert len(found) == 1
    assert det.result(1).score < 0.7  # the window has forgotten the aimbot...
    assert det.scores(1)["score"] == pytest.approx(found[0].value / 0.7)  # ...the score has not


def test_fire_and_movement_scores_are_the_fullest_window() -> None:
    det = MovementDetector()
    fire_t.move_all(det, fire_t.book(), [fire_t.ev(MovementKind.SPEED, t) for t in (10.0, 16.0, 22.0)])
    assert det.scores(1) == {"speed": pytest.approx(2 / 3), "teleport": 0.0, "wall_clip": 0.0, "timer": 0.0}
    fire = FireDetector()
    stale = [fire_t.shot(1.0 + i, view_time_s=1.0 + i - (0.4 if i % 2 else 0.14)) for i in range(8)]
    assert fire_t.fire_all(fire, fire_t.book(), stale) == []
    assert fire.scores(1)["backtrack"] == pytest.approx(4 / 5)
    pairs = [fire_t.shot(8.0 * k + d) for k in range(3) for d in (0.0, 0.2)]
    assert fire_t.fire_all(fire, fire_t.book(), pairs) == []
    assert fire.scores(1)["auto_c"] == pytest.approx(2 / 3)  # 3 fast intervals span 16 s > 10 s


def test_recoil_score_counts_mismatches_in_a_full_ring() -> None:
    det = RecoilDetector()
    skip = recoil_t.book()
    recoil_t.spray(det, skip, 8, report_scale=0.0)  # 7 judged (not the firing command), all bad
    assert det.scores(1) == {"recoil_report": 0.0}  # the check needs 12 judged commands
    recoil_t.spray(det, skip, 40, report_scale=1.0, start=9)
    assert det.scores(1) == {"recoil_report": pytest.approx(7 / 9)}  # the ring has slid past them since


def test_trigger_llr_is_the_cusum_peak_over_h_and_kept_after_misses() -> None:
    h = TriggerConfig().threshold
    row = LOG_LR[range_band(None)]
    first, streak = row[shot_category(True, True, False, False)], row[shot_category(True, True, True, True)]
    det = TriggerDetector()
    assert recoil_t.run(det, recoil_t.book(), "T" * (TRIGGER_NEED - 1)) == []
    peak = first + (TRIGGER_NEED - 2) * streak
    assert det.scores(1)["llr"] == pytest.approx(peak / h)
    assert peak / h < 1.0 <= (peak + streak) / h
    recoil_t.run(det, recoil_t.book(), "." * 40)  # misses bring the statistic back to 0
    assert det._players[1].statistic == 0.0
    assert det.scores(1)["llr"] == pytest.approx(peak / h)


def test_aimdetect_llr_is_the_cusum_peak_over_h(model: TrainedModel) -> None:
    det = AimDetectDetector(model)
    events: list[Any] = []
    for k in range(8):
        events += aimdetect_t.aimbot_kill(1, 10 + k, 100 * k)
    found = aimdetect_t.run(det, aimdetect_t.book(1, *range(10, 20)), events)
    c = det.cusum(1)
    assert det.scores(1) == {"llr": pytest.approx(c.peak / det.h), "bait_hit": 0.0}
    assert found[0].value / det.h >= 1.0 and c.peak >= det.h


def test_population_scores_are_leave_one_out_z_over_k_sigma() -> None:
    players = list(range(8))
    book = aimstats_t.good_book(*players, *(100 + p for p in players), 50)
    det = PopulationDetector()
    rng = np.random.default_rng(9)
    for p in players:
        heads = 0.9 if p == 7 else float(rng.uniform(0.15, 0.3))
        for i in range(60):
            hit = i % 3 != 0
            bone = 2 if hit and rng.random() < heads else (4 if hit else 0)
            det.on_shot(aimstats_t._shot(p, i, 100 + p if hit else None, bone), book)
    det.on_shot(aimstats_t._shot(50, 0, None, 0), book)  # a newcomer: too few shots for any ratio
    # Every player hits 40 of 60 rays, so hit_ratio has no spread and no z.
    ratio = np.array([det.metrics()[p]["headshot_ratio"] for p in players])
    z, _, _ = leave_one_out_z(ratio)
    for p in players:
        scores = det.scores(p)
        assert scores == {"hit_ratio": 0.0, "headshot_ratio": pytest.approx(z[p] / 3.0)}
        assert (scores["headshot_ratio"] >= 1.0) is (p == 7)
    assert det.scores(50) == {"hit_ratio": 0.0, "headshot_ratio": 0.0}
    assert det.scores(UNKNOWN) == {}
    # Too few players: no score.
    small = PopulationDetector()
    for p in range(3):
        for i in range(40):
            small.on_shot(aimstats_t._shot(p, i, 100 + p, 2), aimstats_t.good_book(p, 100 + p))
    assert small.scores(0) == {"hit_ratio": 0.0, "headshot_ratio": 0.0}


def test_over_limit() -> None:
    assert over_limit(3.0, 2.0) == 1.5
    assert over_limit(-3.0, 2.0) == -1.5
    assert over_limit(1e300, 1e-300) == 1.7976931348623157e308
    assert over_limit(0.5, 0.0) == 1.0 and over_limit(0.0, 0.0) == 0.0 and over_limit(-1.0, -2.0) == 0.0


# --- the pipeline --------------------------------------------------------------------------------------


class Broken(Detector):
    name = "broken"

    def scores(self, player: int) -> Mapping[str, float]:
        raise RuntimeError("scores bug")


def test_pipeline_prefixes_every_detectors_scores() -> None:
    skip = bustaim_t.book()
    bust, trigger = BustAim(), TriggerDetector()
    pipe = DetectionPipeline([bust, trigger, Broken()], skip)
    assert pipe.scores(bustaim_t.SHOOTER) == {}
    found = pipe.feed_many([bustaim_t.shot(t, speed=0.0, yaw_off=30.0) for t in range(1, 8)])
    assert {d.kind for d in found} == {"random_aim"}
    scores = pipe.scores(bustaim_t.SHOOTER)
    want = {f"bustaim:{k}": v for k, v in bust.scores(bustaim_t.SHOOTER).items()}
    want |= {f"trigger:{k}": v for k, v in trigger.scores(bustaim_t.SHOOTER).items()}
    assert scores == want
    assert set(want) == {"bustaim:continuous_shots", "bustaim:out_of_range", "bustaim:proaim_teleport",
                         "bustaim:random_aim", "trigger:llr", "trigger:takes", "trigger:delay"}
    assert scores["bustaim:random_aim"] == pytest.approx(7 / 6)
    # The broken detector is skipped and counted, like an error in a hook.
    assert pipe.stats().errors == {"broken": 2}
    strict = DetectionPipeline([bust, Broken()], skip, isolate_errors=False)
    with pytest.raises(RuntimeError, match="scores bug"):
        strict.scores(bustaim_t.SHOOTER)


def test_pipeline_scores_of_the_whole_suite(model: TrainedModel) -> None:
    skip = SkipBook()
    pipe = DetectionPipeline(build_detectors(default_configs(), model), skip, isolate_errors=False)
    shooter = bustaim_t.SHOOTER
    healthy = bustaim_t.book()
    pipe.feed_many([healthy.connection(shooter), healthy.connection(bustaim_t.VICTIM)])
    pipe.feed_many([bustaim_t.shot(t) for t in range(1, 12)])
    scores = pipe.scores(shooter)
    # The detectors that judged the shooter's shots; the others know nothing of him yet.
    prefixes = {key.split(":")[0] for key in scores}
    assert prefixes == {"bustaim", "cbug", "iw4m", "fire", "trigger", "population"}
    assert scores["bustaim:continuous_shots"] == pytest.approx(11 / 20)
    assert all(math.isfinite(v) for v in scores.values())
    assert pipe.stats().errors == {}
