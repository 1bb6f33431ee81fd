"""`python -m runnercli pair --server URL` without a token, end to end: the real CLI asks for a
code, a member approves (in chromium, or by API key) or denies it, and the CLI stores its token
(0600) — then `run` takes a job with it."""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from everdict.processes import Proc
from runners.models import DevicePairing, PairingMethod, Runner
from tests.browser.test_run_page import CHROMIUM_ARGS, Console, log_in
from tests.live import LiveServer, daphne, rest, runner_cli
from tests.required import CHROMIUM
from tests.suites import start, suite

pytestmark = pytest.mark.e2e

FAST = {"EVERDICT_DEVICE_PAIRING_INTERVAL_S": 1}
CODE_RE = re.compile(r"(http://\S+/pair/([B-Z]{4}-[B-Z]{4}))")


def pair_by_code(tmp_path: Path, server: LiveServer, *args: str) -> Proc:
    return runner_cli(tmp_path, ["pair", "--server", server.url, "--no-browser", *args])


def printed_code(proc: Proc, timeout: float = 30) -> tuple[str, str]:
    """The page URL and the code the CLI shows the member."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := CODE_RE.search(proc.output()):
            return found.group(1), found.group(2)
        assert proc.popen.poll() is None, proc.output()
        time.sleep(0.1)
    raise AssertionError(f"no code printed:\n{proc.output()}")


@pytest.mark.browser
def test_a_machine_paired_by_a_code_approved_in_the_browser_then_runs_a_job(
    transactional_db: Any, alice: Any, workspace: Any, tmp_path: Path
) -> None:
    suite(alice, cases=1)
    console = Console()
    with daphne(tmp_path, **FAST) as server:
        cli = pair_by_code(tmp_path, server, "--label", "build-box", "--capability", "gpu")
        try:
            url, code = printed_code(cli)
            assert url == f"{server.url}/pair/{code}"
            approve_in_browser(console, server, url, code, cli)
        finally:
            cli.stop()

        config_file = tmp_path / "runner.json"
        assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
        stored = json.loads(config_file.read_text())
        runner = Runner.objects.get(pk=stored["runner_id"])
        assert stored["token"].startswith("rnr_") and stored["server"] == server.url
        assert (runner.owner, runner.label, runner.paired_via) == (alice, "build-box", "device")
        assert "gpu" in runner.capabilities
        assert f"as runner {runner.pk} “build-box” of alice" in cli.output()

        run = start(alice, runner)
        worker = runner_cli(tmp_path, ["run", "--once", "--wait-ms", "2000"], name="runner")
        try:
            assert worker.popen.wait(60) == 0, worker.output()
        finally:
            worker.stop()
        run.refresh_from_db()
        assert run.results.filter(verdict="pass").count() == 1
    assert console.errors == []


def approve_in_browser(
    console: Console, server: LiveServer, url: str, code: str, cli: Proc
) -> None:
    """Alice, signed in, opens the printed page, checks it and approves; the CLI finishes."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = console.watch(browser.new_page())
        log_in(page, server.url)
        page.goto(url)
        assert page.inner_text("#user-code") == code
        assert page.inner_text("#pair-label") == "build-box"
        assert "gpu" in page.inner_text("#pair-capabilities")
        assert "127.0.0.1" in page.inner_text("#pair-from")
        page.goto(f"{server.url}/account/")
        assert code in page.inner_text("#device-pairings")
        page.goto(url)
        page.click("#approve")
        assert "Approved" in page.inner_text(".messages")
        assert cli.popen.wait(30) == 0, cli.output()
        page.reload()
        assert "Paired" in page.inner_text("#pair-state")
        page.goto(f"{server.url}/account/")
        assert "device code" in page.locator("tr", has_text="build-box").inner_text()
        browser.close()


