"""The ``referee`` CLI: parsing, --help, replay summaries and re-detection, short matches end to end."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from anticheat.events import ConnectionSample, Detection, FireEvidence, FireKind, KillEvent, SessionEvent, ShotClaim, ShotResult, SpawnEvent
from lagcomp.shot import RewindDecision
from server.recording import ReplayReader, ReplayWriter
from testbed.cli import build_parser, main
from testbed.replay_summary import detect, summarize
from anticheat.suite import build_pipeline
from world.weapons import WeaponId

PISTOL = int(WeaponId.PISTOL)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["serve"], ["bots"], ["match"], ["replay"], ["evaluate"], ["lab", "train-aimdetect"]])
def test_help_for_every_subcommand(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: referee")
    for flag in {"serve": ["--tick-rate", "--bind", "--replay"], "bots": ["--server", "--ping-ms", "--loss"],
                 "match": ["--virtual", "--json", "--tolerances"], "replay": ["--detect"],
                 "evaluate": ["--deadline", "--jobs"], "lab": ["--holdout", "--target-fpr"]}.get(
        command[0] if command else "", ["serve", "bots", "match", "replay", "evaluate", "lab"]
    ):
        assert flag in text


def test_parser_defaults_and_values() -> None:
    p = build_parser()
    a = p.parse_args(["serve"])
    assert (a.map, a.tick_rate, a.port, a.bind, a.duration) == ("corridors", 64, 27015, "127.0.0.1", None)
    a = p.parse_args(["bots", "--server", "127.0.0.1:27015", "--count", "3", "--ping-ms", "120", "--loss", "0.02"])
    assert a.server == ("127.0.0.1", 27015) and a.count == 3 and a.ping_ms == 120.0 and a.loss == 0.02
    a = p.parse_args(["match", "x.toml", "--virtual", "--duration", "5", "--seed", "7", "--json"])
    assert (a.scenario, a.virtual, a.duration, a.seed, a.json) == ("x.toml", True, 5.0, 7, True)
    a = p.parse_args(["match"])
    assert a.scenario is None and not a.virtual
    a = p.parse_args(["replay", "f.replay", "--detect", "--tolerances", "t.toml"])
    assert (a.file, a.detect, a.tolerances) == ("f.replay", True, "t.toml")


@pytest.mark.parametrize(
    "argv",
    [
        ["bots"],
        ["bots", "--server", "nohostport"],
        ["bots", "--server", "h:1", "--loss", "2"],
        ["bots", "--server", "h:1", "--count", "0"],
        ["serve", "--tick-rate", "60"],
        ["serve", "--port", "70000"],
        ["match", "--duration", "-1"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: referee" in capsys.readouterr().err


def test_bad_inputs_exit_1_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('map = "open"\nduration_s = 5\ntick_rate_hz = 64\nseed = 1\n[[bots]]\ncount = 1\nprofile = "x"\n')
    code, _, err = run_cli("match", str(bad), "--virtual")
    assert code == 1 and f"{bad}: bots[0].profile: unknown profile 'x'" in err
    code, _, err = run_cli("replay", str(tmp_path / "missing.replay"))
    assert code == 1 and "missing.replay" in err
    not_replay = tmp_path / "x.replay"
    not_replay.write_bytes(b"hello")
    code, _, err = run_cli("replay", str(not_replay))
    assert code == 1 and "not a Referee replay" in err
    tol = tmp_path / "t.toml"
    tol.write_text("[bustaim]\nno_such_key = 1\n")
    good = tmp_path / "good.toml"
    good.write_text(HONEST)
    code, _, err = run_cli("match", str(good), "--virtual", "--tolerances", str(tol))
    assert code == 1 and "[bustaim] unknown key 'no_such_key'" in err


# --- replay summaries and re-detection ----------------------------------------------------------


def shot(slot: int, t: float, victim: int | None = None, bone: int = 0) -> ShotResult:
    return ShotResult(
        shooter=slot, tick=round(t * 64), time_s=t, weapon=PISTOL, pellet=0, origin=(5.0, 5.0, 1.64),
        direction=(1.0, 0.0, 0.0), rewind_time_s=t - 0.1, rewind_decision=RewindDecision.CLAIMED,
        rewind_clamped=False, victim=victim, victim_generation=0, bone=bone,
        hit_point=(15.0, 5.0, 1.6), distance_m=10.0, blocked_by_wall=False,
        victim_pos=(15.0, 5.0, 0.0) if victim is not None else None, victim_speed_m_s=0.0,
        damage=30.0 if victim is not None else 0.0,
        claim=ShotClaim(shooter=slot, weapon=PISTOL, yaw_deg=0.0, pitch_deg=0.0),
    )


def write_synthetic_replay(path: Path) -> list[Detection]:
    """A replay recorded the way ServerCore records: frames of events plus the pipeline's detections.

    Slot 0 crouch-cancels its pistol (auto-C), leaves, and its slot is reused by a new player;
    slot 1 kills slot 0 once with a headshot.
    """
    now = [0.0]
    pipeline = build_pipeline(clock=lambda: now[0])
    writer = ReplayWriter(path, {"kind": "test", "map": "open", "seed": 1, "tick_rate_hz": 64,
                                 "labels": [{"name": "cheater", "profile": "rapid_fire"},
                                            {"name": "honest-1", "profile": "honest"},
                                            {"name": "late-joiner", "profile": "honest"}]})
    frames: dict[int, list[object]] = {}

    def at(t: float, event: object) -> None:
        frames.setdefault(round(t * 64), []).append(event)

    # Slot changes travel in the stream, as ServerCore records them.
    at(0.0, SessionEvent(0, 0, 0.0, "connect", "cheater"))
    at(0.0, SessionEvent(1, 0, 0.0, "connect", "honest-1"))
    at(3.0, SessionEvent(0, 192, 3.0, "disconnect", "cheater"))
    at(3.0, SessionEvent(0, 192, 3.0, "connect", "late-joiner"))
    for slot in (0, 1):
        at(0.25, SpawnEvent(slot, 16, 0.25))
        at(0.25, ConnectionSample(slot, 0.25, 50.0, 2.0, 0.0, 0.0))
    for i in range(8):
        at(1.0 + 0.2 * i, shot(0, 1.0 + 0.2 * i))
        at(1.0 + 0.2 * i, FireEvidence(0, round((1.0 + 0.2 * i) * 64), 1.0 + 0.2 * i, PISTOL, FireKind.TOO_SOON, 0.2, 0.24))
    at(2.5, shot(1, 2.5, victim=0, bone=2))
    at(2.5, KillEvent(1, 0, 160, 2.5, PISTOL, 2, 10.0, 0, True))
    at(3.25, ConnectionSample(0, 3.25, 40.0, 1.0, 0.0, 0.0))
    for i in range(3):
        at(3.5 + 0.2 * i, shot(0, 3.5 + 0.2 * i))
    live: list[Detection] = []
    for tick in sorted(frames):
        t = tick / 64
        now[0] = t
        found = [d for e in frames[tick] for d in pipeline.feed(e)]
        live.extend(found)
        writer.write_tick(tick, t, [*frames[tick], *found])
    writer.close()
    return live


def test_replay_summary_counts_per_type_and_player(tmp_path: Path) -> None:
    path = tmp_path / "s.replay"
    write_synthetic_replay(path)
    s = summarize(path)
    assert not s.truncated
    assert s.events_by_type["ShotResult"] == 12 and s.events_by_type["KillEvent"] == 1
    p0, p1 = s.players
    assert p0.names == ["cheater", "late-joiner"] and p0.profile == "rapid_fire"
    assert (p0.shots, p0.deaths, p0.fire) == (11, 1, 8)
    assert (p1.name, p1.shots, p1.hits, p1.headshots, p1.kills) == ("honest-1", 1, 1, 1, 1)
    code, out, _ = run_cli("replay", str(path), "--json")
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["summary"]["events_by_type"]["ShotResult"] == 12
    assert doc["summary"]["header"]["kind"] == "test"
    code, out, _ = run_cli("replay", str(path))
    assert code == 0 and "events per type" in out and "late-joiner" in out


def test_replay_detect_reproduces_the_live_detections(tmp_path: Path) -> None:
    path = tmp_path / "d.replay"
    live = write_synthetic_replay(path)
    assert any(d.kind == "auto_c" and d.player == 0 for d in live)
    run = detect(path)
    assert run.matches_live and len(run.detections) == len(live)
    assert run.names[0] == "late-joiner"
    code, out, _ = run_cli("replay", str(path), "--detect", "--json")
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["detect"]["matches_live"] is True
    assert doc["detect"]["detections"] == len(live)
    code, out, _ = run_cli("replay", str(path), "--detect")
    assert code == 0 and "the same as the live run" in out


def test_replay_detect_with_other_tolerances_differs(tmp_path: Path) -> None:
    path = tmp_path / "t.replay"
    write_synthetic_replay(path)
    tol = tmp_path / "tol.toml"
    tol.write_text("[fire]\nauto_c_count = 1000\ntoo_soon_count = 1000\n")
    code, out, _ = run_cli("replay", str(path), "--detect", "--tolerances", str(tol), "--json")
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["detect"]["matches_live"] is False
    assert doc["detect"]["tolerances"]["fire"]["auto_c_count"] == 1000
    code, _, err = run_cli("replay", str(path), "--tolerances", str(tol))
    assert code == 1 and "--detect" in err


def test_truncated_replay_reads_up_to_the_last_frame(tmp_path: Path) -> None:
    path = tmp_path / "cut.replay"
    write_synthetic_replay(path)
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    s = summarize(path)
    assert s.truncated and s.frames == sum(1 for _ in ReplayReader(path).frames())


# --- matches end to end ---------------------------------------------------------------------------

HONEST = """
name = "cli-test"
map = "corridors"
duration_s = 2.0
tick_rate_hz = 64
seed = 11

