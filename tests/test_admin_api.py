"""The admin API over HTTP: a real uvicorn on 127.0.0.1 on the game server's loop, a real core
with real bots (a speed hacker, an honest player), and httpx as the client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from anticheat.detectors.bustaim import BustAimFlag
from physics.evidence import MovementKind
from server.admin.explain import explain
from tests.admin_live import CHEATER, HONEST, LiveAdmin, live_admin, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live() -> AsyncIterator[LiveAdmin]:
    async with live_admin() as server:
        yield server


async def test_every_api_route_needs_the_token(live: LiveAdmin) -> None:
    async with httpx.AsyncClient(base_url=live.url) as anonymous:
        for path in ("/api/state", "/api/players", "/api/review", "/api/appeals", "/api/detections"):
            assert (await anonymous.get(path)).status_code == 401, path
            wrong = await anonymous.get(path, headers={"Authorization": "Bearer " + "y" * 43})
            assert wrong.status_code == 401, path
            basic = await anonymous.get(path, headers={"Authorization": f"Basic {live.token}"})
            assert basic.status_code == 401, path
        kicked = await anonymous.post("/api/players/0/kick", json={"reason": "no"})
        assert kicked.status_code == 401
        assert kicked.headers["www-authenticate"] == "Bearer"
        # What carries no data is open: the page, its script, the schema and its reference.
        page = await anonymous.get("/")
        assert page.status_code == 200 and "Referee admin" in page.text
        assert (await anonymous.get("/static/admin.js")).status_code == 200
        assert (await anonymous.get("/api-docs")).status_code == 200
        schema = (await anonymous.get("/openapi.json")).json()
        assert "/api/review/{item_id}/dismiss" in schema["paths"]
        assert "/api/players/{slot}/kick" in schema["paths"]
        # Swagger UI and ReDoc need a CDN: they are off rather than broken.
        assert (await anonymous.get("/docs")).status_code == 404


async def test_live_players_show_ping_loss_and_score(live: LiveAdmin) -> None:
    async def both() -> list[dict[str, Any]] | None:
        players = await live.get("/api/players")
        names = {p["name"] for p in players}
        return players if {CHEATER, HONEST} <= names else None

    players = await wait_for(both, "both bots connected")
    for p in players:
        assert isinstance(p["rtt_ms"], float) and p["rtt_ms"] >= 0.0
        assert 0.0 <= p["loss"] <= 1.0
        assert p["score"] == p["kills"]
        assert p["key"] == p["name"]
    state = await live.get("/api/state")
    assert state["overview"]["players"] == len(live.core.by_slot)
    assert state["overview"]["tick"] > 0


async def test_detections_come_with_evidence_and_an_explanation(live: LiveAdmin) -> None:
    slot = await live.slot_of(CHEATER)

    async def detected() -> dict[str, Any] | None:
        player = await live.get(f"/api/players/{slot}")
        return player if player["recent_detections"] else None

    player = await wait_for(detected, "a detection of the speed hacker")
    detection = player["recent_detections"][0]
    assert detection["detector"] == "movement" and detection["kind"] in {k.value for k in MovementKind}
    evidence = dict(detection["evidence"])
    assert {"value", "limit", "count"} <= evidence.keys()
    assert detection["explanation"] == explain("movement", detection["kind"], detection["value"], evidence)
    assert "Measured" not in detection["explanation"]  # the kind's own sentence, not the fallback
    assert detection["evidence_id"] is not None and detection["dismissed"] is False
    sanction = player["sanction_detail"]
    families = {f["family"]: f for f in sanction["families"]}
    assert families["movement"]["contribution"] > 0.0 and families["movement"]["evidence"] >= 1
    assert sanction["score"] == pytest.approx(player["sanction"]["score"], abs=1e-3)
    feed = await live.get("/api/detections?limit=5")
    assert feed and all(d["player"] == CHEATER for d in feed)
    assert (await live.client.get("/api/players/63")).status_code == 404


async def test_review_dismiss_confirm_and_appeal(live: LiveAdmin) -> None:
    item = await live.pending_item(CHEATER)
    assert item["evidence"] and item["evidence"][0]["explanation"]
    dismissed = (await live.client.post(f"/api/review/{item['id']}/dismiss",
                                        json={"reviewer": "tester", "note": "lag"})).json()
    assert dismissed["status"] == "dismissed" and dismissed["reviewer"] == "tester"
    # The operator marked exactly that item's evidence dismissed: it stops counting.
    policy = live.operator.policy
    assert policy is not None
    dismissed_ids = {e.id for e in policy.evidence(CHEATER) if e.dismissed}
    assert set(live.operator.review.get(item["id"]).evidence_ids) <= dismissed_ids
    shown = (await live.get(f"/api/review/{item['id']}"))["evidence"]
    assert shown and all(d["dismissed"] is True for d in shown)
    again = await live.client.post(f"/api/review/{item['id']}/dismiss", json={"reviewer": "tester"})
    assert again.status_code == 409
    assert (await live.client.post("/api/review/9999/dismiss", json={})).status_code == 404

    # The hacker keeps cheating: new evidence opens a new item, which a reviewer confirms.
    async def newer() -> dict[str, Any] | None:
        review = await live.get("/api/review")
        return next((i for i in review["pending"] if i["player"] == CHEATER and i["id"] != item["id"]), None)

    second = await wait_for(newer, "a second review item")
    confirmed = (await live.client.post(f"/api/review/{second['id']}/confirm",
                                        json={"reviewer": "tester", "note": "clear", "level": "kick"})).json()
    assert confirmed["status"] == "confirmed" and confirmed["confirmed_level"] == "kick"
    assert live.operator.review.get(second["id"]).status.value == "confirmed"
    bad_level = await live.client.post(f"/api/review/{second['id']}/confirm", json={"level": "exile"})
    assert bad_level.status_code == 400

    appeal = await live.client.post("/api/appeals", json={"player": CHEATER, "review_item": second["id"],
                                                          "text": "it was lag"})
    assert appeal.status_code == 201
    decided = (await live.client.post(f"/api/appeals/{appeal.json()['id']}/decide",
                                      json={"reviewer": "tester", "overturn": True, "note": "benefit of doubt"})).json()
    assert decided["status"] == "granted"
    assert (await live.get(f"/api/review/{second['id']}"))["status"] == "overturned"
    appeals = await live.get("/api/appeals")
    assert appeals[0]["id"] == decided["id"] and appeals[0]["text"] == "it was lag"


async def test_detector_and_bustaim_flags(live: LiveAdmin) -> None:
    slot = await live.slot_of(HONEST)
    off = await live.client.put(f"/api/players/{slot}/detectors/movement", json={"enabled": False})
    assert off.status_code == 200
    assert {d["detector"]: d["enabled"] for d in off.json()["detectors"]}["movement"] is False
    assert not live.operator.pipeline.is_enabled(slot, "movement")
    await live.client.put(f"/api/players/{slot}/detectors/movement", json={"enabled": True})
    assert live.operator.pipeline.is_enabled(slot, "movement")
    assert (await live.client.put(f"/api/players/{slot}/detectors/nope", json={"enabled": False})).status_code == 404

    flags = (await live.client.put(f"/api/players/{slot}/bustaim", json={"flags": int(BustAimFlag.IGNORE_PLAYER)})).json()
    checks = {c["name"]: c["on"] for c in flags["bustaim"]["checks"]}
    assert checks["ignore_player"] and not checks["check_random_aim"]
    assert live.operator.pipeline.detector("bustaim").get_flags(slot) == BustAimFlag.IGNORE_PLAYER  # type: ignore[attr-defined]
    assert (await live.client.put(f"/api/players/{slot}/bustaim", json={"flags": 99})).status_code == 422


async def test_kick_disconnects_the_player(live: LiveAdmin) -> None:
    slot = await live.slot_of(HONEST)
    response = await live.client.post(f"/api/players/{slot}/kick", json={"reason": "admin test kick"})
    assert response.status_code == 200 and response.json()["kicked"] is True

    async def gone() -> bool:
        return all(p["name"] != HONEST for p in await live.get("/api/players"))

    await wait_for(gone, "the kicked player to leave")
    departed = [d for d in live.core.departed if d.record["name"] == HONEST]
    assert departed and departed[-1].reason == "admin test kick"
    assert (await live.client.post("/api/players/63/kick", json={})).status_code == 404
