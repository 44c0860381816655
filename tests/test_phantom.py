"""The phantom (server.phantoms): a player record only a wallhack can see, never in the viewer's
line of sight, a player's record on the wire; and the wallhack detector's ``phantom`` kind."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anticheat.detectors.cusum import llr_steps
from anticheat.detectors.wallhack import WallhackConfig, WallhackDetector
from anticheat.events import AimSample, ConnectionSample, Detection, KillEvent
from anticheat.skip import SkipBook, SkipConfig, SkipReason
from physics.weapon_state import WeaponState
from server import protocol as proto
from server.config import PhantomConfig
from server.entity_block import ENTITY_BYTES, EntityFlags, decode_entities
from server.snapshots import SnapshotBuilder
from world.constants import STANDING_CHEST_M, STANDING_EYE_M
from world.state import WorldLimits, WorldState
from world.weapons import WeaponId

# --- on the wire --------------------------------------------------------------------------------


def test_a_phantom_record_is_byte_for_byte_a_player_record_in_its_slot_order() -> None:
    """The phantom's record equals the record the snapshot writer makes for a real player in
    that slot with the same state, and sits where that player's would in slot order."""
    builder = SnapshotBuilder(proto.ProtocolLimits())
    world = WorldState(WorldLimits(max_players=8))
    weapons = WeaponState(8)
    for s in (0, 1, 3, 6):
        world.active[s] = world.alive[s] = True
        world.pos[s] = (float(s), 2.0, 0.0)
        world.health[s] = 100.0
    weapons.sync_to(world)
    # The phantom takes slot 5: what player 5 would look like with its state.
    ghost = WorldState(WorldLimits(max_players=8))
    ghost_weapons = WeaponState(8)
    ghost.active[5] = ghost.alive[5] = True
    ghost.pos[5], ghost.vel[5] = (10.5, -3.25, 0.0), (2.0, 1.5, 0.0)
    ghost.yaw[5], ghost.pitch[5], ghost.health[5] = 37.0, -2.0, 73.0
    ghost_weapons.sync_to(ghost)
    ghost_weapons.weapon[5] = int(WeaponId.RIFLE)
    real = builder.frame(ghost, ghost_weapons, tick=1, server_time_s=0.0).datagrams(0, [5], [], -1)[0]
    real_block = decode_entities(proto.decode_server(real).entities)

    from server.entity_block import make_entities
    record = make_entities(np.array([5]), np.array([int(EntityFlags.ALIVE)]), ghost.pos[5:6], ghost.vel[5:6],
                           ghost.yaw[5:6], ghost.pitch[5:6], np.array([int(WeaponId.RIFLE)]),
                           np.array([73.0])).view(np.uint8).reshape(1, ENTITY_BYTES)
    frame = builder.frame(world, weapons, tick=1, server_time_s=0.0)
    viewers = np.array([0, 1], dtype=np.intp)
    targets = np.array([1, 3, 6, 0, 3, 6], dtype=np.intp)
    ends = np.array([3, 6], dtype=np.intp)
    out = frame.datagrams_many(viewers, [-1, -1], targets, ends, {1: [(200, (1.0, 1.0, 2.0))]},
                               phantoms=(5, np.array([1], dtype=np.intp), record))
    first = decode_entities(proto.decode_server(out[0][0]).entities)
    second = decode_entities(proto.decode_server(out[1][0]).entities)
    assert first["slot"].tolist() == [1, 3, 6]
    assert second["slot"].tolist() == [0, 3, 5, 6, 200]
    assert second[2].tobytes() == real_block[0].tobytes()
    assert second[4]["flags"] & int(EntityFlags.NOT_RENDERED)


# --- in a played match ----------------------------------------------------------------------------


def _eye_points(pos: np.ndarray) -> np.ndarray:
    """Points of a standing body at feet ``pos`` a client tests line of sight to (m)."""
    return np.array([pos + (0.0, 0.0, h) for h in (0.3, 0.9, STANDING_CHEST_M, 1.5, 1.75)])


