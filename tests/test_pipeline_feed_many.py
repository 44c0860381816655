"""feed_many routes each event's detections before the next event goes out, as feed one by one does."""

from __future__ import annotations

from anticheat.events import Detection, SessionEvent
from tests.test_pipeline import EveryThird, Recorder, aim, make, spawn
from tests.synthetic import make_shot as shot


def test_a_subscriber_flag_applies_from_the_next_event_of_the_batch() -> None:
    """A subscriber that disables a detector on a detection (an operator reacting) stops that
    detector for the player from the very next event of the same batch."""
    pipeline = make([EveryThird(), Recorder()])

    def disable(d: Detection) -> None:
        pipeline.set_enabled(d.player, "recorder", False)

    pipeline.subscribe(disable)
    events = [shot(1, 2, 0.1 * i, i) for i in range(3)] + [aim(1), aim(2)]
    found = pipeline.feed_many(events)
    assert [d.kind for d in found] == ["streak"]
    recorder = pipeline.detector("recorder")
    assert isinstance(recorder, Recorder)
    assert [hook for hook, _ in recorder.calls] == ["on_shot", "on_shot", "on_shot", "on_aim"]
    assert recorder.calls[-1][1] == aim(2)


def test_session_events_and_unknown_events_in_a_batch() -> None:
    """A connect resets the slot's detectors where it stands in the batch; unknown events are counted."""
    pipeline = make([Recorder()])
    connect = SessionEvent(player=1, tick=64, time_s=1.0, kind="connect", name="alice")
    pipeline.feed_many([aim(1), connect, object(), spawn(1)])
    recorder = pipeline.detector("recorder")
    assert isinstance(recorder, Recorder)
    assert [hook for hook, _ in recorder.calls] == ["on_aim", "reset", "on_spawn"]
    assert pipeline.key_of(1) == "alice"
    assert pipeline.stats().unknown_events == 1
