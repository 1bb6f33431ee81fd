"""`python -m runnercli submit` end to end: the real server, a real runner (or the CI machine's
own with `--here`), and the command's exit code as a CI job reads it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bulk import results_add
from django.utils import timezone

from accounts.services import api_key_create
from runners.models import Runner
from runners.services import runner_pair
from scorecards.models import Case, DatasetVersion, HarnessVersion, Run, RunStatus
from scorecards.services import harness_create
from tests.live import ROOT, LiveServer, daphne, runner_cli, scheduler, sealed_host
from tests.suites import ECHO_SPEC, suite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The echo harness, broken for one case: `c1` now prints something else.
BROKEN_SPEC = {
    **ECHO_SPEC,
    "command": [
        "python",
        "-c",
        "import sys; t = sys.argv[1]; print('oops' if t == 'hello 1' else t)",
        "{input.text}",
    ],
}


def submit(
    server: LiveServer, key: str, *args: str, timeout: float = 120, here: Path | None = None
) -> Any:
    """`python -m runnercli submit …`; with `--here`, its runner on a host sealed from this
    machine's (`sealed_host` under `here`)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"EVERDICT_API_KEY": key, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    if here is not None:
        env.update(sealed_host(here))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "runnercli",
            "submit",
            "--server",
            server.url,
            "--workspace",
            "acme",
            "--poll-s",
            "0.3",
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def acme(alice: Any, workspace: Any) -> str:
    suite(alice, cases=3)
    return api_key_create(user=alice).key


def test_it_exits_0_on_a_passing_run_then_1_naming_the_regression_against_it(
    acme: str, alice: Any, tmp_path: Path
) -> None:
    token = runner_pair(owner=alice, label="ci-box", capabilities=["python"]).token
    with daphne(tmp_path) as server:
        runner = runner_cli(tmp_path, ["run", "--server", server.url, "--token", token])
        try:
            passing = submit(server, acme, "--harness", "echo", "--dataset", "echo", "--wait")
            harness_create(user=alice, workspace_slug="acme", name="echo", spec=BROKEN_SPEC)
            regressed = submit(
                server,
                acme,
                "--harness",
                "echo",
                "--dataset",
                "echo",
                "--wait",
                "--baseline",
                "previous",
                "--fail-on",
                "any-regression",
                "--metadata",
                "git_sha=abc1234",
            )
        finally:
            runner.stop()

    assert passing.returncode == 0, passing.stdout + passing.stderr
    first = Run.objects.order_by("pk").first()
    assert first is not None and first.status == "succeeded"
    assert f"Run #{first.pk} succeeded: 3 pass, 0 fail, 0 error" in passing.stdout
    assert "[" + "#" * 30 + "] 3/3" in passing.stderr
    # The working directory's git state is recorded unless given.
    assert "git_sha" in first.metadata and "dirty" in first.metadata

    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    assert f"✗ regressed against run #{first.pk}: c1 1/1 → 0/1 pass" in regressed.stdout
    assert "c0" not in regressed.stdout.split("regressed", 1)[1]
    second = Run.objects.order_by("pk").last()
    assert second is not None and second.metadata["git_sha"] == "abc1234"


def breaks(*keys: int) -> dict[str, Any]:
    """The echo harness, printing something else for these cases."""
    texts = [f"hello {i}" for i in keys]
    return {
        **ECHO_SPEC,
        "command": [
            "python",
            "-c",
            f"import sys; t = sys.argv[1]; print('oops' if t in {texts!r} else t)",
            "{input.text}",
        ],
    }


@pytest.mark.once
def test_a_baseline_fails_the_build_on_a_significant_regression_not_on_noise(
    alice: Any, workspace: Any, tmp_path: Path
) -> None:
    suite(alice, cases=8, name="wide")
    key = api_key_create(user=alice).key
    # The baseline, every case passed: written directly, as a finished run.
    now = timezone.now()
    baseline = Run.objects.create(
        workspace=workspace,
        harness=HarnessVersion.objects.get(name="wide"),
        dataset=DatasetVersion.objects.get(name="wide"),
        runtime="self:any",
        submitted_by=alice,
        status=RunStatus.SUCCEEDED,
        started_at=now,
        finished_at=now,
    )
    cases = dict(Case.objects.filter(dataset=baseline.dataset).values_list("position", "pk"))
    results_add(
        baseline, cases, repeats=1, verdict=lambda c, r: "pass", output=lambda c, r: f"hello {c}"
    )
    token = runner_pair(owner=alice, label="ci-box", capabilities=["python"]).token
    args = ("--harness", "wide", "--dataset", "wide", "--wait", "--baseline", str(baseline.pk))
    with daphne(tmp_path) as server:
        runner = runner_cli(tmp_path, ["run", "--server", server.url, "--token", token])
        try:
            # One case of 8 fails: 1 discordant pair, p = 1.
            harness_create(user=alice, workspace_slug="acme", name="wide", spec=breaks(0))
            noise = submit(server, key, *args)
            # Six of 8 fail: 6 discordant pairs, all worse, p = 2/2^6 = 0.031.
            harness_create(user=alice, workspace_slug="acme", name="wide", spec=breaks(*range(6)))
            worse = submit(server, key, *args)
        finally:
            runner.stop()

    assert noise.returncode == 0, noise.stdout + noise.stderr
    assert (
        f"Against run #{baseline.pk}: pass rate 100 % [68\u2013100] vs 88 % [53\u201398]; "
        "\u0394 \u221212 pp" in noise.stdout
    )
    assert "p = 1 (McNemar, 8 pairs): no detectable difference" in noise.stdout
    assert f"· regressed against run #{baseline.pk}: c0 1/1 → 0/1 pass" in noise.stdout
    assert "✗" not in noise.stdout

    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "p = 0.031 (McNemar, 8 pairs): B is worse" in worse.stdout
    assert "is worse than run" in worse.stdout and "beyond noise" in worse.stdout


