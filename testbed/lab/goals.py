"""The detection goals a run is judged by, from a corpus's stored rows: one table, with intervals.

Six figures, each with its 95 % interval and the exposure behind it:

1. honest players: cheating detections per player-hour (link-quality kinds aside, Garwood
   interval) and the players whose sanction went above LOG;
2. smooth (humanised) aimbots at strength >= 0.5, with and without the bait filter: detected within
   60, 120 and 300 s of the cheater's own connect (Clopper-Pearson), and the weaker strengths as a
   curve;
3. triggerbots and wallhacks within 120 s;
4. every blatant profile within 30 s (the worst profile is the figure);
5. AimDetect's per-kill classifier: the shipped model's held-out rates (out-of-fold by match on its
   training corpus) and, when kill rows are given, its rates on this corpus's kills;
6. sanctions: blatant cheaters recommended at least KICK within 60 s; honest players above LOG.

:func:`pool_goals` adds the figures of several corpora up (counts and exposures, then the
intervals again), so held-out corpora built on different seeds read as one sample.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.lab.aggregate import summarize
from testbed.lab.metrics import proportion, rate
from testbed.lab.store import LabStore

__all__ = ["goal_rows", "goals", "pool_goals"]

_SUBTLE_AIM = ("smooth_aimbot", "smooth_aimbot_no_bait")
_TRIGGER_WALL = ("triggerbot", "wallhack")
"""Goal 3's profiles: these and their labelled variants (``triggerbot_no_bait``, ``triggerbot_80ms``...)."""
_STRENGTH = re.compile(r"strength=([0-9.]+)")


def _strength(param_bin: str) -> float | None:
    m = _STRENGTH.search(param_bin or "")
    return float(m.group(1)) if m else None


def _pooled(profiles: Sequence[Mapping[str, Any]], key: str, deadline: str) -> dict[str, Any]:
    k = sum(p[key]["within"][deadline]["k"] for p in profiles)
    n = sum(p[key]["within"][deadline]["n"] for p in profiles)
    return proportion(k, n).to_json() if n else {"k": 0, "n": 0}


def _kick_within(store: LabStore, run: str, deadline_s: float) -> dict[str, tuple[int, int]]:
    """Per blatant profile: (engagements recommended KICK or above within ``deadline_s`` of play,
    engagements)."""
    rows = store.con.execute(
        """SELECT p.profile, count(*) AS n,
                  count(*) FILTER (WHERE EXISTS (
                      SELECT 1 FROM decisions d WHERE d.run = ? AND d.match_id = p.match_id AND d.name = p.name
                      AND d.level IN ('kick', 'temp_ban_review', 'permanent_ban') AND d.play_s <= ?)) AS k
           FROM players p WHERE p.cheat AND p.blatant AND p.match_id IN (
               SELECT DISTINCT match_id FROM decisions WHERE run = ?)
           GROUP BY 1 ORDER BY 1""", [run, deadline_s, run]).fetchall()
    return {profile: (int(k), int(n)) for profile, n, k in rows}


def _honest_above_log(store: LabStore, run: str) -> tuple[int, int, dict[str, int]]:
    """(honest player-matches whose recommendation went above LOG, honest player-matches, the
    highest levels reached and how often)."""
    rows = store.con.execute(
        """SELECT p.match_id, p.name, max(CASE d.level WHEN 'monitor' THEN 1 WHEN 'kick' THEN 2
                   WHEN 'temp_ban_review' THEN 3 WHEN 'permanent_ban' THEN 4 ELSE 0 END)
           FROM players p LEFT JOIN decisions d ON d.match_id = p.match_id AND d.name = p.name AND d.run = ?
           WHERE NOT p.cheat GROUP BY 1, 2""", [run]).fetchall()
    names = ["log", "monitor", "kick", "temp_ban_review", "permanent_ban"]
    levels: dict[str, int] = {}
    for _, _, top in rows:
        level = names[int(top or 0)]
        levels[level] = levels.get(level, 0) + 1
    above = sum(1 for _, _, top in rows if (top or 0) > 0)
    return above, len(rows), levels


