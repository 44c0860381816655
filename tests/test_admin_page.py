"""The admin page in a real headless browser: Debian's chromium driven by Playwright.

The page logs in with the token, shows the speed hacker's evidence with its explanation, and a
click on Dismiss dismisses a review item (checked through the API). Screenshots go to the test's
temporary folder, and also to ``$REFEREE_SCREENSHOT_DIR`` when set. Without chromium (or
Playwright) the test is skipped, unless ``REFEREE_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.admin_live import CHEATER, LiveAdmin, live_admin, wait_for

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    """Debian's chromium, or skip (fail when the browser is required)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    reason = None
    if found is None:
        reason = "Debian's chromium is not installed (apt-get install chromium)"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is not installed"
    if reason is not None:
        if os.environ.get("REFEREE_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    assert found is not None
    return found


async def _shot(page: Any, folder: Path, name: str) -> None:
    path = folder / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    extra = os.environ.get("REFEREE_SCREENSHOT_DIR")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)


async def test_page_shows_evidence_and_dismisses_a_review_item(tmp_path: Path) -> None:
    executable = _chromium()
    from playwright.async_api import async_playwright, expect

    async with live_admin() as live, async_playwright() as pw:
        item = await live.pending_item(CHEATER)
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

            await page.goto(live.url)
            await expect(page.get_by_test_id("login")).to_be_visible()
            await page.fill("#token", "not-the-token-at-all")
            await page.click("button[type=submit]")
            await expect(page.locator("#login-error")).to_contain_text("refused")
            problems.clear()  # the refused token's 401 is logged by the browser as an error
            await page.fill("#token", live.token)
            await page.fill("#reviewer", "browser-reviewer")
            await page.click("button[type=submit]")

            row = page.get_by_test_id("player-row").filter(has_text=CHEATER)
            await expect(row).to_be_visible()
            await row.click()
            panel = page.get_by_test_id("player-panel")
            evidence = panel.get_by_test_id("detection").filter(has_text="faster than").first
            await expect(evidence).to_be_visible()
            await expect(evidence).to_contain_text("limit")  # the evidence's key/value pairs
            await expect(panel.get_by_test_id("family").filter(has_text="movement")).to_be_visible()
            await _shot(page, tmp_path, "admin_player")

            card = page.locator(f'[data-testid=review-item][data-item="{item["id"]}"]')
            await expect(card).to_contain_text(CHEATER)
            await card.locator("input.note").fill("looks like lag to me")
            await card.locator("select.level").select_option("monitor")
            # The speed hacker keeps adding evidence, so the item re-renders while the reviewer
            # writes: mark the node and wait for its replacement, then the draft must still be there.
            await card.evaluate("node => node.dataset.stale = 'yes'")
            await expect(page.locator(f'[data-testid=review-item][data-item="{item["id"]}"][data-stale]')).to_have_count(
                0, timeout=20_000)
            await expect(card.locator("input.note")).to_have_value("looks like lag to me")
            await expect(card.locator("input.note")).to_be_focused()
            await expect(card.locator("select.level")).to_have_value("monitor")
            await card.get_by_test_id("dismiss").click()

            async def dismissed() -> dict[str, Any] | None:
                shown = await live.get(f"/api/review/{item['id']}")
                return shown if shown["status"] == "dismissed" else None

            decided = await wait_for(dismissed, "the page's dismissal")
            assert decided["reviewer"] == "browser-reviewer" and decided["note"] == "looks like lag to me"
            await expect(page.locator("#review-decided")).to_contain_text("dismissed by browser-reviewer")
            await _shot(page, tmp_path, "admin_page")
            assert problems == []

            # ?token= logs in once and leaves the address bar at once.
            second = await browser.new_page()
            await second.goto(f"{live.url}?token={live.token}")
            await expect(second.get_by_test_id("player-row").first).to_be_visible()
            assert "token" not in second.url
        finally:
            await browser.close()