[[bots]]
count = 2
ping_ms = 40.0
name_prefix = "near"

[[bots]]
count = 2
ping_ms = 180.0
jitter_ms = 8.0
loss = 0.03
name_prefix = "far"
"""

REQUIRED = {"name", "profile", "ping_ms", "loss", "shots", "hits", "kills", "detections", "sanction"}


def test_virtual_match_json_and_replay(tmp_path: Path) -> None:
    scenario = tmp_path / "honest.toml"
    scenario.write_text(HONEST)
    replay = tmp_path / "m.replay"
    code, out, err = run_cli("match", str(scenario), "--virtual", "--json", "--replay", str(replay))
    assert code == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["mode"] == "virtual" and doc["scenario"] == "cli-test" and doc["duration_s"] == 2.0
    assert [p["name"] for p in doc["players"]] == ["near-1", "near-2", "far-1", "far-2"]
    for p in doc["players"]:
        assert REQUIRED <= set(p)
        assert p["profile"] == "honest" and isinstance(p["detections"], list)
        assert p["connected"] is True
    assert doc["players"][2]["ping_ms"] == 180.0 and doc["players"][2]["loss"] == 0.03
    reader = ReplayReader(replay)
    assert [label["name"] for label in reader.header["labels"]] == ["near-1", "near-2", "far-1", "far-2"]
    connected = {e.name for e in reader.events() if isinstance(e, SessionEvent) and e.kind == "connect"}
    assert connected == {"near-1", "near-2", "far-1", "far-2"}
    assert detect(replay).matches_live
    code, out, _ = run_cli("match", str(scenario), "--virtual", "--duration", "1", "--seed", "3")
    assert code == 0 and "cli-test on corridors" in out and "near-1" in out


def test_udp_match_on_loopback(tmp_path: Path) -> None:
    scenario = tmp_path / "udp.toml"
    scenario.write_text(HONEST.replace("count = 2", "count = 1").replace("duration_s = 2.0", "duration_s = 1.5"))
    code, out, err = run_cli("match", str(scenario), "--json", "--no-progress")
    assert code == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["mode"] == "udp"
    assert doc["server"]["udp"]["address"].startswith("127.0.0.1:")
    assert doc["server"]["udp"]["bot_process"] is True  # the bots played in a process of their own
    assert all(p["connected"] for p in doc["players"])
    assert doc["server"]["counters"]["commands_received"] > 0


def test_serve_and_bots_over_loopback(tmp_path: Path) -> None:
    from testbed.standalone import run_bot_swarm, serve
    from world.mapfile import builtin_map

    game_map = builtin_map("corridors")
    replay = tmp_path / "serve.replay"

    async def scenario() -> tuple[dict, list]:
        listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(
            serve(game_map, duration_s=2.0, replay_path=replay, on_listening=listening.set_result)
        )
        address = await listening
        stats = await run_bot_swarm(address, game_map, count=2, ping_ms=60.0, loss=0.01, duration_s=1.5)
        return await server, stats

    report, stats = asyncio.run(scenario())
    # The swarm's probe reads the server's map with one short session first.
    assert {p["name"] for p in report["players"]} <= {"honest-1", "honest-2", "honest-probe"}
    assert report["counters"]["connects"] == 3
    assert all(s.slot is not None for s in stats)
    reader = ReplayReader(replay)
    assert reader.header["kind"] == "referee-serve"
    assert sum(isinstance(e, SessionEvent) and e.kind == "connect" for e in reader.events()) >= 2


def test_evaluate_reports_cheaters_and_honest_bots(tmp_path: Path) -> None:
    scenario = tmp_path / "speed.toml"
    scenario.write_text(HONEST.replace("duration_s = 2.0", "duration_s = 4.0") + """
