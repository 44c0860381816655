"""The lab's report: one self-contained HTML page from ``aggregate.summarize``'s dict.

The page answers, in this order: which cheats are caught, how fast, and at what cost to honest
players. Figures are matplotlib (Agg) PNGs embedded as base64 ``data:`` URIs, so the file can be
mailed or archived alone; there is no script and no external reference. An optional second
summary (e.g. tuned tolerances on held-out seeds) is shown next to the first in every table and
figure. Units follow the summary: times in seconds, rates shown per 100 player-hours.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from testbed.lab.metrics import rate

__all__ = ["render_html"]

GOOD = 0.95
"""A detection fraction at or above this is green (and the profile counts as caught)."""
FAIR = 0.80
"""At or above this (and below GOOD) amber; below it red."""
HEADLINE_DEADLINE_S = 120.0
"""The deadline of the headline's "caught" count (s); the largest deadline if the summary lacks it."""

_PRIMARY = "#1f5fa8"
_SECONDARY = "#d9730d"
_DPI = 100
_FIG_W_IN = 11.4

_CSS = """
:root { --ink:#1d2530; --muted:#5b6573; --line:#d9dee5; --bg:#f6f8fa; --good:#dff3e0; --good-ink:#17622a;
        --fair:#fdf1cf; --fair-ink:#7a5500; --bad:#fadcdb; --bad-ink:#9b1c1c; --accent:#1f5fa8; --accent2:#d9730d; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--ink);
       font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.sub { color: var(--muted); margin: 0 0 18px; }
.run-a { color: var(--accent); font-weight: 600; } .run-b { color: var(--accent2); font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(3, 1fr); gap: 14px; }
.card { background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
.card .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.card .big { font-size: 26px; font-weight: 700; margin: 4px 0 2px; }
.card .big small { font-size: 14px; font-weight: 500; color: var(--muted); }
.card .detail { font-size: 13px; color: var(--muted); }
.card .cmp { margin-top: 8px; padding-top: 6px; border-top: 1px dashed var(--line); font-size: 13px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 4px; font-size: 13px; }
th, td { padding: 5px 7px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.ci { text-align: center; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.ci small, td.num small { color: inherit; opacity: .75; }
.nw, td.prof { white-space: nowrap; } td.prof .bin { color: var(--muted); font-size: 12px; }
tr.cmp td { border-top: none; }
tr.first td { border-top: 1px solid #b9c1cc; }
td.g { background: var(--good); color: var(--good-ink); } td.a { background: var(--fair); color: var(--fair-ink); }
td.r { background: var(--bad); color: var(--bad-ink); } td.na { color: var(--muted); }
.tag { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 3px; margin-left: 4px;
       background: #e8ebf0; color: var(--muted); vertical-align: 1px; }
.tag.blatant { background: #f1e4f7; color: #6b2d83; }
.dets { color: var(--muted); font-size: 12px; }
img.fig { display: block; max-width: 100%; height: auto; margin: 8px 0; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.note { color: var(--muted); font-size: 12.5px; }
footer { margin-top: 36px; padding-top: 10px; border-top: 2px solid var(--line); color: var(--muted); font-size: 12.5px; }
footer dt { font-weight: 600; color: var(--ink); margin-top: 6px; } footer dd { margin: 0 0 0 0; }
"""


# --- formatting -----------------------------------------------------------------------------


def _pct(x: float | None, decimals: int = 0) -> str:
    """A fraction as a percentage (HTML) that never rounds a miss up to 100 % or a hit down to 0 %."""
    if x is None:
        return "–"
    v = 100.0 * x
    if v == 0.0:
        return "0"
    step = 10.0 ** -decimals
    if 0.0 < v < step / 2:
        return f"&lt;{step:.{decimals}f}"
    if 100.0 - step / 2 <= v < 100.0:
        return f"&gt;{100.0 - step:.{decimals}f}"
    return f"{v:.{decimals}f}"


def _decimals(p: Mapping[str, Any], fine: bool) -> int:
    # Whole percent hides everything in a small fraction (an honest 1.5 % [0.7-2.8] would read
    # 2 % [0-3]); detection fractions stay whole so that their columns read alike.
    return 1 if fine and float(p["high"]) < 0.10 else 0


