"""Re-running a whole corpus's streams with other tolerances, in parallel.

Each stored stream goes to a worker (a process, or a Ray task) that decompresses it and runs
:func:`testbed.lab.redetect.analyse`; the rows come back to this process, which alone writes
the database. :func:`outcomes` condenses a re-run into what tuning needs per player: the first
alarm's play time and the alarm count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from anticheat.judgement.sanctions import SanctionConfig
from testbed.lab.redetect import Analysis, analyse, decompress
from testbed.lab.store import LabStore

__all__ = ["LINK_KINDS", "PlayerOutcome", "StreamJob", "outcomes", "rerun_corpus", "rerun_streams"]

LINK_KINDS: frozenset[str] = SanctionConfig().link_kinds
"""Detection kinds that describe the connection, not cheating: never counted as alarms."""


@dataclass(frozen=True, slots=True)
class StreamJob:
    """One stored stream and how to re-run it."""

    match_id: int
    codec: str
    data: bytes
    overrides: Mapping[str, Mapping[str, Any]] | None
    run: str
    trace_every_s: float | None


def run_stream(job: StreamJob) -> Analysis:
    """Decompress and analyse one stream (runs in a worker)."""
    return analyse(decompress(job.data, job.codec), job.overrides, match_id=job.match_id, run=job.run,
                   trace_every_s=job.trace_every_s)


def rerun_streams(jobs: Sequence[StreamJob], *, executor: Executor | None = None, ray: bool = False) -> Iterator[Analysis]:
    """Analyses of ``jobs``, in job order (workers from ``executor``, Ray tasks, or this process)."""
    if ray:
        import ray as ray_mod

        remote = ray_mod.remote(num_cpus=1)(run_stream)
        yield from ray_mod.get([remote.remote(job) for job in jobs])
        return
    if executor is None:
        for job in jobs:
            yield run_stream(job)
        return
    yield from executor.map(run_stream, jobs)


def worker_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """Spawned worker processes (nothing inherited: no open database, no numba threads)."""
    return ProcessPoolExecutor(max_workers=max(1, workers or os.cpu_count() or 1), mp_context=get_context("spawn"))


def rerun_corpus(
    store: LabStore,
    overrides: Mapping[str, Mapping[str, Any]] | None,
    run: str,
    *,
    workers: int | None = None,
    ray: bool = False,
    trace_every_s: float | None = 1.0,
    on_match: Callable[[int, int], None] | None = None,
) -> int:
    """Re-run every stored stream with ``overrides`` and store the results as ``run``; returns
    the number of matches re-run. ``on_match(done, total)`` reports progress."""
    if run == "base" and overrides:
        raise ValueError("run 'base' holds the corpus's own tolerances; name a re-run with other tolerances")
    streams = store.streams()
    jobs = [StreamJob(mid, codec, data, overrides, run, trace_every_s) for mid, codec, data in streams]
    done = 0
    pool = None if ray or workers == 1 else worker_pool(workers)
    try:
        for analysis, job in zip(rerun_streams(jobs, executor=pool, ray=ray), jobs, strict=True):
            store.replace_run(run, job.match_id, analysis.detections, analysis.decisions, analysis.traces)
            done += 1
            if on_match is not None:
                on_match(done, len(jobs))
    finally:
        if pool is not None:
            pool.shutdown()
    return done


@dataclass(frozen=True, slots=True)
class PlayerOutcome:
    """One player-match under one tolerance set: first alarm (s of play, or None) and alarms."""

    first_s: float | None
    alarms: int


def outcomes(analysis: Analysis, link_kinds: frozenset[str] = LINK_KINDS) -> dict[str, PlayerOutcome]:
    """Per player name of one analysed match: the first non-link detection and their count."""
    first: dict[str, float] = {}
    count: dict[str, int] = {}
    for row in analysis.detections:
        name, play_s, kind = row[2], row[4], row[6]
        if kind in link_kinds:
            continue
        count[name] = count.get(name, 0) + 1
        if name not in first:
            first[name] = float(play_s)
    return {name: PlayerOutcome(first.get(name), count.get(name, 0)) for name in analysis.exposure}
