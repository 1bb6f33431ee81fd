"""Dispatch: targets resolved against the submitter's own runners, quota, budget, events."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.management import call_command

from accounts.services import api_key_create
from core.errors import Invalid, NotFound, QuotaExceeded
from runners import queue
from runners.models import RunnerJob
from scorecards.models import Membership, Role, Run, RunStatus, Workspace
from scorecards.services import result_submit, workspace_update
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice)


def bearer(user: Any) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(user=user).key}"}


def test_bob_cannot_target_alices_runner_even_as_admin(alice: Any, bob: Any, laptop: Any) -> None:
    Membership.objects.filter(user=bob).update(role=Role.ADMIN)
    with pytest.raises(NotFound):
        start(bob, laptop)
    assert not Run.objects.exists()


def test_self_any_reaches_only_the_submitters_runners(alice: Any, bob: Any, laptop: Any) -> None:
    with pytest.raises(NotFound, match="no runners"):
        start(bob, None)
    pair(bob, "bobs")
    run = start(bob, None)
    assert set(run.jobs.values_list("owner_id", flat=True)) == {bob.pk}
    assert queue.job_lease(runner=laptop) == []


def test_no_capable_runner_is_a_hard_400(alice: Any, laptop: Any) -> None:
    from tests.suites import ECHO_SPEC

    suite(alice, spec={**ECHO_SPEC, "capabilities": ["claude"]}, name="smart")
    with pytest.raises(Invalid, match="lacks the capabilities"):
        start(alice, laptop, harness="smart", dataset="smart")
    with pytest.raises(Invalid):
        start(alice, None, harness="smart", dataset="smart")
    assert not Run.objects.exists()


def test_an_offline_runner_parks_the_jobs_with_one_event_at_once(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop)
    assert run.jobs.count() == 3
    warnings = list(run.events.filter(level="warning").values_list("message", flat=True))
    assert warnings == ["Runner laptop is offline — start it with `python -m runnercli run`"]


def test_an_online_runner_gets_no_offline_event(alice: Any, laptop: Any) -> None:
    queue.job_lease(runner=laptop)  # touches presence
    run = start(alice, laptop)
    assert not run.events.filter(level="warning").exists()


def test_a_self_hosted_run_counts_against_the_quota_but_draws_no_budget(
    alice: Any, laptop: Any
) -> None:
    workspace_update(
        user=alice,
        slug="acme",
        changes={"run_quota": 1, "budget_usd": "10.00", "budget_tokens": 1000},
    )
    spec = {
        "command": ["python", "-c", "x"],
        "output": "json",
        "grader": {"type": "contains", "field": "result"},
    }
    suite(alice, spec=spec, name="costly")
    run = start(alice, laptop, harness="costly", dataset="costly")
    grant = queue.job_lease(runner=laptop)[0]
    result_submit(
        runner=laptop,
        job_id=grant.job.pk,
        lease_epoch=1,
        result=completed(
            '{"result": "hello 0", "total_cost_usd": 0.25, "usage": '
            '{"input_tokens": 10, "output_tokens": 5}}'
        ),
    )
    ws = Workspace.objects.get(slug="acme")
    assert (ws.spent_usd, ws.spent_tokens) == (0, 0)
    row = run.results.get()
    assert row.usage["total_cost_usd"] == 0.25
    with pytest.raises(QuotaExceeded, match="run quota"):
        start(alice, laptop)
    assert Run.objects.count() == 1


def test_over_quota_is_429_with_the_reason(client: Any, alice: Any, laptop: Any) -> None:
    workspace_update(user=alice, slug="acme", changes={"run_quota": 0})
    reply = client.post(
        "/api/workspaces/acme/runs",
        {"harness": "echo", "dataset": "echo", "runtime": f"self:{laptop.pk}"},
        content_type="application/json",
        **bearer(alice),
    )
    assert reply.status_code == 429
    assert "quota" in reply.json()["detail"]


@pytest.mark.parametrize("runtime", ["local", "self:", "self:abc", "nomad:x", "", "self:any;drop"])
def test_an_unknown_runtime_is_400_and_creates_nothing(
    client: Any, alice: Any, laptop: Any, runtime: str
) -> None:
    reply = client.post(
        "/api/workspaces/acme/runs",
        {"harness": "echo", "dataset": "echo", "runtime": runtime},
        content_type="application/json",
        **bearer(alice),
    )
    assert reply.status_code == 400
    assert not Run.objects.exists() and not RunnerJob.objects.exists()


def test_runs_api_reply_shape_logs_and_cancel(client: Any, alice: Any, laptop: Any) -> None:
    headers = bearer(alice)
    created = client.post(
        "/api/workspaces/acme/runs",
        {"harness": "echo", "dataset": "echo", "runtime": f"self:{laptop.pk}", "concurrency": 2},
        content_type="application/json",
        **headers,
    )
    assert created.status_code == 201, created.content
    run = created.json()
    assert set(run) >= {
        "id",
        "workspace",
        "status",
        "runtime",
        "submitted_by",
        "created_at",
        "finished_at",
        "summary",
        "events",
        "results",
    }
    assert run["summary"]["total"] == 3 and run["summary"]["pending"] == 3
    grant = queue.job_lease(runner=laptop)[0]
    queue.job_report_log(runner=laptop, job_id=grant.job.pk, lease_epoch=1, lines=["a", "b"])
    result_submit(runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0"))
    logs = client.get(f"/api/runs/{run['id']}/logs", **headers).json()
    assert [(entry["case"], entry["line"]) for entry in logs] == [("c0", "a"), ("c0", "b")]
    after = client.get(f"/api/runs/{run['id']}/logs?after={logs[0]['seq']}", **headers).json()
    assert [entry["line"] for entry in after] == ["b"]
    got = client.get(f"/api/runs/{run['id']}", **headers).json()
    assert got["status"] == "running"
    assert got["results"][0]["verdict"] == "pass"
    assert got["results"][0]["provenance"]["ran_on"] == "self-hosted"
    canceled = client.post(f"/api/runs/{run['id']}/cancel", **headers)
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"


def test_outsiders_get_404_and_viewers_cannot_start_runs(
    client: Any, alice: Any, charlie: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    assert client.get(f"/api/runs/{run.pk}", **bearer(charlie)).status_code == 404
    assert client.post(f"/api/runs/{run.pk}/cancel", **bearer(charlie)).status_code == 404
    Membership.objects.create(workspace=run.workspace, user=charlie, role=Role.VIEWER)
    assert client.get(f"/api/runs/{run.pk}", **bearer(charlie)).status_code == 200
    assert client.post(f"/api/runs/{run.pk}/cancel", **bearer(charlie)).status_code == 403
    reply = client.post(
        "/api/workspaces/acme/runs",
        {"harness": "echo", "dataset": "echo", "runtime": "self:any"},
        content_type="application/json",
        **bearer(charlie),
    )
    assert reply.status_code == 403


def test_malformed_json_is_400_not_500(client: Any, alice: Any, laptop: Any) -> None:
    reply = client.post(
        "/api/workspaces/acme/runs",
        "{not json",
        content_type="application/json",
        **bearer(alice),
    )
    assert reply.status_code == 400


def test_a_ten_thousand_case_run_is_created_in_bulk(
    alice: Any, workspace: Any, django_assert_max_num_queries: Any
) -> None:
    suite(alice, cases=10_000, name="big")
    runner = pair(alice)
    started = time.perf_counter()
    # Bulk, not a round trip per case: SQLite caps a statement at 999 parameters, so it
    # takes ~150 multi-row INSERTs where PostgreSQL takes a handful.
    with django_assert_max_num_queries(250):
        run = start(alice, runner, harness="big", dataset="big", concurrency=8)
    elapsed = time.perf_counter() - started
    assert run.jobs.count() == 10_000
    assert run.jobs.filter(status="queued").count() == 8
    print(f"10,000-case dispatch: {elapsed:.2f}s")


def test_the_scheduler_command_runs_a_pass(alice: Any, laptop: Any, capsys: Any) -> None:
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    run = start(alice, laptop)
    with time_machine.travel(timezone.now() + timedelta(hours=1)):
        call_command("scheduler", "--once")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "handled" in capsys.readouterr().out
