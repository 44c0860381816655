"""The sanction policy's kind weights, measured on a corpus: one calibrated verdict.

For every ``detector.kind`` a corpus run produced, its rate per player-hour among honest players
and among the cheaters of the profile it is most typical of gives a likelihood ratio, and with a prior prevalence of cheaters the posterior
probability that one such detection came from a cheater: the kind's weight in the sanction policy
(``anticheat.judgement.sanctions``, ``kind_weights``). The honest rate is taken at the upper end
of its 95 % Garwood interval, so a kind honest players never produced still gets a finite ratio
that grows with the honest hours behind it; the cheaters' rate is taken at the lower end, so a kind
seen a handful of times is not over-trusted. The cheaters' rate is the profile's own (its hours
only): a corpus's mixture of cheat profiles is a design choice, not the prevalence of each cheat,
so diluting a teleport detection by the hours of aimbots would say nothing about teleports. A kind
no cheater produced weighs the floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from anticheat.judgement.sanctions import SanctionConfig, count_log_ratio
from testbed.lab.metrics import rate
from testbed.lab.store import LabStore

__all__ = ["KindCalibration", "calibrate", "findings_to_conclude", "kind_weights_toml", "posterior"]

WEIGHT_FLOOR = 0.001
"""The least a kind weighs (a zero weight would be refused by the policy and hide the kind)."""


@dataclass(frozen=True, slots=True)
class KindCalibration:
    """One detection kind's figures: detections among honest players (``honest``) in
    ``honest_h`` player-hours and among all cheaters (``cheat``) in ``cheat_h``; ``honest_high``
    (the honest rate's upper 95 % Garwood bound) and ``cheat_low`` (the highest lower bound of any
    one profile's rate, over that profile's hours) per hour; ``profile_rates`` the lower bounds of
    every profile that makes it faster than honest players (the conclusive test's mixture); ``lr`` their ratio; ``weight`` the
    posterior at the prior; ``to_kick``: how many findings within the policy's conclusive window
    make it conclusive on their own (None: never, the cheats produce it no faster than honest
    players)."""

    kind: str
    honest: int
    honest_h: float
    cheat: int
    cheat_h: float
    honest_high: float
    cheat_low: float
    lr: float
    weight: float
    to_kick: int | None
    profile_rates: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain figures (rates per player-hour)."""
        return {"kind": self.kind, "honest": self.honest, "honest_h": round(self.honest_h, 3), "cheat": self.cheat,
                "cheat_h": round(self.cheat_h, 3), "honest_high_per_h": self.honest_high,
                "cheat_low_per_h": self.cheat_low, "lr": self.lr, "weight": self.weight,
                "to_kick": self.to_kick,
                "profile_low_per_h": list(self.profile_rates)}


def posterior(lr: float, prior: float) -> float:
    """P(cheater | one detection) for a likelihood ratio ``lr`` at prevalence ``prior``."""
    odds = lr * prior / (1.0 - prior)
    return odds / (1.0 + odds)


MAX_TO_KICK = 1000
"""Counts above this are reported as never concluding."""


def findings_to_conclude(honest_per_h: float, cheats_per_h: float | Sequence[float], config: SanctionConfig,
                         kind: str = "") -> int | None:
    """The fewest findings of one kind within ``config.conclusive_window_s`` whose likelihood
    ratio (``anticheat.judgement.sanctions.count_log_ratio``: Poisson, the cheat rates an equal
    mixture) makes the policy's conclusive test pass (None: no count does). A repeat kind
    (``config.repeat_kinds``) counts once, so it concludes at 1 or never."""
    cheats = [cheats_per_h] if isinstance(cheats_per_h, (int, float)) else list(cheats_per_h)
    cheats = [c for c in cheats if c > honest_per_h]
    if not cheats or not honest_per_h > 0.0:
        return None
    window_h = config.conclusive_window_s / 3600.0
    p, goal = config.conclusive_prior, config.conclusive_weight
    need = math.log(goal / (1.0 - goal)) - math.log(p / (1.0 - p))
    repeat = kind in config.repeat_kinds
    for n in range(1, 2 if repeat else MAX_TO_KICK + 1):
        if count_log_ratio(n, honest_per_h, cheats, window_h, repeat) >= need:
            return n
    return None


def calibrate(store: LabStore, run: str = "base", prior: float = 0.02,
              config: SanctionConfig | None = None) -> list[KindCalibration]:
    """Every detection kind of ``run`` (link kinds excepted: they never weigh as cheating), its
    likelihood ratio and weight at cheater prevalence ``prior`` (0..1)."""
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior!r}")
    cfg = config or SanctionConfig()
    honest_h = store.con.execute(
        "SELECT coalesce(sum(play_s) FILTER (WHERE NOT cheat), 0) / 3600.0 FROM players").fetchone()[0]
    profile_h = dict(store.con.execute(
        "SELECT profile, sum(play_s) / 3600.0 FROM players WHERE cheat GROUP BY 1").fetchall())
    cheat_h = sum(profile_h.values())
    honest_counts: dict[tuple[str, str], int] = {}
    by_profile: dict[tuple[str, str], dict[str, int]] = {}
    for detector, kind, cheat, profile, n in store.con.execute(
            "SELECT d.detector, d.kind, p.cheat, p.profile, count(*) FROM detections d "
            "JOIN players p USING (match_id, name) WHERE d.run = ? GROUP BY 1, 2, 3, 4", [run]).fetchall():
        if cheat:
            by_profile.setdefault((detector, kind), {})[profile] = int(n)
        else:
            honest_counts[(detector, kind)] = honest_counts.get((detector, kind), 0) + int(n)
    out = []
    for detector, kind in sorted(set(honest_counts) | set(by_profile)):
        if kind in cfg.link_kinds:
            continue
        n_honest = honest_counts.get((detector, kind), 0)
        honest_high = rate(n_honest, honest_h).high
        if honest_high is None or not honest_high > 0.0:
            continue  # no honest exposure: nothing to calibrate against
        profiles = by_profile.get((detector, kind), {})
        # The cheat the kind is most typical of: the highest lower bound among the profiles.
        every = sorted(rate(n, profile_h[p]).low for p, n in profiles.items() if profile_h.get(p))
        cheat_low = max(every, default=0.0)
        lows = [low for low in every if low > honest_high]  # the profiles that make it faster than honest players
        lr = cheat_low / honest_high
        weight = max(WEIGHT_FLOOR, min(1.0, posterior(lr, prior)))
        out.append(KindCalibration(
            kind=f"{detector}.{kind}", honest=n_honest, honest_h=honest_h, cheat=sum(profiles.values()),
            cheat_h=cheat_h, honest_high=honest_high, cheat_low=cheat_low, lr=lr, weight=weight,
            to_kick=findings_to_conclude(honest_high, lows, cfg, f"{detector}.{kind}"), profile_rates=tuple(lows),
        ))
    return out