def _bounds(p: Mapping[str, Any], fine: bool) -> str:
    """The interval in percent, rounded outward so that it still covers what it covered."""
    dec = _decimals(p, fine)
    scale = 10.0 ** dec
    low = math.floor(100.0 * scale * float(p["low"]) + 1e-9) / scale
    high = math.ceil(100.0 * scale * float(p["high"]) - 1e-9) / scale

    def f(v: float) -> str:
        return "0" if v == 0 else f"{v:.{dec}f}"
    return f"{f(low)}–{f(high)}"


def _prop_html(p: Mapping[str, Any] | None, *, fine: bool = False) -> str:
    """``k/n`` as "estimate% [low-high]" (HTML); ``fine``: a decimal when the whole interval is below 10 %."""
    if p is None or p.get("estimate") is None:
        return "–"
    return f"<b>{_pct(p['estimate'], _decimals(p, fine))}%</b> <small>[{_bounds(p, fine)}]</small>"


def _prop_text(p: Mapping[str, Any] | None, *, fine: bool = False) -> str:
    if p is None or p.get("estimate") is None:
        return "–"
    return f'<span class="nw">{_pct(p["estimate"], _decimals(p, fine))}% [{_bounds(p, fine)}]</span>'


def _grade(p: Mapping[str, Any] | None) -> str:
    if p is None or p.get("estimate") is None:
        return "na"
    e = float(p["estimate"])
    return "g" if e >= GOOD else "a" if e >= FAIR else "r"


def _num(x: float | None) -> str:
    """Three significant figures at most, no exponent."""
    if x is None or not math.isfinite(x):
        return "–"
    a = abs(x)
    if a == 0:
        return "0"
    if a < 0.1:
        return f"{x:.3f}"
    if a < 10:
        return f"{x:.2f}"
    if a < 100:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def _per100(r: Mapping[str, Any] | None) -> tuple[float | None, float | None, float | None]:
    if r is None:
        return None, None, None
    def s(v: Any) -> float | None:
        return None if v is None else 100.0 * float(v)
    return s(r.get("per_hour")), s(r.get("low")), s(r.get("high"))


def _rate_html(r: Mapping[str, Any] | None) -> str:
    est, lo, hi = _per100(r)
    if est is None:
        return "–"
    return f"<b>{_num(est)}</b> <small>[{_num(lo)}–{_num(hi)}]</small>"


def _secs(x: float | None) -> str:
    if x is None:
        return "–"
    if x < 10:
        return f"{x:.1f} s"
    return f"{x:,.0f} s"


def _hours(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def _wall(x: float) -> str:
    return f"{x:.0f} s" if x < 120 else f"{x / 60:.0f} min" if x < 7200 else f"{x / 3600:.1f} h"


def _dkey(d: float) -> str:
    d = float(d)
    return str(int(d)) if d.is_integer() else repr(d)


def _conf(summary: Mapping[str, Any]) -> str:
    return f"{float(summary.get('confidence', 0.95)):.0%}"


def _headline_deadline(summary: Mapping[str, Any]) -> float | None:
    ds = [float(d) for d in summary.get("deadlines_s", [])]
    if not ds:
        return None
    return HEADLINE_DEADLINE_S if HEADLINE_DEADLINE_S in ds else max(ds)


def _bin_name(p: Mapping[str, Any]) -> str:
    return f"{p['profile']} {p['param_bin']}".strip()


def _run_labels(summary: Mapping[str, Any], compare: Mapping[str, Any] | None) -> tuple[str, str]:
    a = str(summary.get("run", "A"))
    if compare is None:
        return a, ""
    b = str(compare.get("run", "B"))
    return (f"{a} (A)", f"{b} (B)") if a == b else (a, b)


# --- figures --------------------------------------------------------------------------------


def _png(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, facecolor="white")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig: Figure, alt: str) -> str:
    return f'<img class="fig" alt="{escape(alt)}" src="data:image/png;base64,{_png(fig)}">'


def _style(ax: Axes) -> None:
    ax.grid(True, color="#e3e7ec", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8.5)


