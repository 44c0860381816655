"""The corpus's numbers: counts and times from SQL (DuckDB), statistics from ``metrics``.

``summarize`` reads one tolerance set (``run``) of a lab corpus (schema: ``testbed.lab.store``)
and returns a JSON-able dict, the one the HTML report and ``referee lab report --json`` show.
Units: times in seconds (``*_s``, on the player's own clock: seconds since its connect), exposure
in hours (``*_h``, ``player_hours``), rates in events per player-hour.

Vocabulary:

* a *player-match* is one ``players`` row (one bot in one match); a cheater's player-match is an
  *engagement*; honest player-matches are the negatives.
* a player is *flagged* when it has at least one detection (link-quality notices excluded) and
  reaches *monitor* when the sanction policy's recommendation reached ``SanctionLevel.MONITOR`` or
  above (``decisions.level``: a level name, any case, or its number).
* an *alarm* is one detection of an honest player; rates are per player-hour of play.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np

from anticheat.judgement.sanctions import SanctionConfig, SanctionLevel
from bots.skill import SkillLevel
from testbed.lab.metrics import detected_within, proportion, rate, roc, time_to_detect, tpr_at_fpr

__all__ = ["LINK_NOTICES", "deadline_key", "run_match_ids", "summarize"]

LINK_NOTICES: frozenset[str] = SanctionConfig().link_kinds
"""Detection kinds describing the connection rather than cheating (the sanction policy's
``link_kinds``: ``desync``, ``unplayable_link``). They are not alarms and flag nobody. No detector
in ``anticheat/`` emits them yet; the default follows the policy so that one that does is
handled the way the policy handles it."""

_ROC_FPR = 0.01
_ROC_MAX_POINTS = 200
_LEVELS = tuple((level.name.lower(), int(level)) for level in SanctionLevel)
_SKILL_ORDER = {s.value: i for i, s in enumerate(SkillLevel)}


def deadline_key(deadline_s: float) -> str:
    """The JSON key of a deadline: ``"30"`` for 30 s, ``"7.5"`` for 7.5 s."""
    d = float(deadline_s)
    return str(int(d)) if d.is_integer() else repr(d)


def run_match_ids(con: duckdb.DuckDBPyConnection, run: str) -> list[int]:
    """Matches with at least one detection, decision or trace row under ``run``, by id.

    A run re-detected on part of the corpus (e.g. held-out seeds) should be summarised over its
    own matches (``summarize(..., match_ids=...)``). This is a heuristic: a match in which the
    run produced no row at all is indistinguishable from one it never processed.
    """
    rows = con.execute(
        "SELECT match_id FROM detections WHERE run = $run UNION SELECT match_id FROM decisions WHERE run = $run "
        "UNION SELECT match_id FROM traces WHERE run = $run ORDER BY 1", {"run": run}).fetchall()
    return [int(r[0]) for r in rows]


def _ctes(match_filter: bool) -> str:
    keep = "list_contains($ids, match_id)" if match_filter else "true"
    levels = ", ".join(f"('{name}', {value})" for name, value in _LEVELS)
    return f"""
    WITH p AS (
        SELECT match_id, name, profile, coalesce(cheat, profile <> 'honest') AS cheat, coalesce(blatant, false) AS blatant,
               skill, link, ping_ms, jitter_ms, loss, coalesce(param_bin, '') AS param_bin, coalesce(play_s, 0.0) AS play_s
        FROM players WHERE {keep}),
    m AS (SELECT * FROM matches WHERE {keep}),
    d AS (
        SELECT match_id, name, play_s, coalesce(detector, '?') || ':' || coalesce(kind, '?') AS label
        FROM detections WHERE run = $run AND NOT list_contains($excl, coalesce(kind, '')) AND {keep}),
    lv(level_name, level_value) AS (VALUES {levels}),
    dec AS (
        SELECT x.match_id, x.name, x.play_s, coalesce(lv.level_value, TRY_CAST(x.level AS INTEGER)) AS level_value
        FROM decisions x LEFT JOIN lv ON lower(trim(x.level)) = lv.level_name
        WHERE x.run = $run AND {keep}),
    fd AS (SELECT match_id, name, min(play_s) AS det_s, count(*) AS n_det FROM d GROUP BY match_id, name),
    fl AS (
        SELECT match_id, name, min(play_s) FILTER (WHERE level_value >= {int(SanctionLevel.MONITOR)}) AS monitor_s,
               max(level_value) AS top_level
        FROM dec GROUP BY match_id, name),
    b AS (
        SELECT p.*, fd.det_s, coalesce(fd.n_det, 0) AS n_det, fl.monitor_s, coalesce(fl.top_level, 0) AS top_level
        FROM p LEFT JOIN fd USING (match_id, name) LEFT JOIN fl USING (match_id, name))
    """


class _Query:
    """The summary's SQL over one run, one match selection, one set of excluded kinds."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run: str, exclude_kinds: Collection[str],
                 match_ids: Iterable[int] | None) -> None:
        self.con = con
        self.params: dict[str, Any] = {"run": run, "excl": sorted(str(k) for k in exclude_kinds)}
        if match_ids is not None:
            self.params["ids"] = sorted({int(i) for i in match_ids})
        self.prefix = _ctes(match_ids is not None)

    def rows(self, sql: str, **extra: Any) -> list[tuple[Any, ...]]:
        text = self.prefix + sql
        params = {k: v for k, v in {**self.params, **extra}.items() if f"${k}" in text}
        return self.con.execute(text, params).fetchall()

    def numpy(self, sql: str, **extra: Any) -> dict[str, np.ndarray]:
        text = self.prefix + sql
        params = {k: v for k, v in {**self.params, **extra}.items() if f"${k}" in text}
        return self.con.execute(text, params).fetchnumpy()


