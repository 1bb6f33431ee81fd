"""In Debian's chromium: watch a browser case work — its live frame on the run page changing
while it runs, then the filmstrip and the timeline on its case page — with the member's
redact pattern hiding a token in both the case's log and its trace.

The case itself drives Debian's chromium headless too (the demo's browser harness). Real
processes throughout: daphne, the scheduler and `python -m runnercli run`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from everdict.demo_browser import browser_spec
from scorecards.services import dataset_create, harness_create
from tests.browser.test_run_page import CHROMIUM_ARGS, Console, log_in
from tests.live import daphne, runner_cli, scheduler
from tests.runnercli.test_e2e import Api
from tests.traces.test_trace_e2e import blob_env

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]

TOKEN = "sk-live-424242"


@pytest.fixture
def browser() -> Any:
    from playwright.sync_api import sync_playwright

    from tests.required import CHROMIUM

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def adder(transactional_db: Any, alice: Any, workspace: Any) -> str:
    """The demo's browser harness, slowed so that a page sees several frames, and one case
    whose note holds a token the member's runner must never let out; alice's API key (made
    here: the browser's event loop runs in the test's thread, where the ORM may not)."""
    spec = browser_spec()
    spec["env"] = {**spec["env"], "DEMO_STEP_S": "1.5"}
    harness_create(user=alice, workspace_slug="acme", name="adder", spec=spec)
    case = {"key": "adder", "input": {"a": 17, "b": 25, "note": f"use {TOKEN}"}, "expected": "42"}
    dataset_create(user=alice, workspace_slug="acme", name="adder", cases=[case])
    return api_key_create(user=alice, name="watch").key


def pair_with_redaction(api: Api, tmp_path: Path) -> int:
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    config = tmp_path / "laptop.json"
    settings = json.loads(config.read_text())
    settings["redact"] = ["sk-live-[0-9]+"]
    config.write_text(json.dumps(settings))
    return runner_id


def test_a_browser_case_is_watched_live_then_read_frame_by_frame(
    adder: str, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    env = blob_env(tmp_path)
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        api = Api(server, adder)
        runner_id = pair_with_redaction(api, tmp_path)
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
        try:
            page = console.watch(browser.new_page(viewport={"width": 1280, "height": 900}))
            log_in(page, server.url)
            run_id = api.start_run("adder", "adder", f"self:{runner_id}")
            page.goto(f"{server.url}/runs/{run_id}/")
            page.evaluate("window.__stillTheSamePage = true")
            frame = page.wait_for_selector("#running-cases img.live-frame", timeout=60_000)
            assert frame is not None
            first = frame.get_attribute("data-n")
            step = page.inner_text("#running-cases .step")
            page.wait_for_function(
                "n => { const img = document.querySelector('#running-cases img.live-frame');"
                " return img && img.getAttribute('data-n') !== n; }",
                arg=first,
                timeout=30_000,
            )
            status_then = page.inner_text("#run-status")
            pixels = page.evaluate(
                "() => document.querySelector('#running-cases img.live-frame').naturalWidth"
            )
            page.wait_for_function(
                "document.getElementById('run-status').textContent === 'succeeded'",
                timeout=60_000,
            )
            assert page.evaluate("window.__stillTheSamePage") is True
            assert page.locator("#running-cases img").count() == 0

            page.goto(f"{server.url}/runs/{run_id}/cases/adder/")
            page.wait_for_selector("[data-frames] button.frame", timeout=10_000)
            page.wait_for_selector("[data-timeline] li[data-seq]", timeout=10_000)
            frames = page.locator("[data-frames] button.frame").count()
            timeline = page.inner_text("[data-timeline]")
            totals = page.inner_text("[data-trace-totals]")
            page.locator("[data-frames] button.frame").last.click()
            page.wait_for_selector("dialog[data-frame-view][open] img[data-frame-big]")
            page.wait_for_selector("[data-timeline] li.t-here")
            opened_at = page.locator("[data-timeline] li.t-here").inner_text()
            log = page.inner_text("#case-log")
            trace = api.ok("GET", f"/api/runs/{run_id}/trace?key=adder")
        finally:
            runner.stop()
    assert step.startswith(("browser.", "thinking", "starting")), step
    assert status_then in ("queued", "running") and pixels == 640, status_then
    assert frames >= 2
    assert "browser.fill" in timeline and "#a = 17" in timeline and "browser.click" in timeline
    assert "tool calls" in totals
    # The last frame was taken after the click: it opens the timeline at the click's answer.
    assert "result" in opened_at and "browser.click" in opened_at, opened_at
    # The token never left the member's machine: not in the log, not in the trace.
    assert "[redacted]" in log and TOKEN not in log
    note = next(e for e in trace["events"] if e["name"] == "note")
    assert note["data"]["text"] == "use [redacted]"
    assert TOKEN not in json.dumps(trace)
    assert console.errors == []