def test_a_denied_code_stops_the_cli_with_a_message_and_pairs_nothing(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path, **FAST) as server:
        cli = pair_by_code(tmp_path, server)
        try:
            _, code = printed_code(cli)
            key = api_key_create(user=alice).key
            status, body = rest(server.url, "POST", f"/api/device-pairings/{code}/deny", key)
            assert (status, body["status"]) == (200, "denied")
            exit_code = cli.popen.wait(30)
        finally:
            cli.stop()
        again = rest(server.url, "POST", f"/api/device-pairings/{code}/approve", key)

    assert exit_code != 0
    assert "✗ the pairing request was denied on the server" in cli.output()
    assert not (tmp_path / "runner.json").exists()
    assert again[0] == 409 and "already denied" in again[1]["detail"]
    assert not Runner.objects.exists()


def test_an_expired_code_stops_the_cli_and_can_no_longer_be_approved(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path, EVERDICT_DEVICE_PAIRING_TTL_S=3, **FAST) as server:
        cli = pair_by_code(tmp_path, server)
        try:
            _, code = printed_code(cli)
            exit_code = cli.popen.wait(30)
        finally:
            cli.stop()
        key = api_key_create(user=alice).key
        late = rest(server.url, "POST", f"/api/device-pairings/{code}/approve", key)

    assert exit_code != 0
    assert "✗ the code expired before it was approved" in cli.output()
    assert late[0] == 409 and "expired" in late[1]["detail"]
    assert not Runner.objects.exists()


def test_an_approved_code_pairs_once_and_wrong_codes_are_throttled(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path, EVERDICT_DEVICE_CODE_RATE="4/min", **FAST) as server:
        cli = pair_by_code(tmp_path, server, "--label", "desk")
        try:
            _, code = printed_code(cli)
            key = api_key_create(user=alice).key
            assert rest(server.url, "POST", f"/api/device-pairings/{code}/approve", key)[0] == 200
            assert cli.popen.wait(30) == 0, cli.output()
        finally:
            cli.stop()
        reused = rest(server.url, "POST", f"/api/device-pairings/{code}/approve", key)
        guesses = [
            rest(server.url, "POST", f"/api/device-pairings/{guess}/approve", key)[0]
            for guess in ("BCDF-GHJK", "BCDF-GHJL", "BCDF-GHJM")
        ]

    assert reused[0] == 409 and "already" in reused[1]["detail"]
    assert guesses == [404, 404, 429]
    assert DevicePairing.objects.get().runner == Runner.objects.get(paired_via=PairingMethod.DEVICE)


def test_with_a_token_the_label_is_ignored_with_a_note(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    from runners.services import runner_pair

    token = runner_pair(owner=alice, label="made-on-page").token
    with daphne(tmp_path) as server:
        cli = runner_cli(
            tmp_path, ["pair", "--server", server.url, "--token", token, "--label", "other"]
        )
        assert cli.popen.wait(30) == 0, cli.output()

    assert "--label is ignored with --token" in cli.output()
    assert json.loads((tmp_path / "runner.json").read_text())["label"] == "made-on-page"


def test_the_cli_waits_longer_when_told_to_slow_down(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    """The CLI's own polling loop against the real server, its sleeps cut short until the
    server says slow_down: it must then wait 5 s more, which is let through in full."""
    from runnercli.client.device import device_pair

    key = api_key_create(user=alice).key
    asked: list[float] = []
    shown: list[str] = []

    def sleep(seconds: float) -> None:
        asked.append(seconds)
        if seconds <= 1:
            time.sleep(0.1)  # the first two polls come too early
            return
        code = CODE_RE.search("\n".join(shown))
        assert code is not None
        approved = rest(server.url, "POST", f"/api/device-pairings/{code.group(2)}/approve", key)
        assert approved[0] == 200
        time.sleep(seconds)

    with daphne(tmp_path, **FAST) as server:
        granted = device_pair(
            server.url,
            label="hurried",
            capabilities=["python"],
            open_browser=False,
            echo=shown.append,
            sleep=sleep,
        )

    assert asked == [1.0, 1.0, 6.0]
    assert Runner.objects.get(pk=granted.runner_id).label == "hurried"