def _grid(n: int, ncols: int, row_h_in: float) -> tuple[Figure, list[Axes]]:
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = Figure(figsize=(_FIG_W_IN, row_h_in * nrows), layout="constrained")
    axes = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _profiles_by_name(summary: Mapping[str, Any] | None) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for p in (summary or {}).get("profiles", []):
        out.setdefault(str(p["profile"]), []).append(p)
    return out


def _fig_ttd(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str | None:
    a, b = _profiles_by_name(summary), _profiles_by_name(compare)
    names = list(dict.fromkeys([*a, *b]))
    if not names:
        return None
    deadlines = [float(d) for d in summary.get("deadlines_s", [])]
    xmax = 1.6 * max(deadlines) if deadlines else None
    ncols = 4
    fig, axes = _grid(len(names), ncols, 2.35)
    cmap = {0: "#1f5fa8", 1: "#2a9d8f", 2: "#8e5cc9", 3: "#c2410c", 4: "#6b7280", 5: "#0e7490"}
    for i, (ax, name) in enumerate(zip(axes, names, strict=True)):
        bins = list(dict.fromkeys([str(p["param_bin"]) for p in a.get(name, []) + b.get(name, [])]))
        seen: set[str] = set()
        for src, style in ((a, "-"), (b, "--")):
            for p in src.get(name, []):
                t = p["any"]["ttd"]
                if not t["times_s"]:
                    continue
                colour = cmap[bins.index(str(p["param_bin"])) % len(cmap)] if len(bins) > 1 else (
                    _PRIMARY if style == "-" else _SECONDARY)
                # One legend entry per bin; the run is told by the line style (figure legend).
                label = (str(p["param_bin"]) or "all") if style == "-" or str(p["param_bin"]) not in seen else "_"
                seen.add(str(p["param_bin"]))
                ax.step(np.r_[0.0, t["times_s"]], 100.0 * np.r_[0.0, t["fraction"]], where="post",
                        linestyle=style, color=colour, linewidth=1.6, label=label)
        for d in deadlines:
            ax.axvline(d, color="#9aa3ae", linewidth=0.7, linestyle=":")
        blatant = any(p.get("blatant") for p in a.get(name, []) + b.get(name, []))
        ax.set_title(f"{name}{'' if blatant else '  (subtle)'}", fontsize=10)
        ax.set_ylim(-2, 102)
        if xmax is not None:
            ax.set_xlim(0, xmax)
        ax.set_xlabel("seconds since connect", fontsize=8.5)
        if i % ncols == 0:
            ax.set_ylabel("% detected", fontsize=8.5)
        _style(ax)
        if len(bins) > 1:
            ax.legend(fontsize=7, loc="lower right", frameon=True, framealpha=0.9, edgecolor="none", handlelength=1.6)
    if compare is not None:
        _run_legend(fig, labels)
    return _img(fig, "Kaplan-Meier time to first detection per cheat profile")


def _link_label(link: str, row: Mapping[str, Any]) -> str:
    ping, loss = row.get("ping_ms"), row.get("loss")
    if ping is None or loss is None:
        return link
    return f"{link} · {float(ping):.0f} ms, {100.0 * float(loss):.3g}% loss"


def _run_legend(fig: Figure, labels: tuple[str, str]) -> None:
    handles = [Line2D([], [], color="#3b4350", linestyle="-", linewidth=1.6),
               Line2D([], [], color="#3b4350", linestyle="--", linewidth=1.6)]
    fig.legend(handles, list(labels), loc="outside upper center", ncols=2, fontsize=8.5, frameon=False)


def _errbars(ax: Axes, rows: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
             y: np.ndarray, colour: str, label: str, marker: str) -> None:
    est, lo, hi = [], [], []
    for r in rows:
        e, low, high = _per100(key(r))
        est.append(np.nan if e is None else e)
        lo.append(np.nan if e is None else e - (low or 0.0))
        hi.append(np.nan if e is None or high is None else high - e)
    ax.errorbar(est, y, xerr=[lo, hi], fmt=marker, color=colour, ecolor=colour, elinewidth=1.4, capsize=3,
                markersize=5, label=label)


def _merge_rows(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]] | None, key: str) -> tuple[
        list[str], dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    ra = {str(r[key]): r for r in a}
    rb = {str(r[key]): r for r in (b or [])}
    return list(dict.fromkeys([*ra, *rb])), ra, rb


def _honest_rows(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, section: str, field: str) -> tuple[
        list[str], dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """Rows of ``honest[section]`` of both summaries by key. A detector absent from one run had no
    honest alarm there: it gets a zero row (with its upper bound) rather than a blank."""
    ha, hb = summary["honest"], (compare or {}).get("honest")
    keys, ra, rb = _merge_rows(ha.get(section, []), (hb or {}).get(section), field)
    if section == "by_detector":
        def zero(h: Mapping[str, Any], k: str) -> Mapping[str, Any]:
            return {field: k, "detections": 0, "player_matches": 0, "rate": rate(0, float(h["player_hours"])).to_json()}
        ra = {k: ra.get(k) or zero(ha, k) for k in keys}
        if hb is not None:
            rb = {k: rb.get(k) or zero(hb, k) for k in keys}
    return keys, ra, rb


def _fig_honest(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str | None:
    panels = [("by link class", "by_link", "link", "alarms"), ("by skill", "by_skill", "skill", "alarms"),
              ("by detector", "by_detector", "label", "rate")]
    merged = [(title, *_honest_rows(summary, compare, k, field), value)
              for title, k, field, value in panels]
    if not any(keys for _, keys, _, _, _ in merged):
        return None
    tallest = max(len(keys) for _, keys, _, _, _ in merged)
    fig = Figure(figsize=(_FIG_W_IN, 1.2 + 0.32 * max(tallest, 3)), layout="constrained")
    axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 0.8, 1.2]})
    for ax, (title, keys, ra, rb, value) in zip(axes, merged, strict=True):
        n = len(keys)
        y = np.arange(n, dtype=float)
        off = 0.17 if compare is not None else 0.0
        _errbars(ax, [ra.get(k, {}) for k in keys], lambda r, v=value: r.get(v), y - off, _PRIMARY, labels[0], "o")
        if compare is not None:
            _errbars(ax, [rb.get(k, {}) for k in keys], lambda r, v=value: r.get(v), y + off, _SECONDARY, labels[1], "s")
        ax.set_yticks(y, [_link_label(k, ra.get(k) or rb.get(k) or {}) if value == "alarms" and title == "by link class"
                          else k for k in keys])
        # A panel with nothing in it (no honest alarm by any detector) keeps a one-row frame.
        ax.set_ylim(max(n, 1) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.set_title(f"honest false alarms {title}", fontsize=10)
        ax.set_xlabel(f"alarms per 100 player-hours ({_conf(summary)} CI)", fontsize=8.5)
        _style(ax)
        ax.tick_params(axis="y", labelsize=8)
    if compare is not None:
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside upper center", ncols=2, fontsize=8.5, frameon=False)
    return _img(fig, "Honest false alarms per 100 player-hours by link class, skill and detector")


def _roc_xy(r: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    return list(r.get("fpr", [])), list(r.get("tpr", []))


def _fig_roc(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str | None:
    da = {str(d["stat"]): d for d in summary.get("detectors", [])}
    db = {str(d["stat"]): d for d in (compare or {}).get("detectors", [])}
    stats_ = list(dict.fromkeys([*da, *db]))
    if not stats_:
        return None
    ncols = 4
    fig, axes = _grid(len(stats_), ncols, 2.7)
    for i, (ax, stat) in enumerate(zip(axes, stats_, strict=True)):
        ax.plot([0, 1], [0, 1], color="#b8c0ca", linewidth=0.8, linestyle=":")
        for src, colour, style, run in ((da, _PRIMARY, "-", labels[0]), (db, _SECONDARY, "--", labels[1])):
            d = src.get(stat)
            if d is None:
                continue
            fpr, tpr = _roc_xy(d["roc"])
            auc = d["roc"].get("auc")
            text = f"AUC {auc:.3f}" if auc is not None else "AUC –"
            if compare is not None:
                text = f"{run}: {text}"
            if fpr:
                ax.plot(fpr, tpr, color=colour, linestyle=style, linewidth=1.6, label=text)
            else:
                ax.plot([], [], color=colour, linestyle=style, label=text)
            op = d.get("at_threshold_1") or {}
            if op.get("tpr") is not None and op.get("fpr") is not None:
                ax.plot([op["fpr"]], [op["tpr"]], marker="o", markersize=5, color=colour, markerfacecolor="white",
                        markeredgewidth=1.5)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(stat, fontsize=9.5)
        ax.set_xlabel("false positive fraction", fontsize=8)
        if i % ncols == 0:
            ax.set_ylabel("true positive fraction", fontsize=8)
        _style(ax)
        ax.legend(fontsize=7.5, loc="lower right", frameon=False)
    return _img(fig, "ROC curve per detector statistic")


# --- sections -------------------------------------------------------------------------------


def _headline(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str:
    def alarms(s: Mapping[str, Any]) -> tuple[str, str]:
        h = s["honest"]
        est, lo, hi = _per100(h["alarms"])
        big = f"{_num(est)} <small>per 100 player-hours</small>"
        detail = (f"{_conf(s)} CI {_num(lo)}–{_num(hi)} · {h['alarms']['count']:,} alarms in "
                  f"{_hours(h['player_hours'])} honest player-hours<br>players flagged {_prop_text(h['flagged'], fine=True)}"
                  f" · reached monitor {_prop_text(h['monitor'], fine=True)}")
        return big, detail

    def caught(s: Mapping[str, Any]) -> tuple[str, str]:
        d = _headline_deadline(s)
        profiles = s.get("profiles", [])
        if d is None or not profiles:
            return "–", "no cheat profiles in this corpus"
        within = [(p, p["any"]["within"].get(_dkey(d))) for p in profiles]
        ok = [p for p, w in within if w and w.get("estimate") is not None and w["estimate"] >= GOOD]
        missed = sorted(((w["estimate"] if w and w.get("estimate") is not None else -1.0, _bin_name(p))
                         for p, w in within if p not in ok))
        text = ", ".join(f"{escape(n)} ({_pct(e) if e >= 0 else '–'}%)" for e, n in missed[:6])
        more = f" and {len(missed) - 6} more" if len(missed) > 6 else ""
        big = f"{len(ok)} / {len(profiles)} <small>profile bins caught ≥ {GOOD:.0%} within {_dkey(d)} s</small>"
        return big, (f"Below: {text}{more}" if missed else "Every profile bin is caught.")

    def corpus(s: Mapping[str, Any]) -> tuple[str, str]:
        c = s["corpus"]
        big = f"{c['matches']:,} <small>matches</small>"
        detail = (f"{c['players']:,} player-matches · {_hours(c['player_hours'])} player-hours<br>"
                  f"{c['honest_player_matches']:,} honest ({_hours(c['honest_player_hours'])} h) · "
                  f"{c['cheater_engagements']:,} cheater engagements<br>built in {_wall(c['build_wall_s'])} of match wall time")
        return big, detail

    cards = []
    for label, fn in (("Cost to honest players: false alarms", alarms), ("Cheats caught", caught), ("Corpus", corpus)):
        big, detail = fn(summary)
        html = (f'<div class="card"><div class="label">{label}</div><div class="big">{big}</div>'
                f'<div class="detail">{detail}</div>')
        if compare is not None:
            cbig, cdetail = fn(compare)
            cbig = cbig.replace("<small>", "").replace("</small>", "")
            html += (f'<div class="cmp"><span class="run-b">{escape(labels[1])}:</span> {cbig}'
                     f'<div class="detail">{cdetail}</div></div>')
        cards.append(html + "</div>")
    return f'<section class="cards">{"".join(cards)}</section>'


def _top_detectors(p: Mapping[str, Any], n: int = 3) -> str:
    dets = list(p["any"].get("detectors", {}).items())[:n]
    engagements = max(int(p.get("engagements", 0)), 1)
    if not dets:
        return "none"
    return ", ".join(f"{escape(label)} {_pct(k / engagements)}%" for label, k in dets)


def _profile_table(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str:
    deadlines = [float(d) for d in summary.get("deadlines_s", [])]
    hd = _headline_deadline(summary)
    pa = {(p["profile"], p["param_bin"]): p for p in summary.get("profiles", [])}
    pb = {(p["profile"], p["param_bin"]): p for p in (compare or {}).get("profiles", [])}
    keys = list(dict.fromkeys([*pa, *pb]))
    if not keys:
        return '<p class="note">No cheating players in this corpus.</p>'
    head = ["<th>Profile / parameter bin</th>"]
    if compare is not None:
        head.append("<th>Run</th>")
    head.append('<th class="num" title="cheater engagements (player-matches)">Eng.</th>')
    head += [f'<th class="num" style="text-align:center">≤ {_dkey(d)} s</th>' for d in deadlines]
    if hd is not None:
        head.append(f'<th style="text-align:center">Monitor ≤ {_dkey(hd)} s</th>')
    head.append('<th class="num">Median / p90</th><th>Top detectors (share of engagements)</th>')
    rows = []
    for key in keys:
        variants = [(labels[0], pa.get(key), "run-a")] + ([(labels[1], pb.get(key), "run-b")] if compare is not None else [])
        for i, (run, p, cls) in enumerate(variants):
            tr_cls = "first" if i == 0 else "cmp"
            cells = []
            if i == 0:
                span = f' rowspan="{len(variants)}"' if len(variants) > 1 else ""
                blatant = next((v.get("blatant") for _, v, _ in variants if v is not None), False)
                tag = '<span class="tag blatant">blatant</span>' if blatant else '<span class="tag">subtle</span>'
                bin_ = f'<div class="bin">{escape(str(key[1]))}</div>' if key[1] else ""
                cells.append(f'<td class="prof"{span}><b>{escape(str(key[0]))}</b>{tag}{bin_}</td>')
            if compare is not None:
                cells.append(f'<td class="{cls}">{escape(run)}</td>')
            if p is None:
                cols = len(deadlines) + (1 if hd is not None else 0) + 3
                cells.append(f'<td colspan="{cols}" class="na">not in this run</td>')
                rows.append(f'<tr class="{tr_cls}">{"".join(cells)}</tr>')
                continue
            cells.append(f'<td class="num">{int(p["engagements"]):,}</td>')
            for d in deadlines:
                w = p["any"]["within"].get(_dkey(d))
                cells.append(f'<td class="ci {_grade(w)}">{_prop_html(w)}</td>')
            if hd is not None:
                w = p["monitor"]["within"].get(_dkey(hd))
                cells.append(f'<td class="ci {_grade(w)}">{_prop_html(w)}</td>')
            t = p["any"]["ttd"]
            cells.append(f'<td class="num">{_secs(t.get("median_s"))} / {_secs(t.get("p90_s"))}</td>')
            cells.append(f'<td class="dets">{_top_detectors(p)}</td>')
            rows.append(f'<tr class="{tr_cls}">{"".join(cells)}</tr>')
    return f'<table><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _honest_table(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str],
                  section: str, field: str, title: str, extra: Callable[[Mapping[str, Any]], str] | None = None,
                  extra_head: str = "") -> str:
    keys, ra, rb = _honest_rows(summary, compare, section, field)
    if not keys:
        return ""
    head = f"<th>{title}</th>{extra_head}"
    if section == "by_detector":
        head += '<th class="num">Detections</th><th class="num">Players flagged</th>'
    else:
        head += '<th class="num">Player-matches</th><th class="num">Player-hours</th><th class="num">Flagged</th>'
    head += f'<th class="num">Alarms / 100 h{" (" + escape(labels[0]) + ")" if compare is not None else ""}</th>'
    if compare is not None:
        head += f'<th class="num">Alarms / 100 h ({escape(labels[1])})</th>'
    value = "rate" if section == "by_detector" else "alarms"
    rows = []
    for k in keys:
        r = ra.get(k)
        cells = [f"<td>{escape(k)}</td>"]
        if extra is not None:
            cells.append(extra(r or rb.get(k) or {}))
        if r is None:
            cells.append(f'<td class="na num" colspan="{2 if section == "by_detector" else 3}">–</td>')
        elif section == "by_detector":
            cells.append(f'<td class="num">{r["detections"]:,}</td><td class="num">{r["player_matches"]:,}</td>')
        else:
            cells.append(f'<td class="num">{r["player_matches"]:,}</td><td class="num">{_hours(r["player_hours"])}</td>'
                         f'<td class="num">{_prop_html(r["flagged"], fine=True)}</td>')
        cells.append(f'<td class="num">{_rate_html((r or {}).get(value))}</td>')
        if compare is not None:
            cells.append(f'<td class="num">{_rate_html((rb.get(k) or {}).get(value))}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _link_extra(r: Mapping[str, Any]) -> str:
    def v(x: Any, scale: float = 1.0, unit: str = "") -> str:
        if x is None:
            return "–"
        y = float(x) * scale
        return f"{y:.0f}{unit}" if y >= 10 or y == round(y) else f"{y:.1f}{unit}"
    return (f'<td class="num">{v(r.get("ping_ms"), unit=" ms")}</td><td class="num">{v(r.get("loss"), 100.0, "%")}</td>'
            f'<td class="num">{v(r.get("jitter_ms"), unit=" ms")}</td>')


def _roc_table(summary: Mapping[str, Any], compare: Mapping[str, Any] | None, labels: tuple[str, str]) -> str:
    da = {str(d["stat"]): d for d in summary.get("detectors", [])}
    db = {str(d["stat"]): d for d in (compare or {}).get("detectors", [])}
    stats_ = list(dict.fromkeys([*da, *db]))
    if not stats_:
        return ""
    head = ('<th>Statistic</th><th class="num">AUC</th>'
            + (f'<th class="num">AUC ({escape(labels[1])})</th>' if compare is not None else "")
            + '<th class="num">TPR at FPR ≤ 1%</th><th class="num">At threshold 1: TPR / FPR</th>'
              '<th class="num">Cheaters / honest</th><th>Best separated profiles (AUC)</th>')
    rows = []
    for stat in stats_:
        d = da.get(stat)
        if d is None:
            rows.append(f'<tr><td>{escape(stat)}</td><td class="na" colspan="6">not in {escape(labels[0])}</td></tr>')
            continue
        auc = d["roc"].get("auc")
        cells = [f"<td>{escape(stat)}</td>", f'<td class="num"><b>{_num(auc)}</b></td>']
        if compare is not None:
            cells.append(f'<td class="num">{_num((db.get(stat) or {}).get("roc", {}).get("auc"))}</td>')
        t01 = next((v for k, v in d.items() if k.startswith("tpr_at_fpr_")), None)
        op = d.get("at_threshold_1") or {}
        cells.append(f'<td class="num">{_pct(t01)}%</td>' if t01 is not None else '<td class="num">–</td>')
        cells.append(f'<td class="num">{_pct(op.get("tpr"))}% / {_pct(op.get("fpr"))}%</td>')
        cells.append(f'<td class="num">{d["roc"].get("n_pos", 0):,} / {d["roc"].get("n_neg", 0):,}</td>')
        best = sorted(((a, p) for p, a in (d.get("by_profile_auc") or {}).items() if a is not None), reverse=True)[:4]
        cells.append('<td class="dets">' + (", ".join(f"{escape(p)} {a:.2f}" for a, p in best) or "–") + "</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _footnote(summary: Mapping[str, Any]) -> str:
    deadlines = ", ".join(f"{_dkey(d)} s" for d in summary.get("deadlines_s", []))
    conf = float(summary.get("confidence", 0.95))
    excluded = ", ".join(summary.get("exclude_kinds", [])) or "none"
    roc_d = summary.get("roc_deadline_s", 120.0)
    items = [
        ("Deadline", f"seconds since the player's own connect ({deadlines}). “Caught within d” counts the cheater "
                     "player-matches with a first detection at or before d, among those detected by d or that played at "
                     "least d; one that left earlier undetected is excluded (its outcome at d is unknown)."),
        ("Engagement, player-match", "one bot in one match; a cheater's player-match is an engagement. Profile bins split a "
                                     "profile by its varied parameter."),
        ("Time to detect", "Kaplan-Meier estimate of the time from connect to the first detection; players never detected "
                           "are censored at the end of their play. “–” for p90 (or the median) means the curve never reaches "
                           "90 % (50 %) during follow-up."),
        ("Monitor", "the sanction policy's recommendation reached heightened monitoring or above."),
        ("Player-hour", "one hour of one player's play (connect to disconnect); honest player-hours are the exposure of "
                        "the false alarm rates."),
        ("Alarm", "one detection of an honest player. Link-quality notices are not alarms "
                  f"(excluded kinds: {escape(excluded)}). A player is flagged by its first alarm."),
        ("Intervals", f"{conf:.0%} two-sided, exact: Clopper-Pearson for fractions, Garwood (Poisson) for rates per "
                      "player-hour. Cell colours read the point estimate: "
                      f"green ≥ {GOOD:.0%}, amber ≥ {FAIR:.0%}, red below."),
        ("ROC", f"one score per player-match: the maximum of the detector's trace (1.0 = its alarm threshold) within "
                f"the first {_dkey(float(roc_d))} s of play, 0 without a trace; positives are cheaters, negatives honest "
                "players. The open circle marks the alarm threshold 1.0."),
    ]
    body = "".join(f"<dt>{t}</dt><dd>{d}</dd>" for t, d in items)
    return f"<footer><h3>Definitions</h3><dl>{body}</dl></footer>"


def _section(title: str, *parts: str | None) -> str:
    return f"<h2>{title}</h2>" + "".join(p for p in parts if p)


def render_html(summary: Mapping[str, Any], *, title: str, compare: Mapping[str, Any] | None = None) -> str:
    """A self-contained HTML page (str) of ``summary`` (``aggregate.summarize``'s dict).

    ``compare``, another summary (e.g. tuned tolerances on held-out seeds), is shown beside the
    first in every card, table and figure. The page embeds its figures as base64 PNGs and
    references nothing outside itself.
    """
    labels = _run_labels(summary, compare)
    conf = _conf(summary)
    sub = f'run <span class="run-a">{escape(labels[0])}</span>'
    if compare is not None:
        sub += f' compared with <span class="run-b">{escape(labels[1])}</span> (dashed / orange in figures)'
    c = summary["corpus"]
    sub += f" · {c['matches']:,} matches, {_hours(c['player_hours'])} player-hours"
    ttd = _fig_ttd(summary, compare, labels)
    honest_fig = _fig_honest(summary, compare, labels)
    roc_fig = _fig_roc(summary, compare, labels)
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{escape(title)}</h1><p class=\"sub\">{sub}</p>",
        _headline(summary, compare, labels),
        _section("Which cheats are caught, and how fast",
                 f'<p class="note">Share of cheater engagements detected within each deadline ({conf} CI), the share '
                 'reaching monitor, and the Kaplan-Meier median / 90th percentile time to the first detection.</p>',
                 _profile_table(summary, compare, labels)),
        _section("Time to detect", '<p class="note">Fraction of engagements detected by each time since connect '
                 "(Kaplan-Meier); dotted lines mark the deadlines.</p>", ttd or '<p class="note">No cheaters.</p>'),
        _section("Cost to honest players",
                 f'<p class="note">False alarms per 100 honest player-hours, with {conf} Garwood intervals.</p>',
                 honest_fig,
                 "<h3>By link class</h3>",
                 _honest_table(summary, compare, labels, "by_link", "link", "Link", _link_extra,
                               '<th class="num">Ping</th><th class="num">Loss</th><th class="num">Jitter</th>'),
                 # Two runs' columns do not fit half a page: stack the tables then.
                 f'<div class="{"grid2" if compare is None else "stack"}"><div><h3>By skill</h3>',
                 _honest_table(summary, compare, labels, "by_skill", "skill", "Skill"),
                 "</div><div><h3>By detector</h3>",
                 _honest_table(summary, compare, labels, "by_detector", "label", "Detector") or
                 '<p class="note">No alarms.</p>',
                 "</div></div>"),
        _section("Detector statistics (ROC)", roc_fig or '<p class="note">No score traces.</p>',
                 _roc_table(summary, compare, labels)),
        _footnote(summary),
        "</main></body></html>",
    ]
    return "\n".join(parts)