[[bots]]
count = 1
profile = "speedhack"
ping_ms = 40.0
""")
    code, out, err = run_cli("evaluate", str(scenario), "--jobs", "1", "--deadline", "3", "--json")
    assert code == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["deadline_s"] == 3.0 and doc["honest"] == 4 and doc["cheaters"] == 1 == doc["blatant"]
    (sc,) = doc["scenarios"]
    (cheater,) = sc["cheaters"]
    assert cheater["profile"] == "speedhack" and cheater["blatant"] is True
    # The timer check catches a 1.5x game clock within two seconds.
    assert cheater["flagged"] and cheater["first_s"] <= 3.0 and "movement:timer" in cheater["detectors"]
    assert doc["honest_flagged"] == 0 and sc["false_positives"] == []
    assert "cli-test: 1/1 cheaters flagged" in err
    code, out, _ = run_cli("evaluate", str(scenario), "--jobs", "1", "--duration", "1", "--deadline", "0.5")
    assert code == 0 and "NO" in out and "blatant cheaters 0/1" in out


# --- command-line rough edges: -v anywhere, --version, the compile notice, unreachable servers ---


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["match"], 0),
        (["-v", "match"], 1),
        (["match", "-v"], 1),
        (["match", "x.toml", "--virtual", "-vv"], 2),
        (["-v", "match", "x.toml", "--verbose"], 2),
        (["replay", "f.replay", "-v", "--detect"], 1),
        (["bots", "--server", "h:1", "-vv"], 2),
        (["lab", "report", "d", "-v"], 1),
        (["-v", "lab", "-v", "report", "d", "-v"], 3),
    ],
)
def test_verbose_anywhere_on_the_command_line(argv: list[str], level: int) -> None:
    from testbed.cli import verbosity

    assert verbosity(build_parser().parse_args(argv)) == level


def test_verbose_after_the_command_sets_the_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    seen: list[int] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: seen.append(kw["level"]))
    assert run_cli("replay", "no-such.replay", "-vv")[0] == 1
    assert run_cli("-v", "replay", "no-such.replay")[0] == 1
    assert seen == [logging.DEBUG, logging.INFO]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"referee {version('referee')}\n"


def _free_udp_port() -> int:
    """A loopback UDP port with nothing bound to it (it was free a moment ago)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _warm_bots_command() -> None:
    """Import and compile what ``referee bots`` needs, so that the timed runs time the command."""
    from testbed.standalone import run_bot_swarm  # noqa: F401
    from world.geometry import MapGeometry
    from world.mapfile import builtin_map

    MapGeometry(builtin_map("corridors"))