def _kill_block(kill_rates: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("tp", "fn", "fp", "tn", "tpr", "fpr", "auc", "n", "fpr_by_group", "tpr_by_group", "tpr_at_fpr")
    return json.loads(json.dumps({k: kill_rates[k] for k in keep if k in kill_rates}, default=float))


def goals(store: LabStore, run: str = "base", kill_rates: Mapping[str, Any] | None = None,
          model: Any | None = None) -> dict[str, Any]:
    """The six goals' figures for ``run`` (plain JSON-able data). ``kill_rates``: the shipped
    model's rates on this corpus's kills (``anticheat.detectors.aimdetect.model.evaluate``);
    ``model``: the model whose held-out rates to report."""
    summary = summarize(store.con, run)
    honest = summary["honest"]
    exclude = tuple(summary["exclude_kinds"])
    marks = ", ".join("?" for _ in exclude) or "''"
    n_alarms = store.con.execute(
        f"""SELECT count(*) FROM detections d JOIN players p USING (match_id, name)
            WHERE d.run = ? AND NOT p.cheat AND d.kind NOT IN ({marks})""", [run, *exclude]).fetchone()[0]
    above, honest_n, levels = _honest_above_log(store, run)
    profiles = summary["profiles"]
    strong = [p for p in profiles if p["profile"] in _SUBTLE_AIM and (_strength(p["param_bin"]) or 0) >= 0.5]
    weak = sorted((p for p in profiles if p["profile"] in _SUBTLE_AIM and (_strength(p["param_bin"]) or 1) < 0.5),
                  key=lambda p: _strength(p["param_bin"]) or 0)
    trigger_wall = [p for p in profiles if p["profile"].startswith(_TRIGGER_WALL)]
    blatant = [p for p in profiles if p["blatant"]]
    kicks = _kick_within(store, run, 60.0)
    out: dict[str, Any] = {
        "run": run,
        "corpus": summary["corpus"],
        "1_honest": {
            "player_hours": honest["player_hours"], "player_matches": honest["player_matches"],
            "cheating_detections": rate(int(n_alarms), honest["player_hours"]).to_json(),
            "flagged_players": honest["flagged"],
            "above_log": proportion(above, honest_n).to_json(), "highest_levels": levels,
        },
        "2_smooth_aim_strength_ge_0.5": {
            d: _pooled(strong, "any", d) for d in ("60", "120", "300")},
        "2_smooth_aim_weaker": [
            {"profile": p["profile"], "bin": p["param_bin"], **{d: p["any"]["within"][d] for d in ("60", "120", "300")}}
            for p in weak],
        "3_trigger_wallhack_120": {p["profile"]: p["any"]["within"]["120"] for p in trigger_wall}
        | {"pooled": _pooled(trigger_wall, "any", "120")},
        "4_blatant_30": {p["profile"]: p["any"]["within"]["30"] for p in blatant}
        | {"pooled": _pooled(blatant, "any", "30")},
        "6_blatant_kick_60": {profile: proportion(k, n).to_json() for profile, (k, n) in kicks.items()}
        | {"pooled": proportion(sum(k for k, _ in kicks.values()), sum(n for _, n in kicks.values())).to_json()},
        "6_honest_above_log": proportion(above, honest_n).to_json(),
    }
    if model is not None:
        out["5_aimdetect_model"] = {"tpr": model.tpr, "fpr": model.fpr, "fpr_worst_group": model.fpr_worst,
                                    "auc": model.auc, "measured": model.meta.get("measured", "held-out"),
                                    "tp": model.tp, "fn": model.fn, "fp": model.fp, "tn": model.tn}
    if kill_rates is not None:
        out["5_aimdetect_this_corpus"] = _kill_block(kill_rates)
    return out


def _pool(values: Sequence[Any]) -> Any:
    """One figure from the same figure of several corpora: proportions and rates from their summed
    counts and exposures, numbers summed, mappings key by key, the weaker-strength curve per bin."""
    first = values[0]
    if isinstance(first, Mapping):
        if "k" in first and "n" in first:
            return proportion(sum(v["k"] for v in values), sum(v["n"] for v in values)).to_json()
        if "count" in first and "exposure_h" in first:
            return rate(sum(v["count"] for v in values), sum(v["exposure_h"] for v in values)).to_json()
        keys = dict.fromkeys(k for v in values for k in v)
        return {k: _pool([v[k] for v in values if k in v]) for k in keys}
    if isinstance(first, list):
        bins: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for v in values:
            for item in v:
                bins.setdefault((item["profile"], item["bin"]), []).append(item)
        return [{"profile": p, "bin": b, **{d: _pool([i[d] for i in items]) for d in ("60", "120", "300")}}
                for (p, b), items in sorted(bins.items(), key=lambda kv: (_strength(kv[0][1]) or 0, kv[0]))]
    if isinstance(first, bool) or not isinstance(first, (int, float)):
        return first if all(v == first for v in values) else list(values)
    return sum(values)


def pool_goals(figures: Sequence[Mapping[str, Any]],
               kill_rates: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The figures of :func:`goals` over several corpora as one sample. Every interval is computed
    again from the summed counts and exposures; ``run`` becomes the list of runs when they differ.
    The shipped model's held-out rates are the first corpus's (one model); per-corpus kill rates are
    not poolable, so ``kill_rates`` (the model's rates on the corpora's kills taken together) takes
    their place."""
    if not figures:
        raise ValueError("nothing to pool")
    keys = [k for k in figures[0] if k not in ("5_aimdetect_model", "5_aimdetect_this_corpus")]
    out = {k: _pool([f[k] for f in figures if k in f]) for k in keys}
    if "5_aimdetect_model" in figures[0]:
        out["5_aimdetect_model"] = figures[0]["5_aimdetect_model"]
    if kill_rates is not None:
        out["5_aimdetect_this_corpus"] = _kill_block(kill_rates)
    return out


def _pct(p: Mapping[str, Any] | None) -> str:
    if not p or not p.get("n"):
        return "-"
    return f"{p['k']}/{p['n']} = {_percent(p['estimate'])}% [{_percent(p['low'])}-{_percent(p['high'])}]"


def _percent(x: float) -> str:
    """A share (0..1) as a percentage: whole numbers, but one decimal under 1 % (an interval of
    0/844 reads [0-0.4], not [0-0])."""
    return f"{100 * x:.1f}" if 0.0 < x < 0.01 else f"{100 * x:.0f}"


def _per100h(r: Mapping[str, Any]) -> str:
    if r.get("per_hour") is None:
        return "-"
    return f"{r['count']} = {100 * r['per_hour']:.1f} [{100 * r['low']:.1f}-{100 * r['high']:.1f}]"


def goal_rows(g: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(goal, figure) lines of one run's :func:`goals`, for a table."""
    h = g["1_honest"]
    rows = [
        (f"1 honest cheating detections /100 h ({h['player_hours']:.1f} h)", _per100h(h["cheating_detections"])),
        ("1 honest players flagged", _pct(h["flagged_players"])),
    ]
    for d in ("60", "120", "300"):
        rows.append((f"2 smooth aim >= 0.5 within {d} s", _pct(g["2_smooth_aim_strength_ge_0.5"][d])))
    for w in g["2_smooth_aim_weaker"]:
        rows.append((f"2 {w['profile']} {w['bin']} within 120 s", _pct(w["120"])))
    trigger_wall = g["3_trigger_wallhack_120"]
    for name in sorted(trigger_wall, key=lambda k: k == "pooled"):
        rows.append((f"3 {name} within 120 s", _pct(trigger_wall[name])))
    worst = min((p for k, p in g["4_blatant_30"].items() if k != "pooled" and p.get("n")),
                key=lambda p: p["estimate"], default=None)
    rows.append(("4 blatant within 30 s (pooled)", _pct(g["4_blatant_30"]["pooled"])))
    rows.append(("4 blatant within 30 s (worst profile)", _pct(worst)))
    if "5_aimdetect_model" in g:
        m = g["5_aimdetect_model"]
        rows.append(("5 AimDetect per kill, model's held-out", f"TPR {m['tpr']:.3f} at FPR {m['fpr']:.3f}"))
    if "5_aimdetect_this_corpus" in g:
        m = g["5_aimdetect_this_corpus"]
        rows.append((f"5 AimDetect per kill, this corpus ({m['n']})", f"TPR {m['tpr']:.3f} at FPR {m['fpr']:.3f}"))
        if "tpr_at_fpr" in m:
            rows.append(("5 AimDetect ROC, this corpus", f"TPR {m['tpr_at_fpr']['0.06']:.3f} at FPR <= 0.06; "
                                                         f"AUC {m['auc']:.3f}"))
    rows.append(("6 blatant at KICK+ within 60 s", _pct(g["6_blatant_kick_60"]["pooled"])))
    rows.append(("6 honest above LOG", _pct(g["6_honest_above_log"])))
    return rows
