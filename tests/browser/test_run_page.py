"""In Debian's chromium: pair a runner, run on "My local host", watch the run page fill in live.

Real processes throughout: daphne, the scheduler and `python -m runnercli run` started with
the token the account page showed once. Chromium is Debian's (`make browser-deps`), never a
downloaded browser build.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everdict.demo_seed import CASES, harness_spec
from runners.services import runner_pair
from scorecards.services import dataset_create, harness_create
from tests.browser.screenshots import keep
from tests.live import daphne, runner_cli, scheduler
from tests.required import CHROMIUM

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PHONE = {"width": 375, "height": 740}
TOKEN_RE = re.compile(r"rnr_[A-Za-z0-9_-]{20,}")

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Console:
    """Every console error and uncaught exception of the pages a test opens."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def watch(self, page: Any) -> Any:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        return page

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} at {message.location}")


@pytest.fixture
def acme(transactional_db: Any, alice: Any, workspace: Any) -> None:
    """A harness that narrates each case on stderr (so lines stream), and four cases."""
    harness_create(user=alice, workspace_slug="acme", name="narrator", spec=harness_spec())
    cases = [c for c in CASES if c["key"] in ("add", "reverse", "upper", "capital-australia")]
    dataset_create(user=alice, workspace_slug="acme", name="questions", cases=cases)


def log_in(page: Any, url: str) -> None:
    page.goto(f"{url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def pair_runner(page: Any, url: str, label: str) -> str:
    """Pair on the account page; the token is shown once and is gone on reload."""
    page.goto(f"{url}/account/")
    page.fill("#id_label", label)
    page.fill("#id_capabilities", "python")
    page.click("text=Pair runner")
    token_match = TOKEN_RE.search(page.inner_text("#pair-command"))
    assert token_match is not None
    # A reload (the page was reached by a redirect, so it re-submits nothing) hides it.
    page.reload()
    assert token_match.group(0) not in page.content()
    assert page.locator("#paired").count() == 0
    assert page.locator("tr", has_text=label).count() == 1
    return token_match.group(0)


def choose_my_local_host(page: Any, url: str, label: str) -> None:
    """Open the run form once the runner is online and pick "My local host — <label>"."""
    wanted = f"My local host — {label} · online"
    for _ in range(60):
        page.goto(f"{url}/w/acme/runs/new?harness=narrator")
        option = page.locator("#id_runtime option", has_text=wanted)
        if option.count():
            break
        page.wait_for_timeout(500)
    assert option.count() == 1, page.inner_text("#id_runtime")
    assert option.get_attribute("disabled") is None
    page.select_option("#id_harness", "narrator")
    page.select_option("#id_dataset", "questions")
    page.select_option("#id_runtime", option.get_attribute("value"))
    page.fill("#id_concurrency", "1")


def test_a_member_runs_on_their_own_machine_and_watches_it_live(
    acme: None, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    with daphne(tmp_path) as server, scheduler(tmp_path):
        url = server.url
        page = console.watch(browser.new_page(viewport={"width": 1280, "height": 900}))
        log_in(page, url)
        token = pair_runner(page, url, "laptop")
        runner = runner_cli(
            tmp_path, ["run", "--server", url, "--token", token, "--wait-ms", "2000"]
        )
        try:
            choose_my_local_host(page, url, "laptop")
            page.click("text=Start run")
            page.wait_for_url(re.compile(r".*/runs/\d+/$"))
            run_url = page.url
            # A reload would drop this marker: everything below must arrive live.
            page.evaluate("window.__stillTheSamePage = true")

            page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
            page.wait_for_selector(".log-line", timeout=30_000)
            first_lines = page.locator(".log-line").count()
            page.wait_for_selector("#run-results tr[data-case]", timeout=30_000)
            still_running = page.inner_text("#run-status")
            page.wait_for_function(
                "['succeeded', 'failed'].includes("
                "document.getElementById('run-status').textContent)",
                timeout=60_000,
            )

            assert page.evaluate("window.__stillTheSamePage") is True
            assert still_running in ("queued", "running")
            assert page.locator("#run-results tr[data-case]").count() == 4
            assert page.locator(".log-line").count() > first_lines
            assert "reading case add" in page.inner_text("#log-lines")
            assert page.locator(".verdict.v-pass").count() == 3
            assert page.locator(".verdict.v-fail").count() == 1  # capital-australia
            assert "self-hosted · laptop · alice" in page.inner_text("#run-results")
            assert "4/4" in page.inner_text("#progress-text")
            assert page.locator("#cancel-form").is_hidden()
            keep(page, "run-page.png")

            check_phone_width(browser, console, page, url, run_url)

            page.goto(f"{url}/account/")
            page.locator("tr", has_text="laptop").locator("summary").click()
            page.click("text=Revoke laptop")
            assert "Runner laptop is revoked" in page.inner_text(".messages")
            assert "revoked" in page.locator("tr", has_text="laptop").inner_text()
            code = runner.popen.wait(30)
        finally:
            runner.stop()
        assert code != 0
        assert "revoked" in runner.output()
    assert console.errors == []


def check_phone_width(browser: Any, console: Console, desktop: Any, url: str, run_url: str) -> None:
    """Every page fits a 375 px wide phone: nothing scrolls sideways."""
    context = browser.new_context(viewport=PHONE, storage_state=desktop.context.storage_state())
    phone = console.watch(context.new_page())
    run_id = run_url.rstrip("/").rsplit("/", 1)[1]
    for path in (
        "/",
        "/account/",
        "/w/acme/",
        "/w/acme/harnesses/",
        "/w/acme/datasets/",
        "/w/acme/runs/",
        "/w/acme/runs/new",
        f"/runs/{run_id}/",
        f"/w/acme/compare?a={run_id}&b={run_id}",
    ):
        phone.goto(url + path)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, f"{path} is {width}px wide on a phone"
    context.close()


@pytest.fixture
def desk_token(acme: None, alice: Any) -> str:
    return runner_pair(owner=alice, label="desk", capabilities=["python"]).token


def test_the_run_page_polls_the_api_when_the_socket_is_refused(
    desk_token: str, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    with daphne(tmp_path) as server, scheduler(tmp_path):
        url = server.url
        runner = runner_cli(
            tmp_path, ["run", "--server", url, "--token", desk_token, "--wait-ms", "2000"]
        )
        try:
            page = console.watch(browser.new_page())
            # As a proxy that does not pass WebSockets would: every socket is closed at once.
            page.route_web_socket(re.compile(r".*/ws/runs/.*"), lambda socket: socket.close())
            log_in(page, url)
            choose_my_local_host(page, url, "desk")
            page.click("text=Start run")
            page.wait_for_url(re.compile(r".*/runs/\d+/$"))
            page.evaluate("window.__stillTheSamePage = true")

            page.wait_for_selector("#live-state[data-state=polling]", timeout=10_000)
            page.wait_for_function(
                "document.querySelectorAll('#run-results tr[data-case]').length === 4",
                timeout=60_000,
            )
            page.wait_for_selector("#live-state[data-state=finished]", timeout=10_000)

            assert page.evaluate("window.__stillTheSamePage") is True
            assert "capital-australia" in page.inner_text("#log-lines")
            assert page.inner_text("#run-status") == "succeeded"
        finally:
            runner.stop()
    assert console.errors == []