def test_bots_exit_1_when_the_host_does_not_resolve() -> None:
    import time

    t0 = time.monotonic()
    code, out, err = run_cli("bots", "--server", "no.such.host.invalid:27015")
    assert code == 1 and out == ""
    (line,) = err.splitlines()  # one line: no traceback, no compile notice
    assert line.startswith("referee: cannot resolve server host 'no.such.host.invalid': ")
    assert time.monotonic() - t0 < 10.0


def test_bots_exit_1_when_no_server_answers() -> None:
    import time

    _warm_bots_command()
    port = _free_udp_port()
    t0 = time.monotonic()
    code, out, err = run_cli("bots", "--server", f"127.0.0.1:{port}", "--count", "2", "--duration", "60",
                             "--connect-timeout", "0.5")
    elapsed = time.monotonic() - t0
    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if not line.startswith("referee: compiling")]
    assert lines == [f"referee: no answer from 127.0.0.1:{port} within 0.5 s (is a server running there?)"]
    assert elapsed < 10.0  # the bots' own handshake timeout would take 30 s, the duration 60 s


def test_swarm_behind_the_link_emulator_names_the_server_when_unanswered() -> None:
    from bots.udp import NoAnswer
    from testbed.standalone import run_bot_swarm
    from world.mapfile import builtin_map

    port = _free_udp_port()
    with pytest.raises(NoAnswer, match=rf"no answer from 127\.0\.0\.1:{port} within"):
        asyncio.run(run_bot_swarm(("127.0.0.1", port), builtin_map("open"), count=1, ping_ms=80.0,
                                  duration_s=30.0, connect_timeout_s=0.4))


