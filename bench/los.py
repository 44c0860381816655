"""Line-of-sight benchmark: batched ``MapGeometry.los_clear`` against a per-segment shapely loop.

``python -m bench los [--map city] [--rays 10000] [--baseline-rays 300] [--seed 7] [--repeats 7]
[--small-calls 300] [--small-only]``

Segments join random points where a player can stand (5-80 m apart) at eye height (standing or
crouching) to a random point on a body (0.1-1.83 m). The baseline is what a newcomer writes: one
shapely LineString per segment, tested in a Python loop against every wall low enough to matter
(the segment clipped to where it is at or below the wall's top). It runs on a subset; its answers
must agree with ours exactly, so the benchmark doubles as a correctness check. A second,
stronger reference (one vectorised shapely ``intersects`` per wall height over all segments) is
timed too, on every segment, so the speedup is not only against a strawman.

A small-batch section (``--small-calls`` distinct batches per size, 0 to skip) times the per-call
cost of the queries the server and the bots make many times per tick with only a few rows:
``los_clear`` and ``first_wall_hit`` with N = 1, 4, 16 of the same segments, ``sweep`` of N circles
moving up to 0.2 m (one tick of running), ``circle_blocked`` and ``point_in_wall`` with N = 1, 4,
next to the large-batch cost per row. Every small batch's answers must equal the large batch's
rows (``small_agreement``). ``--small-only`` runs just that section (no shapely references).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from bench.timing import best_of
from world.constants import CROUCHING_EYE_M, STANDING_EYE_M, STANDING_HEIGHT_M
from world.geometry import MapGeometry
from world.mapfile import GameMap, builtin_map


@dataclass(frozen=True, slots=True)
class Segments:
    """Benchmark segments: start and end points (N, 3), meters."""

    p0: np.ndarray
    p1: np.ndarray


def cpu_best_of(fn: Callable[[], object], repeats: int) -> float:
    """Fastest process CPU time of ``fn`` in seconds: on a shared machine it excludes the time
    other processes held the cores, which wall time (the headline figure) does not."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def make_segments(geometry: MapGeometry, count: int, rng: np.random.Generator) -> Segments:
    """``count`` segments between standable points 5-80 m apart (horizontal distance)."""
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    have = 0
    while have < count:
        pts = rng.uniform((xmin, ymin), (xmax, ymax), size=(8 * count, 2))
        pts = pts[~geometry.circle_blocked(pts)]
        a = pts[rng.integers(len(pts), size=4 * count)]
        b = pts[rng.integers(len(pts), size=4 * count)]
        dist = np.hypot(b[:, 0] - a[:, 0], b[:, 1] - a[:, 1])
        ok = (dist >= 5.0) & (dist <= 80.0)
        starts.append(a[ok])
        ends.append(b[ok])
        have += int(ok.sum())
    a = np.concatenate(starts)[:count]
    b = np.concatenate(ends)[:count]
    eye = np.where(rng.uniform(size=count) < 0.7, STANDING_EYE_M, CROUCHING_EYE_M)
    body = rng.uniform(0.1, STANDING_HEIGHT_M, size=count)
    return Segments(p0=np.column_stack([a, eye]), p1=np.column_stack([b, body]))


