"""Building a corpus: every match of a spec played in virtual time, in parallel, resumably.

A match is played by a worker (a process of this machine's pool, or a Ray task with
``ray_address``): :func:`play_job` plays it with a replay recorder, re-runs the suite over the
recorded stream to get the detections, decisions and score traces, compresses the stream and
returns the rows. Only this process writes the database, one match per transaction, so a build
killed at any moment leaves whole matches only; a resumed build skips them and never plays a
stored match again. Matches are deterministic for their seed, so the same spec gives the same
rows whichever runner played them, in whatever order.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from anticheat.detectors.aimdetect.model import TrainedModel
from anticheat.suite import shipped_model_or_none
from testbed.lab.redetect import analyse, compress
from testbed.lab.spec import CorpusSpec, MatchJob
from testbed.lab.store import LabStore, MatchRows

__all__ = ["BuildProgress", "BuildReport", "CorpusMismatchError", "build_corpus", "play_job", "play_jobs"]

log = logging.getLogger(__name__)

STREAM_CODEC = "xz"


class CorpusMismatchError(ValueError):
    """The directory already holds a corpus of another spec."""


@dataclass(frozen=True, slots=True)
class BuildProgress:
    """After each stored match: matches done / total (this spec), player-hours stored, and this
    build's wall time (s) and matches played (for an ETA)."""

    done: int
    total: int
    player_hours: float
    wall_s: float
    played_now: int
    last_match: int


@dataclass(frozen=True, slots=True)
class BuildReport:
    """A finished (or stopped) build: matches played now, skipped (already stored), wall time (s)."""

    played: int
    skipped: int
    total: int
    wall_s: float
    runner: str


def _labels_of(job: MatchJob) -> dict[str, tuple[bool, bool]]:
    """name -> (cheat, blatant) from the profile registry (plugins and references included)."""
    from bots.registry import default_registry

    registry = default_registry()
    out = {}
    for bot in job.scenario.players():
        spec = registry.resolve(bot.reference)
        out[bot.name] = (bool(spec.cheat), bool(spec.blatant))
    return out


def play_job(job: MatchJob, *, trace_every_s: float = 1.0, codec: str = STREAM_CODEC, runner: str = "process",
             model: TrainedModel | None | str = "shipped") -> MatchRows:
    """Play one corpus match and return its rows (runs in a worker; pure given the job and
    ``model``, AimDetect's model for the analysis: ``"shipped"`` reads the files now)."""
    from testbed.match import run_virtual

    with tempfile.TemporaryDirectory(prefix="referee-lab-") as tmp:
        path = Path(tmp) / "match.rpl"
        result = run_virtual(job.scenario, path)
        raw = path.read_bytes()
    analysis = analyse(raw, match_id=job.match_id, run="base", trace_every_s=trace_every_s, model=model)
    if not analysis.matches_live:
        log.warning("match %d: the offline re-run found %d detections, the live run %d",
                    job.match_id, len(analysis.detections), analysis.live)
    truth = _labels_of(job)
    players = []
    for p in result.players:
        join, leave = analysis.exposure.get(p.name, (0.0, 0.0))
        cheat, blatant = truth[p.name]
        label = job.labels.get(p.name, {})
        players.append({
            "match_id": job.match_id, "name": p.name, "slot": p.slot,
            "profile": label.get("label", p.profile) if cheat else p.profile,
            "cheat": cheat, "blatant": blatant, "skill": p.skill, "link": label.get("link", ""),
            "ping_ms": p.ping_ms, "jitter_ms": p.jitter_ms, "loss": p.loss,
            "params": next((dict(b.params) for b in job.scenario.players() if b.name == p.name), {}),
            "param_bin": label.get("param_bin", ""), "join_s": join, "leave_s": leave,
            "play_s": max(0.0, leave - join), "shots": p.shots, "hits": p.hits, "kills": p.kills, "deaths": p.deaths,
        })
    sc = job.scenario
    return MatchRows(
        match={"match_id": job.match_id, "seed": sc.seed, "map": sc.map, "duration_s": sc.duration_s,
               "tick_rate_hz": sc.tick_rate_hz, "scenario": sc.summary(), "wall_s": result.wall_s, "runner": runner},
        players=players,
        stream=(codec, len(raw), compress(raw, codec)),
        detections=analysis.detections,
        decisions=analysis.decisions,
        traces=analysis.traces,
    )