def test_bots_refuse_another_map_than_the_servers() -> None:
    """Bots given another map than the one a real server runs: exit 1 with one line, before
    any bot plays (tests/test_bots_map.py: without --map they take the server's)."""
    import threading

    from testbed.standalone import serve
    from world.mapfile import builtin_map

    listening = threading.Event()
    address: list[tuple[str, int]] = []

    def on_listening(addr: tuple[str, int]) -> None:
        address.append(addr)
        listening.set()

    server = threading.Thread(
        target=asyncio.run, args=(serve(builtin_map("open"), duration_s=6.0, on_listening=on_listening),), daemon=True
    )
    server.start()
    assert listening.wait(60.0)
    host, port = address[0]
    code, out, err = run_cli("bots", "--server", f"{host}:{port}", "--count", "3", "--duration", "1.5", "--map", "corridors")
    server.join(30.0)
    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if not line.startswith("referee: compiling")]
    assert lines == ["referee: the server runs map 'open', not 'corridors' (from builtin:corridors): leave out --map to play it"]


def test_compile_notice_only_when_the_kernel_cache_is_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """match, serve and bots say they compile before their first heavy step, and only when the
    cache of the kernels they need is cold (the detection itself: tests/test_kernel_cache.py)."""
    import testbed.kernel_cache as kc
    from testbed.cli import COMPILING_NOTICE

    asked: list[tuple[str, ...]] = []
    cold = [["server.core"]]

    def fake_cold(modules: tuple[str, ...] = kc.KERNEL_MODULES) -> list[str]:
        asked.append(tuple(modules))
        return cold[0]

    monkeypatch.setattr(kc, "cold_modules", fake_cold)
    bad = tmp_path / "bad.toml"
    bad.write_text("map = 1\n")
    code, _, err = run_cli("match", str(bad))
    assert code == 1 and err.splitlines()[0] == COMPILING_NOTICE and "bad.toml" in err.splitlines()[1]
    code, _, err = run_cli("serve", "--map", str(tmp_path / "missing.json"))
    assert code == 1 and err.splitlines()[0] == COMPILING_NOTICE
    code, _, err = run_cli("bots", "--server", "127.0.0.1:1", "--profile", "no_such_profile")
    assert code == 1 and err.splitlines()[0] == COMPILING_NOTICE
    assert asked == [kc.COMMAND_KERNEL_MODULES[c] for c in ("match", "serve", "bots")]
    code, _, err = run_cli("bots", "--server", "no.such.host.invalid:1")  # fails before any compiling
    assert code == 1 and COMPILING_NOTICE not in err
    cold[0] = []
    for argv in (["match", str(bad)], ["serve", "--map", str(tmp_path / "missing.json")]):
        code, _, err = run_cli(*argv)
        assert code == 1 and COMPILING_NOTICE not in err


