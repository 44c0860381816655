"""Plain-language explanations of detections, one entry per ``detector:kind``.

The page shows a detection's ``reason`` (the detector's terse code, e.g. ``Strain-1.39@136``), its
evidence as key/value pairs, and the sentence made here: what the finding means for a person
who has not read the detector's source. Every sentence uses only the detection's ``value`` and
``evidence``; a missing or odd figure falls back to the detector's generic sentence, so a new
evidence layout can never break the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["EXPLANATIONS", "explain", "known_kinds"]

Evidence = Mapping[str, Any]
Sentence = Callable[[float, Evidence], str]


def _num(ev: Evidence, key: str) -> float:
    value = ev[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(key)
    return float(value)


def _pct_over(value: float, limit: float) -> str:
    return f"{(value / limit - 1.0) * 100.0:.0f}%" if limit > 0 else "far"


def _range_ms(commands: object) -> str:
    """A delay range in commands ([lo, hi]) as milliseconds at 64 commands a second."""
    if isinstance(commands, (list, tuple)) and len(commands) == 2:
        lo, hi = (_num({"x": c}, "x") for c in commands)
        return f"{lo * 1000 / 64:.0f}-{hi * 1000 / 64:.0f} ms"
    return "a fixed time"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000.0:.0f} ms"


def _rapid_fire(value: float, ev: Evidence) -> str:
    if "allowed_s" in ev:
        return (f"Fired faster than the weapon allows: {_ms(_num(ev, 'interval_s'))} between shots where the "
                f"weapon needs {_ms(_num(ev, 'allowed_s'))} (the server refused {ev.get('count', 'several')} such shots).")
    return f"Fired faster than the weapon allows: {_ms(value)} between shots."


EXPLANATIONS: dict[str, Sentence] = {
    # movement (the server's own simulation against the client's claims)
    "movement:speed": lambda v, ev: (
        f"Moved faster than the game allows, by {_pct_over(v, _num(ev, 'limit'))}: {v:.2f} m/s against a limit "
        f"of {_num(ev, 'limit'):.2f} m/s, {ev.get('count', 'several')} times within {ev.get('window_s', '?')} s."),
    "movement:teleport": lambda v, ev: (
        f"Jumped {v:.1f} m in one step; no movement covers more than {_num(ev, 'limit'):.0f} m (teleport)."),
    "movement:wall_clip": lambda v, ev: (
        f"Claimed to move through a wall ({v:.2f} m inside it), {ev.get('count', 'several')} times within "
        f"{ev.get('window_s', '?')} s (noclip)."),
    "movement:timer": lambda v, ev: (
        f"Sent movement commands faster than real time: their game clock ran {v:.0f} ms ahead of the server's "
        f"(limit {_num(ev, 'limit'):.0f} ms). This is what a speed hack does."),
    # fire (weapon mechanics and the server's checks of shot claims)
    "fire:rapid_fire": _rapid_fire,
    "fire:auto_c": lambda v, ev: (
        f"Cancelled the weapon's recovery by crouching after every shot (a scripted C-bug): {_ms(v)} between shots."),
    "fire:silent_aim_angles": lambda v, ev: (
        f"The shot flew {v:.1f} degrees away from where the player's view actually pointed (silent aim)."),
    "fire:silent_aim_geometry": lambda v, ev: (
        "The claimed shot hit a player the crosshair could not have been on (silent aim)."),
    "fire:forged_hit": lambda v, ev: (
        f"Claimed a hit {v:.0f} m away from where the victim really was at that moment (a forged hit)."),
    "fire:afk_ghost": lambda v, ev: (
        f"Claimed hits on a spot {v:.1f} m from any player (shooting where nobody was)."),
    "fire:backtrack": lambda v, ev: (
        f"Shot at where players had been earlier than its own client was showing: {ev.get('behind_clock', '?')} "
        f"of the last {ev.get('of', '?')} shots claimed a view {_ms(_num(ev, 'behind_s'))} older than the frame "
        "the client had drawn (backtrack)." if ev.get("rule") == "view_clock" else
        f"Shot at where players had been earlier than the connection explains: {ev.get('stale', '?')} of the "
        f"last {ev.get('of', '?')} shots looked back {_ms(v)} (backtrack)."),
    # recoil and trigger
    "recoil:recoil_report": lambda v, ev: (
        f"Reported weapon kick that disagrees with the server's on {ev.get('mismatched', '?')} of "
        f"{ev.get('of', '?')} commands (off by {v:.2f} degrees): recoil is being removed (no-recoil)."),
    "trigger:on_target": lambda v, ev: (
        f"Fired almost only when the crosshair was already on a player: {ev.get('on_target', '?')} of "
        f"{ev.get('shots', '?')} shots ({v * 100:.0f}%). A triggerbot fires exactly then."),
    "trigger:takes": lambda v, ev: (
        f"Fired within a frame of the crosshair touching a player {ev.get('taken', '?')} of "
        f"{ev.get('opportunities', '?')} times ({v * 100:.0f}%); people let most such moments pass. A triggerbot "
        "takes them all."),
    "trigger:delay": lambda v, ev: (
        f"Pulled the trigger {_range_ms(ev.get('range_commands'))} after the crosshair touched a player "
        f"{ev.get('in_range', '?')} of {ev.get('pulls', '?')} times ({v * 100:.0f}%), and hardly ever missed; a "
        "person's reaction time varies far more from one contact to the next. A triggerbot set to a reaction "
        "delay fires at it."),
    "aimsnap:locked_flick": lambda v, ev: (
        f"The view jumped {_num(ev, 'turn_deg'):.0f} degrees in a single command and landed "
        f"{_num(ev, 'on_target_deg'):.1f} degrees from an enemy, {ev.get('flicks_in_window', '?')} times within "
        f"{_num(ev, 'window_span_s'):.0f} s: a hand slows down onto its target, an aimbot does not."),
    # wallhack
    "wallhack:phantom": lambda v, ev: (
        f"Tracked a decoy player that the server placed behind walls and that no one can see, in "
        f"{ev.get('positive_episodes', '?')} of {ev.get('episodes', '?')} of its appearances: only a wallhack "
        "shows it."),
    "wallhack:hidden_tracking": lambda v, ev: (
        f"The crosshair found or followed enemies hidden behind walls in {ev.get('positive_episodes', '?')} "
        f"of {ev.get('episodes', '?')} encounters (wallhack)."),
    # AimDetect
    "aimdetect:aimbot": lambda v, ev: (
        f"The trained model judged {ev.get('positive_kills', '?')} of {ev.get('kills', '?')} kills to look like "
        f"an aimbot's, enough for the sequential test to decide."),
    "aimdetect:bait_hit": lambda v, ev: (
        f"Shot {ev.get('bait_shots', '?')} times within {_num(ev, 'span_s'):.1f} s at bait targets that only "
        "the shooter's client knows about and no honest player aims at (wallhack or aimbot)."),
    # AimStats
    "aimstats:aim_stats": lambda v, ev: (
        f"Aim statistics unlike a person's over {ev.get('samples', '?')} samples: combined score {v:.2f} "
        "from snaps onto targets, micro-jitter and how smoothly the aim tracks."),
    # BustAim
    "bustaim:out_of_range": lambda v, ev: (
        f"Hit from farther than the weapon reaches, {ev.get('streak', '?')} hits in a row."),
    "bustaim:proaim_teleport": lambda v, ev: (
        f"The aim jumped onto the target at the moment of the shot, {ev.get('streak', '?')} hits in a row (proaim)."),
    "bustaim:random_aim": lambda v, ev: (
        f"Hit while the aim was not following the target, {ev.get('streak', '?')} hits in a row (aimbot)."),
    "bustaim:continuous_shots": lambda v, ev: (
        f"Hit {ev.get('streak', '?')} shots in a row without a miss."),
    # IW4MAdmin's statistics
    "iw4m:Bone": lambda v, ev: (
        f"Hit the {ev.get('location', 'same body part')} far more often than players do (ratio {v:.2f}, "
        f"limit {_num(ev, 'threshold'):.2f})."),
    "iw4m:Chest": lambda v, ev: (
        f"Hit the upper chest far more than the lower (ratio {v:.2f}, limit {_num(ev, 'threshold'):.2f}): "
        "aimbots aim at a fixed point."),
    "iw4m:Offset": lambda v, ev: (
        f"Shots left the view's path by {v:.2f} degrees on average (limit {_num(ev, 'threshold'):.2f}): "
        "the aim was moved for the shot only."),
    "iw4m:Strain": lambda v, ev: (
        f"The aim moved between kills with a strain of {v:.2f} (limit {_num(ev, 'threshold'):.2f}): "
        "faster, straighter flicks than hands make."),
    "iw4m:Recoil": lambda v, ev: (
        f"Recoil stayed at {v:.2f} degrees over {ev.get('hits', '?')} hits: the weapon's kick is removed."),
    "iw4m:Snap": lambda v, ev: (
        f"The view snapped onto targets just before hits ({v:.2f}, limit {_num(ev, 'threshold'):.2f})."),
    "iw4m:Button": lambda v, ev: (
        f"Shots registered {v:.0f} times without the fire button pressed (a scripted trigger)."),
    # links (not cheating; the sanction policy counts them apart)
    "link:desync": lambda v, ev: "The connection keeps disagreeing with the server's simulation: a link problem.",
    "link:unplayable_link": lambda v, ev: "The connection is too poor to play on (latency or loss).",
}
"""``detector:kind`` -> the sentence for a detection (value, evidence)."""

_BY_DETECTOR: dict[str, str] = {
    "movement": "The server's movement check rejected the player's claimed positions.",
    "fire": "The server refused shots that the weapon or the world cannot produce.",
    "recoil": "The reported recoil disagrees with the server's.",
    "trigger": "Shots fired with the crosshair on a player far too often.",
    "aimsnap": "The view jumped onto enemies faster than a hand can stop.",
    "wallhack": "The aim followed players the player could not see.",
    "aimdetect": "AimDetect's model found the kills unlike a person's.",
    "aimstats": "The aim's statistics are unlike a person's.",
    "bustaim": "BustAim's hit checks warned.",
    "iw4m": "IW4MAdmin's statistics flagged the player.",
    "cbug": "The player used the crouch-cancel exploit (C-bug) to fire faster than the weapon allows.",
}


def known_kinds() -> tuple[str, ...]:
    """Every ``detector:kind`` with its own sentence."""
    return tuple(EXPLANATIONS)


def explain(detector: str, kind: str, value: float, evidence: Evidence) -> str:
    """The plain-language sentence for one detection (never raises)."""
    sentence = EXPLANATIONS.get(f"{detector}:{kind}")
    if sentence is None and kind in ("desync", "unplayable_link"):
        sentence = EXPLANATIONS[f"link:{kind}"]
    if sentence is None and detector == "cbug":
        return (f"Used the crouch-cancel exploit (C-bug, mostly the {kind.replace('_', ' ')} variant) to fire "
                f"faster than the weapon allows: score {value:.2f} against {evidence.get('threshold', '?')}.")
    if sentence is not None:
        try:
            return sentence(float(value), evidence)
        except (KeyError, ValueError, TypeError, ZeroDivisionError):
            pass
    generic = _BY_DETECTOR.get(detector, f"The {detector} detector found {kind.replace('_', ' ')}.")
    return f"{generic} Measured {value:.3g}." if math.isfinite(value) else generic
