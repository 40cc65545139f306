"""Real headless Chromium (Debian's package) driven by Playwright; no browser download."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FLASKWEB_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="session")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # around it are still synchronous and safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        if SWAP_DELAY_MS:
            _slow_swaps(browser, SWAP_DELAY_MS)
        yield browser
        browser.close()


#: FLASKWEB_TEST_SWAP_DELAY_MS=400: every htmx swap in every page of the browser tests waits
#: that long after its answer has arrived. A test that waits for something the page held
#: before the swap too (a ready card, a phase label) then fails every time instead of now
#: and then on a busy machine (tests/README.md, "Races in browser tests").
SWAP_DELAY_MS = int(os.environ.get("FLASKWEB_TEST_SWAP_DELAY_MS") or 0)


def _slow_swaps(browser, delay_ms: int) -> None:
    """Every context the browser opens delays htmx's swaps by `delay_ms`."""
    script = (
        "addEventListener('load', () => {"
        f" if (window.htmx) htmx.config.defaultSwapDelay = {delay_ms}; }});"
    )
    new_context = browser.new_context

    def slowed(*args, **kwargs):
        context = new_context(*args, **kwargs)
        context.add_init_script(script)
        return context

    browser.new_context = slowed


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs
    yield page
    context.close()


def login(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