def test_serve_log_json_keeps_stderr_json_for_the_compile_notice_and_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Under ``--log-json`` stderr is for a log collector: the compile notice is a record, not
    a plain line, and so is a command's error (in a process of its own, as an operator runs it)."""
    import logging
    import subprocess
    import sys

    import testbed.kernel_cache as kc
    from testbed.cli import COMPILING_NOTICE

    monkeypatch.setattr(kc, "cold_modules", lambda modules=kc.KERNEL_MODULES: ["server.core"])
    missing = str(tmp_path / "missing.json")
    with caplog.at_level(logging.INFO, logger="referee.serve"):
        code, _, err = run_cli("serve", "--log-json", "--map", missing)
    assert code == 1 and COMPILING_NOTICE not in err
    notice = [r for r in caplog.records if getattr(r, "event", None) == "compiling"]
    assert [r.name for r in notice] == ["referee.serve"]
    assert COMPILING_NOTICE.endswith(notice[0].getMessage())

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "serve", "--log-json", "--map", missing],
                          cwd=root, capture_output=True, text=True, timeout=120.0)
    assert done.returncode == 1 and done.stdout == ""
    docs = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    assert docs[-1]["level"] == "ERROR" and docs[-1]["event"] == "error"
    assert "missing.json" in docs[-1]["message"] and "not readable" in docs[-1]["message"]


def test_replay_evidence_lists_each_recorded_detection(tmp_path: Path) -> None:
    path = tmp_path / "e.replay"
    live = write_synthetic_replay(path)
    assert live
    code, out, _ = run_cli("replay", str(path), "--json", "--evidence")
    assert code == 0
    doc = json.loads(out.strip().splitlines()[-1])
    rows = doc["evidence"]
    assert len(rows) == len(live)
    for row, d in zip(rows, live):
        assert row["player"] == "cheater" and row["slot"] == d.player
        assert (row["detector"], row["kind"], row["reason"]) == (d.detector, d.kind, d.reason)
        assert row["time_s"] == round(d.time_s, 3) and row["value"] == pytest.approx(d.value)
        assert row["evidence"] == pytest.approx(dict(d.evidence))
    code, out, _ = run_cli("replay", str(path), "--json", "--evidence", "--player", "honest-1")
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["evidence"] == []
    code, out, _ = run_cli("replay", str(path), "--json")
    assert "evidence" not in json.loads(out.strip().splitlines()[-1])  # only when asked
    code, out, _ = run_cli("replay", str(path), "--evidence", "--player", "cheater")
    assert code == 0
    first = live[0]
    row = next(line for line in out.splitlines() if first.reason in line)
    assert "cheater" in row and f"{first.detector}:{first.kind}" in row and "interval_s=" in row
    code, _, err = run_cli("replay", str(path), "--evidence", "--player", "nobody")
    assert code != 0 and "nobody" in err
    code, _, err = run_cli("replay", str(path), "--player", "cheater")
    assert code != 0 and "--evidence" in err
