"""The detection pipeline: dispatch, skip book order, per-player flags, replay equivalence, routing."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from anticheat.detector import Detector
from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    FireKind,
    KillEvent,
    MovementEvidence,
    MovementKind,
    ShotResult,
    SpawnEvent,
)
from anticheat.judgement.sanctions import SanctionConfig, SanctionLevel, SanctionPolicy
from anticheat.judgement.store import DetectionStore, StoreConfig
from anticheat.pipeline import DETECTION_ID_BLOCK, DetectionPipeline
from anticheat.skip import SkipBook, SkipConfig
from tests.synthetic import make_shot as shot


def aim(player: int = 1, t: float = 1.0) -> AimSample:
    return AimSample(player, 64, t, 1, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0, True, 0.0, None, 0.0, 0.0)


def kill(killer: int = 1, victim: int = 2) -> KillEvent:
    return KillEvent(killer, victim, 64, 1.0, 1, 2, 10.0, 0, True)


def movement(player: int = 1) -> MovementEvidence:
    return MovementEvidence(player, 64, 1.0, MovementKind.SPEED, 12.0, 7.0, (1.0, 0.0, 0.0), (0.0, 0.0, 0.0), True)


def fire(player: int = 1) -> FireEvidence:
    return FireEvidence(player, 64, 1.0, 1, FireKind.TOO_SOON, 0.05, 0.24)


def conn(player: int = 1, rtt: float = 50.0, t: float = 0.5) -> ConnectionSample:
    return ConnectionSample(player, t, rtt, 2.0, 0.0, 0.01)


def spawn(player: int = 1) -> SpawnEvent:
    return SpawnEvent(player, 64, 1.0)


class Recorder(Detector):
    """Records every hook call; optionally reports every shot as a detection."""

    def __init__(self, name: str = "recorder", report_shots: bool = False) -> None:
        self.name = name
        self.calls: list[tuple[str, object]] = []
        self.report_shots = report_shots
        self.skip_seen: list[ConnectionSample | None] = []

    def _hit(self, hook: str, event: object) -> Sequence[Detection]:
        self.calls.append((hook, event))
        return ()

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        self.calls.append(("on_shot", shot))
        self.skip_seen.append(skip.connection(shot.shooter))
        if self.report_shots:
            return (Detection(shot.shooter, shot.tick, shot.time_s, self.name, "shot", 1.0, 0.5, "test"),)
        return ()

    def on_kill(self, kill: KillEvent, skip: SkipBook) -> Sequence[Detection]:
        return self._hit("on_kill", kill)

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        return self._hit("on_aim", sample)

    def on_movement(self, evidence: MovementEvidence, skip: SkipBook) -> Sequence[Detection]:
        return self._hit("on_movement", evidence)

    def on_fire(self, evidence: FireEvidence, skip: SkipBook) -> Sequence[Detection]:
        return self._hit("on_fire", evidence)

    def on_connection(self, sample: ConnectionSample, skip: SkipBook) -> Sequence[Detection]:
        # The contract: the skip book has already recorded this very sample.
        self.skip_seen.append(skip.connection(sample.player))
        return self._hit("on_connection", sample)

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        return self._hit("on_spawn", spawn)

    def reset_player(self, player: int) -> None:
        self.calls.append(("reset", player))


class EveryThird(Detector):
    """Deterministic stateful detector: reports every third hit per shooter, skipped when the book says so."""

    name = "third"

    def __init__(self) -> None:
        self.hits: dict[int, int] = {}

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        if shot.victim is None or skip.shot_reason(shot.shooter, shot.victim, shot.weapon) is not None:
            return ()
        n = self.hits.get(shot.shooter, 0) + 1
        self.hits[shot.shooter] = n
        if n % 3:
            return ()
        return (Detection(shot.shooter, shot.tick, shot.time_s, self.name, "streak", n, 0.4, f"Streak-{n}"),)

    def reset_player(self, player: int) -> None:
        self.hits.pop(player, None)


class AimOnly(Detector):
    name = "aimonly"

    def __init__(self) -> None:
        self.count = 0

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        self.count += 1
        return ()


def make(detectors: Sequence[Detector], **kw: object) -> DetectionPipeline:
    return DetectionPipeline(detectors, SkipBook(SkipConfig(require_connection=False)), clock=lambda: 1e9, **kw)  # type: ignore[arg-type]


def test_dispatch_by_type_to_the_matching_hook() -> None:
    rec = Recorder()
    pipe = make([rec])
    events = [shot(), kill(), aim(), movement(), fire(), conn(), spawn()]
    for event in events:
        pipe.feed(event)
    hooks = ["on_shot", "on_kill", "on_aim", "on_movement", "on_fire", "on_connection", "on_spawn"]
    assert rec.calls == list(zip(hooks, events, strict=True))
    stats = pipe.stats()
    assert stats.events == {
        "ShotResult": 1,
        "KillEvent": 1,
        "AimSample": 1,
        "MovementEvidence": 1,
        "FireEvidence": 1,
        "ConnectionSample": 1,
        "SpawnEvent": 1,
    }


def test_hooks_a_detector_does_not_override_are_never_called() -> None:
    only = AimOnly()
    pipe = make([only])
    pipe.feed_many([shot(), aim(), kill(), aim()])
    assert only.count == 2
    assert pipe._routes[ShotResult].hooks == ()


def test_unknown_event_types_are_counted_not_fatal() -> None:
    pipe = make([Recorder()])
    assert pipe.feed("not an event") == []
    assert pipe.stats().unknown_events == 1


class Picky(Detector):
    """Judges only shots of weapon 1; counts the rest as skipped, by weapon."""

    name = "picky"

    def __init__(self) -> None:
        self.skipped: dict[str, int] = {}

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        if shot.weapon != 1:
            key = f"weapon_{shot.weapon}"
            self.skipped[key] = self.skipped.get(key, 0) + 1
        return ()

    def skip_counts(self) -> dict[str, int]:
        return dict(self.skipped)


def test_stats_carry_each_detectors_skips_by_reason() -> None:
    pipe = make([Picky(), Recorder()])
    pipe.feed_many([shot(weapon=1), shot(weapon=3), shot(weapon=3), shot(weapon=6)])
    # The metrics endpoint exports these as referee_detector_skips{detector, reason}.
    assert pipe.stats().skips == {("picky", "weapon_3"): 2, ("picky", "weapon_6"): 1}


def test_skip_book_records_connection_before_detectors() -> None:
    rec = Recorder()
    book = SkipBook()
    pipe = DetectionPipeline([rec], book, clock=lambda: 0.0)
    sample = conn(player=1, rtt=900.0)
    pipe.feed(sample)
    assert rec.skip_seen == [sample]
    assert book.connection(1) is sample
    pipe.feed(shot(shooter=1))
    assert rec.skip_seen[-1] is sample


def test_disabled_detector_gets_nothing_for_that_player_only() -> None:
    a, b = Recorder("a"), Recorder("b")
    pipe = make([a, b])
    pipe.set_enabled(1, "a", False)
    pipe.feed_many([shot(shooter=1), aim(player=1), shot(shooter=3), kill(killer=1)])
    assert [h for h, _ in a.calls] == ["on_shot"]  # only player 3's shot
    assert a.calls[0][1].shooter == 3  # type: ignore[attr-defined]
    assert len(b.calls) == 4
    assert not pipe.is_enabled(1, "a") and pipe.is_enabled(1, "b") and pipe.is_enabled(3, "a")
    pipe.set_enabled(1, "a", True)
    pipe.feed(shot(shooter=1))
    assert len(a.calls) == 2


def test_wildcard_disables_every_detector_and_unknown_names_fail() -> None:
    a, b = Recorder("a"), Recorder("b")
    pipe = make([a, b])
    pipe.set_enabled(1, "*", False)
    pipe.feed(shot(shooter=1))
    assert a.calls == [] and b.calls == []
    pipe.set_enabled(1, "*", True)
    pipe.feed(shot(shooter=1))
    assert len(a.calls) == 1 and len(b.calls) == 1
    with pytest.raises(ValueError, match="unknown detector"):
        pipe.set_enabled(1, "nope", False)


def test_reset_player_resets_detectors_and_flags() -> None:
    a = Recorder("a")
    pipe = make([a])
    pipe.set_enabled(4, "a", False)
    pipe.reset_player(4)
    assert ("reset", 4) in a.calls
    assert pipe.is_enabled(4, "a")


def _random_stream(seed: int, n: int) -> list[object]:
    rng = random.Random(seed)
    events: list[object] = []
    t = 0.0
    for i in range(n):
        t += 1 / 64
        player = rng.randrange(4)
        roll = rng.random()
        if roll < 0.1:
            events.append(conn(player, rtt=rng.choice([40.0, 80.0, 700.0]), t=t))
        elif roll < 0.7:
            victim = rng.choice([None, (player + 1) % 4])
            events.append(shot(player, victim, t, i))
        else:
            events.append(aim(player, t))
    return events


def test_feed_one_by_one_equals_feed_many() -> None:
    events = _random_stream(7, 3000)
    live = make([EveryThird(), Recorder()])
    live_found: list[Detection] = []
    for event in events:
        live_found.extend(live.feed(event))
    replay = make([EveryThird(), Recorder()])
    replay_found = replay.feed_many(events)
    assert live_found == replay_found
    assert len(live_found) > 50
    assert live.stats() == replay.stats()


def test_detections_go_to_subscribers_policy_and_store(tmp_path: object) -> None:
    store = DetectionStore(":memory:", StoreConfig(autoflush=False))
    policy = SanctionPolicy(SanctionConfig())
    seen: list[Detection] = []
    decisions: list[object] = []
    pipe = DetectionPipeline([Recorder("rec", report_shots=True)], SkipBook(), policy, store, clock=lambda: 1_000_000.0)
    pipe.subscribe(seen.append)
    unsubscribe = pipe.subscribe_decisions(decisions.append)
    pipe.bind(1, "alice")
    found = pipe.feed(shot(shooter=1))
    assert found == seen and len(found) == 1
    assert [e.player for e in policy.evidence("alice")] == ["alice"]
    assert len(decisions) == 1
    stored = store.load_detections("alice")
    assert [s.detection for s in stored] == found
    assert stored[0].id == 1 and stored[0].recorded_at == 1_000_000.0
    unsubscribe()
    pipe.feed(shot(shooter=2))  # unbound slot: keyed "slot:2"
    assert len(decisions) == 1
    assert policy.evidence("slot:2")[0].id == 2
    assert pipe.stats().detections == {("rec", "shot"): 2}
    # A second pipeline over the same database (another server) takes its ids from the next block
    # the store reserves, past every id the first may still hand out: nothing is overwritten.
    again = DetectionPipeline([Recorder("rec", report_shots=True)], SkipBook(), None, store)
    again.feed(shot(shooter=3))
    pipe.feed(shot(shooter=4))
    assert [s.id for s in store.load_detections()] == [1, 2, 3, DETECTION_ID_BLOCK + 1]
    assert [s.player_key for s in store.load_detections()] == ["alice", "slot:2", "slot:4", "slot:3"]


def test_without_a_store_evidence_ids_are_counted_in_memory() -> None:
    policy = SanctionPolicy(SanctionConfig())
    pipe = make([Recorder("rec", report_shots=True)], policy=policy)
    for _ in range(3):
        pipe.feed(shot(shooter=1))
    assert [e.id for e in policy.evidence("slot:1")] == [1, 2, 3]


def test_decisions_are_stored_when_the_recommended_level_changes() -> None:
    store = DetectionStore(":memory:", StoreConfig(autoflush=False))
    policy = SanctionPolicy()
    pipe = DetectionPipeline(
        [Recorder("a", report_shots=True), Recorder("b", report_shots=True), Recorder("c", report_shots=True)],
        SkipBook(),
        policy,
        store,
        clock=lambda: 5e8,
    )
    pipe.bind(1, "p")
    for _ in range(10):
        pipe.feed(shot(shooter=1))
    levels = [d.recommended for d in store.load_decisions("p")]
    # Three independent detectors climb monitor -> kick -> temp ban and then stay: only changes are stored.
    assert levels == sorted(set(levels))
    assert levels[-1] == SanctionLevel.TEMP_BAN_REVIEW
    assert pipe.evaluate("p").applied == SanctionLevel.MONITOR  # type: ignore[union-attr]


class Broken(Detector):
    name = "broken"

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        raise RuntimeError("bug")


def test_a_raising_detector_is_isolated_and_counted() -> None:
    rec = Recorder()
    pipe = make([Broken(), rec])
    pipe.feed(shot())
    pipe.feed(shot())
    assert len(rec.calls) == 2
    assert pipe.stats().errors == {"broken": 2}
    strict = make([Broken()], isolate_errors=False)
    with pytest.raises(RuntimeError):
        strict.feed(shot())


def test_timing_flag_measures_each_detector() -> None:
    pipe = make([EveryThird(), Recorder()], time_detectors=True)
    found = pipe.feed_many(_random_stream(3, 300))
    untimed = make([EveryThird(), Recorder()]).feed_many(_random_stream(3, 300))
    assert found == untimed
    spent = pipe.stats().time_ns
    assert set(spent) == {"third", "recorder"} and all(v > 0 for v in spent.values())


def test_duplicate_detector_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        make([Recorder("x"), Recorder("x")])
