"""Walk a corpus's event streams, one function per stream, in worker processes when asked.

The lab's measurements (the trigger table, bait shots, ...) each decode every stream and reduce
it to rows; this is the loop they share. Streams are read one at a time (a standard corpus holds
~250 MB of them) and decoded in ``jobs`` spawned processes when ``jobs`` > 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from server.recording import ReplayReader
from testbed.lab.redetect import decompress
from testbed.lab.store import LabStore

__all__ = ["map_streams", "stream_events"]

R = TypeVar("R")


def stream_events(match_id: int, codec: str, data: bytes) -> Iterator[object]:
    """Every event of one stored stream, in order."""
    reader = ReplayReader(f"<corpus match {match_id}>", decompress(data, codec))
    return (event for frame in reader.frames() for event in frame.events)


def map_streams(store: LabStore, work: Callable[[tuple[int, str, bytes]], R], *, jobs: int = 1,
                match_ids: Iterable[int] | None = None,
                on_match: Callable[[int, int], object] | None = None) -> Iterator[tuple[int, R]]:
    """``(match_id, work((match_id, codec, data)))`` for each stream of ``store`` (or of
    ``match_ids``), in match order. ``work`` must be a module-level function when ``jobs`` > 1;
    ``on_match(done, total)`` is called after each stream."""
    if match_ids is None:
        ids = [int(r[0]) for r in store.con.execute("SELECT match_id FROM streams ORDER BY match_id").fetchall()]
    else:
        ids = sorted(int(m) for m in match_ids)

    def streams() -> Iterator[tuple[int, str, bytes]]:
        for match_id in ids:
            yield from store.streams([match_id])

    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for i, (match_id, result) in enumerate(zip(ids, pool.map(work, streams()), strict=True)):
                if on_match is not None:
                    on_match(i + 1, len(ids))
                yield match_id, result
    else:
        for i, job in enumerate(streams()):
            result = work(job)
            if on_match is not None:
                on_match(i + 1, len(ids))
            yield job[0], result