def test_a_played_match_never_shows_a_phantom_and_flags_the_wallhack_that_follows_it(tmp_path: Path) -> None:
    """Every snapshot sent over a virtual match: the phantom's record (the slot no player holds)
    is hidden from the viewer's eye (any height up to a jump) to every point of its body, is
    rendered, alive and a player's; it never takes damage or appears in a kill; honest bots
    never count it among what they see; the wallhack's aim follows it, and it alone is flagged."""
    from bots.profiles import profile_names
    from testbed.bot_factory import DefaultBotFactory
    from testbed.match import MatchSetup
    from testbed.scenario import load_scenario
    from testbed.virtual import VirtualNetwork

    # The phantom's alarm threshold for one false alarm per 50 player-hours (the searched range's
    # bottom), so that a short match holds enough phantoms for it.
    (tmp_path / "ph.toml").write_text(
        'map = "corridors"\nduration_s = 30.0\ntick_rate_hz = 64\nseed = 7\n'
        '[tolerances.wallhack]\nphantom_false_alarm_player_hours = 50.0\n'
        '[[bots]]\ncount = 1\nprofile = "honest"\nping_ms = 60.0\n'
        '[[bots]]\ncount = 1\nprofile = "honest"\nskill = "pro"\nping_ms = 250.0\njitter_ms = 10.0\nname_prefix = "far"\n'
        '[[bots]]\ncount = 1\nprofile = "wallhack"\nping_ms = 60.0\nname_prefix = "wh"\n'
    )
    scenario = load_scenario(tmp_path / "ph.toml", profiles=profile_names())
    setup = MatchSetup(scenario, mode="virtual", replay_path=None)
    core = setup.core
    geo = core.geometry
    bots = setup.make_bots(DefaultBotFactory())
    honest_saw: list[int] = []
    for spec, bot in zip(setup.specs, bots, strict=True):
        brain = getattr(bot, "brain", None)
        if spec.profile == "honest" and brain is not None:
            targeting = brain.targeting
            seen = targeting.candidates

            def spy(p: Any, seen: Any = seen) -> Any:
                out = seen(p)
                honest_saw.extend(e.slot for e in out)
                return out

            targeting.candidates = spy
    by_address = {}
    shown = 0
    events: list[Any] = []
    step = core.step

    def checked(now_s: float) -> Any:
        nonlocal shown
        out = step(now_s)
        events.extend(core._tick_events)
        slot = core.phantoms.slot
        if not by_address or len(by_address) != len(core.sessions):
            by_address.clear()
            by_address.update({s.address: s.slot for s in core.sessions.values()})
        for address, datagram in out:
            msg = proto.decode_server(datagram)
            if not isinstance(msg, proto.Snapshot) or slot is None:
                continue
            block = decode_entities(msg.entities)
            mine = block[block["slot"] == slot]
            if not len(mine):
                continue
            assert not core.world.active[slot]
            r = mine[0]
            assert r["flags"] == int(EntityFlags.ALIVE) and r["weapon"] in core.config.primaries
            assert 1 <= r["health"] <= 100 and r["pos"][2] == 0.0
            assert 2.0 <= math.hypot(r["vel"][0], r["vel"][1]) <= 4.7 or not r["vel"].any()
            viewer = by_address[address]
            feet = np.asarray(r["pos"], dtype=np.float64)
            eyes = [core.world.pos[viewer] + (0.0, 0.0, STANDING_EYE_M + z) for z in (-0.6, 0.0, 0.7, 1.4)]
            body = _eye_points(feet)
            for eye in eyes:
                assert not geo.los_clear(np.tile(eye, (len(body), 1)), body).any(), (viewer, feet)
            shown += 1
        return out

    core.step = checked  # type: ignore[method-assign]
    net = VirtualNetwork(core, setup.links_rng)
    for spec, bot in zip(setup.specs, bots, strict=True):
        net.add_client(bot, spec.path, start_s=float(setup.phase_rng.uniform(0.0, core.tick_dt_s)))
    net.run(scenario.duration_s)
    result = setup.finish(scenario.duration_s, 0.0, {})
    assert shown > 500 and core.phantoms.placed >= 4
    phantom_slot = core.phantoms.slot
    assert phantom_slot not in honest_saw
    assert not any(isinstance(e, KillEvent) and phantom_slot in (e.killer, e.victim) for e in events)
    wh = next(p.slot for p in result.players if p.profile == "wallhack")
    on = [e for e in events if isinstance(e, AimSample) and e.player == wh and e.phantom is not None]
    assert on and min(e.phantom_angle_deg for e in on) < 4.0
    flagged = {(p.slot, d.kind) for p in result.players for d in p.detections if d.detector == "wallhack"}
    assert (wh, "phantom") in flagged
    assert {player for player, _ in flagged} == {wh}


# --- the detector ----------------------------------------------------------------------------------


def _sample(t: float, yaw: float, *, phantom: int | None, angle: float, player: int = 0) -> AimSample:
    tick = round(t * 64)
    return AimSample(player, tick, t, tick, yaw, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 1, 0, 0, True, 0.0, None, 180.0, 0.0,
                     None, 180.0, phantom, angle)


