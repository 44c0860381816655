"""testbed.lab.report: a self-contained page showing the summary's profiles and numbers."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from testbed.lab.aggregate import summarize
from testbed.lab.metrics import detected_within, proportion, rate, roc, time_to_detect, tpr_at_fpr
from testbed.lab.report import render_html
from testbed.lab.store import LabStore

DEADLINES = (30, 60, 120, 300)


def _block(first: list[float | None], exposure: list[float], detectors: dict[str, int]) -> dict[str, Any]:
    return {"within": {str(d): detected_within(first, exposure, d).to_json() for d in DEADLINES},
            "ttd": time_to_detect(first, exposure).to_json(), "detectors": detectors}


def _profile(profile: str, param_bin: str, blatant: bool, first: list[float | None], exposure: list[float],
             detectors: dict[str, int]) -> dict[str, Any]:
    return {"profile": profile, "param_bin": param_bin, "blatant": blatant, "engagements": len(first),
            "play_h": sum(exposure) / 3600, "any": _block(first, exposure, detectors),
            "monitor": _block([None if t is None else t + 10 for t in first], [e + 10 for e in exposure], {})}


def _honest_row(key: str, value: str, n: int, hours: float, flagged: int, alarms: int) -> dict[str, Any]:
    return {key: value, "player_matches": n, "player_hours": hours, "flagged": proportion(flagged, n).to_json(),
            "alarms": rate(alarms, hours).to_json()}


def synthetic_summary(run: str = "base", *, speed_caught: int = 38) -> dict[str, Any]:
    """A plausible summary: three profile bins, 600 honest player-hours with 3 alarms, two ROC stats."""
    lock = _profile("lock_aimbot", "", True, [float(5 + i) for i in range(40)], [600.0] * 40,
                    {"iw4m:snap": 40, "aimstats:aim_stats": 31})
    speed_first: list[float | None] = [float(20 + 3 * i) for i in range(speed_caught)]
    speed = _profile("speedhack", "factor=1.5", True, speed_first + [None] * (40 - speed_caught), [600.0] * 40,
                     {"movement:timer": speed_caught})
    smooth = _profile("smooth_aimbot", "strength=0.25", False, [float(100 + 20 * i) if i % 2 else None for i in range(20)],
                      [600.0] * 20, {"aimstats:aim_stats": 10})
    honest = {
        "player_matches": 3600, "player_hours": 600.0, "flagged": proportion(3, 3600).to_json(),
        "monitor": proportion(1, 3600).to_json(), "above_log": proportion(1, 3600).to_json(),
        "kick": proportion(0, 3600).to_json(), "alarms": rate(3, 600.0).to_json(), "first_alarms": rate(3, 600.0).to_json(),
        "by_link": [{**_honest_row("link", "lan", 1800, 300.0, 0, 0), "ping_ms": 5.0, "loss": 0.0, "jitter_ms": 0.5},
                    {**_honest_row("link", "mobile", 1800, 300.0, 3, 3), "ping_ms": 180.0, "loss": 0.04, "jitter_ms": 40.0}],
        "by_skill": [_honest_row("skill", "average", 1800, 300.0, 1, 1), _honest_row("skill", "pro", 1800, 300.0, 2, 2)],
        "by_detector": [{"label": "aimstats:aim_stats", "detections": 3, "player_matches": 3, "rate": rate(3, 600.0).to_json()}],
    }
    curve = roc([0.5, 1.2, 2.0, 3.0], [0.1, 0.2, 0.3, 0.9, 1.1])
    detectors = [{"stat": "iw4m:strain", "roc": curve.to_json(), "tpr_at_fpr_0.01": tpr_at_fpr(curve, 0.01),
                  "at_threshold_1": {"tpr": 0.75, "fpr": 0.2}, "by_profile_auc": {"lock_aimbot": 0.9}},
                 {"stat": "movement:timer", "roc": roc([1.0], []).to_json(), "tpr_at_fpr_0.01": None,
                  "at_threshold_1": {"tpr": 1.0, "fpr": None}, "by_profile_auc": {"speedhack": None}}]
    return {
        "run": run,
        "corpus": {"matches": 360, "players": 3700, "player_hours": 616.7, "honest_player_hours": 600.0,
                   "honest_player_matches": 3600, "cheater_engagements": 100, "build_wall_s": 10_800.0},
        "deadlines_s": list(DEADLINES), "roc_deadline_s": 120.0, "exclude_kinds": ["desync", "unplayable_link"],
        "confidence": 0.95, "profiles": [lock, smooth, speed], "honest": honest, "detectors": detectors,
    }


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def test_page_is_self_contained() -> None:
    html = render_html(synthetic_summary(), title="Lab", compare=synthetic_summary("tuned"))
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    lowered = html.lower()
    for forbidden in ("http://", "https://", "<script", "<link", "url(", "href=", "file:"):
        assert forbidden not in lowered, forbidden
    sources = re.findall(r'src="([^"]*)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)


def test_images_decode_as_png() -> None:
    images = _images(render_html(synthetic_summary(), title="Lab"))
    assert len(images) == 3  # time to detect, honest alarms, ROC
    for data in images:
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 500


def test_page_shows_profiles_and_numbers() -> None:
    html = render_html(synthetic_summary(), title="Referee lab <base>")
    assert "<title>Referee lab &lt;base&gt;</title>" in html
    for name in ("lock_aimbot", "speedhack", "factor=1.5", "smooth_aimbot", "strength=0.25", "iw4m:strain", "movement:timer"):
        assert name in html
    # 38 of 40 speedhack engagements by 300 s: Clopper-Pearson [0.8308, 0.9939], rounded outward.
    p = proportion(38, 40)
    assert (round(p.low, 4), round(p.high, 4)) == (0.8308, 0.9939)
    assert "<b>95%</b> <small>[83–100]</small>" in html
    # 3 honest alarms in 600 h: 0.50 per 100 h, Garwood [0.103, 1.46] shown as 0.10–1.46.
    assert "0.50 <small>per 100 player-hours</small>" in html
    assert "95% CI 0.10–1.46" in html
    # Small fractions get a decimal: 3 of 3600 flagged = 0.083 %, CP [0.017 %, 0.243 %]; 1 of 3600 = 0.028 %.
    assert ('players flagged <span class="nw">0.1% [0–0.3]</span> · '
            'reached monitor <span class="nw">&lt;0.1% [0–0.2]</span>') in html
    # Profile bins caught >= 95 % within 120 s: lock_aimbot (40/40) and speedhack (34/40 by 119 s? no:
    # first detections at 20 + 3i s, so 34 of 40 by 120 s = 85 %): one of three.
    assert "1 / 3 <small>profile bins caught ≥ 95% within 120 s</small>" in html
    assert "speedhack factor=1.5 (85%)" in html
    # Median / p90 of lock_aimbot: detections at 5..44 s -> 24 s / 40 s.
    assert "24 s / 40 s" in html
    assert "AUC" in html and "0.900" not in html  # the by-profile AUC is shown with two decimals
    assert "lock_aimbot 0.90" in html


def test_sections_come_in_the_promised_order() -> None:
    html = render_html(synthetic_summary(), title="Lab")
    marks = ['class="cards"', "Which cheats are caught", "Time to detect</h2>", "Cost to honest players</h2>",
             "Detector statistics (ROC)", "<h3>Definitions</h3>"]
    positions = [html.index(m) for m in marks]
    assert positions == sorted(positions)


def test_cells_are_coloured_by_the_detection_fraction() -> None:
    html = render_html(synthetic_summary(), title="Lab")
    row = re.search(r'<tr class="first"><td class="prof"><b>lock_aimbot</b>.*?</tr>', html)
    assert row is not None and row.group(0).count('class="ci g"') == 4
    smooth = re.search(r'<tr class="first"><td class="prof"><b>smooth_aimbot</b>.*?</tr>', html)
    assert smooth is not None and 'class="ci r"' in smooth.group(0)


def test_compare_is_shown_beside_the_first_summary() -> None:
    b = synthetic_summary("tuned", speed_caught=40)
    b["profiles"] = b["profiles"][:2] + [b["profiles"][2], {**b["profiles"][0], "profile": "rage_aimbot"}]
    html = render_html(synthetic_summary(), title="Lab", compare=b)
    assert 'class="run-b">tuned' in html
    assert "rage_aimbot" in html and "not in this run" in html
    assert len(_images(html)) == 3
    same = render_html(synthetic_summary(), title="Lab", compare=synthetic_summary())
    assert "base (A)" in same and "base (B)" in same


def test_renders_summaries_from_the_aggregator(tmp_path: Path) -> None:
    with LabStore(tmp_path / "corpus.duckdb") as s:
        empty = render_html(summarize(s.con), title="Empty")
    assert "No cheating players" in empty and len(_images(empty)) <= 1


@pytest.mark.parametrize("value", [0.999, 0.001])
def test_percentages_never_round_to_certainty(value: float) -> None:
    summary = synthetic_summary()
    summary["honest"]["flagged"] = {"k": 1, "n": 1000, "estimate": value, "low": 0.0, "high": 1.0}
    html = render_html(summary, title="Lab")
    assert ("&gt;99% [0–100]</span>" if value > 0.5 else "&lt;1% [0–100]</span>") in html