def _check_spec(store: LabStore, spec: CorpusSpec) -> None:
    import json

    digest = spec.digest()
    stored = store.meta("spec_hash")
    if stored is None:
        store.set_meta("spec_hash", digest)
        store.set_meta("spec", json.dumps(spec.raw, sort_keys=True, default=str))
        store.set_meta("spec_name", spec.name)
        store.set_meta("seed", str(spec.seed))
    elif stored != digest:
        raise CorpusMismatchError(
            f"{store.path} holds a corpus of another spec (hash {stored}, this one {digest}); "
            "use another directory for it")


def _process_results(jobs: Sequence[MatchJob], workers: int, trace_every_s: float,
                     model: TrainedModel | None) -> Iterator[MatchRows]:
    """Rows of each job as matches finish (at most ``workers`` in flight), in completion order."""
    if workers == 1:
        for job in jobs:
            yield play_job(job, trace_every_s=trace_every_s, model=model)
        return
    # Spawned workers: nothing inherited (no open database, no numba threads of the parent).
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        pending = list(jobs)
        running: set[Future[MatchRows]] = set()
        try:
            while pending or running:
                while pending and len(running) < workers:
                    running.add(pool.submit(play_job, pending.pop(0), trace_every_s=trace_every_s, model=model))
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield fut.result()
        finally:
            for fut in running:
                fut.cancel()


def _ray_results(jobs: Sequence[MatchJob], address: str, trace_every_s: float,
                 model: TrainedModel | None) -> Iterator[MatchRows]:
    """Rows of each job played as Ray tasks on the cluster at ``address`` (``local`` starts one)."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("--ray needs Ray: pip install 'referee[ray]'") from exc
    started = False
    if not ray.is_initialized():
        if address == "local":
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(play_job)
        shared = ray.put(model)
        refs = [remote.remote(job, trace_every_s=trace_every_s, runner="ray", model=shared) for job in jobs]
        while refs:
            ready, refs = ray.wait(refs, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()


def play_jobs(jobs: Sequence[MatchJob], *, workers: int | None = None, ray_address: str | None = None,
              trace_every_s: float = 1.0) -> Iterator[MatchRows]:
    """Play ``jobs`` (worker processes, default one per CPU; or Ray tasks at ``ray_address``) and
    yield each match's rows as it finishes (completion order). The shipped AimDetect model is read
    once, here, and travels with every job: a build of many hours analyses every match with one
    model, even if the files are retrained meanwhile (a worker reading them per match once met a
    model its older code could not use, and lost the matches in flight)."""
    if not jobs:
        return iter(())
    model = shipped_model_or_none()
    if ray_address:
        return _ray_results(jobs, ray_address, trace_every_s, model)
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    return _process_results(jobs, n, trace_every_s, model)


def build_corpus(
    spec: CorpusSpec,
    store: LabStore,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    max_matches: int | None = None,
    trace_every_s: float = 1.0,
    on_progress: Callable[[BuildProgress], None] | None = None,
) -> BuildReport:
    """Play every match of ``spec`` not yet in ``store`` and store it.

    Args:
        spec: the corpus. store: its database (tied to the spec on first use).
        workers: worker processes (default: one per CPU). ray_address: play on Ray instead
            (``local`` for a local cluster, else a cluster address).
        max_matches: play at most this many of the missing matches (a partial build, resumable).
        trace_every_s: score sampling period (s of match time).
        on_progress: called after each stored match.
    """
    _check_spec(store, spec)
    done = store.done_match_ids()
    jobs = [spec.job(i) for i in range(spec.match_count) if i not in done]
    skipped = spec.match_count - len(jobs)
    if max_matches is not None:
        jobs = jobs[:max_matches]
    start = time.perf_counter()
    per_match_h = (spec.honest_per_match + spec.cheaters_per_match) * spec.duration_s / 3600.0
    runner = "ray" if ray_address else "process"
    played = 0
    for rows in play_jobs(jobs, workers=workers, ray_address=ray_address, trace_every_s=trace_every_s):
        store.add_match(rows)
        played += 1
        log.info("stored match %d (%d/%d)", rows.match["match_id"], skipped + played, spec.match_count)
        if on_progress is not None:
            total_done = skipped + played
            on_progress(BuildProgress(total_done, spec.match_count, total_done * per_match_h,
                                      time.perf_counter() - start, played, int(rows.match["match_id"])))
    return BuildReport(played=played, skipped=skipped, total=spec.match_count,
                       wall_s=time.perf_counter() - start, runner=runner)
