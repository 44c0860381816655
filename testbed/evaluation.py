"""Detector evaluation against ground truth: which cheat profiles are flagged, by what, and when.

``referee evaluate`` plays labelled scenarios in virtual time (by default every built-in
``cheat_<profile>`` scenario: one cheater among honest players on mixed links) and reports, per
cheating bot, whether it was flagged within the deadline (60 simulated seconds by default), by
which detectors, and the match time of its first detection; and, per scenario, every honest bot
that was flagged at all (a false positive). It is a small preset of the lab (``testbed.lab``):
each scenario becomes one lab match job, played by the lab's runner (``play_jobs``: worker
processes, the stream recorded and the suite re-run over it), and the outcome is read from the
rows the lab would store; ``--out DIR`` stores them, so ``referee lab report DIR`` shows the same
matches with intervals and time-to-detect curves. Each match is deterministic for its seed, so
the report is too.

"Flagged" means at least one Detection, whatever the sanction policy then recommends: the policy
weighs evidence before anything is applied, but a detection on an honest player is already a
false alarm someone has to review.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text


from testbed.lab.spec import MatchJob
from testbed.lab.store import LabStore, MatchRows
from testbed.report import NO_SANCTION, detection_counts
from testbed.scenario import Scenario, builtin_scenario, builtin_scenario_names

__all__ = [
    "CheaterOutcome",
    "EvaluationReport",
    "ScenarioOutcome",
    "builtin_cheat_scenarios",
    "cheat_scenarios",
    "evaluate",
    "render_evaluation",
    "scenario_job",
    "summarize_rows",
]

CHEAT_PREFIX = "cheat_"


@dataclass(frozen=True, slots=True)
class CheaterOutcome:
    """One cheating bot's result.

    Attributes: scenario, name, profile (ground truth); blatant: the profile is one every use of
    which is server-checkable (``bots.profiles.ProfileSpec.blatant``); flagged: a detection no
    later than the deadline; first_s: match time of its first detection (s) or None; detectors: ``detector:kind``
    labels of every detection in the match, by first occurrence; sanction: the policy's level.
    """

    scenario: str
    name: str
    profile: str
    blatant: bool
    flagged: bool
    first_s: float | None
    detectors: tuple[str, ...]
    sanction: str
    shots: int

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"scenario": self.scenario, "name": self.name, "profile": self.profile, "blatant": self.blatant, "flagged": self.flagged,
                "first_s": None if self.first_s is None else round(self.first_s, 3),
                "detectors": list(self.detectors), "sanction": self.sanction, "shots": self.shots}


@dataclass(frozen=True, slots=True)
class ScenarioOutcome:
    """One scenario's match: its cheaters, and its honest bots that were flagged (false positives).

    Attributes: scenario, map, duration_s (simulated s), wall_s, honest (number of honest bots),
    cheaters, false_positives: (name, ping_ms, loss, detector labels) per flagged honest bot.
    """

    scenario: str
    map: str
    duration_s: float
    wall_s: float
    honest: int
    cheaters: tuple[CheaterOutcome, ...]
    false_positives: tuple[tuple[str, float, float, tuple[str, ...]], ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"scenario": self.scenario, "map": self.map, "duration_s": self.duration_s,
                "wall_s": round(self.wall_s, 2), "honest": self.honest,
                "cheaters": [c.to_json() for c in self.cheaters],
                "false_positives": [{"name": n, "ping_ms": p, "loss": loss, "detectors": list(d)}
                                    for n, p, loss, d in self.false_positives]}


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """Every scenario's outcome, and the totals (deadline_s: "flagged within", simulated s)."""

    deadline_s: float
    scenarios: tuple[ScenarioOutcome, ...]

    @property
    def cheaters(self) -> tuple[CheaterOutcome, ...]:
        """Every cheating bot of every scenario."""
        return tuple(c for s in self.scenarios for c in s.cheaters)

    @property
    def honest_total(self) -> int:
        """Honest bots played, over all scenarios."""
        return sum(s.honest for s in self.scenarios)

    @property
    def false_positive_total(self) -> int:
        """Honest bots flagged, over all scenarios."""
        return sum(len(s.false_positives) for s in self.scenarios)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form with the totals."""
        cheaters = self.cheaters
        blatant = [c for c in cheaters if c.blatant]
        return {"deadline_s": self.deadline_s,
                "cheaters_flagged": sum(c.flagged for c in cheaters), "cheaters": len(cheaters),
                "blatant_flagged": sum(c.flagged for c in blatant), "blatant": len(blatant),
                "honest_flagged": self.false_positive_total, "honest": self.honest_total,
                "scenarios": [s.to_json() for s in self.scenarios]}


def summarize_rows(scenario: Scenario, rows: MatchRows, deadline_s: float) -> ScenarioOutcome:
    """The outcome of one scenario played as a lab match (its stored rows)."""
    found: dict[str, list[tuple[str, str, float]]] = {}
    for row in rows.detections:
        found.setdefault(row[2], []).append((row[5], row[6], float(row[3])))
    levels: dict[str, str] = {}
    for row in rows.decisions:
        levels[row[2]] = str(row[5])
    cheaters = []
    false_positives = []
    honest = 0
    for p in rows.players:
        name = str(p["name"])
        counts = detection_counts(found.get(name, []))
        labels = tuple(c.label for c in counts)
        if not p["cheat"]:
            honest += 1
            if counts:
                false_positives.append((name, float(p["ping_ms"]), float(p["loss"]), labels))
            continue
        first = min((c.first_s for c in counts), default=None)
        cheaters.append(CheaterOutcome(
            scenario=scenario.name, name=name, profile=str(p["profile"]), blatant=bool(p["blatant"]),
            flagged=first is not None and first <= deadline_s, first_s=first, detectors=labels,
            sanction=levels.get(name, NO_SANCTION) if counts else NO_SANCTION, shots=int(p["shots"]),
        ))
    return ScenarioOutcome(scenario=scenario.name, map=scenario.map, duration_s=scenario.duration_s,
                           wall_s=float(rows.match["wall_s"]), honest=honest, cheaters=tuple(cheaters),
                           false_positives=tuple(false_positives))


def cheat_scenarios() -> tuple[str, ...]:
    """Names of the built-in one-cheater scenarios."""
    return tuple(n for n in builtin_scenario_names() if n.startswith(CHEAT_PREFIX))


def scenario_job(index: int, scenario: Scenario) -> MatchJob:
    """A scenario as a lab match job (each bot's link class named for its ping)."""
    labels = {b.name: {"link": f"{b.ping_ms:g} ms, {b.loss:.0%} loss", "param_bin": "", "label": b.profile}
              for b in scenario.players()}
    return MatchJob(index, scenario, labels)


def evaluate(
    scenarios: Sequence[Scenario],
    *,
    deadline_s: float = 60.0,
    jobs: int | None = None,
    on_done: Callable[[ScenarioOutcome], None] | None = None,
    store: LabStore | None = None,
) -> EvaluationReport:
    """Play ``scenarios`` as lab matches (``jobs`` worker processes; default one per CPU) and report.

    Outcomes are in the order of ``scenarios``, whatever order the matches finish in. With a
    ``store`` (a lab corpus database), every match's rows are stored too.
    """
    from testbed.lab.corpus import play_jobs

    outcomes: list[ScenarioOutcome | None] = [None] * len(scenarios)
    match_jobs = [scenario_job(i, sc) for i, sc in enumerate(scenarios)]
    workers = max(1, min(jobs or os.cpu_count() or 1, len(scenarios) or 1))
    for rows in play_jobs(match_jobs, workers=workers):
        i = int(rows.match["match_id"])
        if store is not None:
            store.add_match(rows)
        outcomes[i] = summarize_rows(scenarios[i], rows, deadline_s)
        if on_done is not None:
            on_done(outcomes[i])
    return EvaluationReport(deadline_s=deadline_s, scenarios=tuple(o for o in outcomes if o is not None))


def builtin_cheat_scenarios(profiles: Any = None) -> list[Scenario]:
    """Every built-in ``cheat_<profile>`` scenario, parsed."""
    return [builtin_scenario(n, profiles) for n in cheat_scenarios()]


def render_evaluation(report: EvaluationReport, wide: bool = False) -> Table:
    """One row per cheating bot, then one per flagged honest bot.

    The default layout fits a 100-column terminal: the scenario's ``cheat_`` prefix dropped
    (the profile says the rest), blatant/subtle as ``B``/``S``, detectors summarised as the
    first ``detector:kind`` and how many others; names and profiles are never wrapped. ``wide``
    gives every column in full.
    """
    title = f"Detection within {report.deadline_s:g} s: ground truth against detections"
    if wide:
        table = Table(title=title)
        for col in ("scenario", "player", "profile", "kind", "flagged", "first (s)", "detectors", "sanction"):
            table.add_column(col)
        for s in report.scenarios:
            for c in s.cheaters:
                table.add_row(s.scenario, c.name, c.profile, "blatant" if c.blatant else "subtle",
                              "yes" if c.flagged else "NO",
                              "-" if c.first_s is None else f"{c.first_s:.1f}", ", ".join(c.detectors) or "-", c.sanction)
            for name, ping, loss, labels in s.false_positives:
                table.add_row(s.scenario, name, "honest", f"{ping:g} ms, {loss:.0%} loss", "FALSE POSITIVE", "-",
                              ", ".join(labels), "")
        return table
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True,
                  caption="B/S: blatant/subtle cheat; FP: honest bot flagged (link: ping ms/loss)")
    rows: list[tuple[str, str, str, str, Text, str, str, str]] = []
    for s in report.scenarios:
        scenario = s.scenario.removeprefix(CHEAT_PREFIX)
        for c in s.cheaters:
            rows.append((scenario, c.name, c.profile, "B" if c.blatant else "S",
                         Text("yes", style="green") if c.flagged else Text("NO", style="bold red"),
                         "-" if c.first_s is None else f"{c.first_s:.1f}", _labels_brief(c.detectors),
                         _SANCTION_SHORT.get(c.sanction, c.sanction)))
        for name, ping, loss, labels in s.false_positives:
            rows.append((scenario, name, "honest", f"{ping:g}/{loss:.0%}", Text("FP", style="bold red"), "-",
                         _labels_brief(labels), ""))
    for col, justify, fixed in (("scenario", "left", True), ("player", "left", True), ("profile", "left", True),
                                ("kind", "left", True), ("flag", "left", True), ("1st s", "right", True),
                                ("detectors", "left", False), ("sanction", "left", True)):
        i = len(table.columns)
        width = max((Text(r[i]).cell_len if isinstance(r[i], str) else r[i].cell_len for r in rows), default=0)
        if fixed:
            table.add_column(col, justify=justify, no_wrap=True, min_width=width)  # type: ignore[arg-type]
        else:
            table.add_column(col, justify=justify, ratio=1, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    return table


_SANCTION_SHORT = {"none": "-", "permanent_ban": "permban", "temp_ban": "tempban"}


def _labels_brief(labels: Sequence[str]) -> str:
    """The first ``detector:kind`` and how many others (``-`` for none)."""
    if not labels:
        return "-"
    return labels[0] + (f" +{len(labels) - 1}" if len(labels) > 1 else "")
