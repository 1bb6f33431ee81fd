"""In Debian's chromium: what an eval user does after a run — filter the failures, open a failing
case, rerun the failures, download the results, follow the harness's history chart.

Real processes: daphne and `python -m runnercli run`; three runs of the demo harness over four
questions (one of which it answers wrong), each labelled by a git SHA.
"""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from everdict.demo_seed import CASES, harness_spec
from runners.services import runner_pair
from scorecards.services import dataset_create, harness_create
from tests.browser.test_run_page import PHONE, Console, browser, log_in
from tests.live import daphne, rest, runner_cli

__all__ = ["browser"]

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]
SHAS = ("1111111aaaa", "2222222bbbb", "3333333cccc")


@pytest.fixture
def runs_ready(transactional_db: Any, alice: Any, workspace: Any) -> tuple[str, str]:
    """The suite, a runner token and an API key. Made before the browser starts: once it
    runs, this thread has an event loop and the ORM refuses it, so the test uses REST."""
    harness_create(user=alice, workspace_slug="acme", name="narrator", spec=harness_spec())
    cases = [c for c in CASES if c["key"] in ("add", "reverse", "upper", "capital-australia")]
    dataset_create(user=alice, workspace_slug="acme", name="questions", cases=cases)
    token = runner_pair(owner=alice, label="laptop", capabilities=["python"]).token
    return token, api_key_create(user=alice).key


def start_runs(url: str, key: str) -> list[int]:
    started = []
    for sha in SHAS:
        body: dict[str, Any] = {"harness": "narrator", "dataset": "questions"}
        body["runtime"] = "self:any"
        body |= {"concurrency": 2, "metadata": {"git_sha": sha}}
        status, run = rest(url, "POST", "/api/workspaces/acme/runs", key, body)
        assert status == 201, run
        started.append(run["id"])
    return started


def wait_finished(url: str, key: str, run_ids: list[int], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statuses = [rest(url, "GET", f"/api/runs/{pk}", key)[1]["status"] for pk in run_ids]
        if all(s in ("succeeded", "failed", "canceled") for s in statuses):
            return
        time.sleep(0.3)
    pytest.fail(f"runs {run_ids} did not finish")


def test_filter_open_a_failing_case_rerun_download_and_follow_the_history(
    runs_ready: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    token, key = runs_ready
    console = Console()
    with daphne(tmp_path) as server:
        url = server.url
        runner = runner_cli(
            tmp_path, ["run", "--server", url, "--token", token, "--max-concurrent", "2"]
        )
        try:
            runs = start_runs(url, key)
            wait_finished(url, key, runs)
            page = console.watch(browser.new_page(viewport={"width": 1280, "height": 900}))
            log_in(page, url)

            # Failures first, in one click; then the failing case, whole.
            page.goto(f"{url}/runs/{runs[-1]}/")
            page.wait_for_function("window.scoreChart !== undefined")
            assert page.locator("#run-results tr[data-case]").count() == 4
            page.click("nav.filters >> text=Failures")
            page.wait_for_url(re.compile(r".*verdict=fail,error.*"))
            assert page.locator("#run-results tr[data-case]").count() == 1
            page.click("#run-results a.case-link")
            page.wait_for_url(re.compile(r".*/cases/capital-australia/$"))
            assert "Canberra" in page.inner_text("#case-expected")
            assert "expected `Canberra` in the output, got" in page.inner_text(
                "[data-testid=reason]"
            )
            assert "Sydney" in page.inner_text("[data-testid=output]")
            assert page.locator("[data-testid=diff] .d-del", has_text="Canberra").count() == 1
            assert "reading case capital-australia" in page.inner_text("#case-log")
            assert page.locator("table.attempts tr[data-status=succeeded]").count() == 1

            # Download CSV from the run page.
            page.goto(f"{url}/runs/{runs[-1]}/")
            with page.expect_download() as download:
                page.click("#download-csv")
            rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
            assert sorted(r["case"] for r in rows) == sorted(
                ["add", "reverse", "upper", "capital-australia"]
            )

            # Rerun failures lands on the child run, which runs just that case.
            page.click("#rerun-failed")
            page.wait_for_url(re.compile(r".*/runs/\d+/$"))
            child = int(page.url.rstrip("/").rsplit("/", 1)[1])
            assert child not in runs
            assert f"run #{runs[-1]}" in page.inner_text("dl.meta")
            wait_finished(url, key, [child])
            page.reload()
            assert page.locator("#run-results tr[data-case]").count() == 1
            assert page.locator("#run-pair").count() == 1

            # The history: a point per run, labelled by SHA; a click opens the run.
            page.goto(f"{url}/w/acme/harnesses/narrator/")
            page.wait_for_function(
                "window.historyChart && window.historyChart.getDatasetMeta(0).data.length === 3"
            )
            assert "1111111" in page.inner_text("table.history")
            box = page.locator("#history-chart").bounding_box()
            point = page.evaluate(
                "(() => { const p = window.historyChart.getDatasetMeta(0).data[1];"
                " return {x: p.x, y: p.y}; })()"
            )
            page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
            page.wait_for_url(f"{url}/runs/{runs[1]}/")

            check_phone_width(browser, console, page, url, runs[-1], child)
        finally:
            runner.stop()
    assert console.errors == []


def check_phone_width(
    browser: Any, console: Console, desktop: Any, url: str, run: int, child: int
) -> None:
    context = browser.new_context(viewport=PHONE, storage_state=desktop.context.storage_state())
    phone = console.watch(context.new_page())
    for path in (
        f"/runs/{run}/",
        f"/runs/{run}/?verdict=fail,error",
        f"/runs/{child}/",
        f"/runs/{run}/cases/capital-australia/",
        "/w/acme/harnesses/narrator/",
        f"/w/acme/compare?b={run}",
        "/w/acme/runs/new",
    ):
        phone.goto(url + path)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, f"{path} is {width}px wide on a phone"
    context.close()
