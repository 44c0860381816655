"""Detector evaluation against ground truth: which cheat profiles are flagged, by what, and when.

``referee evaluate`` plays labelled scenarios in virtual time (by default every built-in
``cheat_<profile>`` scenario: one cheater among honest players on mixed links) and reports, per
cheating bot, whether it was flagged within the deadline (60 simulated seconds by default), by
which detectors, and the match time of its first detection; and, per scenario, every honest bot
that was flagged at all (a false positive). Matches run in parallel worker processes; each is
deterministic for its seed, so the report is too.

"Flagged" means at least one Detection, whatever the sanction policy then recommends: the policy
weighs evidence before anything is applied, but a detection on an honest player is already a
false alarm someone has to review.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from bots.profiles import HONEST, PROFILES

from testbed.report import MatchResult, PlayerResult
from testbed.scenario import Scenario, builtin_scenario, builtin_scenario_names

__all__ = [
    "CheaterOutcome",
    "EvaluationReport",
    "ScenarioOutcome",
    "builtin_cheat_scenarios",
    "cheat_scenarios",
    "evaluate",
    "render_evaluation",
    "summarize_match",
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


def _labels(p: PlayerResult) -> tuple[str, ...]:
    return tuple(d.label for d in p.detections)


def summarize_match(result: MatchResult, deadline_s: float) -> ScenarioOutcome:
    """The outcome of one played scenario."""
    cheaters = []
    false_positives = []
    honest = 0
    for p in result.players:
        first = p.first_detection_s
        if p.profile == HONEST:
            honest += 1
            if p.detections:
                false_positives.append((p.name, p.ping_ms, p.loss, _labels(p)))
            continue
        cheaters.append(CheaterOutcome(
            scenario=result.scenario, name=p.name, profile=p.profile,
            blatant=p.profile in PROFILES and PROFILES[p.profile].blatant,
            flagged=first is not None and first <= deadline_s, first_s=first, detectors=_labels(p),
            sanction=p.sanction, shots=p.shots,
        ))
    return ScenarioOutcome(scenario=result.scenario, map=result.map, duration_s=result.duration_s,
                           wall_s=result.wall_s, honest=honest, cheaters=tuple(cheaters),
                           false_positives=tuple(false_positives))


def cheat_scenarios() -> tuple[str, ...]:
    """Names of the built-in one-cheater scenarios."""
    return tuple(n for n in builtin_scenario_names() if n.startswith(CHEAT_PREFIX))


def _play(scenario: Scenario) -> MatchResult:
    # Imported here so that worker processes pay for the match machinery only when they play.
    from testbed.match import run_virtual

    return run_virtual(scenario)


def evaluate(
    scenarios: Sequence[Scenario],
    *,
    deadline_s: float = 60.0,
    jobs: int | None = None,
    on_done: Callable[[ScenarioOutcome], None] | None = None,
) -> EvaluationReport:
    """Play ``scenarios`` (in ``jobs`` worker processes; default: one per CPU) and report.

    Outcomes are in the order of ``scenarios``, whatever order the matches finish in.
    """
    workers = max(1, min(jobs or os.cpu_count() or 1, len(scenarios) or 1))
    outcomes: list[ScenarioOutcome | None] = [None] * len(scenarios)
    if workers == 1:
        for i, sc in enumerate(scenarios):
            outcomes[i] = summarize_match(_play(sc), deadline_s)
            if on_done is not None:
                on_done(outcomes[i])
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_play, sc): i for i, sc in enumerate(scenarios)}
            for fut in as_completed(futures):
                i = futures[fut]
                outcomes[i] = summarize_match(fut.result(), deadline_s)
                if on_done is not None:
                    on_done(outcomes[i])
    return EvaluationReport(deadline_s=deadline_s, scenarios=tuple(o for o in outcomes if o is not None))


def builtin_cheat_scenarios(profiles: Any = None) -> list[Scenario]:
    """Every built-in ``cheat_<profile>`` scenario, parsed."""
    return [builtin_scenario(n, profiles) for n in cheat_scenarios()]


def render_evaluation(report: EvaluationReport) -> Table:
    """One row per cheating bot, then one per flagged honest bot."""
    table = Table(title=f"Detection within {report.deadline_s:g} s: ground truth against detections")
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
