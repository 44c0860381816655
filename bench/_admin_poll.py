"""The admin page's polling, as a client in its own process (for ``bench tick --admin``): it
imports nothing but httpx, so it starts fast and takes little from the server's core."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["poll_page"]


def poll_page(url: str, token: str, every_s: float, stop: Any, ready: Any, results: Any) -> None:
    """The page's requests every ``every_s`` seconds until ``stop`` is set (runs in a child
    process); ``ready`` is set after the first round of requests succeeded."""
    import httpx

    latencies: list[float] = []
    failures = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=5.0) as client:
        next_at = time.monotonic()
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                state = client.get("/api/state").json()
                players = state["players"]
                if players:
                    client.get(f"/api/players/{players[0]['slot']}").raise_for_status()
                client.get("/api/detections?limit=12").raise_for_status()
                latencies.append(time.perf_counter() - t0)
                ready.set()
            except (httpx.HTTPError, KeyError, ValueError):
                failures += 1
            next_at += every_s
            stop.wait(max(0.0, next_at - time.monotonic()))
    results.put((latencies, failures))
