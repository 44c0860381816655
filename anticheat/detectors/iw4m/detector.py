"""IW4MAdmin's anti-cheat (Stats plugin, Cheat/Detection.cs) over our events.

Seven detection types (REFERENCES section 3): Bone, Chest, Offset, Strain, Recoil, Snap and Button, each
judged over the session (since connect, or since :meth:`IW4MDetector.reset_session`) and, where
IW4MAdmin does, over the player's lifetime (a persisted profile: :meth:`IW4MDetector.export_profile` /
:meth:`IW4MDetector.import_profile`). Findings carry IW4MAdmin's two levels: a flag (human review,
``flag_severity``) and a ban (``ban_severity``); the sanction policy decides what either means.

Only bullet hits on a player are analysed, one per shot: for a shotgun the first pellet that hit counts
and the other pellets of that shot are ignored. Skipped hits (``SkipBook.shot_reason``) are counted in
:attr:`IW4MDetector.stats` and not analysed.

Timing. Bone, Chest and Strain are judged when the hit arrives. Offset needs the view angles of the
command *after* the shot, so those per-hit angle analyses (Offset, Snap, Recoil, Button) wait in a
small queue until a later AimSample of the shooter arrives (or ``pending_timeout_s`` passes, in which
case Offset is not measured for that hit). Each player keeps a ring of recent AimSamples to find them.

Which samples: the shot command is the AimSample whose ``seq`` equals the shot claim's ``seq`` (when the
claim carries none, the latest sample at or before the shot's time); "before" are older commands,
"after" is the first newer one.

- Offset: a = the last command before, b = the first after, c = the claim's angles; see
  :mod:`anticheat.detectors.iw4m.angles`. Session flag after ``offset_flag_min_hits`` and ban after
  ``offset_ban_min_hits`` hits when the location-weighted mean exceeds ``max_offset_deg(hits)``.
- Snap: a and b are the commands nearest to one and two ``snap_step_s`` before the shot command.
  Counted for snap hits only: the first hit on a new victim, or ``snap_reengage_s`` after the last snap
  hit (a spray on one target is one engagement). A hit where nothing moved (a = b = c and the command
  after unchanged) carries no information on aim dynamics and is not counted.
- Recoil: per hit, the mean of ``|recoil_pitch| + |recoil_yaw|`` the client reported over the
  ``recoil_samples_before`` commands before the shot, the shot command, the one after and the claim;
  weapons without recoil are excluded. Ban when the session mean is zero after ``recoil_min_hits`` hits
  and more than ``recoil_min_kills`` kills.
- Button: a hit whose command carried no FIRE press (triggerbot or forged shot packet); flag and ban
  after ``button_flag_hits`` and ``button_ban_hits`` such hits (needs the command's seq).
- Strain: see :mod:`anticheat.detectors.iw4m.angles`; distance is the shot's ``distance_m``.

Chest by default is Page's CUSUM over the torso hits on targets that showed their whole torso
(:mod:`anticheat.detectors.iw4m.chest`), carried in the lifetime profile; ``chest_statistic =
"ratio"`` restores IW4MAdmin's ratio test in both scopes. Bone's headshot half likewise is a
CUSUM over all hits (:mod:`anticheat.detectors.iw4m.headshot`), its largest-single-bone half
IW4MAdmin's ratio test; ``bone_statistic = "ratio"`` restores the headshot ratio test.

Lifetime analyses: Bone (``lifetime_bone_min_kills``), Chest (``lifetime_chest_min_hits``), Offset
(ban when the lifetime mean exceeds the limit and the hit's location has more than
``lifetime_offset_min_location_hits`` lifetime hits) and Snap (``lifetime_snap_min_hits``). Strain,
Recoil and Button are session measures; the lifetime profile keeps their figures for reference.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector
from anticheat.events import AimSample, Buttons, Detection, KillEvent, ShotResult
from anticheat.detectors.iw4m.aim import (
    offset_findings,
    offset_score,
    snap_findings,
    snap_score,
    strain_finding,
    strain_score,
)
from anticheat.detectors.iw4m.angles import Angles, StrainMeter, snap_distance, view_angle_offset
from anticheat.detectors.iw4m.chest import (
    chest_cusum_finding,
    chest_cusum_score,
    chest_limits,
    chest_observe,
    torso_in_view,
)
from anticheat.detectors.iw4m.finding import Finding, Level, Scope, location_name
from anticheat.detectors.iw4m.headshot import (
    headshot_cusum_finding,
    headshot_cusum_score,
    headshot_limits,
    headshot_observe,
)
from anticheat.detectors.iw4m.input import button_finding, button_score, recoil_finding, recoil_score
from anticheat.detectors.iw4m.profile import VALID_BONES, HitStats
from anticheat.detectors.iw4m.ratios import bone_finding, bone_score, chest_finding, chest_score
from anticheat.detectors.iw4m.thresholds import IW4MConfig
from anticheat.skip import SkipBook
from world.weapons import weapon as weapon_spec

__all__ = ["IW4MDetector", "IW4MConfig", "Finding", "Level", "Scope"]


class _PlayerState:
    """Everything IW4MAdmin keeps per player; every container has a fixed bound."""

    __slots__ = (
        "session",
        "lifetime",
        "samples",
        "pending",
        "strain",
        "hit_key",
        "last_hit_time",
        "snap_victim",
        "snap_time",
        "emitted",
        "peaks",
    )

    def __init__(self, cfg: IW4MConfig) -> None:
        self.session = HitStats()
        self.lifetime = HitStats()
        self.samples: deque[AimSample] = deque(maxlen=cfg.aim_ring_size)
        # Hits waiting for the command after them; bounded by pending_max in _enqueue.
        self.pending: deque[ShotResult] = deque()
        self.strain = self._new_strain(cfg)
        self.hit_key: tuple[int, int, int] | None = None
        self.last_hit_time: float | None = None
        self.snap_victim: int | None = None
        self.snap_time: float | None = None
        # (type, scope, level) -> hit count at the last emission: at most 7 * 2 * 2 keys.
        self.emitted: dict[tuple[str, Scope, Level], int] = {}
        # Score key -> its highest value at a detection (at most 7 keys; kept by reset_session).
        self.peaks: dict[str, float] = {}

    @staticmethod
    def _new_strain(cfg: IW4MConfig) -> StrainMeter:
        return StrainMeter(
            cfg.strain_decay_base, cfg.strain_decay_halving_s, cfg.strain_min_dt_s, cfg.strain_distance_unit_m
        )

    def new_session(self, cfg: IW4MConfig) -> None:
        self.session = HitStats()
        self.samples.clear()
        self.pending.clear()
        self.strain = self._new_strain(cfg)
        self.hit_key = None
        self.last_hit_time = None
        self.snap_victim = None
        self.snap_time = None
        self.emitted = {k: v for k, v in self.emitted.items() if k[1] is Scope.LIFETIME}


_SCORES: dict[str, Callable[[_PlayerState, IW4MConfig], float]] = {
    "bone": lambda st, cfg: max(
        bone_score(st.session, cfg, Scope.SESSION), bone_score(st.lifetime, cfg, Scope.LIFETIME),
        headshot_cusum_score(st.lifetime, headshot_limits(cfg)) if cfg.bone_statistic == "cusum" else 0.0,
    ),
    "chest": lambda st, cfg: chest_cusum_score(st.lifetime, chest_limits(cfg)) if cfg.chest_statistic == "cusum"
    else max(chest_score(st.session, cfg, Scope.SESSION), chest_score(st.lifetime, cfg, Scope.LIFETIME)),
    "offset": lambda st, cfg: offset_score(st.session, st.lifetime, cfg),
    "strain": lambda st, cfg: strain_score(st.session, cfg),
    "snap": lambda st, cfg: snap_score(st.session, st.lifetime, cfg),
    "recoil": lambda st, cfg: recoil_score(st.session, cfg),
    "button": lambda st, cfg: button_score(st.session, cfg),
}
"""Score key (a detection type, lower case) -> its statistic, normalised as ``Detector.scores`` says."""


def _angles(sample: AimSample) -> Angles:
    return (sample.pitch_deg, sample.yaw_deg)


def _reported_recoil(pitch: float, yaw: float) -> float:
    return abs(pitch) + abs(yaw)


def _nearest(samples: list[AimSample], target_s: float, step_s: float) -> AimSample | None:
    """The sample nearest to ``target_s`` if within half a step of it (else the stream has a gap);
    with ``step_s`` 0, simply the latest."""
    if not samples:
        return None
    if step_s <= 0.0:
        return samples[-1]
    best = min(samples, key=lambda s: abs(s.time_s - target_s))
    return best if abs(best.time_s - target_s) <= step_s / 2.0 else None


class IW4MDetector(Detector):
    """IW4MAdmin's seven detection types with session and lifetime analysis.

    Args:
        config: thresholds and sample-size rules (IW4MAdmin's figures by default).

    Extra API: :meth:`export_profile`, :meth:`import_profile`, :meth:`reset_session`,
    :meth:`session_stats`, :meth:`lifetime_stats`, :meth:`current_strain`, :attr:`stats`.
    """

    name = "iw4m"

    def __init__(self, config: IW4MConfig | None = None) -> None:
        self.config = config or IW4MConfig()
        self._chest = chest_limits(self.config)
        self._headshot = headshot_limits(self.config)
        self._players: dict[int, _PlayerState] = {}
        self._stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ profiles and operator API

    def export_profile(self, player: int) -> dict[str, Any]:
        """The lifetime profile of ``player`` as a plain dict (empty profile for an unknown player)."""
        st = self._players.get(player)
        return (st.lifetime if st is not None else HitStats()).to_dict()

    def import_profile(self, player: int, data: Mapping[str, Any]) -> None:
        """Replace the lifetime profile of ``player``; raises ValueError (state untouched) if malformed."""
        stats = HitStats.from_dict(data)
        self._state(player).lifetime = stats

    def reset_session(self, player: int) -> None:
        """Start a new session for ``player``, keeping the lifetime profile."""
        st = self._players.get(player)
        if st is not None:
            st.new_session(self.config)

    def reset_player(self, player: int) -> None:
        """Forget ``player`` entirely, lifetime profile included (import it again if needed)."""
        self._players.pop(player, None)

    def session_stats(self, player: int) -> dict[str, Any]:
        """The session figures of ``player`` (same layout as the exported profile)."""
        st = self._players.get(player)
        return (st.session if st is not None else HitStats()).to_dict()

    def lifetime_stats(self, player: int) -> dict[str, Any]:
        """Alias of :meth:`export_profile`, for symmetry with :meth:`session_stats`."""
        return self.export_profile(player)

    def current_strain(self, player: int) -> float:
        """The session strain of ``player`` after its last hit."""
        st = self._players.get(player)
        return st.strain.value if st is not None else 0.0

    @property
    def stats(self) -> dict[str, int]:
        """Counters: skipped hits per reason (``skip_<reason>``), duplicates, unresolved angles..."""
        return dict(self._stats)

    def scores(self, player: int) -> Mapping[str, float]:
        """Each detection type's statistic against its limit (unitless), keyed by the type in
        lower case; the larger of the session and lifetime scopes where both are judged.

        - ``bone``: headshot ratio and largest single-bone share, each over its flag limit at the
          current hits (0.0 below the kills Bone needs); ``chest``: upper/lower torso ratio over
          its flag limit (0.0 below the upper-torso hits it needs);
        - ``offset``: mean offset (deg) over ``max_offset_deg`` at the hits measured; ``snap``:
          mean snap (deg per step) over the flag limit (each 0.0 below its hits);
        - ``strain``: the session's highest strain over the flag limit (the strain itself decays);
        - ``recoil``: zero tolerance over the mean reported recoil (inverted: low recoil is the
          suspicious side; the largest float at exactly zero), 0.0 below its hits and kills;
        - ``button``: hits without a FIRE press over the count that flags.

        Means and ratios are cumulative over the session (or lifetime) and reported as they are
        now; so that a crossing between two readings is never lost, each type's value at each of
        its detections is kept and the score is never below it (``reset_session`` keeps those,
        ``reset_player`` forgets them).
        """
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        cfg = self.config
        peaks = st.peaks
        return {key: max(score(st, cfg), peaks.get(key, 0.0)) for key, score in _SCORES.items()}

    # ------------------------------------------------------------------ events

    def on_kill(self, kill: KillEvent, skip: SkipBook) -> Sequence[Detection]:
        """Count the kill for the sample-size rules (Bone needs kills, Recoil more than a few)."""
        if kill.killer != kill.victim:
            st = self._state(kill.killer)
            st.session.kills += 1
            st.lifetime.kills += 1
        return NO_DETECTIONS

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        """Remember the command; judge waiting hits that it completes."""
        st = self._players.get(sample.player)
        if st is None:
            st = self._state(sample.player)
        st.samples.append(sample)
        if not st.pending:
            return NO_DETECTIONS
        return self._resolve_ready(st, sample.time_s)

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        """Analyse a bullet hit (one per shot)."""
        if shot.victim is None or shot.bone == 0 or shot.victim == shot.shooter:
            return NO_DETECTIONS
        st = self._state(shot.shooter)
        key = (shot.tick, shot.claim.seq, shot.weapon)
        if key == st.hit_key:
            self._stats["extra_pellet"] += 1
            return NO_DETECTIONS
        st.hit_key = key
        if shot.bone not in VALID_BONES:
            self._stats["unknown_bone"] += 1
            return NO_DETECTIONS
        reason = skip.shot_reason(shot.shooter, shot.victim, shot.weapon)
        if reason is not None:
            self._stats[f"skip_{reason.value}"] += 1
            return NO_DETECTIONS
        if st.last_hit_time is not None and shot.time_s < st.last_hit_time:
            self._stats["out_of_order"] += 1
            return NO_DETECTIONS
        st.last_hit_time = shot.time_s
        self._stats["analysed"] += 1
        cfg = self.config
        st.session.add_hit(shot.bone)
        st.lifetime.add_hit(shot.bone)

        cusum = cfg.chest_statistic == "cusum"
        if cusum and torso_in_view(shot.exposed):
            chest_observe(st.lifetime, shot.bone, self._chest)
        candidates: list[Finding | None] = []
        for scope, stats in ((Scope.SESSION, st.session), (Scope.LIFETIME, st.lifetime)):
            candidates.append(bone_finding(stats, cfg, scope))
            if not cusum:
                candidates.append(chest_finding(stats, cfg, scope))
        if cusum:
            candidates.append(chest_cusum_finding(st.lifetime, self._chest))
        if cfg.bone_statistic == "cusum":
            headshot_observe(st.lifetime, shot.bone, self._headshot)
            candidates.append(headshot_cusum_finding(st.lifetime, self._headshot))
        findings = [f for f in candidates if f is not None]
        strain = st.strain.update(shot.time_s, (shot.claim.pitch_deg, shot.claim.yaw_deg), shot.distance_m)
        for stats in (st.session, st.lifetime):
            stats.max_strain = max(stats.max_strain, strain)
        strain_hit = strain_finding(strain, st.session.hits, cfg)
        if strain_hit is not None:
            findings.append(strain_hit)

        out = self._emit(st, shot, findings)
        out.extend(self._enqueue(st, shot))
        return out

    # ------------------------------------------------------------------ pending hits

    def _enqueue(self, st: _PlayerState, shot: ShotResult) -> list[Detection]:
        out: list[Detection] = []
        if len(st.pending) >= self.config.pending_max:
            # Never let the queue grow: the oldest hit is judged with what is known now.
            self._stats["pending_overflow"] += 1
            out.extend(self._resolve(st, st.pending.popleft()))
        st.pending.append(shot)
        out.extend(self._resolve_ready(st, shot.time_s))
        return out

    def _resolve_ready(self, st: _PlayerState, now: float) -> list[Detection]:
        out: list[Detection] = []
        while st.pending:
            shot = st.pending[0]
            if self._after_sample(st, shot) is not None:
                st.pending.popleft()
                out.extend(self._resolve(st, shot))
            elif now - shot.time_s > self.config.pending_timeout_s:
                st.pending.popleft()
                self._stats["no_after_sample"] += 1
                out.extend(self._resolve(st, shot))
            else:
                break
        return out

    @staticmethod
    def _after_sample(st: _PlayerState, shot: ShotResult) -> AimSample | None:
        seq = shot.claim.seq
        for s in st.samples:
            if (seq > 0 and s.seq > seq) or (seq <= 0 and s.time_s > shot.time_s):
                return s
        return None

    @staticmethod
    def _split(st: _PlayerState, shot: ShotResult) -> tuple[list[AimSample], AimSample | None]:
        """Commands before the shot command (oldest first) and the shot command itself."""
        seq = shot.claim.seq
        samples = list(st.samples)
        if seq > 0:
            before = [s for s in samples if s.seq < seq]
            cmd = next((s for s in samples if s.seq == seq), None)
            return before, cmd
        upto = [s for s in samples if s.time_s <= shot.time_s]
        if not upto:
            return [], None
        return upto[:-1], upto[-1]

    def _resolve(self, st: _PlayerState, shot: ShotResult) -> list[Detection]:
        before, cmd = self._split(st, shot)
        after = self._after_sample(st, shot)
        c: Angles = (shot.claim.pitch_deg, shot.claim.yaw_deg)
        findings: list[Finding] = []

        if before and after is not None:
            offset = view_angle_offset(_angles(before[-1]), _angles(after), c)
            st.session.add_offset(shot.bone, offset)
            st.lifetime.add_offset(shot.bone, offset)
            findings.extend(offset_findings(st.session, st.lifetime, shot.bone, self.config))
        else:
            self._stats["offset_unmeasured"] += 1

        findings.extend(self._snap(st, shot, before, cmd, after, c))
        findings.extend(self._recoil(st, shot, before, cmd, after))
        findings.extend(self._button(st, shot, cmd))
        return self._emit(st, shot, findings)

    # ------------------------------------------------------------------ per-hit angle measures

    def _snap(
        self,
        st: _PlayerState,
        shot: ShotResult,
        before: list[AimSample],
        cmd: AimSample | None,
        after: AimSample | None,
        c: Angles,
    ) -> list[Finding]:
        cfg = self.config
        victim = shot.victim
        new_engagement = (
            st.snap_time is None or victim != st.snap_victim or shot.time_s - st.snap_time >= cfg.snap_reengage_s
        )
        if not new_engagement:
            return []
        t_c = cmd.time_s if cmd is not None else shot.time_s
        b = _nearest(before, t_c - cfg.snap_step_s, cfg.snap_step_s)
        a = None
        if b is not None:
            older = [s for s in before if s.time_s < b.time_s]
            a = _nearest(older, b.time_s - cfg.snap_step_s, cfg.snap_step_s)
        if a is None or b is None:
            self._stats["snap_unmeasured"] += 1
            return []
        aa, bb = _angles(a), _angles(b)
        if aa == bb == c and (after is None or _angles(after) == c):
            self._stats["snap_still"] += 1
            return []
        snap = snap_distance(aa, bb, c)
        st.snap_victim = victim
        st.snap_time = shot.time_s
        st.session.add_snap(snap)
        st.lifetime.add_snap(snap)
        return snap_findings(st.session, st.lifetime, cfg)

    def _recoil(
        self,
        st: _PlayerState,
        shot: ShotResult,
        before: list[AimSample],
        cmd: AimSample | None,
        after: AimSample | None,
    ) -> list[Finding]:
        cfg = self.config
        try:
            has_recoil = weapon_spec(shot.weapon).has_recoil
        except KeyError:
            has_recoil = False
        if not has_recoil:
            return []
        window = before[-cfg.recoil_samples_before :] if cfg.recoil_samples_before > 0 else []
        window = window + [s for s in (cmd, after) if s is not None]
        values = [
            _reported_recoil(s.recoil_pitch_deg, s.recoil_yaw_deg) for s in window if s.weapon == shot.weapon
        ]
        values.append(_reported_recoil(shot.claim.recoil_pitch_deg, shot.claim.recoil_yaw_deg))
        hit_mean = sum(values) / len(values)
        st.session.add_recoil(hit_mean)
        st.lifetime.add_recoil(hit_mean)
        finding = recoil_finding(st.session, cfg)
        return [finding] if finding is not None else []

    def _button(self, st: _PlayerState, shot: ShotResult, cmd: AimSample | None) -> list[Finding]:
        if shot.claim.seq <= 0 or cmd is None:
            self._stats["button_unchecked"] += 1
            return []
        if cmd.buttons & Buttons.FIRE:
            return []
        st.session.button_no_fire += 1
        st.lifetime.button_no_fire += 1
        finding = button_finding(st.session, self.config)
        return [finding] if finding is not None else []

    # ------------------------------------------------------------------ emission

    def _emit(self, st: _PlayerState, shot: ShotResult, findings: list[Finding]) -> list[Detection]:
        """Detections for ``findings``, re-raising one (type, scope, level) only every few hits."""
        cfg = self.config
        out: list[Detection] = []
        for f in findings:
            key = (f.type, f.scope, f.level)
            now_hits = st.session.hits if f.scope is Scope.SESSION else st.lifetime.hits
            last = st.emitted.get(key)
            if last is not None and now_hits - last < cfg.reemit_every_hits:
                continue
            st.emitted[key] = now_hits
            stat = f.type.lower()
            value = _SCORES[stat](st, cfg)
            if value > st.peaks.get(stat, 0.0):
                st.peaks[stat] = value
            evidence: dict[str, float | int | str] = {
                "level": f.level.value,
                "scope": f.scope.value,
                "threshold": f.threshold,
                "hits": f.hits,
            }
            if f.location is not None:
                evidence["location"] = location_name(f.location)
            out.append(
                Detection(
                    player=shot.shooter,
                    tick=shot.tick,
                    time_s=shot.time_s,
                    detector=self.name,
                    kind=f.type,
                    value=f.value,
                    severity=cfg.ban_severity if f.level is Level.BAN else cfg.flag_severity,
                    reason=f.reason,
                    evidence=evidence,
                )
            )
        return out

    def _state(self, player: int) -> _PlayerState:
        st = self._players.get(player)
        if st is None:
            st = _PlayerState(self.config)
            self._players[player] = st
        return st
