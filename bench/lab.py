"""The lab's costs: corpus throughput, storage, and a threshold sweep against re-runs.

1. Corpus throughput: a small spec is built into a fresh corpus (worker processes, one per
   CPU); the figure is simulated player-hours per core-hour. Baseline in the same run: the same
   matches played bare (``run_virtual`` with no recording, no re-detection, no storage), so the
   ratio is what the lab adds to playing.
2. Storage: the database's size per simulated player-hour (the issue's budget: 10 MB).
3. Sweep: 1,000 thresholds over one detector statistic's score traces (TPR and FPR at each),
   against re-running that detector alone over every stored stream (the other way to learn what
   a threshold does): ``--reruns`` re-runs are timed and their mean is multiplied by 1,000.

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

SPEC = """
name = "bench-lab"
duration_s = {duration}
maps = ["corridors"]
seed = 4242
honest_per_match = 6
cheaters_per_match = 2
honest_player_hours = {hours}
skills = ["average", "high"]

[[links]]
name = "lan"
ping_ms = 30.0

[[links]]
name = "lossy"
ping_ms = 200.0
jitter_ms = 20.0
loss = 0.03

[[cheats]]
profile = "smooth_aimbot"
[cheats.params]
strength = [0.3, 0.6]

[[cheats]]
profile = "triggerbot"
"""


def _bare(jobs: list[Any], workers: int) -> float:
    """Wall time (s) of the same matches played without the lab."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from testbed.match import run_virtual

    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(run_virtual, [j.scenario for j in jobs]))
    return time.perf_counter() - start


def _sweep(store: Any, stat: str, deadline_s: float, thresholds: np.ndarray) -> tuple[float, dict[str, Any]]:
    """Seconds for a sweep of ``thresholds`` over the traces of ``stat``, and its curve's ends."""
    start = time.perf_counter()
    rows = store.con.execute(
        """SELECT p.cheat, coalesce(max(t.value) FILTER (WHERE t.play_s <= ?), 0.0)
           FROM players p LEFT JOIN traces t
             ON t.match_id = p.match_id AND t.name = p.name AND t.run = 'base' AND t.stat = ?
           GROUP BY p.match_id, p.name, p.cheat""", [deadline_s, stat]).fetchall()
    cheat = np.array([bool(r[0]) for r in rows])
    peak = np.array([float(r[1]) for r in rows])
    hit = peak[None, :] >= thresholds[:, None]
    tpr = hit[:, cheat].mean(axis=1) if cheat.any() else np.zeros(len(thresholds))
    fpr = hit[:, ~cheat].mean(axis=1) if (~cheat).any() else np.zeros(len(thresholds))
    return time.perf_counter() - start, {"players": len(rows), "tpr_at_1": float(np.interp(1.0, thresholds, tpr)),
                                         "fpr_at_1": float(np.interp(1.0, thresholds, fpr))}


def _rerun_detector(streams: list[tuple[int, str, bytes]], detector: str) -> float:
    """Seconds to re-run one detector alone over every stream."""
    from anticheat.events import Detection
    from anticheat.pipeline import DetectionPipeline
    from anticheat.skip import SkipBook
    from anticheat.suite import build_detectors, resolve_configs, shipped_model_or_none
    from server.recording import ReplayReader
    from testbed.lab.redetect import decompress

    configs = resolve_configs()
    model = shipped_model_or_none()
    start = time.perf_counter()
    for mid, codec, data in streams:
        chosen = [d for d in build_detectors(configs, model) if d.name == detector]
        pipeline = DetectionPipeline(chosen, SkipBook(configs["skip"]))
        reader = ReplayReader(f"<{mid}>", decompress(data, codec))
        pipeline.feed_many(e for e in reader.events() if not isinstance(e, Detection))
        pipeline.flush()
    return time.perf_counter() - start


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench lab")
    parser.add_argument("--duration", type=float, default=60.0, help="match length (s)")
    parser.add_argument("--hours", type=float, default=0.2, help="honest player-hours of the corpus")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--reruns", type=int, default=3, help="single-detector re-runs timed")
    parser.add_argument("--stat", default="aimstats:score", help="the trace statistic swept")
    args = parser.parse_args(argv)

    from testbed.lab.corpus import build_corpus
    from testbed.lab.spec import parse_spec
    from testbed.lab.store import open_store

    spec = parse_spec(tomllib.loads(SPEC.format(duration=args.duration, hours=args.hours)), "bench-lab")
    jobs = spec.jobs()
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        store = open_store(Path(tmp) / "corpus")
        report = build_corpus(spec, store, workers=args.jobs)
        store.compact()
        size = store.size_bytes()
        bare_s = _bare(jobs, args.jobs)
        hours = spec.player_hours
        lab_rate = hours / (report.wall_s * args.jobs / 3600.0)
        bare_rate = hours / (bare_s * args.jobs / 3600.0)
        thresholds = np.linspace(0.0, 2.0, 1000)
        stats = [r[0] for r in store.con.execute(
            "SELECT stat FROM traces GROUP BY stat ORDER BY count(*) DESC").fetchall()]
        stat = args.stat if args.stat in stats else (stats[0] if stats else args.stat)
        sweep_s, curve = _sweep(store, stat, 120.0, thresholds)
        streams = store.streams()
        detector = stat.partition(":")[0]
        rerun_s = [_rerun_detector(streams, detector) for _ in range(args.reruns)]
        store.close()
    rerun_mean = float(np.mean(rerun_s))
    return {
        "matches": report.played,
        "player_hours": round(hours, 3),
        "workers": args.jobs,
        "corpus_wall_s": round(report.wall_s, 2),
        "player_hours_per_core_hour": round(lab_rate, 2),
        "bare_player_hours_per_core_hour": round(bare_rate, 2),
        "lab_vs_bare": round(lab_rate / bare_rate, 3),
        "db_mb_per_player_hour": round(size / 1e6 / hours, 2),
        "sweep_stat": stat,
        "sweep_1000_thresholds_s": round(sweep_s, 4),
        "rerun_one_detector_s": round(rerun_mean, 3),
        "reruns_timed": args.reruns,
        "rerun_1000_est_s": round(rerun_mean * 1000, 1),
        "sweep_speedup": round(rerun_mean * 1000 / sweep_s, 1),
        **curve,
    }
