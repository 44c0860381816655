"""C-bug (crouch-cancel) detection: a suspicion score fed by key-state changes after shots.

Modelled on the SA-MP include "Cbug Detection" (REFERENCES section 2). Its milliseconds become seconds
here. Suspicious actions soon after a shot with a monitored weapon add weights to a per-player score;
the score decays linearly, is cleared after an idle spell, and a detection is raised when it reaches
the threshold outside the cooldown, after which the player's state is reset.

Inputs: key states come from consecutive ``AimSample``s of a player (a key is *pressed* when its bit is
set now and was not in the previous sample; a weapon switch is a change of the requested weapon);
shots come from ``ShotResult`` (one per shot: the extra pellets of a shotgun shot are ignored).

Variants of a crouch press inside the sequence window after a shot, one per press (the heaviest that
applies, so a press is never counted twice):

====================  ======  =================================================================
rollbug               4.5     crouch while leaning (lean held, or pressed since the shot)
quick_cswitch         4.5     crouch with a weapon switch pending (requested in the switch buffer)
classic               4.0     crouch on the ground, neither sprinting nor jumping
jumpbug               3.5     crouch while jumping (jump held or airborne)
run_bug               3.0     crouch while sprint was already held
slide                 2.0     sprint and crouch pressed in the same command
====================  ======  =================================================================

Other actions: a shot within the rapid-shot window of the previous one (+3.0, ``rapid_shots``), a weapon
switch away within the switch buffer after a shot (+3.0, ``switch_after_shot``) and the switch back to
the weapon that fired within the buffer after that (+3.5, ``switch_back``).

Two flaws of the original are fixed: every tolerance is a config field, and the jumpbug and run-bug
weights really reach the score (the original assigned them and then overwrote or never added them).

Validations: the shot's weapon must be monitored; "has ammo" has no ammunition count in our events, so
it is enforced by construction and by evidence: only registered shots open a sequence (the server
refuses shots from an empty magazine), and a refused shot for an empty magazine or a reload, or a
reload press, closes the open sequence. Per-player enabling defaults to ON for everyone
(``enabled_by_default``; the original starts every player disabled).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from anticheat.detector import NO_DETECTIONS, NO_SCORES, Detector, over_limit
from anticheat.events import AimSample, Buttons, Detection, FireEvidence, FireKind, ShotResult, SpawnEvent
from anticheat.skip import SkipBook
from anticheat.tolerances import searched
from world.weapons import WeaponId

__all__ = ["CbugConfig", "CbugDetector", "VARIANTS"]

VARIANTS: tuple[str, ...] = (
    "rollbug",
    "quick_cswitch",
    "classic",
    "jumpbug",
    "run_bug",
    "slide",
    "rapid_shots",
    "switch_after_shot",
    "switch_back",
)
"""Every contribution name, in the order used to break ties."""

_LEAN = int(Buttons.LEAN_LEFT | Buttons.LEAN_RIGHT)


@dataclass(frozen=True, slots=True)
class CbugConfig:
    """C-bug tolerances (the original's defines, ms converted to s).

    Attributes:
        threshold: score at which a detection is raised (20; CBUG_D_SUSPICION_THRESHOLD is 10.0).
            On the lab's training corpus (26.7 honest player-hours) honest scores peaked at 11.9
            (3 players over 10: crouch-peeking between bursts); the C-bug profile reaches 32-39.
            Scores move in steps of 3-4.5 and the honest tail fell ~0.15x per step, so 20 (two
            steps past the honest peak) extrapolates to about 0.3 false alarms per 100 hours.
        decay_per_s: score lost per second (CBUG_D_SUSPICION_DECAY 0.5/s).
        sequence_window_s: how long after a shot an action counts (CBUG_D_SEQUENCE_INTERVAL 1500 ms).
        rapid_shot_window_s: a shot this soon after the previous is rapid (CBUG_D_SHOT_INTERVAL 200 ms).
        switch_buffer_s: a weapon switch this soon after a shot, or a switch back this soon after the
            switch away, counts; also how long a switch request stays "pending" for a quick C-switch
            (CBUG_D_WEAPON_BUFFER_TIME 500 ms).
        idle_reset_s: the score is cleared after this long without a suspicious action
            (CBUG_D_SCORE_RESET_TIME 2000 ms).
        cooldown_s: no second detection within this time of the previous (CBUG_D_COOLDOWN_TIME 1500 ms).
        ping_multiplier: windows widen by ``ping_ms * ping_multiplier`` ms (CBUG_D_PING_MULTIPLIER 0.01),
            i.e. by 1 % of the round trip; applied to the sequence, rapid-shot and switch windows.
        weight_*: score added per variant (see the module docstring).
        monitored_weapons: weapon ids whose shots open a sequence. The original watches the Desert
            Eagle, Shotgun, SPAS-12, Rifle and Sniper; ours are the pistol, shotgun, rifle and sniper.
        crouches_per_shot: crouch presses that count after one shot (1). The exploit needs one
            cancel per shot, and the cheat crouches once after every shot; an honest player who taps
            crouch while fighting (dodging, peeking) presses it several times between two shots, and
            the original's every-press scoring took four taps after one sniper shot for a cancel
            each. 0 counts every press, as the original.
        enabled_by_default: players are checked unless disabled (the original's default is off).
        severity: Detection severity (a C-bug is an exploit of the game, not a cheat program).
    """

    threshold: float = searched(20.0, 4.0, 30.0)
    decay_per_s: float = 0.5
    sequence_window_s: float = 1.5
    rapid_shot_window_s: float = 0.2
    switch_buffer_s: float = 0.5
    idle_reset_s: float = 2.0
    cooldown_s: float = 1.5
    ping_multiplier: float = 0.01
    weight_classic: float = 4.0
    weight_rollbug: float = 4.5
    weight_quick_cswitch: float = 4.5
    weight_jumpbug: float = 3.5
    weight_run_bug: float = 3.0
    weight_slide: float = 2.0
    weight_rapid_shots: float = 3.0
    weight_switch_after_shot: float = 3.0
    weight_switch_back: float = 3.5
    monitored_weapons: frozenset[int] = field(
        default_factory=lambda: frozenset(
            int(w) for w in (WeaponId.PISTOL, WeaponId.SHOTGUN, WeaponId.RIFLE, WeaponId.SNIPER)
        )
    )
    crouches_per_shot: int = 1
    enabled_by_default: bool = True
    severity: float = 0.5

    def __post_init__(self) -> None:
        # A TOML list of ids becomes the frozenset the membership tests expect.
        object.__setattr__(self, "monitored_weapons", frozenset(int(w) for w in self.monitored_weapons))
        for name in (
            "threshold",
            "decay_per_s",
            "sequence_window_s",
            "rapid_shot_window_s",
            "switch_buffer_s",
            "idle_reset_s",
            "cooldown_s",
            "ping_multiplier",
            *(f"weight_{v}" for v in VARIANTS),
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        if isinstance(self.crouches_per_shot, bool) or not isinstance(self.crouches_per_shot, int) or self.crouches_per_shot < 0:
            raise ValueError(f"crouches_per_shot must be an int >= 0, got {self.crouches_per_shot!r}")

    def weight(self, variant: str) -> float:
        """The score weight of ``variant`` (one of :data:`VARIANTS`)."""
        return float(getattr(self, f"weight_{variant}"))


class _PlayerState:
    """Score and the little history one player's key changes need (all scalars: bounded)."""

    __slots__ = (
        "score",
        "peak",
        "contrib",
        "last_update",
        "last_action",
        "last_detection",
        "shot_time",
        "shot_seq",
        "shot_weapon",
        "shot_key",
        "switch_away_time",
        "switch_request_time",
        "roll_time",
        "crouches",
        "prev_buttons",
        "prev_switch",
        "prev_weapon",
        "switch_target",
    )

    def __init__(self) -> None:
        self.score = 0.0
        # The highest score reached (scores() reports it: the score decays and is cleared).
        self.peak = 0.0
        self.contrib: dict[str, float] = {}
        self.last_update: float | None = None
        self.last_action: float | None = None
        self.last_detection: float | None = None
        self.shot_time: float | None = None
        self.shot_seq = 0
        self.shot_weapon = 0
        self.shot_key: tuple[int, int, int] | None = None
        self.switch_away_time: float | None = None
        self.switch_request_time: float | None = None
        self.roll_time: float | None = None
        # Crouch presses counted since the shot that opened the sequence.
        self.crouches = 0
        self.prev_buttons: int | None = None
        self.prev_switch = 0
        self.prev_weapon = 0
        # Target of the last switch already counted, so the request and the change it causes a few
        # commands later count once.
        self.switch_target = 0

    def clear_score(self) -> None:
        self.score = 0.0
        self.contrib.clear()
        self.last_action = None

    def clear_sequence(self) -> None:
        self.shot_time = None
        self.shot_seq = 0
        self.shot_weapon = 0
        self.switch_away_time = None
        self.roll_time = None
        self.crouches = 0


class CbugDetector(Detector):
    """Crouch-cancel exploit detection by suspicion score.

    Args:
        config: tolerances and weights.

    Extra API: :meth:`set_enabled` / :meth:`is_enabled` per player, :meth:`score` and :meth:`stats`.
    """

    name = "cbug"

    def __init__(self, config: CbugConfig | None = None) -> None:
        self.config = config or CbugConfig()
        self._players: dict[int, _PlayerState] = {}
        self._enabled: dict[int, bool] = {}
        self._stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ operator API

    def set_enabled(self, player: int, enabled: bool) -> None:
        """Turn detection on or off for ``player``; turning it off forgets the player's score."""
        self._enabled[player] = bool(enabled)
        if not enabled:
            self._players.pop(player, None)

    def is_enabled(self, player: int) -> bool:
        """Whether ``player`` is checked."""
        return self._enabled.get(player, self.config.enabled_by_default)

    def score(self, player: int) -> float:
        """The suspicion score of ``player`` as of its last scored event (decay is applied lazily)."""
        st = self._players.get(player)
        return st.score if st is not None else 0.0

    def scores(self, player: int) -> Mapping[str, float]:
        """``score``: the highest suspicion score ``player`` reached, against ``threshold``.

        The score decays, is cleared after an idle spell and after each detection, so the value
        is its maximum since the player's state began (turning the player's checks off forgets
        it). One score for every kind: a detection's kind is the variant that added most to it.
        Unitless.
        """
        st = self._players.get(player)
        if st is None:
            return NO_SCORES
        return {"score": over_limit(st.peak, self.config.threshold)}

    def contributions(self, player: int) -> dict[str, float]:
        """Weights added per variant since the score was last cleared."""
        st = self._players.get(player)
        return dict(st.contrib) if st is not None else {}

    @property
    def stats(self) -> dict[str, int]:
        """Counters: skips per reason (``skip_<reason>``), ignored shots, detections."""
        return dict(self._stats)

    def reset_player(self, player: int) -> None:
        """Forget ``player`` entirely (the enable switch included)."""
        self._players.pop(player, None)
        self._enabled.pop(player, None)

    # ------------------------------------------------------------------ events

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        """A shot opens (or continues) a sequence; a shot soon after the previous one is rapid."""
        player = shot.shooter
        if not self.is_enabled(player):
            self._stats["skip_disabled"] += 1
            return NO_DETECTIONS
        st = self._state(player)
        key = (shot.tick, shot.claim.seq, shot.weapon)
        if key == st.shot_key:
            return NO_DETECTIONS  # another pellet of the same shot
        st.shot_key = key
        reason = skip.player_reason(player)
        if reason is not None:
            self._stats[f"skip_{reason.value}"] += 1
            return NO_DETECTIONS
        if shot.weapon not in self.config.monitored_weapons:
            # A shot with another weapon ends the sequence: later keys belong to that shot.
            st.clear_sequence()
            self._stats["unmonitored_shot"] += 1
            return NO_DETECTIONS
        now = shot.time_s
        self._advance(st, now)
        ping = self._ping_ms(skip, player)
        rapid = (
            st.shot_time is not None
            and st.shot_weapon == shot.weapon
            and 0.0 <= now - st.shot_time <= self._window(self.config.rapid_shot_window_s, ping)
        )
        st.shot_time = now
        st.shot_seq = shot.claim.seq
        st.shot_weapon = shot.weapon
        st.switch_away_time = None
        st.roll_time = None
        st.crouches = 0
        if rapid:
            self._add(st, "rapid_shots", now)
            return self._maybe_detect(st, player, shot.tick, now)
        return NO_DETECTIONS

    def on_aim(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        """Key-state changes of one command, judged against the open shot sequence."""
        st = self._players.get(sample.player)
        # Fast path (nearly every command): the same keys, switch request and weapon as the previous
        # command of a known player. Nothing is pressed or switched, so there is nothing to judge and
        # nothing new to remember (whether or not the player is enabled).
        if (
            st is not None
            and sample.buttons == st.prev_buttons
            and sample.weapon_switch == st.prev_switch
            and sample.weapon == st.prev_weapon
        ):
            return NO_DETECTIONS
        return self._key_changes(sample, skip)

    def _key_changes(self, sample: AimSample, skip: SkipBook) -> Sequence[Detection]:
        player = sample.player
        if not self.is_enabled(player):
            return NO_DETECTIONS
        st = self._state(player)
        buttons = int(sample.buttons)
        prev_buttons = st.prev_buttons
        target = self._switch_event(st, sample)
        # Edges need the previous command whatever happens below, so remember this one first.
        st.prev_buttons = buttons
        st.prev_switch = sample.weapon_switch
        st.prev_weapon = sample.weapon
        if prev_buttons is None:
            return NO_DETECTIONS
        pressed = buttons & ~prev_buttons
        switched = target is not None
        if not pressed and not switched:
            return NO_DETECTIONS
        reason = skip.player_reason(player)
        if reason is not None:
            self._stats[f"skip_{reason.value}"] += 1
            return NO_DETECTIONS
        now = sample.time_s
        self._advance(st, now)
        if pressed & Buttons.RELOAD:
            st.clear_sequence()  # reloading: the magazine is empty or being refilled, nothing to cancel
            return NO_DETECTIONS
        if st.shot_time is None:
            return NO_DETECTIONS
        since_shot = now - st.shot_time
        ping = self._ping_ms(skip, player)
        cfg = self.config
        if since_shot < 0.0 or (st.shot_seq and sample.seq <= st.shot_seq):
            return NO_DETECTIONS  # the command that fired, or an older one: not "after the shot"
        if since_shot > self._window(cfg.sequence_window_s, ping):
            st.clear_sequence()
            return NO_DETECTIONS
        buffer = self._window(cfg.switch_buffer_s, ping)
        added = False
        if pressed & _LEAN:
            st.roll_time = now
        if switched:
            if st.switch_away_time is None and target != st.shot_weapon and since_shot <= buffer:
                st.switch_away_time = now
                self._add(st, "switch_after_shot", now)
                added = True
            elif (
                st.switch_away_time is not None
                and target == st.shot_weapon
                and now - st.switch_away_time <= buffer
            ):
                st.switch_away_time = None
                self._add(st, "switch_back", now)
                added = True
            st.switch_request_time = now
        per_shot = cfg.crouches_per_shot
        if pressed & Buttons.CROUCH and (per_shot == 0 or st.crouches < per_shot):
            variant = self._crouch_variant(st, sample, buttons, int(pressed), now, buffer)
            if variant is not None:
                st.crouches += 1
                self._add(st, variant, now)
                added = True
        if added:
            return self._maybe_detect(st, player, sample.tick, now)
        return NO_DETECTIONS

    def on_fire(self, evidence: FireEvidence, skip: SkipBook) -> Sequence[Detection]:
        """A refused shot for an empty magazine or a reload closes the sequence (no ammo to cancel)."""
        if evidence.kind in (FireKind.EMPTY, FireKind.RELOADING):
            st = self._players.get(evidence.player)
            if st is not None:
                st.clear_sequence()
        return NO_DETECTIONS

    def on_spawn(self, spawn: SpawnEvent, skip: SkipBook) -> Sequence[Detection]:
        """A new life: the last life's shot can no longer be cancelled (the score itself stays)."""
        st = self._players.get(spawn.player)
        if st is not None:
            st.clear_sequence()
        return NO_DETECTIONS

    # ------------------------------------------------------------------ internals

    def _state(self, player: int) -> _PlayerState:
        st = self._players.get(player)
        if st is None:
            st = _PlayerState()
            self._players[player] = st
        return st

    @staticmethod
    def _ping_ms(skip: SkipBook, player: int) -> float:
        conn = skip.connection(player)
        if conn is None or not math.isfinite(conn.rtt_ms) or conn.rtt_ms < 0:
            return 0.0
        return conn.rtt_ms

    def _window(self, base_s: float, ping_ms: float) -> float:
        # The original adds ping_ms * multiplier milliseconds to a millisecond window.
        return base_s + ping_ms * self.config.ping_multiplier / 1000.0

    @staticmethod
    def _switch_event(st: _PlayerState, sample: AimSample) -> int | None:
        """The weapon a switch in this command goes to, or None: a new request, or a change of the held
        weapon that no counted request announced."""
        if st.prev_buttons is None:
            st.switch_target = sample.weapon
            return None
        ws = sample.weapon_switch
        if ws and ws != st.prev_switch and ws != sample.weapon and ws != st.switch_target:
            st.switch_target = ws
            return ws
        if sample.weapon != st.prev_weapon and sample.weapon != st.switch_target:
            st.switch_target = sample.weapon
            return sample.weapon
        return None

    def _advance(self, st: _PlayerState, now: float) -> None:
        """Decay the score up to ``now`` and clear it after an idle spell."""
        cfg = self.config
        if st.last_update is not None and now > st.last_update:
            st.score = max(0.0, st.score - cfg.decay_per_s * (now - st.last_update))
        if st.last_update is None or now > st.last_update:
            st.last_update = now
        if st.last_action is not None and now - st.last_action > cfg.idle_reset_s:
            st.clear_score()

    def _add(self, st: _PlayerState, variant: str, now: float) -> None:
        weight = self.config.weight(variant)
        st.score += weight
        # Only an addition raises the score, so its maximum is always one taken here.
        if st.score > st.peak:
            st.peak = st.score
        st.contrib[variant] = st.contrib.get(variant, 0.0) + weight
        st.last_action = now

    def _crouch_variant(
        self, st: _PlayerState, sample: AimSample, buttons: int, pressed: int, now: float, buffer: float
    ) -> str | None:
        """The heaviest variant a crouch press matches (None when its weapon is not monitored)."""
        if sample.weapon not in self.config.monitored_weapons:
            return None
        jumping = bool(buttons & Buttons.JUMP) or not sample.on_ground
        sprint_held = bool(buttons & Buttons.SPRINT)
        leaning = bool(buttons & _LEAN) or st.roll_time is not None
        switch_pending = bool(sample.weapon_switch) or (
            st.switch_request_time is not None and 0.0 <= now - st.switch_request_time <= buffer
        )
        candidates: list[str] = []
        if leaning:
            candidates.append("rollbug")
        if switch_pending:
            candidates.append("quick_cswitch")
        if sample.on_ground and not jumping and not sprint_held:
            candidates.append("classic")
        if jumping:
            candidates.append("jumpbug")
        if sprint_held:
            candidates.append("slide" if pressed & Buttons.SPRINT else "run_bug")
        if not candidates:
            return None
        return max(candidates, key=lambda v: (self.config.weight(v), -VARIANTS.index(v)))

    def _maybe_detect(self, st: _PlayerState, player: int, tick: int, now: float) -> Sequence[Detection]:
        cfg = self.config
        if st.score < cfg.threshold:
            return NO_DETECTIONS
        if st.last_detection is not None and now - st.last_detection <= cfg.cooldown_s:
            self._stats["cooldown"] += 1
            return NO_DETECTIONS
        contrib = dict(st.contrib)
        kind = max(contrib, key=lambda v: (contrib[v], -VARIANTS.index(v)))
        score = st.score
        st.last_detection = now
        st.clear_score()
        st.clear_sequence()
        self._stats["detections"] += 1
        evidence: dict[str, float | int | str] = {v: round(w, 3) for v, w in contrib.items()}
        evidence["threshold"] = cfg.threshold
        return (
            Detection(
                player=player,
                tick=tick,
                time_s=now,
                detector=self.name,
                kind=kind,
                value=score,
                severity=cfg.severity,
                reason=f"C-bug ({kind}) score {score:.2f} >= {cfg.threshold:.2f}",
                evidence=evidence,
            ),
        )
