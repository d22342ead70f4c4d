"""The live dashboard in headless Chromium (the system's browser, driven through the DevTools
protocol by Playwright), on a real standalone cluster: no console error at all, the page
loads, a topic created through the CLI appears within 2 s, a SIGKILLed broker shows as not
live within its session's TTL + 2 s — without a reload. The screenshot is kept at
test-artifacts/dashboard.png (or under $METAPLANE_ARTIFACTS)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from tests.admin.standalone import METAPLANE, SESSION_TTL, Standalone

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(
    os.environ.get("METAPLANE_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise AssertionError("chromium is not installed: run .ci/system-deps chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.timeout(180)
def test_the_dashboard_follows_the_cluster_live(browser: Browser, standalone: Standalone) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("console", lambda message: record(problems, message))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
    page.goto(standalone.dashboard)
    live = sorted(standalone.live)
    page.wait_for_selector(f"#brokers tr[data-broker='{live[-1]}'][data-live='true']")
    page.wait_for_selector("#stream[data-state='live']")
    page.wait_for_selector("#topics tr[data-topic='/orders/created']")

    # A topic created through the CLI appears within 2 s, without a reload.
    created = subprocess.run(
        [*METAPLANE, "topics", "create", "/orders/refunds", "--store", standalone.store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    shown_in = timed(page, "#topics tr[data-topic='/orders/refunds']", timeout=2.0)
    assert shown_in <= 2.0

    # Searchable: only the matching rows stay.
    page.fill("#search", "refunds")
    assert page.locator("#topics tbody tr:visible").count() == 1
    page.fill("#search", "")

    # A SIGKILLed broker shows as not live within its session's TTL + 2 s.
    victim = live[-1]
    killed_at = standalone.kill(victim)
    selector = f"#brokers tr[data-broker='{victim}'][data-live='false']"
    page.wait_for_selector(selector, timeout=(SESSION_TTL + 2) * 1000)
    assert time.monotonic() - killed_at <= SESSION_TTL + 2
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
    assert page.locator("#feed li").count() > 0  # the live feed shows the changes
    page.close()
    assert problems == []


def record(problems: list[str], message: ConsoleMessage) -> None:
    if message.type in ("error", "warning", "assert"):
        problems.append(f"console {message.type}: {message.text}")


def timed(page: Page, selector: str, timeout: float) -> float:
    """Seconds until `selector` is on the page (failing after `timeout`)."""
    started = time.monotonic()
    page.wait_for_selector(selector, timeout=timeout * 1000)
    return time.monotonic() - started
