"""Tolerance search: an Optuna study that trades caught cheaters against honest false alarms.

Every trial is a set of tolerance overrides; it is scored by re-running the tuning corpus's
stored streams (never by replaying matches) and reading, per player-match, the first alarm:

* TPR: cheater player-matches alarmed within ``deadline_s`` of their play, among those that
  either were alarmed by then or played that long;
* false alarms per honest player-hour (link notices aside).

The study is multi-objective (maximise TPR, minimise the false-alarm rate; NSGA-II); its Pareto
front is reported, and the pick is the front's highest TPR whose false-alarm rate is at most the
target (ties: fewer alarms). The search space comes from the tolerance dataclasses
(``anticheat.suite.default_configs``): a field's ``metadata["search"] = (low, high)`` when it
declares one, otherwise a range around its default (see :func:`search_space`). Severities,
booleans, strings and nested tables are not searched.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anticheat.suite import default_configs
from testbed.lab.rerun import StreamJob, outcomes, rerun_streams, worker_pool
from testbed.lab.store import LabStore

__all__ = ["Param", "TrialResult", "TuneResult", "flatten", "search_space", "to_toml", "tune"]

_NOT_SEARCHED = ("severity",)
_PROBABILITY_NAMES = ("alpha", "beta")


@dataclass(frozen=True, slots=True)
class Param:
    """One searched tolerance: ``section.key`` in [low, high]; ``log`` scale; ``integer``."""

    section: str
    key: str
    low: float
    high: float
    log: bool
    integer: bool
    default: float

    @property
    def name(self) -> str:
        """``section.key``."""
        return f"{self.section}.{self.key}"


def _range(name: str, default: float, integer: bool) -> tuple[float, float, bool] | None:
    if integer:
        if default < 1:
            return None
        return max(1, default // 3), max(default * 3, default + 2), False
    if default <= 0 or not math.isfinite(default):
        return None
    if any(p == name or name.endswith("_" + p) for p in _PROBABILITY_NAMES):
        return default / 10.0, min(0.5, default * 10.0), True
    if default < 1.0 and ("rate" in name or "fraction" in name or "ratio" in name):
        return max(0.01, default - 0.3), min(0.999, default + 0.3), False
    return default / 3.0, default * 3.0, True


def search_space(sections: Sequence[str] | None = None, keys: Sequence[str] | None = None, *,
                 all_fields: bool = False) -> list[Param]:
    """The searched tolerances of ``sections`` (default: every detector's; never ``sanctions`` or
    ``skip``), or exactly ``keys`` (``section.key`` or ``section.table.key`` names).

    By default only the fields that declare ``metadata["search"] = (low, high)`` are searched:
    the decision thresholds, chosen so that a study of a few dozen trials is not lost in ring
    sizes and population constants. ``all_fields`` (or naming ``keys``) searches any numeric
    field; one without declared bounds gets, from its default d: probabilities named
    alpha/beta [d/10, min(0.5, 10 d)] on a log scale; rates, fractions and ratios below 1
    [d - 0.3, d + 0.3] clipped to (0.01, 0.999); other positive floats [d/3, 3 d] on a log scale;
    positive integers [max(1, d // 3), max(3 d, d + 2)].
    """
    configs = default_configs()
    wanted_keys = None if keys is None else set(keys)
    chosen = list(sections) if sections else [s for s in configs if s not in ("sanctions", "skip")]
    unknown = [s for s in chosen if s not in configs]
    if unknown:
        raise ValueError(f"unknown tolerance sections {unknown}; known: {sorted(configs)}")
    if wanted_keys is not None:
        chosen = sorted({k.partition(".")[0] for k in wanted_keys})
    out: list[Param] = []
    for section in chosen:
        out.extend(_fields(section, "", configs[section], wanted_keys, all_fields or wanted_keys is not None))
    if wanted_keys is not None:
        missing = wanted_keys - {p.name for p in out}
        if missing:
            raise ValueError(f"not searchable tolerances (unknown, or not a number): {sorted(missing)}")
    return out


def _fields(section: str, prefix: str, config: Any, wanted_keys: set[str] | None, undeclared: bool) -> list[Param]:
    """Searchable numeric fields of ``config``, nested config tables one level down included."""
    out: list[Param] = []
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        key = f"{prefix}{f.name}"
        name = f"{section}.{key}"
        default = getattr(config, f.name)
        if dataclasses.is_dataclass(default) and not prefix:
            out.extend(_fields(section, f"{key}.", default, wanted_keys, undeclared))
            continue
        if wanted_keys is not None and name not in wanted_keys:
            continue
        hint = hints.get(f.name)
        declared = f.metadata.get("search") if f.metadata else None
        if hint not in (float, int) or isinstance(default, bool):
            continue
        if declared is None and (not undeclared or (wanted_keys is None and any(s in f.name for s in _NOT_SEARCHED))):
            continue
        integer = hint is int
        if declared is not None:
            low, high = declared
            log = bool(low > 0 and high / low >= 10)
        else:
            got = _range(f.name, float(default), integer)
            if got is None:
                continue
            low, high, log = got
        out.append(Param(section, key, float(low), float(high), log, integer, float(default)))
    return out


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial: its overrides, TPR within the deadline (with k/n), honest alarms and hours."""

    number: int
    overrides: Mapping[str, Mapping[str, Any]]
    tpr: float
    detected: int
    eligible: int
    alarms: int
    honest_hours: float

    @property
    def alarms_per_hour(self) -> float:
        """Honest false alarms per player-hour."""
        return self.alarms / self.honest_hours if self.honest_hours > 0 else math.inf

    def to_json(self) -> dict[str, Any]:
        """Plain form."""
        return {"number": self.number, "overrides": {k: dict(v) for k, v in self.overrides.items()},
                "tpr": self.tpr, "detected": self.detected, "eligible": self.eligible, "alarms": self.alarms,
                "honest_hours": self.honest_hours, "alarms_per_hour": self.alarms_per_hour}


@dataclass(frozen=True, slots=True)
class TuneResult:
    """The study: every trial, the Pareto front, the pick (None when no trial met the target)."""

    trials: tuple[TrialResult, ...]
    front: tuple[TrialResult, ...]
    best: TrialResult | None
    baseline: TrialResult
    target_per_hour: float
    deadline_s: float
    space: tuple[Param, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain form."""
        return {"target_per_hour": self.target_per_hour, "deadline_s": self.deadline_s,
                "space": [dataclasses.asdict(p) for p in self.space],
                "baseline": self.baseline.to_json(), "best": None if self.best is None else self.best.to_json(),
                "front": [t.to_json() for t in self.front], "trials": len(self.trials)}


def _labels(store: LabStore) -> dict[tuple[int, str], tuple[bool, float]]:
    rows = store.con.execute("SELECT match_id, name, cheat, play_s FROM players").fetchall()
    return {(int(m), str(n)): (bool(c), float(p)) for m, n, c, p in rows}


def score(analyses: Sequence[Any], labels: Mapping[tuple[int, str], tuple[bool, float]], deadline_s: float,
          number: int, overrides: Mapping[str, Mapping[str, Any]]) -> TrialResult:
    """TPR within ``deadline_s`` (s of play) and honest alarms of one re-run of the corpus."""
    detected = eligible = alarms = 0
    honest_s = 0.0
    for analysis in analyses:
        for name, outcome in outcomes(analysis).items():
            cheat, play_s = labels[(analysis.match_id, name)]
            if cheat:
                hit = outcome.first_s is not None and outcome.first_s <= deadline_s
                if hit or play_s >= deadline_s:
                    eligible += 1
                    detected += hit
            else:
                alarms += outcome.alarms
                honest_s += play_s
    return TrialResult(number, overrides, detected / eligible if eligible else 0.0, detected, eligible, alarms,
                       honest_s / 3600.0)


def _suggest(trial: Any, space: Sequence[Param]) -> dict[str, dict[str, Any]]:
    overrides: dict[str, dict[str, Any]] = {}
    for p in space:
        if p.integer:
            value: Any = trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
        else:
            value = trial.suggest_float(p.name, p.low, p.high, log=p.log)
        table = overrides.setdefault(p.section, {})
        *parents, leaf = p.key.split(".")
        for part in parents:
            table = table.setdefault(part, {})
        table[leaf] = value
    return overrides


def _valid(overrides: Mapping[str, Mapping[str, Any]]) -> bool:
    from anticheat.suite import resolve_configs

    try:
        resolve_configs(overrides)
    except ValueError:
        return False
    return True


def tune(
    store: LabStore,
    *,
    target_per_hour: float,
    deadline_s: float,
    space: Sequence[Param],
    trials: int = 30,
    workers: int | None = None,
    ray: bool = False,
    seed: int = 0,
    on_trial: Callable[[TrialResult], None] | None = None,
) -> TuneResult:
    """Run the study over ``store``'s streams (see the module docstring)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    labels = _labels(store)
    streams = store.streams()
    if not streams:
        raise ValueError(f"{store.path}: the corpus holds no streams to re-run")
    pool = None if ray or workers == 1 else worker_pool(workers)
    results: list[TrialResult] = []

    def evaluate(number: int, overrides: dict[str, dict[str, Any]]) -> TrialResult:
        jobs = [StreamJob(mid, codec, data, overrides or None, "trial", None) for mid, codec, data in streams]
        analyses = list(rerun_streams(jobs, executor=pool, ray=ray))
        return score(analyses, labels, deadline_s, number, overrides)

    try:
        baseline = evaluate(-1, {})
        if on_trial is not None:
            on_trial(baseline)
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, trials // 3 or 4)))
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
        # The defaults are a trial too: the search starts from where the detectors stand.
        study.enqueue_trial({p.name: (int(p.default) if p.integer else p.default) for p in space
                             if p.low <= p.default <= p.high})
        for _ in range(trials):
            trial = study.ask()
            overrides = _suggest(trial, space)
            if not _valid(overrides):
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            result = evaluate(trial.number, overrides)
            results.append(result)
            study.tell(trial, [result.tpr, result.alarms_per_hour])
            if on_trial is not None:
                on_trial(result)
    finally:
        if pool is not None:
            pool.shutdown()
    front_numbers = {t.number for t in study.best_trials}
    front = tuple(sorted((r for r in results if r.number in front_numbers), key=lambda r: (r.alarms_per_hour, -r.tpr)))
    feasible = [r for r in results if r.alarms_per_hour <= target_per_hour]
    best = max(feasible, key=lambda r: (r.tpr, -r.alarms_per_hour)) if feasible else None
    return TuneResult(tuple(results), front, best, baseline, target_per_hour, deadline_s, tuple(space))


def flatten(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"movement": {"timer": {"count": 3}}}`` as ``{"movement.timer.count": 3}``."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def to_toml(overrides: Mapping[str, Mapping[str, Any]], comment: str = "") -> str:
    """A tolerance file that ``--tolerances`` accepts (nested tables as ``[section.field]``)."""
    lines = [f"# {line}" for line in comment.splitlines()] if comment else []

    def table(name: str, values: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        if scalars or not values:
            lines.append(f"\n[{name}]")
            for key, value in sorted(scalars.items()):
                lines.append(f"{key} = {value!r}" if isinstance(value, int) else f"{key} = {float(value)!r}")
        for key, value in sorted(values.items()):
            if isinstance(value, Mapping):
                table(f"{name}.{key}", value)

    for section in sorted(overrides):
        table(section, overrides[section])
    return "\n".join(lines).lstrip("\n") + "\n"
