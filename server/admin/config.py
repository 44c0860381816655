"""Where the admin page listens and the token it requires (no web framework imported here, so
the game server's command line can build it cheaply)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

__all__ = ["AdminConfig", "MIN_TOKEN_CHARS", "generate_token"]

MIN_TOKEN_CHARS = 16
"""A shorter token is refused: it would be guessable over a loopback port in little time."""


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """Where the admin listens and the token it requires.

    Attributes:
        host: address to bind (default loopback only: the page can kick and ban).
        port: TCP port (0: any free one).
        token: the bearer token (at least :data:`MIN_TOKEN_CHARS` characters;
            :func:`generate_token` makes one).
    """

    host: str = "127.0.0.1"
    port: int = 0
    token: str = ""

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the admin token must have at least {MIN_TOKEN_CHARS} characters")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")

    def __repr__(self) -> str:  # the token must not end up in a log line
        return f"AdminConfig(host={self.host!r}, port={self.port}, token=<hidden>)"


def generate_token() -> str:
    """A fresh random token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)
