"""The Prometheus endpoint of a real ``serve``: bots, garbage datagrams and a cheat, scraped over HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from server.metrics import MetricsConfig
from server.tick_stats import TickStats
from testbed.logsetup import JsonFormatter

Families = dict[str, list[Sample]]

GARBAGE = b"\xc1" * 32
"""0xc1 is never used by MessagePack: the server rejects this as ``not_msgpack``."""


def scrape(url: str) -> Families:
    """Every sample of the endpoint, by family name (counters without ``_total``)."""
    with urllib.request.urlopen(url, timeout=10.0) as response:
        text = response.read().decode()
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def value(families: Families, sample: str, **labels: str) -> float:
    """The value of the sample called ``sample`` with exactly these labels (missing: NaN)."""
    for samples in families.values():
        for s in samples:
            if s.name == sample and s.labels == labels:
                return s.value
    return math.nan


async def scrape_until(url: str, done: Callable[[Families], bool], timeout_s: float = 30.0) -> Families:
    """Scrape every 0.2 s until ``done`` holds (bounded: fails after ``timeout_s``)."""
    async with asyncio.timeout(timeout_s):
        while True:
            families = await asyncio.to_thread(scrape, url)
            if done(families):
                return families
            await asyncio.sleep(0.2)


def test_tick_histogram_counts_every_tick_in_its_bucket() -> None:
    stats = TickStats(budget_s=0.004, window=4)  # the ring is shorter than the ticks: the histogram is not
    durations = [0.0001, 0.001, 0.001, 0.003, 0.004, 0.0045, 0.02, 0.5]
    for d in durations:
        stats.add(d)
    buckets, total = stats.histogram()
    assert total == pytest.approx(sum(durations))
    cumulative = dict(buckets)
    assert 0.004 in cumulative  # the budget is a bound
    assert cumulative[0.00025] == 1
    assert cumulative[0.001] == 3  # a tick equal to a bound is in it (le)
    assert cumulative[0.004] == 5
    assert cumulative[0.005] == 6
    assert cumulative[0.25] == 7
    assert cumulative[math.inf] == len(durations) == stats.ticks
    assert stats.overruns == 3
    counts = [n for _, n in buckets]
    assert counts == sorted(counts)


def test_serve_exposes_players_traffic_rejections_detections_and_ticks(caplog: pytest.LogCaptureFixture) -> None:
    from testbed.standalone import run_bot_swarm, serve
    from world.mapfile import builtin_map

    game_map = builtin_map("corridors")

    async def scenario() -> tuple[Families, Families, dict]:
        loop = asyncio.get_running_loop()
        listening: asyncio.Future[tuple[str, int]] = loop.create_future()
        metrics_at: asyncio.Future[tuple[str, int]] = loop.create_future()
        server = asyncio.create_task(serve(
            game_map, duration_s=10.0, metrics=MetricsConfig(port=0),
            on_listening=listening.set_result, on_metrics_listening=metrics_at.set_result,
        ))
        await asyncio.wait([server, listening], timeout=180.0, return_when=asyncio.FIRST_COMPLETED)
        if server.done():
            server.result()  # serve failed before it listened: raise its error
        address = listening.result()
        host, port = await asyncio.wait_for(metrics_at, 5.0)
        assert host == "127.0.0.1"
        url = f"http://{host}:{port}/metrics"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            for _ in range(5):
                raw.sendto(GARBAGE, address)
        swarm = asyncio.create_task(run_bot_swarm(address, game_map, count=2, profile="speedhack", duration_s=4.0))
        playing = await scrape_until(url, lambda f: value(f, "referee_players") == 2)
        await asyncio.wait_for(swarm, 30.0)
        after = await scrape_until(url, lambda f: value(f, "referee_players") == 0)
        report = await asyncio.wait_for(server, 30.0)
        return playing, after, report

    with caplog.at_level(logging.INFO, logger="server.activity_log"):
        playing, after, report = asyncio.run(scenario())

    # (run_bot_swarm may probe the server with a connection of its own first.)
    connected = value(after, "referee_connects_total")
    assert connected >= 2 and value(playing, "referee_connects_total") == connected
    assert value(after, "referee_disconnects_total", reason="client") == connected
    assert value(after, "referee_datagrams_rejected_total", reason="not_msgpack") == 5
    assert report["rejections"]["not_msgpack"] == 5
    # Traffic: both ways, bytes at least as many as datagrams, and growing while the bots play.
    for name in ("referee_datagrams_received_total", "referee_datagrams_sent_total"):
        assert 0 < value(playing, name) < value(after, name)
    assert value(after, "referee_sent_bytes_total") > value(after, "referee_datagrams_sent_total")
    assert report["udp"]["datagrams_received"] >= value(after, "referee_datagrams_received_total")
    assert report["udp"]["datagrams_sent"] >= value(after, "referee_datagrams_sent_total")
    assert value(after, "referee_kernel_receive_drops_total") == 0 == report["udp"]["kernel_drops"]
    assert value(after, "referee_socket_receive_buffer_bytes") > 0
    # The speed hack's 1.5x game clock is caught by the movement timer check.
    timer = value(after, "referee_detections_total", detector="movement", kind="timer")
    assert timer >= 1
    assert sum(s.value for s in after["referee_sanction_decisions"]) >= 1
    # Skips by detector and reason are exported, every sample a label pair (empty when none skipped).
    assert all(set(s.labels) == {"detector", "reason"} for s in after["referee_detector_skips"])
    # Ticks: a histogram of every tick so far, cumulative, and the phases' time.
    buckets = [s for s in after["referee_tick_duration_seconds"] if s.name.endswith("_bucket")]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
    ticks = value(after, "referee_tick_duration_seconds_count")
    assert ticks == counts[-1] > value(playing, "referee_tick_duration_seconds_count") > 0
    assert value(after, "referee_tick_duration_seconds_sum") > 0
    assert value(after, "referee_tick_budget_seconds") == 1 / 64
    assert value(after, "referee_tick_overruns_total") <= ticks
    assert value(after, "referee_tick_phase_seconds_total", phase="inputs") > 0
    assert {s.labels["decision"] for s in after["referee_rewind_decisions"]} == {
        "claimed", "estimate", "max_unlag", "not_rewound"}
    assert "process_cpu_seconds" in after  # the process collector is on the private registry too

    # The activity log: a line per connect, disconnect and detection, with structured fields.
    records = [r for r in caplog.records if r.name == "server.activity_log"]
    connects = [r for r in records if getattr(r, "event", None) == "connect"]
    assert len(connects) == connected
    assert {"speedhack-1", "speedhack-2"} <= {r.player for r in connects}  # type: ignore[attr-defined]
    assert all(r.address.startswith("127.0.0.1:") for r in connects)  # type: ignore[attr-defined]
    gone = [r for r in records if getattr(r, "event", None) == "disconnect"]
    assert sorted((r.player, r.reason) for r in gone) == sorted(  # type: ignore[attr-defined]
        (r.player, "client") for r in connects)  # type: ignore[attr-defined]
    found = [r for r in records if getattr(r, "event", None) == "detection"]
    assert any(r.check == "movement:timer" for r in found)  # type: ignore[attr-defined]
    assert all(r.levelno == logging.INFO for r in records)
    line = json.loads(JsonFormatter().format(found[0]))
    assert line["level"] == "INFO" and line["logger"] == "server.activity_log"
    assert line["event"] == "detection" and line["player"].startswith("speedhack-")
    assert line["check"] == f"{line['detector']}:{line['kind']}" and isinstance(line["value"], float)
    assert line["message"].startswith(f"detection: {line['player']} {line['check']} value=")


class _Lines:
    """Every stderr line of a process, read by a thread of its own.

    ``select`` on the pipe and then ``readline`` is wrong: one read can take two lines into the
    file object's buffer, and the second then waits for the next write to the pipe. CI lost the
    ``metrics_listening`` line that way until ``serve`` ended 300 s later."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def next(self, deadline_s: float) -> str | None:
        """The next line, None at the end of the stream; waits until ``deadline_s``
        (time.monotonic) at most."""
        try:
            line = self._queue.get(timeout=max(0.0, deadline_s - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line from referee serve in time; so far: {self.seen}") from None
        if line is not None:
            self.seen.append(line)
        return line

    def rest(self, timeout_s: float) -> list[str]:
        """The lines left once the stream has ended (waits ``timeout_s`` for its end at most)."""
        self._thread.join(timeout_s)
        start = len(self.seen)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return self.seen[start:]
            if line is not None:
                self.seen.append(line)


def test_referee_serve_logs_json_lines_serves_metrics_and_ends_with_the_rejections(tmp_path: Path) -> None:
    """``referee serve --log-json --metrics-port 0`` in a process of its own, stopped with Ctrl-C:
    every stderr line is a JSON object (where it listens, connects, detections, disconnects);
    stdout's final tables count the rejected datagrams by reason."""
    from testbed.standalone import run_bot_swarm
    from world.mapfile import builtin_map

    root = Path(__file__).resolve().parent.parent
    stdout_path = tmp_path / "stdout.txt"
    with stdout_path.open("w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "testbed.cli", "serve", "--port", "0", "--duration", "600", "--log-json",
             "--metrics-port", "0", "--map", "corridors"],
            cwd=root, stdout=stdout, stderr=subprocess.PIPE, text=True,
        )
    assert proc.stderr is not None
    lines = _Lines(proc.stderr)
    try:
        # A cold numba cache compiles first: 116 s on an idle core of the CI machine's kind since
        # the phantom kernel; a bound, not a speed requirement.
        deadline = time.monotonic() + 420.0
        address = url = None
        while address is None or url is None:
            line = lines.next(deadline)
            assert line, f"referee serve ended early: {lines.seen}"
            doc = json.loads(line)
            if doc.get("event") == "listening":
                host, port = doc["address"].rsplit(":", 1)
                address = (host, int(port))
            elif doc.get("event") == "metrics_listening":
                url = doc["url"]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            for _ in range(3):
                raw.sendto(GARBAGE, address)
        asyncio.run(run_bot_swarm(address, builtin_map("corridors"), count=1, profile="speedhack", duration_s=3.0,
                                  connect_timeout_s=120.0))
        assert proc.poll() is None, f"referee serve ended during the run: {lines.seen}"
        families = scrape(url)
        proc.send_signal(signal.SIGINT)  # serve stops cleanly: report, final tables
        proc.wait(timeout=60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rest = "".join(lines.rest(10.0))
    out = stdout_path.read_text()
    assert proc.returncode == 0, rest
    assert value(families, "referee_datagrams_rejected_total", reason="not_msgpack") == 3
    assert value(families, "referee_detections_total", detector="movement", kind="timer") >= 1
    docs = [json.loads(line) for line in lines.seen]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(d) for d in docs)
    events = [(d.get("event"), d.get("player")) for d in docs if d["logger"] == "server.activity_log"]
    assert ("connect", "speedhack-1") in events and ("disconnect", "speedhack-1") in events
    assert ("detection", "speedhack-1") in events
    found = next(d for d in docs if d.get("event") == "detection")
    assert found["level"] == "INFO" and found["check"].startswith("movement:")
    # The final tables: the players, then the traffic and every rejection by reason.
    assert "speedhack-1" in out
    assert re.search(r"rejected by reason", out) and re.search(r"not_msgpack\s+.*3", out)