def kind_weights_toml(kinds: list[KindCalibration], comment: str = "") -> str:
    """A ``--tolerances`` file setting ``[sanctions] kind_weights`` and ``kind_rates`` (the rates
    behind the conclusive test: kinds no cheater produced are left out of it)."""
    lines = [f"# {line}" for line in comment.splitlines()] if comment else []
    ordered = sorted(kinds, key=lambda k: k.kind)
    lines.append("[sanctions]")
    lines.append("kind_weights = [")
    for k in ordered:
        lines.append(f'    ["{k.kind}", {k.weight:.6g}],  # LR {k.lr:.3g}: honest {k.honest} in '
                     f"{k.honest_h:.1f} h, cheaters {k.cheat} in {k.cheat_h:.1f} h")
    lines.append("]")
    lines.append("# (kind, honest detections per player-hour: upper 95 % bound, cheaters': lower bound)")
    lines.append("kind_rates = [")
    for k in ordered:
        if k.cheat_low > 0.0:
            lines.append(f'    ["{k.kind}", {k.honest_high:.6g}, {k.cheat_low:.6g}],')
    lines.append("]")
    lines.append("# (kind, one cheat profile's rate per player-hour, lower bound): the conclusive test's mixture")
    lines.append("kind_profile_rates = [")
    for k in ordered:
        for r in k.profile_rates:
            lines.append(f'    ["{k.kind}", {r:.6g}],')
    lines.append("]")
    return "\n".join(lines) + "\n"
