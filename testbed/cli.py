"""The ``referee`` command: serve, bots, match, replay.

    referee serve  [--map M] [--tick-rate 64|128] [--port P] [--bind 127.0.0.1] [--duration S] [--replay F]
                   [--metrics-port P] [--metrics-host 127.0.0.1] [--log-json]
                   [--admin-port P] [--admin-host 127.0.0.1] [--admin-token T | env REFEREE_ADMIN_TOKEN]
                   [--db PATH|URL | --no-db]
    referee bots   --server HOST:PORT [--count N] [--profile P] [--ping-ms] [--loss] [--jitter-ms] [--duration S]
                   [--connect-timeout S]
    referee match  [SCENARIO.toml] [--virtual] [--duration S] [--seed N] [--json] [--replay F] [--tolerances F]
                   [--db PATH|URL]
    referee replay FILE [--detect] [--tolerances F] [--json]

``-v`` / ``-vv`` (more logging) go anywhere on the command line; ``referee --version`` prints the
installed version.

Output: tables and summaries on stdout; live progress lines, logs and errors on stderr. With
``--json`` the last line of stdout is one JSON object. Exit status: 0 done, 1 a bad input file
(scenario, map, tolerances, replay), a server that cannot be reached or a failed run, 2 bad
command-line usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from testbed.argtypes import positive_float as _positive_float
from testbed.logsetup import configure_logging

__all__ = ["build_parser", "main", "verbosity"]

log = logging.getLogger("referee")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

COMPILING_NOTICE = (
    "referee: compiling numeric kernels (first start after install: up to two minutes; "
    "later starts load them from cache)"
)
"""Written on stderr before the first compile-heavy step of match, serve and bots when numba's
cache of the kernels that command needs is cold."""

SERVE_INFO_LOGGERS = ("server.activity_log", "referee.serve")
"""Loggers ``serve`` shows at INFO without ``-v``: connects, disconnects, detections, sanctions,
and (with ``--log-json``) where it listens."""

_VERBOSE_SUB = "_verbose_"
"""Prefix of the ``-v`` counters of the subcommand parsers (one per nesting depth, summed)."""


class CliError(Exception):
    """A user-facing failure: printed as ``referee: <message>`` with exit status 1."""


# --- argument types ---------------------------------------------------------------------------


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1] (0.05 = 5 %), got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in [0, 65535], got {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 1 <= value <= 200:
        raise argparse.ArgumentTypeError(f"expected a count in [1, 200], got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, 2^63), got {value}")
    return value


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    number = _port(port)
    if number == 0:
        raise argparse.ArgumentTypeError("the server port cannot be 0")
    return host.strip("[]"), number


# --- parser -------------------------------------------------------------------------------------

_VERBOSE_HELP = "more logging on stderr (-vv: debug); anywhere on the command line"


def _package_version() -> str:
    """The installed ``referee`` distribution's version (``unknown`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("referee")
    except PackageNotFoundError:
        return "unknown"


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of ``parser``'s subcommands (each once, aliases included)."""
    found: dict[int, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse has no public view of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.setdefault(id(sub), sub)
    return list(found.values())


def _add_verbose_everywhere(parser: argparse.ArgumentParser, depth: int = 1) -> None:
    """Give every subcommand parser below ``parser`` its own ``-v`` counter.

    argparse copies a subparser's namespace over its parent's, so one shared ``verbose`` dest
    would let ``referee -v match -v`` count 1; each depth counts into ``_verbose_<depth>``
    (absent unless given) and :func:`verbosity` adds them up.
    """
    for sub in _subparsers(parser):
        if "-v" not in sub._option_string_actions:
            flags = ["-v"] + ([] if "--verbose" in sub._option_string_actions else ["--verbose"])
            sub.add_argument(*flags, action="count", dest=f"{_VERBOSE_SUB}{depth}", default=argparse.SUPPRESS,
                             help=_VERBOSE_HELP)
        _add_verbose_everywhere(sub, depth + 1)


def verbosity(args: argparse.Namespace) -> int:
    """How many ``-v`` the command line held, before and after the subcommand(s)."""
    return int(getattr(args, "verbose", 0)) + sum(
        int(v) for k, v in vars(args).items() if k.startswith(_VERBOSE_SUB)
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``referee`` argument parser with its subcommands."""
    parser = argparse.ArgumentParser(
        prog="referee",
        description="Authoritative shooter server simulation: server, bots, matches and replays.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help=_VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"referee {_package_version()}",
                        help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser("serve", help="run the UDP server", description="Run the authoritative server over UDP.")
    serve.add_argument("--map", default="corridors", help="built-in map name or map file (default: corridors)")
    serve.add_argument("--tick-rate", type=int, choices=(64, 128), default=64, help="ticks per second (default: 64)")
    serve.add_argument("--port", type=_port, default=27015, help="UDP port, 0 for any free one (default: 27015)")
    serve.add_argument("--bind", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    serve.add_argument("--duration", type=_positive_float, help="stop after this many seconds (default: until Ctrl-C)")
    serve.add_argument("--replay", metavar="FILE", help="record a replay file")
    serve.add_argument("--tolerances", metavar="FILE", help="TOML of detector tolerance overrides")
    serve.add_argument("--seed", type=_seed, default=0, help="seed of the server's random choices (default: 0)")
    serve.add_argument("--metrics-port", type=_port, metavar="P",
                       help="serve Prometheus metrics at http://HOST:P/metrics, 0 for any free port (default: none)")
    serve.add_argument("--metrics-host", default="127.0.0.1",
                       help="address of the metrics endpoint (default: 127.0.0.1, loopback only)")
    serve.add_argument("--admin-port", type=_port, metavar="P",
                       help="serve the admin page and API at http://HOST:P/, 0 for any free port (default: none)")
    serve.add_argument("--admin-host", default="127.0.0.1",
                       help="address of the admin page (default: 127.0.0.1, loopback only)")
    serve.add_argument("--admin-token", metavar="T",
                       help="the admin page's token, 16 characters or more (default: $REFEREE_ADMIN_TOKEN, "
                            "else a new one, printed once)")
    serve.add_argument("--log-json", action="store_true",
                       help="log on stderr as one JSON object per line (time, level, logger, message, fields)")
    serve.add_argument("--db", metavar="PATH|URL",
                       help="store detections, sanctions, reviews, profiles and sessions in this SQLite file or "
                            "postgresql:// database (default: $XDG_DATA_HOME/referee/referee.db)")
    serve.add_argument("--no-db", action="store_true", help="store nothing (detections are only logged and reported)")

    bots = sub.add_parser("bots", help="connect bots to a server", description="Connect N bots of one profile to a server.")
    bots.add_argument("--server", type=_host_port, required=True, metavar="HOST:PORT", help="the server's address")
    bots.add_argument("--count", type=_count, default=4, help="number of bots (default: 4)")
    bots.add_argument("--profile", default="honest", help="a profile name (honest, a cheat, an installed one) or module:callable (default: honest)")
    bots.add_argument("--skill", default="average", choices=("low", "average", "high", "pro"), help="aim skill (default: average)")
    bots.add_argument("--map", help="the server's map: built-in name or file; refused when the server runs another "
                      "(default: the server's map, when it is built in)")
    bots.add_argument("--ping-ms", type=_non_negative_float, default=0.0, help="emulated round trip (ms, default: 0)")
    bots.add_argument("--jitter-ms", type=_non_negative_float, default=0.0, help="delay sd per direction (ms, default: 0)")
    bots.add_argument("--loss", type=_fraction, default=0.0, help="loss per direction, fraction (default: 0)")
    bots.add_argument("--duration", type=_positive_float, default=60.0, help="seconds to play (default: 60)")
    bots.add_argument("--seed", type=_seed, default=0, help="seed of the bots (default: 0)")
    bots.add_argument("--name-prefix", help="bot names are PREFIX-1, PREFIX-2... (default: the profile)")
    bots.add_argument("--connect-timeout", type=_positive_float, default=5.0, metavar="S",
                      help="fail when the server has not answered any bot within S seconds (default: 5)")

    match = sub.add_parser(
        "match",
        help="server + bots in one command",
        description=(
            "Play a scenario: the server and its bots in one process, over real UDP (default) or in "
            "virtual time (--virtual). Ends with every player's ground truth against what the server recorded."
        ),
    )
    match.add_argument("scenario", nargs="?", help="scenario TOML (default: the built-in default scenario)")
    match.add_argument("--virtual", action="store_true", help="simulate in virtual time, as fast as possible")
    match.add_argument("--duration", type=_positive_float, help="override the scenario's duration (s)")
    match.add_argument("--seed", type=_seed, help="override the scenario's seed")
    match.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    match.add_argument("--replay", metavar="FILE", help="record a replay file")
    match.add_argument("--tolerances", metavar="FILE", help="TOML of detector tolerance overrides")
    match.add_argument("--port", type=_port, default=0, help="server UDP port in UDP mode (default: any free one)")
    match.add_argument("--no-progress", action="store_true", help="no live progress line on stderr")
    match.add_argument("--wide", action="store_true", help="the full results table (about 150 columns)")
    match.add_argument("--db", metavar="PATH|URL",
                       help="store the anti-cheat's conclusions and the sessions in this SQLite file or "
                            "postgresql:// database (default: none)")

    replay = sub.add_parser("replay", help="summarise a replay", description="Summarise a replay file; --detect re-runs the detectors.")
    replay.add_argument("file", help="the replay file")
    replay.add_argument("--detect", action="store_true", help="re-run the detector pipeline over the recorded events")
    replay.add_argument("--tolerances", metavar="FILE", help="TOML of detector tolerance overrides (with --detect)")
    replay.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    replay.add_argument("--evidence", action="store_true",
                        help="list every recorded detection: time, player, detector:kind, reason, value, evidence")
    replay.add_argument("--player", metavar="NAME", help="with --evidence: only this player's detections")

    evaluate = sub.add_parser(
        "evaluate",
        help="flag rate per cheat profile and honest false positives",
        description="Play labelled scenarios in virtual time (default: every built-in cheat_<profile> scenario) "
        "and report, per cheating bot, whether it was flagged within the deadline, by which detectors and when; "
        "and every honest bot that was flagged at all.",
    )
    evaluate.add_argument("scenarios", nargs="*", help="scenario TOML files (default: the built-in cheat scenarios)")
    evaluate.add_argument("--deadline", type=_positive_float, default=60.0, help="flagged within this many match seconds (default 60)")
    evaluate.add_argument("--duration", type=_positive_float, help="override every scenario's duration (s)")
    evaluate.add_argument("--jobs", type=_count, help="matches played in parallel (default: one per CPU)")
    evaluate.add_argument("--json", action="store_true", help="print the report as one JSON object on the last line")
    evaluate.add_argument("--out", metavar="DIR", help="also store the matches as a lab corpus (referee lab report DIR)")
    evaluate.add_argument("--wide", action="store_true", help="the full table (about 150 columns)")

    from testbed.lab.cli import add_lab_parser

    add_lab_parser(sub)
    _add_verbose_everywhere(parser)
    return parser


# --- helpers ------------------------------------------------------------------------------------


def _console(stream: TextIO) -> Console:
    # Piped output gets a wide fixed width: rich's 80-column default truncates the player table.
    tty = stream.isatty()
    return Console(file=stream, width=None if tty else 200, soft_wrap=False, highlight=False)


def _load_map(name: str) -> Any:
    from world.mapfile import MapError, builtin_map, builtin_map_names, load_map

    try:
        if name in builtin_map_names():
            return builtin_map(name)
        return load_map(name)
    except MapError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"{name}: not a built-in map ({', '.join(builtin_map_names())}) and not readable: {exc.strerror or exc}") from exc


def _load_tolerances(path: str | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    from anticheat.suite import resolve_configs
    from anticheat.tolerances import ToleranceError, load_overrides

    try:
        overrides = load_overrides(Path(path))
        resolve_configs(overrides)  # fail now, naming the section and key, not mid-match
    except ToleranceError as exc:
        raise CliError(str(exc)) from exc
    return overrides


def _announce_compiling(command: str, err: TextIO, *, json_lines: bool = False) -> None:
    """Say on ``err`` that the kernels are being compiled when numba's cache of those that
    ``command`` needs is cold (a cold start is otherwise silent for up to two minutes); log at INFO
    that they load from the cache otherwise. With ``json_lines`` the notice is a log record
    (``event`` "compiling") on ``referee.serve``, as stderr then holds JSON lines only. Call it
    before the command's first heavy import."""
    from testbed.kernel_cache import COMMAND_KERNEL_MODULES, cold_modules

    try:
        cold = cold_modules(COMMAND_KERNEL_MODULES[command])
    except Exception as exc:  # noqa: BLE001 - a notice must never stop the command
        log.debug("cannot tell whether the kernel cache is warm: %s", exc)
        return
    if not cold:
        log.info("numeric kernels: loading them from numba's cache")
        return
    if json_lines:
        logging.getLogger("referee.serve").info(COMPILING_NOTICE.removeprefix("referee: "), extra={"event": "compiling"})
    else:
        err.write(COMPILING_NOTICE + "\n")
        err.flush()
    log.info("kernels not in numba's cache yet: %s", ", ".join(cold))


def _resolve_server(host: str, port: int) -> None:
    """Fail with a one-line message when the server's host name does not resolve."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CliError(f"cannot resolve server host {host!r}: {reason}") from exc


def _loop_factory() -> Any:
    """uvloop's loop factory where available (REFERENCES 9: ~4 us per datagram instead of ~33)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _run_async(coro: Any, *, uvloop: bool = True) -> Any:
    with asyncio.Runner(loop_factory=_loop_factory() if uvloop else None) as runner:
        return runner.run(coro)


class _ProgressLine:
    """One status line on stderr, rewritten in place on a terminal, else printed every few seconds."""

    def __init__(self, stream: TextIO, every_s: float = 5.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.every_s = every_s
        self._last_printed_s = -math.inf
        self._width = 0

    def __call__(self, p: Any) -> None:
        speed = p.speedup
        speed_text = f"{speed:6.1f}x" if math.isfinite(speed) else "     -x"
        line = (
            f"[{p.mode}] {p.now_s:7.1f}/{p.duration_s:.0f} s  {speed_text}  players {p.connected:3d}  "
            f"kills {p.kills:4d}  detections {p.detections:5d}"
        )
        if self.tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        elif p.now_s - self._last_printed_s >= self.every_s or (p.now_s >= p.duration_s > self._last_printed_s):
            self.stream.write(line + "\n")
            self._last_printed_s = p.now_s
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


# --- subcommands --------------------------------------------------------------------------------


def _cmd_match(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _announce_compiling("match", err)
    from bots.registry import default_registry
    from testbed.bot_factory import scenario_profiles
    from testbed.bot_process import BotProcessError
    from testbed.match import run_udp, run_virtual
    from testbed.report import bot_lag_warning, render_table, summary_line
    from testbed.scenario import ScenarioError, default_scenario, load_scenario

    profiles = default_registry()
    try:
        scenario = load_scenario(args.scenario, profiles) if args.scenario else default_scenario(profiles)
        changes: dict[str, Any] = {}
        if args.duration is not None:
            changes["duration_s"] = args.duration
        if args.seed is not None:
            changes["seed"] = args.seed
        if changes:
            scenario = scenario.replace(**changes)
    except ScenarioError as exc:
        raise CliError(str(exc)) from exc
    overrides = _load_tolerances(args.tolerances)
    if overrides:
        scenario = scenario.with_tolerances(overrides)
    _check_scenario_tolerances(scenario)
    progress = None if args.no_progress else _ProgressLine(err)
    try:
        if args.virtual:
            result = run_virtual(scenario, replay_path=args.replay, progress=progress, db=args.db)
        else:
            # The bots (and their link proxies) run in a process of their own on the stdlib loop,
            # so this process serves alone and can use uvloop.
            result = _run_async(run_udp(scenario, port=args.port, replay_path=args.replay, progress=progress, db=args.db))
    except (ScenarioError, BotProcessError) as exc:
        raise CliError(str(exc)) from exc
    finally:
        if progress is not None:
            progress.done()
    # Profiles named by module:callable are unknown to the registry by their labels.
    result = result.with_profiles(scenario_profiles(scenario, profiles))
    warning = bot_lag_warning(result)
    if args.json:
        out.write(result.to_json_line() + "\n")
        if warning is not None:
            err.write(f"referee: {warning}\n")
    else:
        console = _console(out)
        console.print(render_table(result, wide=args.wide, width=console.width))
        console.print(summary_line(result))
        if warning is not None:
            console.print(warning, style="bold yellow")
        if result.replay:
            console.print(f"replay written to {result.replay}")
    return EXIT_OK


def _check_scenario_tolerances(scenario: Any) -> None:
    """Check a scenario's own tolerance tables before the match starts."""
    from anticheat.suite import resolve_configs
    from anticheat.tolerances import ToleranceError

    try:
        resolve_configs(scenario.tolerances)
    except ToleranceError as exc:
        raise CliError(f"{scenario.source}: tolerances: {exc}") from exc


def _cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from server.recording import ReplayError
    from testbed.replay_summary import detect, render_detect, render_evidence, render_summary, summarize

    overrides = _load_tolerances(args.tolerances)
    if args.tolerances and not args.detect:
        raise CliError("--tolerances needs --detect")
    if args.player is not None and not args.evidence:
        raise CliError("--player needs --evidence")
    try:
        summary = summarize(args.file)
        run = detect(args.file, overrides) if args.detect else None
    except ReplayError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"{args.file}: {exc.strerror or exc}") from exc
    evidence = summary.evidence(args.player) if args.evidence else None
    if args.player is not None and args.player not in {n for p in summary.players for n in p.names}:
        raise CliError(f"{args.file}: no player named {args.player!r}")
    if args.json:
        doc: dict[str, Any] = {"summary": summary.to_json()}
        if run is not None:
            doc["detect"] = run.to_json()
        if evidence is not None:
            doc["evidence"] = [d.to_json() for d in evidence]
        out.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
        return EXIT_OK
    console = _console(out)
    console.print(render_summary(summary))
    if run is not None:
        console.print(render_detect(run))
    if evidence is not None:
        title = "detections (recorded)" + (f" of {args.player}" if args.player else "")
        console.print(render_evidence(evidence, title))
    return EXIT_OK


def _cmd_evaluate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import json

    from bots.registry import default_registry
    from testbed.evaluation import ScenarioOutcome, builtin_cheat_scenarios, evaluate, render_evaluation
    from testbed.scenario import ScenarioError, load_scenario

    profiles = default_registry()
    try:
        scenarios = [load_scenario(p, profiles) for p in args.scenarios] or builtin_cheat_scenarios(profiles)
    except ScenarioError as exc:
        raise CliError(str(exc)) from exc
    if args.duration is not None:
        scenarios = [s.replace(duration_s=args.duration) for s in scenarios]
    for s in scenarios:
        _check_scenario_tolerances(s)

    def done(o: ScenarioOutcome) -> None:
        flagged = sum(c.flagged for c in o.cheaters)
        err.write(f"{o.scenario}: {flagged}/{len(o.cheaters)} cheaters flagged, "
                  f"{len(o.false_positives)}/{o.honest} honest flagged ({o.wall_s:.0f} s wall)\n")

    store = None
    if args.out:
        from testbed.lab.store import open_store

        store = open_store(args.out)
        if store.done_match_ids():
            store.close()
            raise CliError(f"{args.out} already holds a corpus; store an evaluation in a new directory")
        store.set_meta("spec_name", "evaluate")
    try:
        report = evaluate(scenarios, deadline_s=args.deadline, jobs=args.jobs, on_done=done, store=store)
    finally:
        if store is not None:
            store.close()
    if args.json:
        out.write(json.dumps(report.to_json(), sort_keys=True) + "\n")
    else:
        console = _console(out)
        console.print(render_evaluation(report, wide=args.wide))
        cheaters = report.cheaters
        blatant = [c for c in cheaters if c.blatant]
        console.print(f"flagged within {args.deadline:g} s: blatant cheaters {sum(c.flagged for c in blatant)}/{len(blatant)}, "
                      f"all cheaters {sum(c.flagged for c in cheaters)}/{len(cheaters)}; "
                      f"honest bots flagged: {report.false_positive_total}/{report.honest_total}")
    return EXIT_OK


def _serve_db(args: argparse.Namespace) -> str | None:
    """The database ``serve`` writes: ``--db``, none with ``--no-db``, else the default file."""
    if args.no_db:
        if args.db:
            raise CliError("--db and --no-db exclude each other")
        return None
    if args.db:
        return str(args.db)
    from anticheat.judgement.store import default_sqlite_path

    return str(default_sqlite_path())


def _cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _announce_compiling("serve", err, json_lines=args.log_json)
    from server.metrics import MetricsConfig
    from testbed.standalone import ServeStatus, serve

    game_map = _load_map(args.map)
    overrides = _load_tolerances(args.tolerances)
    console = _console(out)
    announce = logging.getLogger("referee.serve")

    def listening(address: tuple[str, int]) -> None:
        until = f" for {args.duration:g} s" if args.duration else " until Ctrl-C"
        line = f"serving {game_map.name} at {args.tick_rate} Hz on {address[0]}:{address[1]}{until}"
        if args.log_json:  # stderr holds JSON lines only
            announce.info(line, extra={"event": "listening", "address": f"{address[0]}:{address[1]}"})
            return
        err.write(f"referee: {line}\n")
        err.flush()

    def metrics_listening(address: tuple[str, int]) -> None:
        url = f"http://{address[0]}:{address[1]}/metrics"
        if args.log_json:
            announce.info("metrics on %s", url, extra={"event": "metrics_listening", "url": url})
            return
        err.write(f"referee: metrics on {url}\n")
        err.flush()

    def status(s: ServeStatus) -> None:
        log.info("t=%.0f s players=%d kills=%d detections=%d", s.time_s, s.players, s.kills, s.detections)

    admin, generated = _admin_config(args)

    def admin_listening(url: str) -> None:
        # The token is shown here once, never logged: stdout under --log-json (stderr is JSON lines).
        if args.log_json:
            announce.info("admin page on %s", url, extra={"event": "admin_listening", "url": url})
            if generated:
                out.write(f"referee: admin token {admin.token}\n")
                out.flush()
            return
        token = f"; token {admin.token}" if generated else " (token from --admin-token / REFEREE_ADMIN_TOKEN)"
        err.write(f"referee: admin page on {url}{token}\n")
        err.flush()

    try:
        report = _run_async(
            serve(
                game_map,
                tick_rate_hz=args.tick_rate,
                bind=(args.bind, args.port),
                duration_s=args.duration,
                seed=args.seed,
                replay_path=args.replay,
                tolerances=overrides,
                on_listening=listening,
                status=status,
                stop_on_sigint=True,
                metrics=None if args.metrics_port is None else MetricsConfig(args.metrics_host, args.metrics_port),
                on_metrics_listening=metrics_listening,
                admin=admin,
                on_admin_listening=admin_listening,
                db=_serve_db(args),
            )
        )
    except OSError as exc:
        where = f"{args.bind}:{args.port}"
        if args.metrics_port is not None:
            where += f" (metrics {args.metrics_host}:{args.metrics_port})"
        if args.admin_port is not None:
            where += f" (admin {args.admin_host}:{args.admin_port})"
        raise CliError(f"cannot serve on {where}: {exc.strerror or exc}") from exc
    console.print(_server_table(report))
    console.print(_traffic_line(report))
    console.print(_rejections_table(report))
    return EXIT_OK


def _admin_config(args: argparse.Namespace) -> tuple[Any, bool]:
    """The admin page's config from ``--admin-*`` (None without ``--admin-port``) and whether its
    token was generated here (then it must be shown once)."""
    if args.admin_port is None:
        return None, False
    from server.admin.config import AdminConfig, generate_token

    token = args.admin_token or os.environ.get("REFEREE_ADMIN_TOKEN") or ""
    generated = not token
    if generated:
        token = generate_token()
    try:
        return AdminConfig(args.admin_host, args.admin_port, token), generated
    except ValueError as exc:
        raise CliError(f"--admin-token: {exc}") from exc


def _traffic_line(report: dict[str, Any]) -> str:
    """The end of ``serve``: datagrams in and out, send errors, the kernel's drops at the socket."""
    udp = report.get("udp", {})
    drops = udp.get("kernel_drops")
    return (f"datagrams: {udp.get('datagrams_received', 0)} in, {udp.get('datagrams_sent', 0)} out "
            f"({udp.get('bytes_sent', 0)} B), {udp.get('send_errors', 0)} send errors, "
            f"dropped by the kernel: {'-' if drops is None else drops}")


def _rejections_table(report: dict[str, Any]) -> Table:
    """Every datagram (or command, shot) the server refused, by reason (PROTOCOL.md section 8)."""
    table = Table(title="rejected by reason", title_justify="left")
    table.add_column("reason")
    table.add_column("count", justify="right")
    rejections = report.get("rejections", {})
    for reason, n in sorted(rejections.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(reason, str(n))
    if not rejections:
        table.add_row("(none)", "0")
    return table


def _server_table(report: dict[str, Any]) -> Table:
    """The final table of ``serve``: everyone the server saw, those who left marked with when."""
    table = Table(title=f"server at tick {report.get('tick')} ({report.get('time_s', 0.0):.1f} s)", title_justify="left")
    for col in ("slot", "name", "left", "rtt ms", "loss", "shots", "hits", "kills", "deaths", "detections", "sanction"):
        table.add_column(col)
    for p in report.get("players", []):
        detections = ", ".join(f"{k} x{v}" for k, v in sorted(p.get("detections", {}).items())) or "-"
        sanction = (p.get("sanction") or {}).get("recommended", "-") if p.get("detections") else "-"
        left = "-" if p.get("left_s") is None else f"{p['left_s']:.1f} s ({p.get('left_reason') or '?'})"
        table.add_row(
            str(p["slot"]), p["name"], left, f"{p['rtt_ms']:.0f}", f"{p['loss'] * 100:.1f}%", str(p["shots"]),
            str(p["hits"]), str(p["kills"]), str(p["deaths"]), detections, str(sanction),
        )
    return table


def _cmd_bots(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    host, port = args.server
    _resolve_server(host, port)  # before a minute of compiling, on a cold start
    _announce_compiling("bots", err)
    from bots.client import map_mismatches
    from bots.registry import default_registry
    from bots.udp import ConnectError
    from testbed.scenario import ScenarioError
    from testbed.standalone import run_bot_swarm

    try:
        default_registry().resolve(args.profile)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    game_map = _load_map(args.map) if args.map is not None else None
    mismatches_before = map_mismatches()
    try:
        stats = _run_async(
            run_bot_swarm(
                args.server,
                game_map,
                count=args.count,
                profile=args.profile,
                skill=args.skill,
                ping_ms=args.ping_ms,
                jitter_ms=args.jitter_ms,
                loss=args.loss,
                duration_s=args.duration,
                seed=args.seed,
                name_prefix=args.name_prefix,
                connect_timeout_s=args.connect_timeout,
            ),
        )
    except (ScenarioError, ConnectError) as exc:
        raise CliError(str(exc)) from exc
    for (server_map, client_map), n in map_mismatches().items():
        n -= mismatches_before.get((server_map, client_map), 0)
        if n > 0:
            err.write(f"referee: {n} of {len(stats)} bots: the server runs map {server_map!r}, these bots "
                      f"have {client_map!r} (--map {server_map})\n")
    table = Table(title=f"{args.count} {args.profile} bots against {args.server[0]}:{args.server[1]}", title_justify="left")
    for col in ("name", "slot", "state", "rtt ms", "sent", "received", "shots", "deaths", "bad"):
        table.add_column(col)
    for s in stats:
        table.add_row(
            s.name, "-" if s.slot is None else str(s.slot), s.state.value,
            "-" if s.rtt_s is None else f"{s.rtt_s * 1000:.0f}", str(s.datagrams_sent), str(s.datagrams_received),
            str(s.shots_sent), str(s.deaths), str(s.bad_datagrams),
        )
    _console(out).print(table)
    return EXIT_OK


def _cmd_lab(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from testbed.lab.cli import LabError, run_lab

    try:
        return run_lab(args, out, err)
    except LabError as exc:
        raise CliError(str(exc)) from exc


_COMMANDS = {
    "lab": _cmd_lab,
    "match": _cmd_match,
    "replay": _cmd_replay,
    "serve": _cmd_serve,
    "bots": _cmd_bots,
    "evaluate": _cmd_evaluate,
}


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the ``referee`` command line; returns the exit status."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits on --help (0) and on usage errors (2); return that as our status.
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    serving = args.command == "serve"
    configure_logging(verbosity(args), err, json_lines=getattr(args, "log_json", False), timed=serving,
                      info_loggers=SERVE_INFO_LOGGERS if serving else ())
    try:
        return _COMMANDS[args.command](args, out, err)
    except CliError as exc:
        if getattr(args, "log_json", False):  # stderr holds JSON lines only
            logging.getLogger("referee").error("%s", exc, extra={"event": "error"})
        else:
            err.write(f"referee: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("referee: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover - python -m testbed.cli
    sys.exit(main())
