"""An operator's kick and the live player list on the sans-IO core."""

from __future__ import annotations

from server import protocol as proto
from tests.server_harness import ScriptedClient, make_core, run_ticks


def test_kick_sends_kicked_and_reports_the_player_as_left() -> None:
    core = make_core()
    a = ScriptedClient("alice", ("127.0.0.1", 5001))
    b = ScriptedClient("bob", ("127.0.0.1", 5002))
    a.connect(core, 0.0)
    b.connect(core, 0.0)
    run_ticks(core, [a, b], 3)
    live = core.live_players()
    assert [p["name"] for p in live] == ["alice", "bob"]
    assert live[0]["address"] == "127.0.0.1:5001" and live[0]["connected_s"] == 0.0

    assert core.kick(b.slot, "kicked by admin")
    assert not core.kick(99)
    out = core.step(core.next_tick_s())
    to_bob = [proto.decode_server(d) for addr, d in out if addr == b.address]
    assert proto.ServerDisconnect(proto.DisconnectCode.KICKED) in to_bob
    assert [p["name"] for p in core.live_players()] == ["alice"]
    left = [p for p in core.report()["players"] if not p["connected"]]
    assert [(p["name"], p["left_reason"]) for p in left] == [("bob", "kicked by admin")]
    assert not core.kick(b.slot)