def test_without_wait_it_prints_the_run_and_its_url(acme: str, alice: Any, tmp_path: Path) -> None:
    runner_pair(owner=alice, label="offline", capabilities=["python"])
    with daphne(tmp_path) as server:
        started = submit(server, acme, "--harness", "echo", "--dataset", "echo")
    run = Run.objects.get()
    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines() == [f"run {run.pk}", f"{server.url}/runs/{run.pk}/"]


def test_a_bad_key_or_bad_usage_exits_2(acme: str, tmp_path: Path) -> None:
    with daphne(tmp_path) as server:
        refused = submit(server, "evk_" + "x" * 40, "--harness", "echo", "--dataset", "echo")
        unknown = submit(server, acme, "--harness", "nope", "--dataset", "echo", "--wait")
        usage = submit(server, acme, "--harness", "echo", "--dataset", "echo", "--repeats", "99")
    assert refused.returncode == 2
    assert "refused this API key" in refused.stderr
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert usage.returncode == 2
    assert not Run.objects.exists()


def test_fail_under_fails_a_run_below_the_threshold(acme: str, alice: Any, tmp_path: Path) -> None:
    harness_create(user=alice, workspace_slug="acme", name="echo", spec=BROKEN_SPEC)
    with daphne(tmp_path) as server:
        under = submit(
            server,
            acme,
            "--harness",
            "echo",
            "--dataset",
            "echo",
            "--here",
            "--repeats",
            "2",
            "--fail-under",
            "0.9",
            here=tmp_path,
        )
    assert under.returncode == 1, under.stdout + under.stderr
    assert "mean pass fraction 66.7%" in under.stdout
    assert "is under 90.0%" in under.stdout


def test_here_runs_the_cases_on_this_machine_and_leaves_no_runner_paired(
    acme: str, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path) as server:
        done = submit(
            server, acme, "--harness", "echo", "--dataset", "echo", "--here", here=tmp_path
        )

    assert done.returncode == 0, done.stdout + done.stderr
    run = Run.objects.get()
    assert run.status == "succeeded" and run.runner is not None
    ephemeral = Runner.objects.get(pk=run.runner.pk)
    assert ephemeral.label.startswith("ci-")
    assert {r.provenance["runner"] for r in run.results.all()} == {
        f"{ephemeral.pk}/{ephemeral.label}"
    }
    assert not Runner.objects.filter(owner=alice, revoked_at__isnull=True).exists()
    assert f"revoked runner {ephemeral.pk}" in done.stderr


# Claude Code's stream, as a tiny script prints it: the final result carries the case's text
# and what it cost (no braces: `{…}` in a command is a placeholder).
COSTING_SPEC: dict[str, Any] = {
    "command": [
        "python",
        "-c",
        "import json, sys; print(json.dumps(dict(type='system', subtype='init', "
        "session_id='s'))); print(json.dumps(dict(type='result', subtype='success', "
        "is_error=False, result=sys.argv[1], total_cost_usd=0.01, num_turns=1)))",
        "{input.text}",
    ],
    "timeout_s": 30,
    "output": "claude-stream-json",
    "grader": {"type": "exact"},
}


def test_a_run_budget_runs_what_it_pays_for_and_skips_the_rest(
    alice: Any, workspace: Any, tmp_path: Path
) -> None:
    suite(alice, cases=20, spec=COSTING_SPEC, name="costly")
    key = api_key_create(user=alice).key
    paired = runner_pair(owner=alice, label="ci-box", capabilities=["python"])
    with daphne(tmp_path) as server, scheduler(tmp_path):
        runner = runner_cli(
            tmp_path,
            ["run", "--server", server.url, "--token", paired.token, "--max-concurrent", "1"],
        )
        try:
            # The run needs a runner that told what it can run (its features, on connecting).
            deadline = time.monotonic() + 30
            while not Runner.objects.get(pk=paired.runner.pk).features:
                assert time.monotonic() < deadline, "the runner never connected"
                time.sleep(0.2)
            done = submit(
                server,
                key,
                "--harness",
                "costly",
                "--dataset",
                "costly",
                "--wait",
                "--max-cost-usd",
                "0.05",
            )
        finally:
            runner.stop()

    assert done.returncode == 3, done.stdout + done.stderr
    run = Run.objects.get()
    assert run.max_cost_usd is not None and float(run.max_cost_usd) == 0.05
    assert run.results.filter(verdict="pass").count() == 5
    skipped = run.results.filter(verdict="skipped")
    assert skipped.count() == 15
    assert set(skipped.values_list("reason", flat=True)) == {"run budget $0.05 reached"}
    assert f"Run #{run.pk} succeeded: 5 pass, 0 fail, 0 error" in done.stdout
    assert "· 15 skipped" in done.stdout
    assert "✗ the run budget $0.05 ended the run: 15 cases skipped ($0.05 reported)" in done.stdout
    assert "20/20" in done.stderr and "15 skipped" in done.stderr
    assert run.events.filter(
        message="Run budget $0.05 reached ($0.05 reported): 15 cases not started skipped."
    ).exists()