def _skip() -> SkipBook:
    return SkipBook(SkipConfig(require_connection=False))


def _phantom_episode(serial: int, start_s: float, tracked: bool) -> list[AimSample]:
    """A phantom's 2.5 s (160 samples at 64 Hz): the view turns 0.5 deg a sample; tracked, the
    phantom stays 1 deg off the crosshair (the view follows it); else 60 deg away."""
    return [_sample(start_s + k / 64, 0.5 * k, phantom=serial, angle=1.0 if tracked else 60.0) for k in range(160)]


def test_phantom_verdicts_drive_the_cusum_as_computed_by_hand() -> None:
    det = WallhackDetector()
    cfg = det.config
    up, down = llr_steps(cfg.phantom_theta0, cfg.phantom_theta1)
    skip = _skip()
    out: list[Detection] = []
    verdicts = [True, False, True, True]
    for i, v in enumerate(verdicts):
        for s in _phantom_episode(i + 1, 3.0 * i, v):
            out.extend(det.on_aim(s, skip))
    # The last episode is judged when a sample without it comes.
    out.extend(det.on_aim(_sample(29.0, 0.0, phantom=None, angle=180.0), skip))
    expected = 0.0
    for v in verdicts:
        expected = max(0.0, expected + (up if v else down))
    c = det.phantom_cusum(0)
    assert det.phantom_episodes_judged == 4 and det.phantom_episodes_positive == 3
    assert c.statistic == pytest.approx(expected)
    assert not out and det.episodes_judged == 0
    # Tracked phantoms, one after the other: an alarm after ceil(h / up) more at most.
    n = math.ceil((det.phantom_h - expected) / up)
    for i in range(n):
        for s in _phantom_episode(10 + i, 30.0 + 3.0 * i, True):
            out.extend(det.on_aim(s, skip))
    out.extend(det.on_aim(_sample(1000.0, 0.0, phantom=None, angle=180.0), skip))
    assert [d.kind for d in out] == ["phantom"] and out[0].detector == "wallhack"
    assert out[0].evidence["phantom"] == 10 + n - 1
    assert det.scores(0)["phantom_llr"] >= 1.0


def test_phantoms_never_aimed_at_never_alarm_and_config_is_checked() -> None:
    det = WallhackDetector()
    skip = _skip()
    out = []
    for i in range(200):
        for s in _phantom_episode(i + 1, 3.0 * i, False):
            out.extend(det.on_aim(s, skip))
    assert not out and det.phantom_episodes_judged >= 199 and det.phantom_episodes_positive == 0
    # Resting on it for a quarter of its life, even while turning, is chance (under 30 %): negative.
    crossed = [_sample(900.0 + k / 64, 1.0 * k, phantom=999, angle=1.0 if k < 40 else 60.0) for k in range(160)]
    for s in [*crossed, _sample(903.0, 0.0, phantom=None, angle=180.0)]:
        det.on_aim(s, skip)
    assert det.phantom_episodes_judged >= 200 and det.phantom_episodes_positive == 0
    with pytest.raises(ValueError):
        WallhackConfig(phantom_theta0=0.6, phantom_theta1=0.5)
    with pytest.raises(ValueError):
        PhantomConfig(min_range_m=10.0, max_range_m=5.0)


def test_phantom_lives_are_judged_on_a_bad_link_but_not_for_an_exempt_player() -> None:
    """Loss and lag skip hidden targets (a real enemy may look hidden on a late picture), but they
    cannot aim a crosshair at a phantom: a satellite-grade link is judged, an exempt bot is not."""
    bad = ConnectionSample(0, 0.0, rtt_ms=700.0, jitter_ms=40.0, loss=0.2, since_update_s=0.0)
    exempt = ConnectionSample(0, 0.0, rtt_ms=20.0, jitter_ms=1.0, loss=0.0, since_update_s=0.0, exempt=True)
    judged = {}
    for name, sample in (("bad", bad), ("exempt", exempt)):
        det = WallhackDetector()
        skip = _skip()
        skip.record(sample)
        assert skip.player_reason(0) in (SkipReason.HIGH_PING, SkipReason.EXEMPT)
        out: list[Detection] = []
        for i in range(40):
            for s in _phantom_episode(i + 1, 3.0 * i, True):
                out.extend(det.on_aim(s, skip))
        judged[name] = (det.phantom_episodes_judged, [d.kind for d in out])
    assert judged["bad"][0] >= 39 and judged["bad"][1][:1] == ["phantom"]
    assert judged["exempt"] == (0, [])
