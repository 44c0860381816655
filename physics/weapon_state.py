"""Weapon mechanics per player slot: fire interval, the crouch-cancel exploit, ammo and reload,
weapon switch, recoil punch and shot spread.

Units: seconds (server time), degrees, meters per second. Per-weapon numbers come from
``world.weapons.WEAPONS``; the rest from ``physics.config.WeaponConfig``.

Ownership: :class:`WeaponState` is authoritative for the held weapon, the per-weapon magazine and
reserve of every weapon a player carries, and all timing state. ``WorldState.weapon/ammo/reserve``
are a mirror of the held weapon's values for snapshots and hit registration; the server copies
them once per tick with :meth:`WeaponState.sync_to` (never write them elsewhere).

The crouch-cancel ("C-bug", REFERENCES section 2) is a *mechanic* here, because a detector must
catch its real use: for a weapon with ``cbug=True``, a crouch press (standing -> crouching) no
later than ``cbug_window_s`` after an accepted shot arms a cancel, and the next shot is then
allowed ``cbug_interval_s`` after the previous one instead of ``fire_interval_s``. Nothing else
shortens the interval: switching weapons costs ``deploy_s`` and the interval is kept per weapon,
so a quick switch back never fires a weapon earlier than its own interval.

Order within one command: the caller applies movement first and reports the crouch press
(:meth:`WeaponState.note_crouch_presses`), then fires (:meth:`WeaponState.try_fire`). A crouch
pressed in the same command as a shot therefore counts for the *previous* shot, which is what
happened in time: the crouch came before this trigger pull.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from physics.config import WeaponConfig
from physics.evidence import FireEvidence, FireKind
from world.constants import STANCE_CROUCHING
from world.state import WorldState
from world.weapons import WEAPONS, WeaponId, WeaponSpec

NO_WEAPON = 0
"""Weapon id of an empty hand (a slot that has not spawned)."""


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, slots=True)
class WeaponTable:
    """The weapon table as read-only arrays indexed by weapon id (index 0 = no weapon), so per-tick
    work over players can gather per-weapon numbers with one indexing operation."""

    fire_interval_s: np.ndarray
    cbug: np.ndarray
    cbug_window_s: np.ndarray
    cbug_interval_s: np.ndarray
    magazine: np.ndarray
    reserve: np.ndarray
    reload_s: np.ndarray
    recovery_deg_s: np.ndarray
    spread_deg: np.ndarray
    moving_spread_deg: np.ndarray
    airborne_spread_deg: np.ndarray
    crouch_spread_factor: np.ndarray
    move_speed_m_s: np.ndarray

    @property
    def size(self) -> int:
        """Number of rows (largest weapon id + 1)."""
        return int(self.fire_interval_s.shape[0])

    @classmethod
    def build(cls, weapons: dict[WeaponId, WeaponSpec] = WEAPONS) -> WeaponTable:
        """Gather ``weapons`` into arrays; row 0 (no weapon) never fires and does not move fast."""
        size = max(int(w) for w in weapons) + 1

        def col(attr: str, dtype: type, empty: float) -> np.ndarray:
            out: np.ndarray = np.full(size, empty, dtype=dtype)
            for wid, spec in weapons.items():
                out[int(wid)] = getattr(spec, attr)
            return _readonly(out)

        return cls(
            fire_interval_s=col("fire_interval_s", np.float64, np.inf),
            cbug=col("cbug", bool, False),
            cbug_window_s=col("cbug_window_s", np.float64, 0.0),
            cbug_interval_s=col("cbug_interval_s", np.float64, np.inf),
            magazine=col("magazine", np.int16, 0),
            reserve=col("reserve", np.int16, 0),
            reload_s=col("reload_s", np.float64, 0.0),
            recovery_deg_s=col("recoil_recovery_deg_s", np.float64, 0.0),
            spread_deg=col("spread_deg", np.float64, 0.0),
            moving_spread_deg=col("moving_spread_deg", np.float64, 0.0),
            airborne_spread_deg=col("airborne_spread_deg", np.float64, 0.0),
            crouch_spread_factor=col("crouch_spread_factor", np.float64, 1.0),
            move_speed_m_s=col("move_speed_m_s", np.float64, 0.0),
        )


TABLE = WeaponTable.build()
"""The built-in weapon table (read-only)."""


_ADVANCED = 0
_USE_NUMPY = 1
_NOT_FINITE = 2


@numba.njit(cache=True)
def _advance_kernel(
    rows: np.ndarray, now_s: np.ndarray, weapon: np.ndarray, recovery_deg_s: np.ndarray, magazine: np.ndarray,
    punch_pitch: np.ndarray, punch_yaw: np.ndarray, punch_time: np.ndarray, reload_end: np.ndarray,
    ammo: np.ndarray, reserve: np.ndarray,
) -> int:
    """Punch recovery and reload completion of distinct ``rows``, each at its own time: what
    ``WeaponState._recover`` then ``_finish_reloads`` compute, operation for operation in IEEE
    double (no fast-math), without numpy's per-call costs. Changes nothing and returns
    _NOT_FINITE for a non-finite time, _USE_NUMPY for a row outside the slots or named twice (the
    numpy version's indexing semantics then apply), else _ADVANCED."""
    cap = weapon.shape[0]
    seen = np.zeros(cap, dtype=np.bool_)
    for i in range(rows.shape[0]):
        if not math.isfinite(now_s[i]):
            return _NOT_FINITE
    for i in range(rows.shape[0]):
        s = rows[i]
        if s < 0 or s >= cap or seen[s]:
            return _USE_NUMPY
        seen[s] = True
    for i in range(rows.shape[0]):
        s = rows[i]
        t = now_s[i]
        dt = t - punch_time[s]
        if not (dt >= 0.0 or math.isnan(dt)):
            dt = 0.0
        pp = punch_pitch[s]
        py = punch_yaw[s]
        mag = math.hypot(pp, py)
        new = mag - recovery_deg_s[weapon[s]] * dt
        if not (new >= 0.0 or math.isnan(new)):
            new = 0.0
        scale = new / mag if mag > 0.0 else 0.0
        punch_pitch[s] = pp * scale
        punch_yaw[s] = py * scale
        pt = punch_time[s]
        punch_time[s] = pt if (pt >= t or math.isnan(pt)) else t
        end = reload_end[s]
        if not math.isnan(end) and end <= t:
            held = weapon[s]
            need = np.int32(magazine[held]) - np.int32(ammo[s, held])
            take = min(need, np.int32(reserve[s, held]))
            ammo[s, held] += take
            reserve[s, held] -= take
            reload_end[s] = np.nan
    return _ADVANCED


@numba.njit(cache=True)
def _sync_kernel(weapon: np.ndarray, ammo: np.ndarray, reserve: np.ndarray, n: int,
                 world_weapon: np.ndarray, world_ammo: np.ndarray, world_reserve: np.ndarray) -> None:
    """``WeaponState.sync_to`` over the first ``n`` slots."""
    for s in range(n):
        held = weapon[s]
        world_weapon[s] = held
        world_ammo[s] = ammo[s, held]
        world_reserve[s] = reserve[s, held]


@dataclass(frozen=True, slots=True)
class FireOutcome:
    """The server's answer to one shot command.

    Attributes:
        accepted: the shot fired. player: slot. weapon: the id the client named. time_s (s).
        interval_s: time since this player's previous accepted shot with this weapon (s), inf if
            none: the figure the fire-rate and C-bug detectors want.
        allowed_s: the shortest interval allowed at that moment (s): ``cbug_interval_s`` when a
            crouch-cancel was armed, ``fire_interval_s`` otherwise.
        cbug_used: the shot was accepted only thanks to an armed crouch-cancel (interval shorter
            than the normal fire interval).
        cbug_armed: a crouch-cancel was armed when the command arrived (used or not).
        shot_index: position of this shot in the current spray (0-based; the recoil pattern entry
            applied after it); -1 when refused.
        punch_pitch_deg, punch_yaw_deg: the recoil punch the shot was fired with (deg, pitch up,
            yaw right); the kick of this shot is added afterwards and affects the next one.
        ammo_left: rounds left in the magazine after the command.
        reload_started: the command started a reload (fire on an empty magazine with reserve).
        evidence: why the shot was refused, or None when accepted.
    """

    accepted: bool
    player: int
    weapon: int
    time_s: float
    interval_s: float
    allowed_s: float
    cbug_used: bool
    cbug_armed: bool
    shot_index: int
    punch_pitch_deg: float
    punch_yaw_deg: float
    ammo_left: int
    reload_started: bool
    evidence: FireEvidence | None


class WeaponState:
    """Weapon state of ``capacity`` player slots (structure of arrays).

    Arrays (N = capacity, W = table size):
        weapon (N,) int8 held weapon id (0 none); owned (N, W) bool;
        ammo (N, W), reserve (N, W) int16 rounds per weapon;
        last_shot_s (N, W) float64, time of the last accepted shot per weapon (-inf none);
        shot_index (N,) int32, consecutive shots in the current spray (restarts after a pause of
            more than ``spray_gap_s`` beyond the fire interval, a switch or a reload);
        punch_pitch_deg, punch_yaw_deg (N,) accumulated recoil (deg), recovering at the weapon's
            ``recoil_recovery_deg_s``; punch_time_s (N,) time the punch was last brought up to date;
        reload_end_s (N,) float64, end of the running reload (NaN none);
        switch_end_s (N,) float64, the held weapon may fire from this time on;
        cbug_armed (N,) bool.
    """

    def __init__(self, capacity: int, config: WeaponConfig | None = None, table: WeaponTable = TABLE) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.config = config or WeaponConfig()
        self.table = table
        w = table.size
        self.weapon = np.zeros(capacity, dtype=np.int8)
        self.owned = np.zeros((capacity, w), dtype=bool)
        self.ammo = np.zeros((capacity, w), dtype=np.int16)
        self.reserve = np.zeros((capacity, w), dtype=np.int16)
        self.last_shot_s = np.full((capacity, w), -np.inf, dtype=np.float64)
        self.shot_index = np.zeros(capacity, dtype=np.int32)
        self.punch_pitch_deg = np.zeros(capacity, dtype=np.float64)
        self.punch_yaw_deg = np.zeros(capacity, dtype=np.float64)
        self.punch_time_s = np.zeros(capacity, dtype=np.float64)
        self.reload_end_s = np.full(capacity, np.nan, dtype=np.float64)
        self.switch_end_s = np.zeros(capacity, dtype=np.float64)
        self.cbug_armed = np.zeros(capacity, dtype=bool)
        # Load (or compile) the kernel now, not in the middle of the first tick that needs it.
        self.advance_slots(np.zeros(0, np.intp), np.zeros(0))

    # ------------------------------------------------------------------ lifecycle

    @property
    def capacity(self) -> int:
        """Number of player slots."""
        return int(self.weapon.shape[0])

    def _slot(self, slot: int) -> int:
        if not isinstance(slot, (int, np.integer)) or not 0 <= int(slot) < self.capacity:
            raise ValueError(f"unknown player slot {slot!r} (capacity {self.capacity})")
        return int(slot)

    def _weapon_id(self, weapon_id: int) -> int:
        wid = int(weapon_id)
        if not 0 < wid < self.table.size or not math.isfinite(self.table.fire_interval_s[wid]):
            raise ValueError(f"unknown weapon id {weapon_id!r}")
        return wid

    @staticmethod
    def _time(now_s: float) -> float:
        t = float(now_s)
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {now_s!r}")
        return t

    def spawn(self, slot: int, loadout: Sequence[int], now_s: float) -> None:
        """(Re)arm a player with ``loadout`` (weapon ids; the first is held, ready at once) and
        full magazines and reserves; every timer, the punch and the spray are reset."""
        s = self._slot(slot)
        t = self._time(now_s)
        ids = [self._weapon_id(w) for w in loadout]
        if not ids:
            raise ValueError("loadout must name at least one weapon")
        self.clear(s)
        self.owned[s, ids] = True
        self.ammo[s, ids] = self.table.magazine[ids]
        self.reserve[s, ids] = self.table.reserve[ids]
        self.weapon[s] = ids[0]
        self.punch_time_s[s] = t
        self.switch_end_s[s] = t

    def clear(self, slot: int) -> None:
        """Empty a slot (player left, or before a respawn)."""
        s = self._slot(slot)
        self.weapon[s] = NO_WEAPON
        self.owned[s] = False
        self.ammo[s] = 0
        self.reserve[s] = 0
        self.last_shot_s[s] = -np.inf
        self.shot_index[s] = 0
        self.punch_pitch_deg[s] = 0.0
        self.punch_yaw_deg[s] = 0.0
        self.punch_time_s[s] = 0.0
        self.reload_end_s[s] = np.nan
        self.switch_end_s[s] = 0.0
        self.cbug_armed[s] = False

    def sync_to(self, world: WorldState) -> None:
        """Mirror the held weapon, its magazine and reserve into ``world`` (all slots, vectorised)."""
        n = min(self.capacity, world.capacity)
        _sync_kernel(self.weapon, self.ammo, self.reserve, n, world.weapon, world.ammo, world.reserve)

    # ------------------------------------------------------------------ time

    def _advance(self, rows: np.ndarray, now_s: np.ndarray | float) -> None:
        """Punch recovery then reload completion of ``rows`` at ``now_s`` (s, scalar or one per row)."""
        r = np.asarray(rows, dtype=np.intp)
        t = np.asarray(now_s, dtype=np.float64)
        if t.shape != r.shape:
            t = np.full(r.shape, t)
        self._advance_rows(r, t)

    def _advance_rows(self, r: np.ndarray, t: np.ndarray) -> None:
        """:meth:`_advance` of an intp array of rows and a float64 array of times of its shape."""
        status = _USE_NUMPY
        if r.ndim == 1:
            tab = self.table
            status = _advance_kernel(r, t, self.weapon, tab.recovery_deg_s, tab.magazine, self.punch_pitch_deg,
                                     self.punch_yaw_deg, self.punch_time_s, self.reload_end_s, self.ammo, self.reserve)
        if status == _NOT_FINITE:
            raise ValueError("now_s must be finite")
        if status == _USE_NUMPY:
            if not np.all(np.isfinite(t)):
                raise ValueError("now_s must be finite")
            self._recover(r, t)
            self._finish_reloads(r, t)

    def _recover(self, rows: np.ndarray, now_s: np.ndarray | float) -> None:
        """Bring the punch of ``rows`` up to ``now_s``: its magnitude falls linearly at the held
        weapon's recovery rate. (The reference of ``_advance_kernel``, and what runs for repeated rows.)"""
        if not rows.size:
            return
        dt = np.maximum(now_s - self.punch_time_s[rows], 0.0)
        rate = self.table.recovery_deg_s[self.weapon[rows].astype(np.intp)]
        pp, py = self.punch_pitch_deg[rows], self.punch_yaw_deg[rows]
        mag = np.hypot(pp, py)
        new = np.maximum(mag - rate * dt, 0.0)
        scale = np.where(mag > 0.0, new / np.where(mag > 0.0, mag, 1.0), 0.0)
        self.punch_pitch_deg[rows] = pp * scale
        self.punch_yaw_deg[rows] = py * scale
        self.punch_time_s[rows] = np.maximum(self.punch_time_s[rows], now_s)

    def _finish_reloads(self, rows: np.ndarray, now_s: np.ndarray | float) -> None:
        end = self.reload_end_s[rows]
        done = rows[~np.isnan(end) & (end <= now_s)]
        if not done.size:
            return
        held = self.weapon[done].astype(np.intp)
        need = self.table.magazine[held].astype(np.int32) - self.ammo[done, held]
        take = np.minimum(need, self.reserve[done, held]).astype(np.int16)
        self.ammo[done, held] += take
        self.reserve[done, held] -= take
        self.reload_end_s[done] = np.nan

    def advance(self, now_s: float) -> None:
        """Per-tick update of every slot (vectorised): punch recovery and reload completion."""
        t = self._time(now_s)
        self._advance(np.arange(self.capacity), t)

    def advance_slots(self, slots: np.ndarray, now_s: np.ndarray) -> None:
        """Bring ``slots`` up to their own clocks ``now_s`` (s, one per slot): punch recovery and
        reload completion. A server that runs each player's weapon on that player's command clock
        (so network jitter never makes a shot look early) advances players one clock each."""
        rows = np.asarray(slots, dtype=np.intp)
        t = np.asarray(now_s, dtype=np.float64)
        if rows.shape != t.shape:
            raise ValueError("slots and now_s must have the same shape")
        self._advance_rows(rows, t)

    def reloading(self, now_s: float) -> np.ndarray:
        """(N,) bool: a reload is running at ``now_s``."""
        end = self.reload_end_s
        return ~np.isnan(end) & (end > now_s)

    def ready(self, slots: np.ndarray, now_s: np.ndarray) -> np.ndarray:
        """(K,) bool: each slot's held weapon would accept a shot at its own time ``now_s`` (s, one
        per slot; the slots brought up to it): a weapon held and deployed, no reload running, a
        round in the magazine and the weapon's fire interval since its last shot elapsed (a
        crouch-cancel's shorter interval aside). What ``try_fire`` accepts, asked without firing."""
        rows = np.asarray(slots, dtype=np.intp)
        t = np.asarray(now_s, dtype=np.float64)
        held = self.weapon[rows].astype(np.intp)
        end = self.reload_end_s[rows]
        reloading = ~np.isnan(end) & (end > t)
        interval = self.table.fire_interval_s[held]
        since = t - self.last_shot_s[rows, held]
        return ((held != NO_WEAPON) & (t >= self.switch_end_s[rows]) & ~reloading & (self.ammo[rows, held] > 0)
                & (since >= interval - self.config.interval_epsilon_s))

    def _reloading_at(self, slot: int, now_s: float) -> bool:
        """``reloading(now_s)[slot]`` without computing every slot."""
        end = float(self.reload_end_s[slot])
        return not math.isnan(end) and end > now_s

    # ------------------------------------------------------------------ actions

    def switch_weapon(self, slot: int, weapon_id: int, now_s: float) -> bool:
        """Start deploying ``weapon_id`` (must be owned): cancels a reload and an armed crouch-cancel,
        resets the punch and the spray; the weapon may fire ``deploy_s`` later. Returns False (and
        changes nothing) for a weapon the player does not carry; switching to the held weapon is a
        no-op returning True."""
        s = self._slot(slot)
        t = self._time(now_s)
        w = self._weapon_id(weapon_id)
        if not self.owned[s, w]:
            return False
        if w == int(self.weapon[s]):
            return True
        self.weapon[s] = w
        self.reload_end_s[s] = np.nan
        self.cbug_armed[s] = False
        self.punch_pitch_deg[s] = 0.0
        self.punch_yaw_deg[s] = 0.0
        self.punch_time_s[s] = t
        self.shot_index[s] = 0
        self.switch_end_s[s] = t + self.config.deploy_s
        return True

    def start_reload(self, slot: int, now_s: float) -> bool:
        """Start reloading the held weapon (RELOAD button). Refused (False) while switching or
        reloading, with a full magazine or an empty reserve. The reload ends ``reload_s`` later
        and disarms a pending crouch-cancel."""
        s = self._slot(slot)
        t = self._time(now_s)
        self._advance(np.array([s]), t)
        w = int(self.weapon[s])
        if w == NO_WEAPON or t < self.switch_end_s[s] or not np.isnan(self.reload_end_s[s]):
            return False
        if self.ammo[s, w] >= self.table.magazine[w] or self.reserve[s, w] <= 0:
            return False
        self.reload_end_s[s] = t + self.table.reload_s[w]
        self.cbug_armed[s] = False
        self.shot_index[s] = 0
        return True

    def note_crouch_presses(self, slots: np.ndarray, now_s: float) -> np.ndarray:
        """Crouch presses (standing -> crouching, ``MoveResult.crouch_pressed``) of ``slots`` at
        ``now_s``: arms the crouch-cancel of those holding a ``cbug`` weapon whose last accepted
        shot with it is at most ``cbug_window_s`` old. Returns (K,) bool, armed by this press.
        A press outside the window, with another weapon, or during a reload changes nothing."""
        t = self._time(now_s)
        sl = np.asarray(slots, dtype=np.intp)
        if not sl.size:
            return np.zeros(0, dtype=bool)
        held = self.weapon[sl].astype(np.intp)
        since = t - self.last_shot_s[sl, held]
        eps = self.config.interval_epsilon_s
        arm = (
            self.table.cbug[held]
            & (since >= 0.0)
            & (since <= self.table.cbug_window_s[held] + eps)
            & ~self.reloading(t)[sl]
        )
        self.cbug_armed[sl[arm]] = True
        return arm

    def try_fire(self, slot: int, weapon_id: int, now_s: float, tick: int = 0, alive: bool = True) -> FireOutcome:
        """A shot command from ``slot`` naming ``weapon_id`` at server time ``now_s`` (s).

        Checks, in order: dead (``alive`` False), wrong weapon, still deploying, reloading, empty
        magazine (starts a reload when there is reserve), too soon. An accepted shot uses a round,
        consumes an armed crouch-cancel and adds the weapon's recoil kick for this spray position.
        """
        s = self._slot(slot)
        t = self._time(now_s)
        self._advance(np.array([s]), t)

        held = int(self.weapon[s])
        named = int(weapon_id)
        armed = bool(self.cbug_armed[s])
        normal = float(self.table.fire_interval_s[held]) if held else math.inf
        allowed = float(self.table.cbug_interval_s[held]) if armed else normal
        last = float(self.last_shot_s[s, held]) if held else -math.inf
        interval = t - last
        eps = self.config.interval_epsilon_s

        kind: FireKind | None = None
        reload_started = False
        if not alive:
            kind = FireKind.DEAD
        elif held == NO_WEAPON or named != held:
            kind = FireKind.WRONG_WEAPON
        elif t < self.switch_end_s[s]:
            kind = FireKind.SWITCHING
        elif self._reloading_at(s, t):
            kind = FireKind.RELOADING
        elif self.ammo[s, held] <= 0:
            kind = FireKind.EMPTY
            reload_started = self.start_reload(s, t)
        elif interval < allowed - eps:
            kind = FireKind.TOO_SOON

        if kind is not None:
            return FireOutcome(
                accepted=False,
                player=s,
                weapon=named,
                time_s=t,
                interval_s=interval,
                allowed_s=allowed,
                cbug_used=False,
                cbug_armed=armed,
                shot_index=-1,
                punch_pitch_deg=float(self.punch_pitch_deg[s]),
                punch_yaw_deg=float(self.punch_yaw_deg[s]),
                ammo_left=int(self.ammo[s, held]) if held else 0,
                reload_started=reload_started,
                evidence=FireEvidence(
                    player=s,
                    tick=int(tick),
                    time_s=t,
                    weapon=named,
                    kind=kind,
                    interval_s=interval,
                    allowed_s=allowed,
                ),
            )

        spec = WEAPONS[WeaponId(held)]
        index = int(self.shot_index[s]) if interval <= normal + self.config.spray_gap_s else 0
        fired_pitch, fired_yaw = float(self.punch_pitch_deg[s]), float(self.punch_yaw_deg[s])
        kick_pitch, kick_yaw = spec.recoil_kick(index)
        self.punch_pitch_deg[s] += kick_pitch
        self.punch_yaw_deg[s] += kick_yaw
        self.shot_index[s] = index + 1
        self.ammo[s, held] -= 1
        self.last_shot_s[s, held] = t
        self.cbug_armed[s] = False
        return FireOutcome(
            accepted=True,
            player=s,
            weapon=named,
            time_s=t,
            interval_s=interval,
            allowed_s=allowed,
            cbug_used=armed and interval < normal - eps,
            cbug_armed=armed,
            shot_index=index,
            punch_pitch_deg=fired_pitch,
            punch_yaw_deg=fired_yaw,
            ammo_left=int(self.ammo[s, held]),
            reload_started=False,
            evidence=None,
        )


# ---------------------------------------------------------------------- spread


def current_spread_deg(
    weapon_id: np.ndarray | int,
    horizontal_speed_m_s: np.ndarray | float,
    on_ground: np.ndarray | bool,
    stance: np.ndarray | int,
    table: WeaponTable = TABLE,
) -> np.ndarray:
    """Radius (deg) of the random cone of shots, per player (arrays broadcast).

    ``spread_deg`` + ``moving_spread_deg`` x min(1, speed / weapon speed) + ``airborne_spread_deg``
    when not on the ground, all times ``crouch_spread_factor`` when crouching.
    """
    if type(on_ground) is bool and isinstance(weapon_id, int) and isinstance(horizontal_speed_m_s, float | int) \
            and isinstance(stance, int):
        # One player (the server's shot, a bot's aim): the same IEEE operations on Python floats,
        # without ~15 numpy calls of fixed overhead. (Clipping a -0.0 fraction may keep its sign
        # where np.clip would not; added to a non-zero spread it gives the same bits.)
        move = float(table.move_speed_m_s[weapon_id])
        frac = min(max(horizontal_speed_m_s / (move if move > 0.0 else 1.0), 0.0), 1.0)
        cone = float(table.spread_deg[weapon_id]) + float(table.moving_spread_deg[weapon_id]) * frac
        cone = cone + (0.0 if on_ground else float(table.airborne_spread_deg[weapon_id]))
        return np.float64(cone * (float(table.crouch_spread_factor[weapon_id]) if stance == STANCE_CROUCHING else 1.0))
    w = np.asarray(weapon_id, dtype=np.intp)
    speed = np.asarray(horizontal_speed_m_s, dtype=np.float64)
    move = table.move_speed_m_s[w]
    frac = np.clip(speed / np.where(move > 0.0, move, 1.0), 0.0, 1.0)
    cone = table.spread_deg[w] + table.moving_spread_deg[w] * frac
    cone = cone + np.where(np.asarray(on_ground, dtype=bool), 0.0, table.airborne_spread_deg[w])
    crouched = np.asarray(stance) == STANCE_CROUCHING
    return cone * np.where(crouched, table.crouch_spread_factor[w], 1.0)


def shot_directions(
    yaw_deg: float,
    pitch_deg: float,
    punch_pitch_deg: float,
    punch_yaw_deg: float,
    spread_deg: float,
    pellets: int,
    pellet_spread_deg: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Unit directions (pellets, 3) of one shot.

    The aim is the view (yaw, pitch) plus the punch (pitch up, yaw to the right, so the fired yaw
    is ``yaw - punch_yaw``). One offset uniform in a disc of ``spread_deg`` moves the whole shot;
    each pellet then gets its own offset uniform in a disc of ``pellet_spread_deg``. Offsets are
    exact angles from the aim, so every direction lies within ``spread_deg + pellet_spread_deg``
    of it. Draw order (deterministic for a seeded ``rng``): 2 uniforms for the shot, then 2 per
    pellet (none for a single-pellet weapon).
    """
    if pellets < 1:
        raise ValueError("pellets must be at least 1")
    for name, value in (
        ("yaw_deg", yaw_deg),
        ("pitch_deg", pitch_deg),
        ("punch_pitch_deg", punch_pitch_deg),
        ("punch_yaw_deg", punch_yaw_deg),
        ("spread_deg", spread_deg),
        ("pellet_spread_deg", pellet_spread_deg),
    ):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    if spread_deg < 0.0 or pellet_spread_deg < 0.0:
        raise ValueError("spread radii must be >= 0")
    aim_yaw = yaw_deg - punch_yaw_deg
    # min/max give np.clip's value for a finite angle, without its fixed cost.
    aim_pitch = min(90.0, max(-90.0, pitch_deg + punch_pitch_deg))
    # A shot is a few rays, so numpy's fixed cost per call, not the arithmetic, is what it costs
    # (paid on a tick's cold caches): the draws are one call, the angles of each stage go through
    # cos and sin together, and the few rows are combined in Python floats. Every value is the one
    # the array formulation gives (element-wise numpy trigonometry gives each element the same bits
    # whatever the array; + - * / are IEEE either way); a test holds the two together.
    extra = pellets if pellets > 1 else 0
    u = rng.random((1 + extra, 2))  # the same stream as 2 draws for the shot, then 2 per pellet
    radius = np.full(1 + extra, pellet_spread_deg)
    radius[0] = spread_deg
    r = radius * np.sqrt(u[:, 0])
    a = 2.0 * np.pi * u[:, 1]
    angles = np.concatenate((np.radians([aim_pitch, aim_yaw]), a))
    cos, sin = np.cos(angles), np.sin(angles)
    cp = cos[0]
    f0, f1, f2 = float(cp * cos[1]), float(cp * sin[1]), float(sin[0])
    yaw = math.radians(aim_yaw)
    r0, r1, r2 = math.sin(yaw), -math.cos(yaw), 0.0
    # right x fwd, with np.cross's products and differences.
    u0, u1, u2 = r1 * f2 - r2 * f1, r2 * f0 - r0 * f2, r0 * f1 - r1 * f0
    off_x, off_y = r * cos[2:], r * sin[2:]
    if extra:
        off_x, off_y = off_x[0] + off_x[1:], off_y[0] + off_y[1:]
    rho = np.radians(np.hypot(off_x, off_y))
    phi = np.arctan2(off_y, off_x)
    n = rho.size
    turns = np.concatenate((rho, phi))
    cos_t, sin_t = np.cos(turns).tolist(), np.sin(turns).tolist()
    rows = []
    for k in range(n):
        c_rho, s_rho, c_phi, s_phi = cos_t[k], sin_t[k], cos_t[n + k], sin_t[n + k]
        rows.append((c_rho * f0 + s_rho * (c_phi * r0 + s_phi * u0), c_rho * f1 + s_rho * (c_phi * r1 + s_phi * u1),
                     c_rho * f2 + s_rho * (c_phi * r2 + s_phi * u2)))
    out = np.array(rows)
    # np.linalg.norm's own computation for real rows.
    return out / np.sqrt(np.add.reduce(out * out, axis=1, keepdims=True))