def _natural(text: str) -> tuple[tuple[int, float | str], ...]:
    # "strength=0.25" < "strength=1" < "strength=10" (numbers compare as numbers).
    parts = re.split(r"(-?\d+(?:\.\d+)?)", text)
    return tuple((0, float(p)) if i % 2 else (1, p) for i, p in enumerate(parts) if p != "")


def _detection_block(players: Sequence[Mapping[str, Any]], key: str, deadlines_s: Sequence[float],
                     detectors: Mapping[str, int], confidence: float) -> dict[str, Any]:
    first = [p[key] for p in players]
    exposure = [p["e"] for p in players]
    return {
        "within": {deadline_key(d): detected_within(first, exposure, d, confidence).to_json() for d in deadlines_s},
        "ttd": time_to_detect(first, exposure).to_json(),
        "detectors": dict(sorted(detectors.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _profiles(q: _Query, deadlines_s: Sequence[float], confidence: float) -> list[dict[str, Any]]:
    groups = q.rows("""
        SELECT profile, param_bin, bool_or(blatant), count(*), sum(play_s) / 3600.0,
               list({'d': det_s, 'm': monitor_s, 'e': play_s})
        FROM b WHERE cheat GROUP BY profile, param_bin""")
    flagged_by: dict[str, dict[tuple[str, str], dict[str, int]]] = {"any": defaultdict(dict), "monitor": defaultdict(dict)}
    # Detectors behind a monitor decision: those that had flagged the player by the time it was reached.
    for block, cond in (("any", "true"), ("monitor", "b.monitor_s IS NOT NULL AND d.play_s <= b.monitor_s")):
        for profile, param_bin, label, n in q.rows(f"""
                SELECT profile, param_bin, label, count(*) FROM (
                    SELECT DISTINCT b.profile, b.param_bin, d.match_id, d.name, d.label
                    FROM d JOIN b USING (match_id, name) WHERE b.cheat AND {cond})
                GROUP BY ALL"""):
            flagged_by[block][(profile, param_bin)][label] = int(n)
    out = []
    for profile, param_bin, blatant, n, play_h, players in sorted(groups, key=lambda g: (g[0], _natural(g[1]))):
        key = (profile, param_bin)
        out.append({
            "profile": profile, "param_bin": param_bin, "blatant": bool(blatant), "engagements": int(n),
            "play_h": float(play_h or 0.0),
            "any": _detection_block(players, "d", deadlines_s, flagged_by["any"].get(key, {}), confidence),
            "monitor": _detection_block(players, "m", deadlines_s, flagged_by["monitor"].get(key, {}), confidence),
        })
    return out


def _honest_group(q: _Query, column: str, extra: str, confidence: float) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    rows = q.rows(f"""
        SELECT {column}{extra}, count(*), sum(play_s) / 3600.0, count(*) FILTER (WHERE n_det > 0), sum(n_det)
        FROM b WHERE NOT cheat GROUP BY {column}""")
    out = []
    for row in rows:
        *keys, n, hours, flagged, alarms = row
        hours = float(hours or 0.0)
        out.append((tuple(keys), {"player_matches": int(n), "player_hours": hours,
                                  "flagged": proportion(int(flagged), int(n), confidence).to_json(),
                                  "alarms": rate(int(alarms or 0), hours, confidence).to_json()}))
    return out


def _honest(q: _Query, confidence: float) -> dict[str, Any]:
    n, hours, flagged, monitor, above_log, kick, alarms = q.rows(f"""
        SELECT count(*), coalesce(sum(play_s), 0) / 3600.0, count(*) FILTER (WHERE n_det > 0),
               count(*) FILTER (WHERE top_level >= {int(SanctionLevel.MONITOR)}),
               count(*) FILTER (WHERE top_level > {int(SanctionLevel.LOG)}),
               count(*) FILTER (WHERE top_level >= {int(SanctionLevel.KICK)}), coalesce(sum(n_det), 0)
        FROM b WHERE NOT cheat""")[0]
    n, hours = int(n), float(hours)
    by_link = [{"link": link, "ping_ms": _float(ping), "loss": _float(loss), "jitter_ms": _float(jitter), **v}
               for (link, ping, loss, jitter), v in _honest_group(
                   q, "link", ", avg(ping_ms), avg(loss), avg(jitter_ms)", confidence)]
    by_link.sort(key=lambda r: (_nan_last(r["ping_ms"]), _nan_last(r["loss"]), _nan_last(r["jitter_ms"]), str(r["link"])))
    by_skill = [{"skill": skill, **v} for (skill,), v in _honest_group(q, "skill", "", confidence)]
    by_skill.sort(key=lambda r: (_SKILL_ORDER.get(str(r["skill"]), len(_SKILL_ORDER)), str(r["skill"])))
    by_detector = [
        {"label": label, "detections": int(k), "player_matches": int(pm), "rate": rate(int(k), hours, confidence).to_json()}
        for label, k, pm in q.rows("""
            SELECT label, count(*), count(DISTINCT (match_id, name)) FROM d JOIN p USING (match_id, name)
            WHERE NOT p.cheat GROUP BY label ORDER BY count(*) DESC, label""")
    ]
    return {
        "player_matches": n, "player_hours": hours,
        "flagged": proportion(int(flagged), n, confidence).to_json(),
        "monitor": proportion(int(monitor), n, confidence).to_json(),
        "above_log": proportion(int(above_log), n, confidence).to_json(),
        "kick": proportion(int(kick), n, confidence).to_json(),
        "alarms": rate(int(alarms), hours, confidence).to_json(),
        "first_alarms": rate(int(flagged), hours, confidence).to_json(),
        "by_link": by_link, "by_skill": by_skill, "by_detector": by_detector,
    }


def _detectors(q: _Query, roc_deadline_s: float) -> list[dict[str, Any]]:
    # The trace is a step function sampled on change, so its maximum over [0, deadline] is the
    # maximum of the rows sampled by then; a player without rows scores 0.
    cols = q.numpy("""
        , s AS (SELECT match_id, name, stat, max(value) AS score FROM traces
                WHERE run = $run AND play_s <= $deadline AND match_id IN (SELECT match_id FROM p)
                GROUP BY match_id, name, stat),
        st AS (SELECT DISTINCT stat FROM traces WHERE run = $run AND match_id IN (SELECT match_id FROM p))
        SELECT st.stat, p.profile, p.cheat, coalesce(s.score, 0.0)::DOUBLE AS score
        FROM st CROSS JOIN p LEFT JOIN s ON s.stat = st.stat AND s.match_id = p.match_id AND s.name = p.name
        ORDER BY st.stat, p.profile""", deadline=float(roc_deadline_s))
    stat_col = np.asarray(cols["stat"], dtype=object)
    profile_col = np.asarray(cols["profile"], dtype=object)
    cheat_col = np.asarray(cols["cheat"], dtype=bool)
    score_col = np.asarray(cols["score"], dtype=np.float64)
    out = []
    for stat in dict.fromkeys(stat_col.tolist()):
        sel = stat_col == stat
        cheat, score, profiles = cheat_col[sel], score_col[sel], profile_col[sel]
        pos, neg = score[cheat], score[~cheat]
        curve = roc(pos, neg)
        tpr1 = _mean_or_none(pos >= 1.0)
        fpr1 = _mean_or_none(neg >= 1.0)
        out.append({
            "stat": stat,
            "roc": curve.to_json(_ROC_MAX_POINTS),
            f"tpr_at_fpr_{_ROC_FPR}": tpr_at_fpr(curve, _ROC_FPR),
            "at_threshold_1": {"tpr": tpr1, "fpr": fpr1},
            "by_profile_auc": {str(pr): roc(score[cheat & (profiles == pr)], neg).auc
                               for pr in sorted(set(profiles[cheat].tolist()))},
        })
    return out


def _mean_or_none(flags: np.ndarray) -> float | None:
    return float(flags.mean()) if len(flags) else None


def _float(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _nan_last(x: float | None) -> float:
    return math.inf if x is None else x


def summarize(con: duckdb.DuckDBPyConnection, run: str = "base", deadlines_s: Sequence[float] = (30, 60, 120, 300),
              exclude_kinds: Collection[str] = LINK_NOTICES, *, roc_deadline_s: float = 120.0,
              match_ids: Iterable[int] | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """The numbers of tolerance set ``run`` over the corpus in ``con`` (a JSON-able dict).

    Args:
        con: a connection to a lab corpus (``LabStore.con``; read-only is enough).
        run: the tolerance set whose detections, decisions and traces are read.
        deadlines_s: detection deadlines (s since the player's connect), keys of ``within``.
        exclude_kinds: detection kinds that are neither alarms nor flags (link-quality notices).
        roc_deadline_s: a player's score for a trace statistic is the trace's maximum within this
            many seconds of its connect (s).
        match_ids: summarise only these matches (e.g. a run stored for held-out seeds; see
            ``run_match_ids``); None: every match in the corpus.
        confidence: coverage of every interval.

    Returns:
        ``{"run", "corpus", "deadlines_s", "roc_deadline_s", "exclude_kinds", "confidence",
        "profiles", "honest", "detectors"}``: see the module docstring for the vocabulary and
        ``metrics`` for the interval blocks (``Proportion.to_json``, ``Rate.to_json`` in events per
        player-hour, ``TimeToDetect.to_json``). Per profile bin, ``any`` reads the first detection
        and ``monitor`` the first decision at MONITOR or above; ``any.detectors`` counts the
        engagements each ``detector:kind`` flagged at any time, ``monitor.detectors`` those it had
        flagged by the time monitor was reached. ``honest.above_log`` (level > LOG) equals
        ``honest.monitor`` with today's levels; ``honest.kick`` counts KICK or above (a
        recommendation needing review). Link-driven KICKs count there: decisions do not say why.
        ``honest.by_detector`` lists the labels with at least one honest alarm.

    Raises:
        ValueError: a detection or a monitor decision after the end of its player's play (a
            corpus bug).
    """
    deadlines = [float(d) for d in deadlines_s]
    q = _Query(con, run, exclude_kinds, match_ids)
    matches, wall_s = q.rows("SELECT count(*), coalesce(sum(wall_s), 0) FROM m")[0]
    players, hours, honest_hours, honest_n, engagements = q.rows("""
        SELECT count(*), coalesce(sum(play_s), 0) / 3600.0, coalesce(sum(play_s) FILTER (WHERE NOT cheat), 0) / 3600.0,
               count(*) FILTER (WHERE NOT cheat), count(*) FILTER (WHERE cheat)
        FROM p""")[0]
    return {
        "run": run,
        "corpus": {"matches": int(matches), "players": int(players), "player_hours": float(hours),
                   "honest_player_hours": float(honest_hours), "honest_player_matches": int(honest_n),
                   "cheater_engagements": int(engagements), "build_wall_s": float(wall_s)},
        "deadlines_s": [int(d) if d.is_integer() else d for d in deadlines],
        "roc_deadline_s": float(roc_deadline_s),
        "exclude_kinds": sorted(exclude_kinds),
        "confidence": confidence,
        "profiles": _profiles(q, deadlines, confidence),
        "honest": _honest(q, confidence),
        "detectors": _detectors(q, roc_deadline_s),
    }
