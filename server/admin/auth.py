"""The admin token: one shared secret, sent as ``Authorization: Bearer <token>``.

The page asks for the token once (a login form, or ``?token=`` in the address, which it removes
from the address bar at once) and keeps it in the tab's sessionStorage. The token is compared in
constant time and never logged (uvicorn's access log is off: an address may carry it).
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status

from server.admin.config import MIN_TOKEN_CHARS

__all__ = ["TokenCheck"]


class TokenCheck:
    """A FastAPI dependency that lets a request through only with the right bearer token.

    Args:
        token: the expected token (at least :data:`MIN_TOKEN_CHARS` characters).
    """

    def __init__(self, token: str) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the admin token must have at least {MIN_TOKEN_CHARS} characters")
        self._token = token.encode()

    def matches(self, presented: str) -> bool:
        """Whether ``presented`` is the token (constant time)."""
        return hmac.compare_digest(presented.encode(), self._token)

    async def __call__(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not self.matches(presented.strip()):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail="missing or wrong admin token",
                headers={"WWW-Authenticate": "Bearer"},
            )
