"""A run by host: pass rate, count and mean duration per runner and per fingerprint, on the
run reply and page; compare names a regression confined to one host."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from runnercli.protocol import CaseResult, Fingerprint
from runners import queue
from scorecards.services import result_submit
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def settle(runner: Any, claude: str, *, wrong: bool, duration_ms: int) -> str:
    """The runner leases one job and reports it (its output right or wrong); its case key."""
    grant = queue.job_lease(runner=runner)[0]
    text = f"hello {grant.job.case_key.removeprefix('c')}"
    result = CaseResult(
        status="completed",
        exit_code=0,
        output="nope" if wrong else text,
        duration_ms=duration_ms,
        fingerprint=Fingerprint(os="linux", os_version="6.1", tools={"claude": claude}),
    )
    result_submit(
        runner=runner, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, result=result
    )
    return grant.job.case_key


@pytest.fixture
def laptops(alice: Any, workspace: Any) -> tuple[Any, Any]:
    suite(alice, cases=4)
    return pair(alice, "laptop-1"), pair(alice, "laptop-2")


def _spread(alice: Any, laptops: tuple[Any, Any], *, wrong_on_2: bool) -> Any:
    """A run over 4 cases on both laptops: two each, laptop-2 with a newer claude."""
    one, two = laptops
    run = start(alice, None, concurrency=4)
    for _ in range(2):
        settle(one, "2.0.14", wrong=False, duration_ms=100)
        settle(two, "2.1.0", wrong=wrong_on_2, duration_ms=300)
    return run


def test_the_run_reply_and_page_show_results_per_runner_and_fingerprint(
    client: Client, alice: Any, laptops: tuple[Any, Any]
) -> None:
    run = _spread(alice, laptops, wrong_on_2=True)

    by_host = api(alice).get(f"/api/runs/{run.pk}").json()["by_host"]

    runners = {r["label"]: r for r in by_host["runners"]}
    assert set(runners) == {"laptop-1", "laptop-2"}
    assert (runners["laptop-1"]["results"], runners["laptop-1"]["pass_rate"]) == (2, 1.0)
    assert (runners["laptop-2"]["results"], runners["laptop-2"]["pass_rate"]) == (2, 0.0)
    assert runners["laptop-2"]["mean_duration_ms"] == 300
    prints = {p["facts"]["claude"]: p for p in by_host["fingerprints"]}
    assert prints["2.1.0"]["runners"] == ["laptop-2"] and prints["2.1.0"]["results"] == 2
    assert prints["2.0.14"]["facts"]["OS"] == "linux 6.1"

    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-by-host"' in page and 'data-runner="laptop-2"' in page
    assert "claude 2.1.0, linux 6.1" in page


def test_compare_says_when_every_regression_ran_on_one_host(
    client: Client, alice: Any, laptops: tuple[Any, Any]
) -> None:
    baseline = _spread(alice, laptops, wrong_on_2=False)
    run = _spread(alice, laptops, wrong_on_2=True)

    compared = api(alice).get(f"/api/runs/{run.pk}/compare?baseline={baseline.pk}").json()

    assert compared["counts"]["regressed"] == 2
    assert compared["confined"] == "all 2 regressions ran on laptop-2, claude 2.1.0, linux 6.1"
    client.force_login(alice)
    page = client.get(f"/w/acme/compare?a={baseline.pk}&b={run.pk}").content.decode()
    assert "All 2 regressions ran on laptop-2" in page


def test_a_run_on_one_host_names_no_confinement(alice: Any, laptops: tuple[Any, Any]) -> None:
    one, _ = laptops
    baseline = start(alice, one, concurrency=4)
    for _ in range(4):
        settle(one, "2.0.14", wrong=False, duration_ms=1)
    run = start(alice, one, concurrency=4)
    for _ in range(4):
        settle(one, "2.0.14", wrong=True, duration_ms=1)

    compared = api(alice).get(f"/api/runs/{run.pk}/compare?baseline={baseline.pk}").json()

    assert compared["counts"]["regressed"] == 4 and compared["confined"] == ""
