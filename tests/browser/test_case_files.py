"""In Debian's chromium: a running case's Files tab — its working directory listed, a text
file and an image opened, a binary downloaded — served by the member's runner through the
fs rendezvous; after the case, the tab is gone. Real processes: daphne and
`python -m runnercli run`."""

from __future__ import annotations

import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from scorecards.services import dataset_create, harness_create
from tests.browser.test_run_page import CHROMIUM_ARGS, Console, log_in
from tests.live import daphne, runner_cli
from tests.mcpgateway.mcp_client import call, structured
from tests.runnercli.test_e2e import Api
from tests.runnercli.test_files_e2e import BINARY, CASE, PNG

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]


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
def waiting_case(transactional_db: Any, alice: Any, workspace: Any, tmp_path: Path) -> str:
    """A harness whose case writes its files, then waits for `release` in tmp_path; alice's
    API key (made here: the browser's event loop runs in the test's thread)."""
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(CASE))
    command = [sys.executable, str(script), str(tmp_path / "release"), PNG.hex()]
    spec = {"command": command, "timeout_s": 120, "capabilities": ["python"]}
    harness_create(user=alice, workspace_slug="acme", name="waits", spec=spec)
    cases = [{"key": "c0", "input": {}, "expected": "done"}]
    dataset_create(user=alice, workspace_slug="acme", name="one", cases=cases)
    return api_key_create(user=alice, name="files").key


def test_a_running_cases_files_tab_lists_opens_and_downloads(
    waiting_case: str, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    blobs = {"location": str(tmp_path / "blobs"), "allow_overwrite": True}
    with daphne(tmp_path, EVERDICT_BLOB_STORAGE_OPTIONS=json.dumps(blobs)) as server:
        api = Api(server, waiting_case)
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
        try:
            page = console.watch(browser.new_page(accept_downloads=True))
            log_in(page, server.url)
            run_id = api.start_run("waits", "one", f"self:{runner_id}")
            case_url = f"{server.url}/runs/{run_id}/cases/c0/"
            for _ in range(120):
                page.goto(case_url)
                if page.locator("[data-files-tab]").count():
                    break
                page.wait_for_timeout(500)
            page.click("[data-files-tab]")
            # The case may still be writing: open the listing again until notes.txt is there.
            for _ in range(40):
                if page.locator('[data-files-list] a[data-path="notes.txt"]').count():
                    break
                page.wait_for_timeout(250)
                page.click("[data-files-tab]")
                page.click("[data-files-tab]")
            listed = page.inner_text("[data-files-list]")

            page.click('[data-files-list] a[data-path="notes.txt"]')
            text = page.wait_for_selector('pre[data-files-text="notes.txt"]').inner_text()

            page.click('[data-files-list] a[data-path="out"]')
            page.click('[data-files-list] a[data-path="out/pic.png"]', timeout=30_000)
            image = page.wait_for_selector('img[data-files-image="out/pic.png"]')
            page.wait_for_function(
                "() => document.querySelector('img[data-files-image]').naturalWidth > 0"
            )
            width = image.evaluate("img => img.naturalWidth")

            page.click('[data-files-list] a[data-path=""]')
            with page.expect_download() as downloading:
                page.click('[data-files-list] a[data-path="data.bin"]', timeout=30_000)
            download = downloading.value
            saved = Path(download.path()).read_bytes()

            page.click('[data-files-list] a[data-path="passwd"]')
            refused = page.wait_for_selector("[data-files-error]:not([hidden])").inner_text()
        finally:
            (tmp_path / "release").write_text("go")
        try:
            api.wait_run(run_id)
            page.goto(case_url)
            after = page.locator("[data-files-tab]").count()
        finally:
            runner.stop()
    for name in ("notes.txt", "out/", "data.bin", "passwd", "sib"):
        assert name in listed, listed
    assert text == "hello from the case\ntoken=hunter2\n"
    assert width == 1
    assert (download.suggested_filename, saved) == ("data.bin", BINARY)
    assert "leads out of the case directory" in refused, refused
    assert after == 0
    assert not [e for e in console.errors if e.startswith("uncaught")], console.errors


def test_a_runner_that_does_not_answer_is_said_so_on_the_files_tab(
    waiting_case: str, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    with daphne(tmp_path, EVERDICT_FS_ANSWER_TIMEOUT_S="1") as server:
        api = Api(server, waiting_case)
        body = {"label": "asleep", "capabilities": ["python"]}
        paired = api.ok("POST", "/api/runners", body)
        run_id = api.start_run("waits", "one", f"self:{paired['id']}")
        # Leased by a runner that then never polls for file requests (called from a thread
        # of its own: the browser's event loop runs in this one).
        with ThreadPoolExecutor(max_workers=1) as pool:
            leasing = pool.submit(call, server.url, paired["token"], "lease_job", {"protocol": 3})
            assert structured(leasing.result(timeout=60))["job"]
        page = console.watch(browser.new_page())
        log_in(page, server.url)
        page.goto(f"{server.url}/runs/{run_id}/cases/c0/")
        page.click("[data-files-tab]")
        said = page.wait_for_selector("[data-files-error]:not([hidden])").inner_text()
    assert "The runner did not answer within 1 s" in said, said
    assert not [e for e in console.errors if e.startswith("uncaught")], console.errors
