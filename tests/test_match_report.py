"""Match reports: players who left stay in them, the tables fit 100 columns, detection details."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from anticheat.detector import Detector
from anticheat.events import Detection, SpawnEvent
from anticheat.pipeline import DetectionPipeline
from anticheat.skip import SkipBook
from server import protocol as proto
from testbed.bot_factory import DefaultBotFactory
from testbed.cli import _server_table, main
from testbed.evaluation import CheaterOutcome, EvaluationReport, ScenarioOutcome, render_evaluation
from testbed.match import run_virtual
from testbed.report import DetectionCount, MatchResult, PlayerResult, bot_lag_warning, render_table
from testbed.scenario import builtin_scenario
from tests.server_harness import ScriptedClient, make_core, run_ticks

SPEEDHACK = "cheat_speedhack"


# --- players who left -------------------------------------------------------------------------


class _FlagOnSpawn(Detector):
    """Reports a speed detection about every player who spawns."""

    name = "movement"

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> list[Detection]:
        return [Detection(spawn.player, spawn.tick, spawn.time_s, "movement", "speed", 9.5, 0.9,
                          "Speed-9.50/7.00", {"speed_mps": 9.5, "limit_mps": 7.0})]


def test_core_report_keeps_a_flagged_player_who_left() -> None:
    core = make_core()
    core.pipeline = DetectionPipeline([_FlagOnSpawn()], SkipBook())
    a = ScriptedClient("stays", ("127.0.0.1", 5001))
    b = ScriptedClient("speeder", ("127.0.0.1", 5002))
    for c in (a, b):
        c.connect(core, 0.0)
    run_ticks(core, [a, b], 3)
    b.packet_seq += 1
    core.receive(b.address, proto.encode(proto.Disconnect(b.token, b.packet_seq)), core.time_s)
    run_ticks(core, [a], 5)
    core.close()
    report = core.report()
    by_name = {p["name"]: p for p in report["players"]}
    assert set(by_name) == {"stays", "speeder"}
    gone = by_name["speeder"]
    assert gone["connected"] is False and gone["left_reason"] == "client"
    assert 0.0 < gone["left_s"] <= report["time_s"]
    assert gone["detections"] == {"movement:speed": 1}
    assert {"shots", "hits", "kills", "deaths", "sanction"} <= set(gone)
    assert by_name["stays"]["connected"] is True and by_name["stays"]["left_s"] is None
    out = io.StringIO()
    Console(file=out, width=200, record=False).print(_server_table(report))
    row = next(line for line in out.getvalue().splitlines() if "speeder" in line)
    assert "movement:speed x1" in row and "(client)" in row


class _Leaves:
    """A bot that disconnects (sends DISCONNECT, then falls silent) at ``leave_s``."""

    def __init__(self, inner: Any, leave_s: float) -> None:
        self.inner, self.leave_s, self.left = inner, leave_s, False

    @property
    def next_step_s(self) -> float | None:
        if self.left:
            return None
        nxt = self.inner.next_step_s
        return self.leave_s if nxt is None else min(nxt, self.leave_s)

    def start(self, now_s: float) -> list[bytes]:
        return self.inner.start(now_s)

    def receive(self, datagram: bytes, now_s: float) -> None:
        if not self.left:
            self.inner.receive(datagram, now_s)

    def step(self, now_s: float) -> list[bytes]:
        if self.left:
            return []
        if now_s >= self.leave_s:
            self.left = True
            return self.inner.disconnect(now_s)
        return self.inner.step(now_s)


def _speedhack_leaving(leave_s: float, duration_s: float) -> MatchResult:
    default = DefaultBotFactory()

    def factory(spec: Any, **kw: Any) -> Any:
        bot = default(spec, **kw)
        return _Leaves(bot, leave_s) if spec.profile == "speedhack" else bot

    scenario = builtin_scenario(SPEEDHACK).replace(duration_s=duration_s)
    return run_virtual(scenario, bot_factory=factory)


def test_a_speedhacker_who_left_stays_in_the_match_result() -> None:
    result = _speedhack_leaving(leave_s=5.0, duration_s=8.0)
    cheater = next(p for p in result.players if p.profile == "speedhack")
    assert cheater.connected and cheater.left_s is not None and 4.9 <= cheater.left_s <= 5.5
    assert cheater.flagged and cheater.first_detection_s is not None and cheater.first_detection_s < cheater.left_s
    assert cheater.rtt_ms is not None  # the server's figures as they stood when it left
    assert cheater.sanction != "none"
    assert all(p.left_s is None for p in result.players if p is not cheater)
    doc = result.to_json()
    row = next(p for p in doc["players"] if p["profile"] == "speedhack")
    assert row["left_s"] == round(cheater.left_s, 3) and row["detections"]
    out = io.StringIO()
    Console(file=out, width=100).print(render_table(result))
    assert any(f"{cheater.name} (left" in line for line in out.getvalue().splitlines())


# --- tables in 100 columns --------------------------------------------------------------------


def _many_detections_result() -> MatchResult:
    kinds = [DetectionCount(d, k, n, t) for d, k, n, t in (
        ("movement", "timer", 40, 1.5), ("iw4m", "Strain", 12, 3.0), ("aimstats", "snap_rate", 3, 9.0),
        ("fire", "rate", 2, 12.0), ("bustaim", "random_aim", 1, 20.0))]
    players = [
        PlayerResult("satellite-1", "honest", "average", 600.0, 40.0, 0.05, slot=0,
                     connected=True, rtt_ms=612.0, measured_loss=0.05, shots=1234, hits=567, kills=89, deaths=90),
        PlayerResult("cheater-1", "smooth_aimbot", "high", 30.0, 1.0, 0.0, slot=1, connected=True, rtt_ms=31.0,
                     shots=2345, hits=1200, kills=150, deaths=20, detections=tuple(kinds), sanction="permanent_ban",
                     sanction_score=0.97, left_s=41.25),
        PlayerResult("late", "honest", "low", 80.0, 2.0, 0.01),
    ]
    return MatchResult("cheat_smooth_aimbot_long_scenario", "builtin", "virtual", "corridors", 123456, 64, 60.0,
                       2.0, tuple(players))


def test_a_udp_match_whose_bots_fell_behind_says_so() -> None:
    from dataclasses import replace

    base = _many_detections_result()
    assert bot_lag_warning(base) is None  # virtual time: nothing to fall behind
    on_time = replace(base, server={"udp": {"bot_commands": 100_000, "bot_ticks_skipped": 500}})
    assert bot_lag_warning(on_time) is None  # 0.5 %: a scheduler hiccup or two
    starved = replace(base, server={"udp": {"bot_commands": 30_000, "bot_ticks_skipped": 70_000}})
    warning = bot_lag_warning(starved)
    assert warning is not None and "skipped 70% of their ticks" in warning


def _lines(renderable: Any, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().splitlines()


def test_match_table_fits_100_columns_without_splitting_names() -> None:
    result = _many_detections_result()
    lines = _lines(render_table(result), 100)
    assert max(len(line) for line in lines) <= 100
    for p in result.players:
        row = next((line for line in lines if p.name in line), None)
        assert row is not None, p.name  # the name on one line, not wrapped
        assert p.profile in row
    cheater = next(line for line in lines if "cheater-1" in line)
    assert "(left 41s)" in cheater and "58 movement:timer" in cheater and "permban" in cheater
    assert "1200/2345" in cheater and "150/20" in cheater
    assert "never conn." in next(line for line in lines if "late" in line)


def test_match_table_in_80_columns_keeps_the_detections_and_the_sanction() -> None:
    result = _many_detections_result()
    lines = _lines(render_table(result, width=80), 80)
    assert max(len(line) for line in lines) <= 80
    cheater = next(line for line in lines if "cheater-1" in line)
    assert "58 movement:timer" in cheater and "permban" in cheater and "1.5" in cheater
    assert "hit/shot" not in "\n".join(lines) and "hits and K/D with --wide" in " ".join(lines)


def test_match_table_wide_has_every_column() -> None:
    lines = _lines(render_table(_many_detections_result(), wide=True), 200)
    text = "\n".join(lines)
    for header in ("profile (truth)", "ping ms", "rtt ms", "deaths", "detections (detector:kind)", "first s"):
        assert header in text
    assert "movement:timer x40" in text and "(left at 41.2 s)" in text


def _evaluation() -> EvaluationReport:
    cheaters = tuple(
        CheaterOutcome(f"cheat_{profile}", "cheater-1", profile, blatant, flagged, first, dets, sanction, 100)
        for profile, blatant, flagged, first, dets, sanction in (
            ("smooth_aimbot", False, True, 12.5, ("iw4m:Strain", "aimstats:snap_rate", "aimdetect:kill"), "temp_ban"),
            ("speedhack", True, True, 1.6, ("movement:timer",), "permanent_ban"),
            ("backtrack", True, False, None, (), "none"),
        )
    )
    false_positive = ("satellite-1", 600.0, 0.05, ("fire:rate", "iw4m:Strain"))
    scenarios = tuple(ScenarioOutcome(c.scenario, "corridors", 60.0, 1.0, 6, (c,), (false_positive,)) for c in cheaters)
    return EvaluationReport(deadline_s=60.0, scenarios=scenarios)


def test_evaluation_table_fits_100_columns_and_wide_has_every_column() -> None:
    report = _evaluation()
    lines = _lines(render_evaluation(report), 100)
    assert max(len(line) for line in lines) <= 100
    smooth = next(line for line in lines if "smooth_aimbot" in line and "cheater-1" in line)
    assert "iw4m:Strain +2" in smooth and "tempban" in smooth
    assert any("backtrack" in line and "NO" in line for line in lines)
    assert sum("satellite-1" in line and "FP" in line for line in lines) == 3
    wide = "\n".join(_lines(render_evaluation(report, wide=True), 200))
    assert "FALSE POSITIVE" in wide and "iw4m:Strain, aimstats:snap_rate, aimdetect:kill" in wide
    assert "cheat_smooth_aimbot" in wide and "blatant" in wide


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue()


def test_match_cli_compact_by_default_and_wide_on_request() -> None:
    code, out = _run("match", "--virtual", "--duration", "2", "--no-progress")
    assert code == 0 and "detections (detector:kind)" not in out and "hit/shot" in out
    code, out = _run("match", "--virtual", "--duration", "2", "--no-progress", "--wide")
    assert code == 0 and "detections (detector:kind)" in out and "profile (truth)" in out


# --- detection details ------------------------------------------------------------------------


def test_match_json_lists_each_detection_with_reason_value_and_evidence(tmp_path: Path) -> None:
    code, out = _run("match", "--virtual", "--duration", "6", "--no-progress", "--json",
                     str(Path(__file__).parent.parent / "testbed" / "scenarios" / f"{SPEEDHACK}.toml"))
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    cheater = next(p for p in doc["players"] if p["profile"] == "speedhack")
    assert {"detections", "first_detection_s", "sanction", "connected"} <= set(cheater)  # unchanged keys
    details = cheater["detection_list"]
    assert details and sum(d["count"] for d in cheater["detections"]) == len(details)
    first = details[0]
    assert set(first) == {"time_s", "detector", "kind", "reason", "value", "severity", "evidence"}
    assert first["reason"] and isinstance(first["evidence"], dict) and first["evidence"]
    assert np.isclose(first["time_s"], cheater["first_detection_s"])
    assert all(p["detection_list"] == [] for p in doc["players"] if not p["detections"])
