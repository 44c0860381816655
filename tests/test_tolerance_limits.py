"""Tolerances and server settings that would break a detector or the server mid-match are
refused when the file is read.

Found by applying edge values (0, 1, 2, -1, 1e-9, 1e9, 0.5) to every numeric field of every
tolerance section, re-running the detectors over recorded matches, and to every numeric field of
the server's configuration, playing a short match: these got through and then raised inside a
detector (the pipeline counts that and skips the detector from then on: the operator's detector
went silent), inside a tick, or out of the CLI as a traceback.
"""

from __future__ import annotations

import math

import pytest

from anticheat.detectors.iw4m.thresholds import max_offset_deg
from anticheat.suite import resolve_configs
from anticheat.tolerances import ToleranceError, apply_overrides

REFUSED = [
    ("aimdetect", "false_alarm_player_hours", 0.0),
    ("aimdetect", "kills_per_hour", -1.0),
    ("aimdetect", "false_alarm_player_hours", 0.001),  # under one kill: every kill would alarm
    ("iw4m", "strain_decay_base", 2.0),  # grows instead of decaying, then overflows
    ("iw4m", "strain_decay_base", -1.0),  # no real powers
    ("iw4m", "strain_decay_base", 0.0),
    ("iw4m", "strain_decay_halving_s", 0.0),
    ("iw4m", "strain_distance_unit_m", 0.0),
    ("iw4m", "strain_min_dt_s", 0.0),  # two hits in one instant would divide by zero
]


@pytest.mark.parametrize(("section", "key", "value"), REFUSED)
def test_a_value_that_would_break_the_detector_is_refused(section: str, key: str, value: float) -> None:
    with pytest.raises(ToleranceError, match=rf"\[{section}\].*{key}"):
        resolve_configs({section: {key: value}})


def test_the_defaults_and_the_edges_that_still_make_sense_are_taken() -> None:
    configs = resolve_configs({"aimdetect": {"false_alarm_player_hours": 50.0}, "iw4m": {"strain_decay_base": 1.0}})
    assert configs["aimdetect"].false_alarm_player_hours == 50.0 and configs["iw4m"].strain_decay_base == 1.0


def test_an_offset_limit_past_the_largest_float_is_infinite() -> None:
    assert max_offset_deg(60, sigmas=1e9) == math.inf
    assert max_offset_deg(60, mu=1e9) == math.inf


SERVER_REFUSED = [
    ({"history_s": 0.5}, "length_s"),  # shorter than the longest rewind
    ({"history_s": 1e9}, "length_s"),  # a 477 GiB ring: MemoryError at start
    ({"handshake": {"salt_bytes": 1_000_000_000}}, "salt_bytes"),  # a gigabyte drawn per connection
    ({"protocol": {"max_datagram_bytes": 100}}, "every other player"),  # no record fits: raised in a tick
    ({"max_clients": 200, "protocol": {"max_datagram_bytes": 600}}, "every other player"),
    ({"netstats": {"loss_window": 1_000_000_000}}, "loss_window"),  # 8 GB per client: killed by the OOM killer
    ({"netstats": {"snapshot_history": 1_000_000_000}}, "snapshot_history"),
]


@pytest.mark.parametrize(("table", "message"), SERVER_REFUSED)
def test_a_server_setting_that_would_break_the_server_is_refused(table: dict, message: str) -> None:
    from server.config import ServerConfig

    with pytest.raises(ToleranceError, match=message):
        apply_overrides(ServerConfig(), table, "server")
