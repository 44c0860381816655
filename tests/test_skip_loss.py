"""The shared loss skip: a 300 ms satellite link's usual loss is judged, a broken link is not."""

from __future__ import annotations

from anticheat.events import ConnectionSample
from anticheat.skip import SkipBook, SkipConfig, SkipReason


def _reason(loss: float, config: SkipConfig | None = None) -> SkipReason | None:
    book = SkipBook(config)
    book.record(ConnectionSample(player=3, time_s=1.0, rtt_ms=310.0, jitter_ms=15.0, loss=loss, since_update_s=0.01))
    return book.player_reason(3)


def test_a_satellite_links_measured_loss_is_judged() -> None:
    # A 5 % link measures 4-9 % over the server's loss window (lab/heldout4, satellite players):
    # under BustAim's 5 % skip such a player went unjudged most of the time.
    for loss in (0.04, 0.062, 0.094, 0.15):
        assert _reason(loss) is None


def test_heavy_loss_is_skipped_and_the_limit_is_configurable() -> None:
    assert _reason(0.16) is SkipReason.HIGH_LOSS
    assert _reason(0.062, SkipConfig(max_loss=0.05)) is SkipReason.HIGH_LOSS
