"""``referee lab``: build corpora, re-run them, tune tolerances, report.

    referee lab corpus SPEC --out DIR [--jobs N] [--ray ADDRESS] [--max-matches N] [--seed N]
    referee lab rerun DIR --tolerances FILE --run NAME [--jobs N] [--ray ADDRESS]
    referee lab tune DIR --target-fpr-per-hour R --deadline S [--detectors A,B] [--params S.K,...]
                     [--trials N] [--holdout DIR] [--out tuned.toml]
    referee lab report DIR --out report.html [--run NAME] [--compare DIR[:RUN]] [--json]
    referee lab goals DIR [--run NAME] [--compare RUN] [--kills] [--json]
    referee lab calibrate DIR [--run NAME] [--prior P] [--out sanctions.toml]
    referee lab train-aimdetect DIR [--holdout DIR] [--target-fpr F] [--out PATH]
    referee lab fidelity DIR [--jobs N] [--json]   (honest bots against real-player figures)
    referee lab trigger-table DIR [--jobs N] [--tail-from X] [--honest DIR]... [--json]  (triggerbot constants)
    referee lab baits DIR... [--jobs N] [--json]   (AimDetect bait shots, counted or aimed before the kill)
    referee lab takes DIR... [--jobs N] [--json]   (crosshair contacts taken: the trigger detector's takes table)
    referee lab delays DIR... [--jobs N] [--json]  (contact-to-shot delays: the trigger detector's delay table)
    referee lab export DIR OUTDIR        (every table as Parquet)
    referee lab sql DIR "SELECT ..."     (read-only SQL over the corpus)

SPEC is a corpus spec file or a built-in spec's name (``standard``, ``subtle``, ``honest``,
``smoke``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from testbed.argtypes import positive_float, positive_int

__all__ = ["add_lab_parser", "run_lab"]


class LabError(Exception):
    """A user-facing failure of a lab command (printed by the CLI, exit status 1)."""


def add_lab_parser(sub: Any) -> None:
    """Add ``lab`` and its subcommands to the ``referee`` parser's subparsers."""
    lab = sub.add_parser("lab", help="the tuning lab: corpora, metrics with intervals, tolerance search, report",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = lab.add_subparsers(dest="lab_command", required=True, metavar="{corpus,rerun,tune,report,goals,calibrate,train-aimdetect,fidelity,trigger-table,baits,takes,delays,"
                               "export,sql}")

    corpus = cmds.add_parser("corpus", help="play a spec's labelled matches into a corpus directory (resumable)")
    from testbed.lab.spec import builtin_spec_names

    corpus.add_argument("spec", help=f"corpus spec TOML, or a built-in spec name ({', '.join(builtin_spec_names())})")
    corpus.add_argument("--out", required=True, help="corpus directory (its corpus.duckdb is created or resumed)")
    corpus.add_argument("--jobs", type=positive_int, help="worker processes (default: one per CPU)")
    corpus.add_argument("--ray", metavar="ADDRESS", help="play on a Ray cluster ('local' starts one here); needs referee[ray]")
    corpus.add_argument("--max-matches", type=positive_int, help="play at most this many of the missing matches")
    corpus.add_argument("--seed", type=int, help="play the spec on other seeds (match i plays SEED + i): a held-out corpus")
    corpus.add_argument("--json", action="store_true", help="print a JSON summary of the build on the last line")

    rerun = cmds.add_parser("rerun", help="re-run the detectors over the stored streams with other tolerances")
    rerun.add_argument("dir")
    rerun.add_argument("--tolerances", required=True, help="tolerance TOML (same tables as --tolerances elsewhere)")
    rerun.add_argument("--run", required=True, help="name the results are stored under (not 'base')")
    rerun.add_argument("--jobs", type=positive_int)
    rerun.add_argument("--ray", metavar="ADDRESS")

    tune = cmds.add_parser("tune", help="search tolerances for the most cheaters caught at a target false-alarm rate")
    tune.add_argument("dir", help="tuning corpus")
    tune.add_argument("--target-fpr-per-hour", type=float, default=0.01,
                      help="honest false alarms per player-hour allowed (default 0.01: 1 per 100 h)")
    tune.add_argument("--deadline", type=positive_float, default=120.0, help="a cheater counts as caught within this many s of play (120)")
    tune.add_argument("--detectors", help="comma-separated tolerance sections to search (default: every detector's)")
    tune.add_argument("--params", help="comma-separated section.key tolerances to search (instead of --detectors)")
    tune.add_argument("--all-fields", action="store_true",
                      help="search every numeric tolerance of the sections, not only the declared thresholds")
    tune.add_argument("--trials", type=positive_int, default=30, help="Optuna trials (30)")
    tune.add_argument("--jobs", type=positive_int)
    tune.add_argument("--ray", metavar="ADDRESS")
    tune.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    tune.add_argument("--holdout", help="a corpus of disjoint seeds: the pick is re-run there as run 'tuned'")
    tune.add_argument("--out", default="tuned.toml", help="where to write the tuned tolerances (tuned.toml)")
    tune.add_argument("--json", action="store_true")

    report = cmds.add_parser("report", help="metrics with 95 %% intervals: HTML page or JSON")
    report.add_argument("dir")
    report.add_argument("--out", help="HTML file to write (default: DIR/report.html)")
    report.add_argument("--run", default="base", help="tolerance set to report (base)")
    report.add_argument("--compare", metavar="DIR[:RUN]", help="a second corpus (or run) shown side by side")
    report.add_argument("--json", action="store_true", help="print the numbers as one JSON object instead")

    goals = cmds.add_parser("goals", help="the detection goals (honest alarms, subtle and blatant TPR, "
                            "AimDetect, sanctions) of a run, side by side with another")
    goals.add_argument("dir", nargs="+", metavar="DIR[:RUN]",
                       help="the corpus (RUN: its run, instead of --run); several are pooled into one sample")
    goals.add_argument("--run", default="base")
    goals.add_argument("--compare", metavar="RUN", help="another run of the same corpora, shown first (before)")
    goals.add_argument("--kills", action="store_true",
                       help="also score the shipped AimDetect model on the corpora's kills (decodes every stream)")
    goals.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    calib = cmds.add_parser("calibrate", help="the sanction policy's kind weights from each kind's likelihood ratio")
    calib.add_argument("dir")
    calib.add_argument("--run", default="base", help="the detections of this run (default base)")
    calib.add_argument("--prior", type=positive_float, default=0.02,
                       help="prevalence of cheaters the posterior assumes (default 0.02)")
    calib.add_argument("--out", metavar="FILE", help="write a --tolerances file with [sanctions] kind_weights")
    calib.add_argument("--json", action="store_true", help="print the table as one JSON object")

    train = cmds.add_parser("train-aimdetect", help="train AimDetect's per-kill classifier on a corpus's kills")
    train.add_argument("dir", help="the training corpus")
    train.add_argument("--holdout", metavar="DIR", help="measure the rates and ROC on this corpus's kills "
                       "(otherwise out-of-fold, grouped by match)")
    train.add_argument("--target-fpr", type=positive_float, default=0.02,
                       help="per-kill false-positive rate of honest kills the threshold allows (default 0.02: "
                            "the sequential test needs fewer kills at a strict operating point)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", metavar="PATH", help="model files PATH.npz and PATH.json (default DIR/aimdetect)")
    train.add_argument("--json", action="store_true", help="print the measured rates as one JSON object")

    export = cmds.add_parser("export", help="write every table of the corpus as Parquet")
    export.add_argument("dir")
    export.add_argument("outdir")

    fidelity = cmds.add_parser("fidelity", help="the honest players' figures (IW4MAdmin's hit mix and offset, "
                               "reaction time, Fitts' law, variety) beside the real-player references")
    fidelity.add_argument("dir")
    fidelity.add_argument("--jobs", type=positive_int, default=1, help="worker processes decoding streams (1)")
    fidelity.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    trig = cmds.add_parser("trigger-table", help="measure the triggerbot detector's LOG_LR table and honest "
                           "CUSUM-peak tail (threshold) on a corpus, beside the current constants")
    trig.add_argument("dir")
    trig.add_argument("--jobs", type=positive_int, default=1, help="worker processes decoding streams (1)")
    trig.add_argument("--tail-from", type=float, default=6.0, metavar="X",
                      help="fit the honest peak tail at x = X, X+1, ... (default 6)")
    trig.add_argument("--honest", action="append", default=[], metavar="DIR",
                      help="another corpus whose honest players join the peak tail (repeatable): "
                      "long honest sessions, such as the sessions spec")
    trig.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    baits = cmds.add_parser("baits", help="AimDetect's bait shots per group (honest, each cheat profile): how "
                            "many were counted, how many aimed at a view from before the kill")
    baits.add_argument("dirs", nargs="+", metavar="DIR", help="corpora, pooled")
    baits.add_argument("--jobs", type=positive_int, default=1, help="worker processes decoding streams (1)")
    baits.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    takes = cmds.add_parser("takes", help="crosshair contacts per stratum and range band and how many were taken "
                            "(fired on within a command): the trigger detector's TAKE_LLR, its honest peaks and "
                            "the triggerbots' alarm times")
    takes.add_argument("dirs", nargs="+", metavar="DIR", help="corpora recorded with the crosshair probe, pooled")
    takes.add_argument("--jobs", type=positive_int, default=1, help="worker processes decoding streams (1)")
    takes.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    delays = cmds.add_parser("delays", help="first shots on crosshair contacts per stratum, range band and delay "
                             "range (commands from contact to FIRE): the trigger detector's DELAY_LLR, its honest "
                             "peaks and the triggerbots' alarm times")
    delays.add_argument("dirs", nargs="+", metavar="DIR", help="corpora recorded with the crosshair probe, pooled")
    delays.add_argument("--jobs", type=positive_int, default=1, help="worker processes decoding streams (1)")
    delays.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    sql = cmds.add_parser("sql", help="run a read-only SQL query over the corpus")
    sql.add_argument("dir")
    sql.add_argument("query")


def run_lab(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one ``referee lab`` subcommand; LabError for a user-facing failure."""
    import duckdb

    handler = {"corpus": _corpus, "rerun": _rerun, "tune": _tune, "report": _report, "goals": _goals,
               "calibrate": _calibrate, "train-aimdetect": _train_aimdetect, "export": _export,
               "sql": _sql, "fidelity": _fidelity, "trigger-table": _trigger_table,
               "baits": _baits, "takes": _takes, "delays": _delays}[args.lab_command]
    try:
        return handler(args, out, err)
    except duckdb.IOException as exc:
        # Another process (a build or re-run) holds the corpus: say so in one line.
        where = getattr(args, "dir", "")
        where = ", ".join(where) if isinstance(where, list) else where
        raise LabError(f"{where}: the corpus database is busy or unreadable "
                       f"({str(exc).splitlines()[0]})") from exc


def _console(out: TextIO) -> Console:
    return Console(file=out, width=max(80, min(120, Console(file=out).width)))


def _init_ray(address: str) -> None:
    try:
        import ray
    except ImportError as exc:
        raise LabError("--ray needs Ray: pip install 'referee[ray]'") from exc
    if not ray.is_initialized():
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)


def _corpus(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from bots.registry import default_registry
    from testbed.lab.corpus import BuildProgress, CorpusMismatchError, build_corpus
    from testbed.lab.spec import SpecError, load_spec
    from testbed.lab.store import open_store

    registry = default_registry()
    try:
        spec = load_spec(args.spec, registry)
    except SpecError as exc:
        raise LabError(str(exc)) from exc
    if args.seed is not None:
        spec = spec.with_seed(args.seed)
    console = Console(file=err)
    console.print(f"corpus {spec.name!r}: {spec.match_count} matches of {spec.duration_s:g} s, "
                  f"{spec.player_hours:.2f} player-hours\n{spec.honest_per_match} honest + "
                  f"{spec.cheaters_per_match} cheating bots a match, seeds {spec.seed}-{spec.seed + spec.match_count - 1}")
    store = open_store(args.out)
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[hours]:.2f} player-h"), TimeElapsedColumn(), TextColumn("ETA"),
                      TimeRemainingColumn(), console=console, transient=False) as progress:
            done_before = len(store.done_match_ids())
            task = progress.add_task("matches", total=spec.match_count, completed=done_before,
                                     hours=done_before * spec.player_hours / spec.match_count)
            def on_progress(p: BuildProgress) -> None:
                progress.update(task, completed=p.done, hours=p.player_hours)
                if not console.is_terminal:
                    # A log file gets no live bar: a line per stored match instead.
                    console.print(f"match {p.last_match} stored: {p.done}/{p.total}, "
                                  f"{p.player_hours:.2f} player-h, {p.wall_s:.0f} s")

            try:
                report = build_corpus(
                    spec, store, workers=args.jobs, ray_address=args.ray, max_matches=args.max_matches,
                    on_progress=on_progress,
                )
            except CorpusMismatchError as exc:
                raise LabError(str(exc)) from exc
        if report.played:
            store.compact()
        size = store.size_bytes()
        stored_h, stream_bytes = store.con.execute(
            "SELECT (SELECT coalesce(sum(play_s), 0) / 3600.0 FROM players), "
            "(SELECT coalesce(sum(octet_length(data)), 0) FROM streams)").fetchone()
    finally:
        store.close()
    per_h = (lambda b: round(b / 1e6 / stored_h, 2) if stored_h else None)
    summary = {"spec": spec.name, "dir": os.fspath(args.out), "played": report.played, "skipped": report.skipped,
               "total": report.total, "wall_s": round(report.wall_s, 1), "runner": report.runner,
               "player_hours": round(stored_h, 3), "db_bytes": size, "db_mb_per_player_hour": per_h(size),
               "stream_mb_per_player_hour": per_h(stream_bytes)}
    if args.json:
        out.write(json.dumps(summary) + "\n")
    else:
        out.write(f"played {report.played} matches ({report.skipped} already stored) of {report.total} "
                  f"in {report.wall_s:.0f} s\n{stored_h:.2f} player-hours stored, database {size / 1e6:.1f} MB\n"
                  f"per player-hour: database {summary['db_mb_per_player_hour']} MB, "
                  f"streams {summary['stream_mb_per_player_hour']} MB\n")
    return 0


def _goals(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import numpy as np

    from anticheat.detectors.aimdetect.model import evaluate, load_shipped_model
    from testbed.lab.goals import goal_rows, goals, pool_goals
    from testbed.lab.kills import corpus_kill_rows

    targets = [_dir_and_run(d, args.run) for d in args.dir]
    model = load_shipped_model()
    # figures[i][j]: corpus i, column j (the compare run first, then the run).
    figures: list[list[dict[str, Any]]] = []
    kills = []
    for directory, run in targets:
        store = _open_read(directory)
        try:
            runs = [r for r in (args.compare, run) if r]
            missing = [r for r in runs if r not in store.runs()]
            if missing:
                raise LabError(f"{directory} has no run {missing[0]!r}; runs: {', '.join(store.runs())}")
            if args.kills:
                err.write(f"extracting the kills of {directory} ...\n")
                kills.append(corpus_kill_rows(store))
            figures.append([goals(store, r, None, model) for r in runs])
        finally:
            store.close()
    kill_rates = None
    if kills:
        err.write("scoring the shipped AimDetect model on every kill ...\n")
        kill_rates = evaluate(model, np.concatenate([k.features for k in kills]),
                              np.concatenate([k.labels for k in kills]), np.concatenate([k.strata for k in kills]))
    columns = [pool_goals([f[j] for f in figures], kill_rates) for j in range(len(figures[0]))]
    names = [r for r in (args.compare, "/".join(dict.fromkeys(run for _, run in targets))) if r]
    if args.json:
        body: dict[str, Any] = {"runs": columns}
        if len(targets) > 1:
            body["corpora"] = [{"dir": d, "run": r, "runs": f} for (d, r), f in zip(targets, figures)]
        out.write(json.dumps(body) + "\n")
        return 0
    console = _console(out)
    c = columns[-1]["corpus"]
    where = targets[0][0] if len(targets) == 1 else f"{len(targets)} corpora pooled"
    table = Table(title=f"{where}: {c['matches']} matches, {c['player_hours']:.1f} player-hours "
                        f"({c['honest_player_hours']:.1f} honest), {c['cheater_engagements']} cheater engagements")
    table.add_column("goal", no_wrap=True)
    for name in names:
        table.add_column(name)
    rows = [dict(goal_rows(col)) for col in columns]
    for goal in dict.fromkeys(k for col in rows for k in col):
        table.add_row(goal, *(col.get(goal, "-") for col in rows))
    console.print(table)
    if len(targets) > 1:
        for (directory, run), f in zip(targets, figures):
            h = f[-1]["1_honest"]
            console.print(f"  {directory} (run {run}): {h['player_hours']:.1f} honest h, "
                          f"{h['cheating_detections']['count']} honest cheating detections")
    return 0


def _dir_and_run(spec: str, default_run: str) -> tuple[str, str]:
    """``DIR`` or ``DIR:RUN`` (a colon inside an existing directory's name is part of it)."""
    if ":" in spec and not Path(spec).exists():
        directory, _, run = spec.rpartition(":")
        return directory, run or default_run
    return spec, default_run


def _calibrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.calibrate import calibrate, kind_weights_toml
    from testbed.lab.store import open_store

    if not args.prior < 1.0:
        raise LabError("--prior must be below 1")
    try:
        store = open_store(args.dir, read_only=True)
    except FileNotFoundError as exc:
        raise LabError(str(exc)) from exc
    try:
        if args.run not in store.runs():
            raise LabError(f"{args.dir} has no run {args.run!r}; runs: {', '.join(store.runs())}")
        kinds = calibrate(store, args.run, args.prior)
    finally:
        store.close()
    if args.out:
        Path(args.out).write_text(kind_weights_toml(
            kinds, f"referee lab calibrate {args.dir} --run {args.run} --prior {args.prior:g}"))
    if args.json:
        out.write(json.dumps({"prior": args.prior, "run": args.run, "kinds": [k.to_json() for k in kinds]}) + "\n")
        return 0
    console = _console(out)
    table = Table(title=f"one detection's weight at a prior of {args.prior:g} ({args.run})")
    table.add_column("kind", no_wrap=True)
    for name in ("honest", "cheaters", "LR >=", "weight", "to KICK"):
        table.add_column(name, justify="right", no_wrap=True)
    for k in kinds:
        table.add_row(k.kind, f"{k.honest}/{k.honest_h:.0f} h", f"{k.cheat}/{k.cheat_h:.0f} h",
                      f"{k.lr:,.0f}" if k.lr >= 10 else f"{k.lr:.2g}", f"{k.weight:.3f}",
                      "-" if k.to_kick is None else str(k.to_kick))
    console.print(table)
    console.print("to KICK: findings within the conclusive window that recommend KICK on their own")
    if args.out:
        console.print(f"written to {args.out} (apply it with --tolerances)")
    return 0


def _train_aimdetect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from anticheat.detectors.aimdetect.features import FEATURE_NAMES
    from anticheat.detectors.aimdetect.model import save_model, train
    from testbed.lab.kills import corpus_kill_rows
    from testbed.lab.store import open_store

    def rows(directory: str) -> Any:
        try:
            store = open_store(directory, read_only=True)
        except FileNotFoundError as exc:
            raise LabError(str(exc)) from exc
        try:
            err.write(f"extracting kills of {directory} ...\n")
            return corpus_kill_rows(store)
        finally:
            store.close()

    data = rows(args.dir)
    if len(set(data.labels.tolist())) < 2:
        raise LabError(f"{args.dir}: needs kills of honest players and of aim cheats, found {len(data)} kills")
    holdout = None
    if args.holdout:
        if Path(args.holdout).resolve() == Path(args.dir).resolve():
            raise LabError("the holdout corpus is the training corpus")
        held = rows(args.holdout)
        holdout = (held.features, held.labels, held.strata)
    model = train(data.features, data.labels, args.seed, feature_names=FEATURE_NAMES, groups=data.matches,
                  strata=data.strata, target_fpr=args.target_fpr, holdout=holdout)
    target = Path(args.out) if args.out else Path(args.dir) / "aimdetect"
    save_model(model, target)
    summary = {
        "train_kills": len(data), "train_positive": int(data.labels.sum()),
        "measured_on": args.holdout or "out-of-fold (grouped by match)",
        "auc": round(model.auc, 4), "threshold": model.threshold, "tpr": round(model.tpr, 4),
        "fpr": round(model.fpr, 4), "fpr_worst_group": round(model.fpr_worst, 4),
        "confusion": {"tp": model.tp, "fn": model.fn, "fp": model.fp, "tn": model.tn},
        "fpr_by_group": {k: round(v, 4) for k, v in sorted(model.fpr_by_group.items())},
        "tpr_by_group": {k: round(v, 4) for k, v in sorted(model.tpr_by_group.items())},
        "model": os.fspath(target),
    }
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return 0
    console = _console(out)
    console.print(f"{summary['train_kills']} kills ({summary['train_positive']} aim-assisted); rates measured "
                  f"{summary['measured_on']}")
    console.print(f"AUC {model.auc:.3f}; at the threshold: TPR {model.tpr:.3f}, FPR {model.fpr:.3f} "
                  f"(worst honest group {model.fpr_worst:.3f})")
    table = Table("group", "kills judged positive")
    for key, value in summary["fpr_by_group"].items():
        table.add_row(key, f"{value:.3f}")
    for key, value in summary["tpr_by_group"].items():
        table.add_row(key, f"{value:.3f}")
    console.print(table)
    console.print(f"model written to {target}.npz / .json")
    return 0


def _load_tolerances(path: str) -> dict[str, dict[str, Any]]:
    from anticheat.suite import resolve_configs
    from anticheat.tolerances import ToleranceError, load_overrides

    try:
        overrides = load_overrides(Path(path))
        resolve_configs(overrides)
    except ToleranceError as exc:
        raise LabError(str(exc)) from exc
    except ValueError as exc:
        raise LabError(f"{path}: {exc}") from exc
    return overrides


def _rerun(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.rerun import rerun_corpus
    from testbed.lab.store import open_store

    if args.run == "base":
        raise LabError("run 'base' holds the corpus's own tolerances; name this run otherwise")
    overrides = _load_tolerances(args.tolerances)
    try:
        store = open_store(args.dir)
    except FileNotFoundError as exc:
        raise LabError(str(exc)) from exc
    if args.ray:
        _init_ray(args.ray)
    start = time.perf_counter()
    try:
        n = rerun_corpus(store, overrides, args.run, workers=args.jobs, ray=bool(args.ray),
                         on_match=lambda d, t: err.write(f"\rre-ran {d}/{t} matches"))
    finally:
        store.close()
    err.write("\n")
    out.write(f"re-ran {n} matches as run {args.run!r} in {time.perf_counter() - start:.1f} s\n")
    return 0


def _tune(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.rerun import rerun_corpus
    from testbed.lab.store import open_store
    from testbed.lab.tune import search_space, to_toml, tune

    try:
        space = search_space(
            sections=args.detectors.split(",") if args.detectors else None,
            keys=args.params.split(",") if args.params else None,
            all_fields=args.all_fields,
        )
    except ValueError as exc:
        raise LabError(str(exc)) from exc
    if not space:
        raise LabError("nothing to search: the chosen sections declare no searched thresholds "
                       "(name tolerances with --params, or add --all-fields)")
    try:
        store = open_store(args.dir)
        holdout = open_store(args.holdout) if args.holdout else None
    except FileNotFoundError as exc:
        raise LabError(str(exc)) from exc
    try:
        if holdout is not None:
            _check_disjoint(store, holdout)
        if args.ray:
            _init_ray(args.ray)
        err.write(f"searching {len(space)} tolerances over {len(store.done_match_ids())} matches, {args.trials} trials\n")

        def on_trial(r: Any) -> None:
            tag = "defaults" if r.number < 0 else f"trial {r.number}"
            err.write(f"{tag}: TPR@{args.deadline:g}s {r.detected}/{r.eligible} = {r.tpr:.3f}, "
                      f"honest alarms {r.alarms} in {r.honest_hours:.2f} h = {r.alarms_per_hour:.3f}/h\n")

        result = tune(store, target_per_hour=args.target_fpr_per_hour, deadline_s=args.deadline, space=space,
                      trials=args.trials, workers=args.jobs, ray=bool(args.ray), seed=args.seed, on_trial=on_trial)
        if result.best is None:
            out.write(f"no trial met {args.target_fpr_per_hour:g} false alarms per player-hour; nothing written\n")
            _print_front(result, out)
            return 1
        comment = (f"referee lab tune {args.dir} --target-fpr-per-hour {args.target_fpr_per_hour:g} "
                   f"--deadline {args.deadline:g}\ntuning corpus: TPR {result.best.tpr:.3f} "
                   f"({result.best.detected}/{result.best.eligible}), {result.best.alarms} honest alarms in "
                   f"{result.best.honest_hours:.2f} player-h")
        Path(args.out).write_text(to_toml(result.best.overrides, comment), encoding="utf-8")
        store.set_meta("tune", json.dumps(result.to_json()))
        rerun_corpus(store, result.best.overrides or None, "tuned", workers=args.jobs, ray=bool(args.ray))
        if holdout is not None:
            rerun_corpus(holdout, result.best.overrides or None, "tuned", workers=args.jobs, ray=bool(args.ray))
    finally:
        store.close()
        if holdout is not None:
            holdout.close()
    if args.json:
        out.write(json.dumps(result.to_json()) + "\n")
    else:
        _print_front(result, out)
        out.write(f"wrote {args.out}; results stored as run 'tuned' in {args.dir}"
                  + (f" and {args.holdout}" if args.holdout else "") + "\n")
    return 0


def _print_front(result: Any, out: TextIO) -> None:
    from testbed.lab.tune import flatten

    table = Table(title=f"Pareto front: TPR within {result.deadline_s:g} s against honest alarms per player-hour",
                  title_justify="left")
    for col in ("trial", "TPR", "caught", "alarms/h", "alarms", "changed tolerances"):
        table.add_column(col)
    for r in (result.baseline, *result.front):
        changed = ", ".join(f"{k}={v:.4g}" for k, v in flatten(r.overrides).items()) or "defaults"
        table.add_row("defaults" if r.number < 0 else str(r.number), f"{r.tpr:.3f}", f"{r.detected}/{r.eligible}",
                      f"{r.alarms_per_hour:.3f}", str(r.alarms), changed)
    _console(out).print(table)


def _check_disjoint(a: Any, b: Any) -> None:
    sa = {int(r[0]) for r in a.con.execute("SELECT seed FROM matches").fetchall()}
    sb = {int(r[0]) for r in b.con.execute("SELECT seed FROM matches").fetchall()}
    common = sa & sb
    if common:
        raise LabError(f"the holdout corpus shares {len(common)} seeds with the tuning corpus "
                       f"(e.g. {min(common)}); build it with `referee lab corpus ... --seed N` on other seeds")


def _open_read(directory: str) -> Any:
    """The corpus at ``directory``, read-only (LabError when there is none)."""
    from testbed.lab.store import open_store

    try:
        return open_store(directory, read_only=True)
    except FileNotFoundError as exc:
        raise LabError(str(exc)) from exc


def _summary(directory: str, run: str) -> dict[str, Any]:
    from testbed.lab.aggregate import summarize

    store = _open_read(directory)
    try:
        runs = store.runs() or ["base"]
        if run not in runs:
            raise LabError(f"{directory}: no run {run!r}; runs: {', '.join(runs)}")
        summary = summarize(store.con, run=run)
        summary["corpus"]["dir"] = directory
        summary["corpus"]["spec"] = store.meta("spec_name")
        tuned = store.meta("tune")
        if tuned:
            summary["tune"] = json.loads(tuned)
        return summary
    finally:
        store.close()


def _report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.report import render_html

    summary = _summary(args.dir, args.run)
    compare = None
    if args.compare:
        cdir, _, crun = args.compare.partition(":")
        compare = _summary(cdir or args.dir, crun or args.run)
    if args.json:
        out.write(json.dumps({"summary": summary, "compare": compare}, default=str) + "\n")
        return 0
    path = Path(args.out) if args.out else Path(args.dir) / "report.html"
    title = f"Referee lab: {summary['corpus'].get('spec') or args.dir} (run {args.run})"
    path.write_text(render_html(summary, title=title, compare=compare), encoding="utf-8")
    out.write(f"wrote {path}\n")
    return 0


def _fidelity(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import math

    from testbed.lab.fidelity import corpus_fidelity

    store = _open_read(args.dir)
    try:
        result = corpus_fidelity(store, jobs=args.jobs,
                                 on_match=lambda d, t: err.write(f"\rdecoded {d}/{t} streams"))
    finally:
        store.close()
    err.write("\n")
    if args.json:
        out.write(json.dumps({"dir": args.dir, **result.to_json()}) + "\n")
        return 0
    console = Console(file=out, width=100)

    def num(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3f}"

    for group, figures in result.groups.items():
        table = Table(title=f"{args.dir}: {group}", title_justify="left", show_edge=False)
        for col, justify in (("figure", "left"), ("estimate", "right"), ("95 % CI", "right"), ("n", "right"),
                             ("p10, p90", "right"), ("reference", "right"), ("verdict", "left")):
            table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for f in figures:
            spread = "" if f.spread is None else f"{num(f.spread[0])}, {num(f.spread[1])}"
            interval = "-" if math.isnan(f.low) else f"{num(f.low)}, {num(f.high)}"
            table.add_row(f.label, num(f.estimate), interval, str(f.n), spread,
                          "-" if f.reference is None else f.reference.text, f.verdict)
        console.print(table)
    console.print(f"{result.players} honest players in {result.matches} matches. p10, p90: across players "
                  "(reaction times: p25, p75 of the reactions). CI: 95 % bootstrap over players. Within: "
                  "IW4MAdmin's mean ± its sd at the median hits per player (offset: ± sigma in ln).")
    return 0


def _trigger_table(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.trigger_table import measure, tail_grid

    store = _open_read(args.dir)
    extra = []
    try:
        extra = [_open_read(d) for d in args.honest]
        try:
            m = measure(store, jobs=args.jobs, xs=tail_grid(args.tail_from), honest_stores=extra,
                        on_match=lambda d, t: err.write(f"\rdecoded {d}/{t} streams"))
        except ValueError as exc:
            raise LabError(f"{args.dir}: {exc}") from exc
    finally:
        for other in extra:
            other.close()
        store.close()
        err.write("\n")
    if args.json:
        out.write(json.dumps({"dir": args.dir, **m.to_json()}) + "\n")
        return 0
    from testbed.lab.trigger_table import print_measurement

    print_measurement(m, args.dir, Console(file=out, width=80))
    return 0


def _baits(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.baits import corpus_bait_shots, group_hours, groups
    from testbed.lab.metrics import rate

    shots = []
    hours: dict[str, float] = {}
    for directory in args.dirs:
        store = _open_read(directory)
        try:
            shots += corpus_bait_shots(store, jobs=args.jobs,
                                       on_match=lambda d, t, name=directory: err.write(f"\r{name}: decoded {d}/{t} streams"))
            for g, h in group_hours(store).items():
                hours[g] = hours.get(g, 0.0) + h
        finally:
            store.close()
            err.write("\n")
    table = groups(shots, hours)
    if args.json:
        out.write(json.dumps({"dirs": args.dirs, "groups": [g.to_json() for g in table]}) + "\n")
        return 0
    def num(x: float | None) -> str:
        # Short enough for 80 columns: a cheater's rate runs to tens of thousands per 100 h.
        if x is None:
            return "inf"
        if x >= 1000:
            return f"{x / 1000:.0f}k" if x >= 10_000 else f"{x / 1000:.1f}k"
        return f"{x:.0f}" if x >= 10 else f"{x:.2g}"

    t = Table(title=f"Bait shots: {', '.join(args.dirs)}", title_justify="left")
    t.add_column("group", no_wrap=True)
    for col in ("hours", "shots", "before kill", "counted"):
        t.add_column(col, justify="right", min_width=7 if col == "counted" else None)
    # Kept whole: a rate cut in two rows is hard to read.
    t.add_column("per 100 h", no_wrap=True, min_width=15)
    for g in table:
        est, low, high = rate(g.counted, g.hours).per_100h()
        per = "-" if est is None else f"{num(est)} [{num(low)}-{num(high)}]"
        t.add_row(g.group, f"{g.hours:.1f}", str(g.shots), str(g.aimed_before_kill), str(g.counted), per)
    console = Console(file=out, width=80)
    console.print(t)
    console.print("before kill: the shot's view time came before the shooter's latest kill (a spray still "
                  "climbing through it), so AimDetect does not count it. Per 100 h: counted shots per 100 "
                  "player-hours, with an exact Poisson 95 % interval.")
    for g in table:
        if g.shots:
            spread = ""
            if g.before_kill_view_s is not None:
                near, far = f"{-g.before_kill_view_s[1]:.2f}", f"{-g.before_kill_view_s[0]:.2f}"
                spread = f"; aimed {near if near == far else f'{near}-{far}'} s before the kill"
            weapons = ", ".join(f"{k}: {v}" for k, v in g.weapons.items())
            console.print(f"{g.group}: weapons {weapons}{spread}")
    return 0


def _export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:

    store = _open_read(args.dir)
    target = Path(args.outdir)
    target.mkdir(parents=True, exist_ok=True)
    try:
        for table in ("meta", "matches", "players", "streams", "detections", "decisions", "traces"):
            dest = target / f"{table}.parquet"
            store.con.execute(f"COPY {table} TO '{dest.as_posix()}' (FORMAT parquet)")
            out.write(f"{dest}\n")
    finally:
        store.close()
    return 0


def _sql(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import duckdb


    store = _open_read(args.dir)
    try:
        try:
            result = store.con.execute(args.query)
        except duckdb.Error as exc:
            raise LabError(f"SQL: {exc}") from exc
        columns = [d[0] for d in result.description or ()]
        table = Table()
        for c in columns:
            table.add_column(c)
        for row in result.fetchall():
            table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
        _console(out).print(table)
    finally:
        store.close()
    return 0


def _pooled(dirs: list[str], collect: Any, jobs: int, err: TextIO) -> list[Any]:
    """Every corpus's player-match records from ``collect(store, jobs=, on_match=)``, with the match
    ids of further corpora offset so that player-matches stay apart."""
    import dataclasses

    from testbed.lab.trigger_table import EXTRA_MATCH_OFFSET

    players: list[Any] = []
    for k, directory in enumerate(dirs):
        store = _open_read(directory)
        try:
            found = collect(store, jobs=jobs,
                            on_match=lambda d, t, name=directory: err.write(f"\r{name}: decoded {d}/{t} streams"))
        finally:
            store.close()
            err.write("\n")
        players += [dataclasses.replace(p, match_id=p.match_id + k * EXTRA_MATCH_OFFSET) for p in found]
    return players


def _takes(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import math

    import numpy as np

    from anticheat.detectors.trigger import TriggerConfig
    from testbed.lab.takes import corpus_opportunities, measure_takes
    from testbed.lab.trigger_table import band_label

    players = _pooled(args.dirs, corpus_opportunities, args.jobs, err)
    m = measure_takes(players, TriggerConfig().takes_threshold)
    if not any(c[:, 0].sum() for c in m.counts.values()):
        raise LabError(f"no crosshair contacts in {', '.join(args.dirs)}: recorded before the crosshair probe?")
    if args.json:
        out.write(json.dumps({"dirs": args.dirs, **m.to_json()}) + "\n")
        return 0
    console = Console(file=out, width=80)
    t = Table(title=f"Crosshair contacts taken: {', '.join(args.dirs)}", title_justify="left")
    t.add_column("stratum", no_wrap=True)
    for band in range(len(m.table)):
        t.add_column(band_label(band), justify="right")
    for stratum in sorted(m.counts, key=lambda s: (not s.startswith("honest:"), s)):
        c = m.counts[stratum]
        t.add_row(stratum, *(f"{c[b, 1] / c[b, 0]:.2f} /{c[b, 0]}" if c[b, 0] else "-" for b in range(len(m.table))))
    console.print(t)
    console.print("rate taken / contacts (fired on within a command)")
    console.print("TAKE_LLR per band, not taken/taken:")
    console.print("  shipped   " + "  ".join(f"{a:+.2f}/{b:+.2f}" for a, b in m.table))
    if m.measured is not None:
        console.print("  measured  " + "  ".join(f"{a:+.2f}/{b:+.2f}" for a, b in m.measured))
    peaks = np.array(m.honest_peaks)
    n = len(peaks)
    console.print(f"honest: {n} player-matches, {m.honest_hours:.1f} h; CUSUM peaks (threshold {m.threshold:g}):")
    console.print(f"  highest {(peaks.max() if n else 0.0):.1f}; "
                  + ", ".join(f">= {x}: {int((peaks >= x).sum())}" for x in (4, 6, 8, 10, 12)))
    times = sorted(math.inf if f is None else f for _, _, _, f in m.triggerbots)
    if times:
        console.print(f"triggerbots: {len(times)}; at the threshold within 60 s {sum(x <= 60 for x in times)}, "
                      f"within 120 s {sum(x <= 120 for x in times)};")
        console.print(f"  median {np.median(times):.0f} s, slowest {times[-1]:.0f} s")
    return 0


def _delays(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import math

    import numpy as np
    from rich import box

    from anticheat.detectors.trigger import TriggerConfig
    from anticheat.detectors.trigger_delays import DELAY_RANGES
    from testbed.lab.delays import corpus_first_fires, measure_delays
    from testbed.lab.trigger_table import band_label

    m = measure_delays(_pooled(args.dirs, corpus_first_fires, args.jobs, err), TriggerConfig().delay_threshold)
    if not any(c[:, 0].sum() for c in m.counts.values()):
        raise LabError(f"no trigger pulls in {', '.join(args.dirs)}: recorded before the crosshair probe?")
    if args.json:
        out.write(json.dumps({"dirs": args.dirs, "ranges": DELAY_RANGES, **m.to_json()}) + "\n")
        return 0
    console = Console(file=out, width=80)
    console.print(f"Trigger pulls: first shots on crosshair contacts, and off target: {', '.join(args.dirs)}")
    console.print("(rows: honest skills, then the triggerbots, tb)")
    for band in range(len(m.table)):
        t = Table(title=f"band {band_label(band)}: share of trigger pulls off target and per delay "
                  "range (commands)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        t.add_column("stratum", no_wrap=True)
        t.add_column("n", justify="right")
        t.add_column("off", justify="right")
        for lo, hi in DELAY_RANGES:
            t.add_column(f"{lo}-{hi}", justify="right")
        for stratum in sorted(m.counts, key=lambda s: (not s.startswith("honest:"), s)):
            c = m.counts[stratum][band]
            if c[0]:
                t.add_row(stratum.removeprefix("honest:").replace("triggerbot", "tb")[:14], str(c[0]),
                          *(f"{x / c[0]:.2f}" for x in c[1:]))
        console.print(t)
    console.print("DELAY_LLR per band and range (columns as above), outside then inside:")
    for label, table in (("shipped", m.table), ("measured", m.measured)):
        if table is not None:
            for band, row in enumerate(table):
                console.print(f"  {label:8s} {band} " + " ".join(f"{a:+.1f}{b:+.1f}" for a, b in row))
    peaks = np.array(m.honest_peaks)
    n = len(peaks)
    console.print(f"honest: {n} player-matches, {m.honest_hours:.1f} h; highest CUSUM of the bank "
                  f"(threshold {m.threshold:g}):")
    console.print(f"  highest {(peaks.max() if n else 0.0):.1f}; "
                  + ", ".join(f">= {x}: {int((peaks >= x).sum())}" for x in (4, 6, 8, 10, 12, 14)))
    times = sorted(math.inf if f is None else f for _, _, _, f in m.triggerbots)
    if times:
        console.print(f"triggerbots: {len(times)}; at the threshold within 60 s {sum(x <= 60 for x in times)}, "
                      f"within 120 s {sum(x <= 120 for x in times)}, within 300 s {sum(x <= 300 for x in times)};")
        console.print(f"  median {np.median(times):.0f} s, slowest {times[-1]:.0f} s")
    return 0
