"""The admin HTTP API (FastAPI) and the page it serves.

Every ``/api`` route needs the bearer token; the page itself (``/``), its static files, the
OpenAPI schema (``/openapi.json``) and the self-hosted API reference (``/api-docs``) carry no
data and need none. Swagger UI and ReDoc are switched off: both load their scripts from a CDN,
which a server on a closed network cannot reach; ``/api-docs`` renders the schema with a small
script shipped in the package.

Every handler is ``async def`` on purpose: FastAPI runs plain ``def`` handlers in a thread pool,
where they would read the core while a tick changes it. As coroutines they run on the game
server's loop between ticks. Responses are built by ``JSONResponse`` straight from the view's
plain data (no response models: their validation would cost more than building the data).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from server.admin.auth import TokenCheck
from server.admin.view import AdminError, AdminView

__all__ = ["create_app"]

_NO_STORE = {"Cache-Control": "no-store"}


class KickBody(BaseModel):
    """Why the player is kicked (shown in reports as the departure reason)."""

    reason: str = Field("kicked by an admin", max_length=200)


class DecideBody(BaseModel):
    """Who decides a review item, and why."""

    reviewer: str = Field("admin", min_length=1, max_length=80)
    note: str = Field("", max_length=2000)


class ConfirmBody(DecideBody):
    """A confirmation, optionally at another level than the recommended one (``log``,
    ``monitor``, ``kick``, ``temp_ban_review``, ``permanent_ban``)."""

    level: str | None = None


class AppealBody(BaseModel):
    """A player's appeal against the sanction of a review item."""

    player: str = Field(min_length=1, max_length=200)
    review_item: int
    text: str = Field("", max_length=4000)


class AppealDecisionBody(DecideBody):
    """Grant (``overturn``: the sanction is reversed and its evidence dismissed) or reject."""

    overturn: bool


class DetectorFlagBody(BaseModel):
    """Whether the detector judges this player."""

    enabled: bool


class BustAimFlagsBody(BaseModel):
    """BustAim's per-player check bits: 1 out of range, 2 proaim/teleport, 4 random aim,
    8 continuous shots, 16 ignore the player."""

    flags: int = Field(ge=0, le=31)


def _json(data: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status_code, headers=_NO_STORE)


def _static_dir() -> str:
    return str(resources.files("server.admin") / "static")


def create_app(view: AdminView, token: str) -> FastAPI:
    """The admin application over ``view``, guarded by ``token`` (see :mod:`server.admin.auth`)."""
    app = FastAPI(
        title="Referee admin",
        summary="Live players, detections with their evidence, sanctions, the review queue and appeals.",
        version="1",
        docs_url=None,
        redoc_url=None,
    )
    static = _static_dir()
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.exception_handler(AdminError)
    async def admin_error(_request: Request, exc: AdminError) -> JSONResponse:
        return _json({"detail": str(exc)}, exc.status)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(f"{static}/index.html", headers=_NO_STORE)

    @app.get("/api-docs", include_in_schema=False)
    async def api_docs() -> FileResponse:
        return FileResponse(f"{static}/docs.html", headers=_NO_STORE)

    api = APIRouter(prefix="/api", dependencies=[Depends(TokenCheck(token))])

    @api.get("/state", summary="What the page polls: overview, players, review queue, appeals")
    async def state() -> JSONResponse:
        # Players first: their evaluation can open a review item, which the counts must include.
        players = view.players()
        return _json({"overview": view.overview(), "players": players, "review": view.review(),
                      "appeals": view.appeals()})

    @api.get("/overview", summary="Server at a glance (tick, players, pending reviews, tick ms)")
    async def overview() -> JSONResponse:
        return _json(view.overview())

    @api.get("/players", summary="Connected players: ping (rtt_ms), jitter, loss, score, sanction")
    async def players() -> JSONResponse:
        return _json(view.players())

    @api.get("/players/{slot}", summary="One player: detections explained, sanction by family, flags, scores")
    async def player(slot: int) -> JSONResponse:
        return _json(view.player(slot))

    @api.post("/players/{slot}/kick", summary="Kick the player (applied at the next tick)")
    async def kick(slot: int, body: KickBody) -> JSONResponse:
        return _json(view.kick(slot, body.reason))

    @api.put("/players/{slot}/detectors/{detector}", summary="Turn a detector ('*' for all) on or off for a player")
    async def set_detector(slot: int, detector: str, body: DetectorFlagBody) -> JSONResponse:
        return _json(view.set_detector(slot, detector, body.enabled))

    @api.put("/players/{slot}/bustaim", summary="Set BustAim's check flags for a player")
    async def set_bustaim(slot: int, body: BustAimFlagsBody) -> JSONResponse:
        return _json(view.set_bustaim_flags(slot, body.flags))

    @api.get("/detections", summary="Newest detections (of one player key), newest first")
    async def detections(limit: int = Query(50, ge=0, le=1000), player: str | None = None) -> JSONResponse:
        return _json(view.detections(limit, player))

    @api.get("/review", summary="Pending review items and the latest decided ones")
    async def review() -> JSONResponse:
        return _json(view.review())

    @api.get("/review/{item_id}", summary="One review item")
    async def review_item(item_id: int) -> JSONResponse:
        return _json(view.review_item(item_id))

    @api.post("/review/{item_id}/confirm", summary="Confirm a review item: the sanction stands")
    async def confirm(item_id: int, body: ConfirmBody) -> JSONResponse:
        return _json(view.confirm(item_id, body.reviewer, body.note, body.level))

    @api.post("/review/{item_id}/dismiss", summary="Dismiss a review item: its evidence stops counting")
    async def dismiss(item_id: int, body: DecideBody) -> JSONResponse:
        return _json(view.dismiss(item_id, body.reviewer, body.note))

    @api.get("/appeals", summary="Appeals, pending first")
    async def appeals() -> JSONResponse:
        return _json(view.appeals())

    @api.post("/appeals", summary="File a player's appeal against a review item's sanction", status_code=201)
    async def file_appeal(body: AppealBody) -> JSONResponse:
        return _json(view.file_appeal(body.player, body.review_item, body.text), 201)

    @api.post("/appeals/{appeal_id}/decide", summary="Grant (overturn) or reject an appeal")
    async def decide_appeal(appeal_id: int, body: AppealDecisionBody) -> JSONResponse:
        return _json(view.decide_appeal(appeal_id, body.reviewer, body.overturn, body.note))

    app.include_router(api)
    return app