def baseline_los_clear(game_map: GameMap, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """The straightforward version: per segment, per wall, a shapely LineString intersection.

    Semantics match MapGeometry (closed solids): the part of the segment at or below the wall's
    top must not touch the footprint, and the segment must stay strictly inside the bounds.
    """
    walls = [(shapely.Polygon(w.polygon), w.height) for w in game_map.walls]
    xmin, ymin, xmax, ymax = game_map.bounds
    inner = shapely.Polygon([(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax)])
    result = np.ones(len(p0), dtype=bool)
    for i in range(len(p0)):
        a, b = p0[i], p1[i]
        if not shapely.contains_properly(inner, shapely.LineString([a[:2], b[:2]])):
            result[i] = False
            continue
        dz = b[2] - a[2]
        for poly, height in walls:
            if min(a[2], b[2]) > height:
                continue  # entirely above this wall
            lo, hi = 0.0, 1.0
            if dz > 0.0:
                hi = min(1.0, (height - a[2]) / dz)
            elif dz < 0.0:
                lo = max(0.0, (height - a[2]) / dz)
            s0 = a[:2] + lo * (b[:2] - a[:2])
            s1 = a[:2] + hi * (b[:2] - a[:2])
            piece = shapely.LineString([s0, s1]) if hi > lo else shapely.Point(s0)
            if piece.intersects(poly):
                result[i] = False
                break
    return result


def vectorized_shapely_los_clear(game_map: GameMap, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """A competent shapely version: per distinct wall height, clip every segment to where it is at
    or below that height and test all of them in one ``intersects`` call against the prepared
    union of the walls of that height. Same semantics as :func:`baseline_los_clear`."""
    heights = np.array([w.height for w in game_map.walls])
    polys = np.array([shapely.Polygon(w.polygon) for w in game_map.walls], dtype=object)
    inner = shapely.box(*game_map.bounds)
    clear = shapely.contains_properly(inner, shapely.linestrings(np.stack([p0[:, :2], p1[:, :2]], axis=1)))
    dz = p1[:, 2] - p0[:, 2]
    for h in np.unique(heights):
        union = shapely.union_all(polys[heights == h])
        shapely.prepare(union)
        with np.errstate(divide="ignore", invalid="ignore"):
            th = (h - p0[:, 2]) / dz
        lo = np.where(dz < 0.0, np.clip(th, 0.0, None), 0.0)
        hi = np.where(dz > 0.0, np.clip(th, None, 1.0), 1.0)
        rows = np.flatnonzero(clear & (lo <= hi) & ~((dz == 0.0) & (p0[:, 2] > h)))
        d2 = p1[rows, :2] - p0[rows, :2]
        a = p0[rows, :2] + lo[rows, np.newaxis] * d2
        b = p0[rows, :2] + hi[rows, np.newaxis] * d2
        # A zero-length clip (touching the top at one point) is a point, not a line.
        point = hi[rows] <= lo[rows]
        geoms = np.empty(len(rows), dtype=object)
        geoms[~point] = shapely.linestrings(np.stack([a[~point], b[~point]], axis=1))
        geoms[point] = shapely.points(a[point])
        clear[rows[shapely.intersects(union, geoms)]] = False
    return clear


SMALL_SIZES: tuple[int, ...] = (1, 4, 16)
POINT_SIZES: tuple[int, ...] = (1, 4)
SWEEP_MAX_MOVE_M = 0.2


def _per_call_us(fn: Callable[[np.ndarray, np.ndarray], object], a: np.ndarray, b: np.ndarray, size: int, repeats: int) -> float:
    """Wall time per call (us) of ``fn(a[i:i + size], b[i:i + size])`` over consecutive, distinct
    batches (sliced beforehand, so slicing is not timed): each call is timed on its own, its
    fastest of ``repeats`` rounds is kept, and the mean over the batches is reported. A call
    lasts well under a scheduler time slice, so on a busy machine the fastest round of each call
    is nearly always an uncontended one, unlike the time of a whole loop of calls."""
    batches = [(a[i : i + size], b[i : i + size]) for i in range(0, len(a) - size + 1, size)]
    best = np.full(len(batches), np.inf)
    clock = time.perf_counter
    for _ in range(repeats):
        for k, (x, y) in enumerate(batches):
            t0 = clock()
            fn(x, y)
            best[k] = min(best[k], clock() - t0)
    return float(best.mean()) * 1e6


def small_batch_figures(geometry: MapGeometry, seg: Segments, calls: int, repeats: int, rng: np.random.Generator) -> dict[str, object]:
    """Per-call cost (us) of small batches of every query, the large-batch cost per row (us) for
    comparison, and whether the small batches answer exactly like one large batch."""
    n = calls * max(SMALL_SIZES)
    p0, p1 = seg.p0[:n], seg.p1[:n]
    delta = p1 - p0
    length = np.linalg.norm(delta, axis=1)
    direction = delta / length[:, np.newaxis]
    xmin, ymin, xmax, ymax = geometry.game_map.bounds
    pts = rng.uniform((xmin, ymin), (xmax, ymax), size=(8 * n, 2))
    start = pts[~geometry.circle_blocked(pts)][:n]
    angle = rng.uniform(0.0, 2.0 * np.pi, len(start))
    step = rng.uniform(0.0, SWEEP_MAX_MOVE_M, len(start))[:, np.newaxis] * np.column_stack([np.cos(angle), np.sin(angle)])
    stop = start + step
    probe = np.column_stack([rng.uniform((xmin, ymin), (xmax, ymax), size=(n, 2)), rng.uniform(0.0, 4.5, n)])

    def fwh(o: np.ndarray, i: np.ndarray) -> np.ndarray:
        return geometry.first_wall_hit(o, direction[i], length[i])

    idx = np.arange(n)
    queries: dict[str, tuple[Callable[[np.ndarray, np.ndarray], object], np.ndarray, np.ndarray, tuple[int, ...]]] = {
        "los_clear": (geometry.los_clear, p0, p1, SMALL_SIZES),
        "first_wall_hit": (fwh, p0, idx, SMALL_SIZES),
        "sweep": (lambda a, b: geometry.sweep(a, b), start, stop, SMALL_SIZES),
        "circle_blocked": (lambda a, _: geometry.circle_blocked(a), start, start, POINT_SIZES),
        "point_in_wall_2d": (lambda a, _: geometry.point_in_wall(a), probe[:, :2], probe, POINT_SIZES),
        "point_in_wall_3d": (lambda a, _: geometry.point_in_wall(a), probe, probe, POINT_SIZES),
    }

    def answers(out: object) -> list[np.ndarray]:
        if isinstance(out, np.ndarray):
            return [out]
        return [out.end, out.fraction, out.hit, out.normal]  # type: ignore[attr-defined]

    figures: dict[str, object] = {}
    agree = True
    for name, (fn, a, b, sizes) in queries.items():
        rows = len(a)
        large = best_of(lambda fn=fn, a=a, b=b: fn(a, b), repeats)
        figures[f"{name}_large_us_per_row"] = round(large / rows * 1e6, 3)
        whole = answers(fn(a, b))
        for size in sizes:
            figures[f"{name}_n{size}_us_per_call"] = round(_per_call_us(fn, a, b, size, repeats), 1)
            parts = [answers(fn(a[i : i + size], b[i : i + size])) for i in range(0, rows - size + 1, size)]
            used = len(parts) * size
            for k, ref in enumerate(whole):
                agree &= bool(np.array_equal(np.concatenate([p[k] for p in parts]), ref[:used]))
    figures["small_agreement"] = agree
    return figures


def main(argv: list[str]) -> dict[str, object]:
    """Run the benchmark and return its figures (rays per second, speedup, agreement)."""
    parser = argparse.ArgumentParser(prog="python -m bench los", description=__doc__)
    parser.add_argument("--map", default="city")
    parser.add_argument("--rays", type=int, default=10_000)
    parser.add_argument("--baseline-rays", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--small-calls", type=int, default=300, help="distinct batches per small size; 0 skips")
    parser.add_argument("--small-only", action="store_true", help="only the small-batch section")
    args = parser.parse_args(argv)

    game_map = builtin_map(args.map)
    t0 = time.perf_counter()
    geometry = MapGeometry(game_map)
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(args.seed)
    seg = make_segments(geometry, max(args.rays, args.small_calls * max(SMALL_SIZES)), rng)
    small: dict[str, object] = {}
    if args.small_calls > 0:
        small = small_batch_figures(geometry, seg, args.small_calls, args.repeats, rng)
        sys.stdout.write(
            f"small batches on {args.map!r} (us per call; large batch us per row): "
            + ", ".join(f"{k}={v}" for k, v in small.items())
            + "\n"
        )
    if args.small_only:
        return {"map": args.map, "walls": len(game_map.walls), **small}
    seg = Segments(p0=seg.p0[: args.rays], p1=seg.p1[: args.rays])
    delta = seg.p1 - seg.p0
    length = np.linalg.norm(delta, axis=1)
    direction = delta / length[:, np.newaxis]

    clear = geometry.los_clear(seg.p0, seg.p1)
    hit = geometry.first_wall_hit(seg.p0, direction, length)
    los_s = best_of(lambda: geometry.los_clear(seg.p0, seg.p1), args.repeats)
    fwh_s = best_of(lambda: geometry.first_wall_hit(seg.p0, direction, length), args.repeats)
    los_cpu_s = cpu_best_of(lambda: geometry.los_clear(seg.p0, seg.p1), args.repeats)

    n_base = min(args.baseline_rays, args.rays)
    t0 = time.perf_counter()
    base = baseline_los_clear(game_map, seg.p0[:n_base], seg.p1[:n_base])
    base_s = time.perf_counter() - t0

    vec_s = best_of(lambda: vectorized_shapely_los_clear(game_map, seg.p0, seg.p1), max(1, args.repeats // 3))
    vec = vectorized_shapely_los_clear(game_map, seg.p0, seg.p1)

    figures: dict[str, object] = {
        "map": args.map,
        "walls": len(game_map.walls),
        "rays": args.rays,
        "build_s": round(build_s, 4),
        "clear_fraction": round(float(clear.mean()), 4),
        "los_ms_per_batch": round(los_s * 1e3, 3),
        "rays_per_s": round(args.rays / los_s),
        "los_cpu_ms_per_batch": round(los_cpu_s * 1e3, 3),
        "first_wall_hit_ms_per_batch": round(fwh_s * 1e3, 3),
        "first_wall_hit_rays_per_s": round(args.rays / fwh_s),
        "first_wall_hit_agrees_with_los": float(np.mean(np.isinf(hit) == clear)),
        "baseline_rays": n_base,
        "baseline_rays_per_s": round(n_base / base_s, 1),
        "speedup": round((args.rays / los_s) / (n_base / base_s), 1),
        "agreement": float(np.mean(base == clear[:n_base])),
        "vectorized_shapely_rays_per_s": round(args.rays / vec_s),
        "speedup_vs_vectorized_shapely": round(vec_s / los_s, 2),
        "vectorized_shapely_agreement": float(np.mean(vec == clear)),
        **small,
    }
    sys.stdout.write(
        f"los on {args.map!r} ({len(game_map.walls)} walls): {args.rays} rays in {los_s * 1e3:.2f} ms "
        f"({figures['rays_per_s']:,} rays/s); first_wall_hit {fwh_s * 1e3:.2f} ms; "
        f"baseline {figures['baseline_rays_per_s']} rays/s on {n_base}; agreement {figures['agreement']}; "
        f"vectorized shapely {figures['vectorized_shapely_rays_per_s']:,} rays/s\n"
    )
    return figures
