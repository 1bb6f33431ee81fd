"""The runner tools over real HTTP: a whole job through MCP alone, fencing, gating, bounds."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from accounts.services import api_key_create
from runners.models import JobAttempt, JobLogLine, JobStatus, RunnerJob
from scorecards.models import CaseResult as CaseResultRow
from tests.live import ParkedPolls, metric
from tests.mcpgateway.conftest import SLOW_RECHECK_S
from tests.mcpgateway.mcp_client import acall, call, error_text, rest, session, structured
from tests.suites import suite

pytestmark = pytest.mark.e2e

RESULT = {
    "status": "completed",
    "exit_code": 0,
    "output": "hello 0\n",
    "stderr_tail": "",
    "duration_ms": 12,
    "fingerprint": {"os": "linux", "python": "3.11", "runnercli_version": "test"},
}


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    suite(alice, cases=1)
    return api_key_create(user=alice).key


def pair_via_rest(gateway: Any, key: str, label: str = "laptop") -> dict[str, Any]:
    status, paired = rest(
        gateway.url, "POST", "/api/runners", key, {"label": label, "capabilities": ["python"]}
    )
    assert status == 201, paired
    return paired


def dispatch(gateway: Any, key: str, runner_id: int | str) -> dict[str, Any]:
    status, run = rest(
        gateway.url,
        "POST",
        "/api/workspaces/acme/runs",
        key,
        {"harness": "echo", "dataset": "echo", "runtime": f"self:{runner_id}"},
    )
    assert status == 201, run
    return run


def dispatch_all(gateway: Any, user: Any, key: str, runner_id: int, cases: int) -> dict[str, Any]:
    """Dispatch a run of `cases` cases with every job queued at once."""
    name = f"suite-{cases}"
    suite(user, cases=cases, name=name)
    status, run = rest(
        gateway.url,
        "POST",
        "/api/workspaces/acme/runs",
        key,
        {"harness": name, "dataset": name, "runtime": f"self:{runner_id}", "concurrency": cases},
    )
    assert status == 201, run
    return run


def lease(gateway: Any, token: str, **args: Any) -> dict[str, Any]:
    reply = structured(call(gateway.url, token, "lease_job", {"protocol": 2, **args}))
    assert reply["job"] is not None, reply
    return reply


class ParkedLease(threading.Thread):
    """A `lease_job` long-poll in flight on its own thread, with the times it began and ended."""

    def __init__(self, url: str, token: str, wait_ms: int) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.wait_ms = url, token, wait_ms
        self.asked_at = self.answered_at = 0.0
        self.reply: dict[str, Any] | None = None

    def run(self) -> None:
        asyncio.run(self._poll())

    async def _poll(self) -> None:
        async with session(self.url, self.token) as client:
            await client.list_tools()
            self.asked_at = time.monotonic()
            result = await client.call_tool(
                "lease_job",
                {
                    "protocol": 2,
                    "wait_ms": self.wait_ms,
                    "capabilities": ["python"],
                    "status": "idle",
                },
            )
            self.answered_at = time.monotonic()
            self.reply = structured(result)


def test_a_whole_job_runs_through_the_mcp_tools_alone(gateway: Any, alice: Any, key: str) -> None:
    paired = pair_via_rest(gateway, key)
    token = paired["token"]
    wait_ms = 20_000
    parking = ParkedPolls(gateway.url)
    poll = ParkedLease(gateway.url, token, wait_ms)
    poll.start()
    # Its first round found the queue empty: from now on only a wake-up can bring it the job.
    parking.wait()
    assert poll.reply is None and poll.asked_at

    dispatched_at = time.monotonic()
    run = dispatch(gateway, key, paired["id"])
    poll.join(wait_ms / 1000 + 10)

    # Woken by the dispatch itself: well before wait_ms and before any periodic re-check.
    assert poll.reply is not None
    assert poll.asked_at < dispatched_at
    assert poll.answered_at - dispatched_at < 2.0
    assert poll.answered_at - poll.asked_at < min(wait_ms / 1000, SLOW_RECHECK_S) / 2
    job, lease_ = poll.reply["job"], poll.reply["lease"]
    assert job["run_id"] == run["id"]
    assert job["case"] == {"key": "c0", "input": {"text": "hello 0"}}
    assert "expected" not in job["case"]
    assert lease_["job_id"] == job["job_id"] and lease_["lease_epoch"] == job["lease_epoch"]
    assert lease_["lease_ttl_ms"] == 5000 and 0 < lease_["heartbeat_ms"] < 5000
    fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}

    beat = structured(
        call(gateway.url, token, "heartbeat_job", {**fence, "status": "running 1 job"})
    )
    assert beat == {"accepted": True, "reason": "", "cancel": False, "resumed": False}
    logged = structured(
        call(gateway.url, token, "report_case_log", {**fence, "lines": ["starting", "hello 0"]})
    )
    assert logged["accepted"] is True
    ack = structured(call(gateway.url, token, "submit_job_result", {**fence, "result": RESULT}))
    assert ack == {"accepted": True, "reason": ""}

    status, scored = rest(gateway.url, "GET", f"/api/runs/{run['id']}", key)
    assert status == 200
    assert scored["status"] == "succeeded"
    [result] = scored["results"]
    assert result["case"] == "c0" and result["verdict"] == "pass" and result["score"] == 1.0
    assert result["provenance"] == {
        "ran_on": "self-hosted",
        "runner": f"{paired['id']}/laptop",
        "by": "alice",
    }
    status, logs = rest(gateway.url, "GET", f"/api/runs/{run['id']}/logs", key)
    assert status == 200
    assert [(line["case"], line["line"]) for line in logs] == [
        ("c0", "starting"),
        ("c0", "hello 0"),
    ]
    assert logs[0]["seq"] < logs[1]["seq"]


def test_a_duplicate_result_is_accepted_once_and_changes_nothing(gateway: Any, key: str) -> None:
    paired = pair_via_rest(gateway, key)
    dispatch(gateway, key, paired["id"])
    job = lease(gateway, paired["token"])["job"]
    fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
    first = structured(
        call(gateway.url, paired["token"], "submit_job_result", {**fence, "result": RESULT})
    )
    again = structured(
        call(gateway.url, paired["token"], "submit_job_result", {**fence, "result": RESULT})
    )
    assert first == {"accepted": True, "reason": ""}
    assert again == {"accepted": True, "reason": "duplicate"}
    assert CaseResultRow.objects.count() == 1


def test_a_stale_epoch_is_refused_and_another_runners_job_too(
    gateway: Any, alice: Any, bob: Any, key: str
) -> None:
    paired = pair_via_rest(gateway, key)
    token = paired["token"]
    dispatch(gateway, key, paired["id"])
    job = lease(gateway, token)["job"]
    stale = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"] - 1}

    beat = structured(call(gateway.url, token, "heartbeat_job", stale))
    assert beat["accepted"] is False and "stale" in beat["reason"]
    late: list[tuple[str, dict[str, Any]]] = [
        ("submit_job_result", {"result": RESULT}),
        ("report_case_log", {"lines": ["late"]}),
        ("fail_job", {"message": "late"}),
    ]
    for tool, extra in late:
        ack = structured(call(gateway.url, token, tool, {**stale, **extra}))
        assert ack["accepted"] is False, (tool, ack)
        assert "stale" in ack["reason"]

    # Someone else's runner, even one of the same owner, holding the right epoch: refused.
    current = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
    other = pair_via_rest(gateway, key, label="desktop")["token"]
    strangers = pair_via_rest(gateway, api_key_create(user=bob).key, label="bobs")["token"]
    for intruder in (other, strangers):
        for tool, extra in [("heartbeat_job", {}), *late]:
            ack = structured(call(gateway.url, intruder, tool, {**current, **extra}))
            assert ack["accepted"] is False, (tool, ack)
    assert (
        "unknown job"
        in structured(call(gateway.url, strangers, "heartbeat_job", current))["reason"]
    )

    assert CaseResultRow.objects.count() == 0
    assert JobLogLine.objects.count() == 0
    assert RunnerJob.objects.get(pk=job["job_id"]).status == JobStatus.LEASED
    ack = structured(call(gateway.url, token, "submit_job_result", {**current, "result": RESULT}))
    assert ack["accepted"] is True


def test_an_outdated_runner_is_told_to_update_and_takes_no_attempt(gateway: Any, key: str) -> None:
    paired = pair_via_rest(gateway, key)
    dispatch(gateway, key, paired["id"])
    reply = structured(
        call(gateway.url, paired["token"], "lease_job", {"protocol": 0, "wait_ms": 1000})
    )
    assert reply == {"job": None, "lease": None, "update_required": True}
    job = RunnerJob.objects.get()
    assert job.status == JobStatus.QUEUED
    assert job.attempts == 0 and job.lease_epoch == 0
    assert not JobAttempt.objects.exists()


def test_an_empty_queue_answers_no_job_after_wait_ms(gateway: Any, key: str) -> None:
    token = pair_via_rest(gateway, key)["token"]
    began = time.monotonic()
    reply = structured(call(gateway.url, token, "lease_job", {"protocol": 2, "wait_ms": 700}))
    waited = time.monotonic() - began
    assert reply == {"job": None, "lease": None, "update_required": False}
    assert 0.6 < waited < 10
    # A negative wait is clamped to "do not wait".
    began = time.monotonic()
    structured(call(gateway.url, token, "lease_job", {"protocol": 2, "wait_ms": -5}))
    assert time.monotonic() - began < 2


def test_a_long_poll_whose_client_hung_up_leaves_no_job_leased(gateway: Any, key: str) -> None:
    paired = pair_via_rest(gateway, key)
    parked_before = metric(gateway.url, "everdict_parked_long_polls")
    parking = ParkedPolls(gateway.url)

    async def hang_up_once_parked() -> None:
        poll = asyncio.create_task(
            acall(gateway.url, paired["token"], "lease_job", {"protocol": 2, "wait_ms": 20_000})
        )
        await asyncio.to_thread(parking.wait)
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll

    asyncio.run(hang_up_once_parked())
    dispatch(gateway, key, paired["id"])
    # The poll has left the server's parked polls: cancelled by the hang-up, or (were the
    # hang-up missed) woken by the dispatch, having claimed the job.
    deadline = time.monotonic() + 15
    while metric(gateway.url, "everdict_parked_long_polls") > parked_before:
        assert time.monotonic() < deadline, "the hung-up poll is still parked"
        time.sleep(0.05)
    job = RunnerJob.objects.get()
    assert job.status == JobStatus.QUEUED
    assert not JobAttempt.objects.exists()
    # And the job is there for the next caller.
    assert lease(gateway, paired["token"])["job"]["job_id"] == job.pk


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("report_case_log", {"lines": ["x"] * 501}, "lines"),
        ("report_case_log", {"lines": ["é" * 5000]}, "8192 bytes"),
        ("heartbeat_job", {"status": "s" * 201}, "status"),
        (
            "submit_job_result",
            {"result": {**RESULT, "output": "o" * (1024 * 1024 + 1)}},
            "output exceeds",
        ),
        (
            "submit_job_result",
            {"result": {**RESULT, "stderr_tail": "e" * (64 * 1024 + 1)}},
            "stderr_tail exceeds",
        ),
        (
            "submit_job_result",
            {"result": {**RESULT, "provenance": {"ran_on": "cloud"}}},
            "provenance",
        ),
        ("submit_job_result", {"result": {**RESULT, "status": "great"}}, "status"),
    ],
)
def test_an_argument_over_a_bound_is_a_tool_error_and_nothing_is_stored(
    gateway: Any, key: str, tool: str, args: dict[str, Any], says: str
) -> None:
    paired = pair_via_rest(gateway, key)
    dispatch(gateway, key, paired["id"])
    job = lease(gateway, paired["token"])["job"]
    fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
    result = call(gateway.url, paired["token"], tool, {**fence, **args})
    assert result.is_error
    assert says in error_text(result)
    assert JobLogLine.objects.count() == 0
    assert CaseResultRow.objects.count() == 0
    assert RunnerJob.objects.get().status == JobStatus.LEASED


def test_lease_job_stores_the_capabilities_the_runner_reports(gateway: Any, key: str) -> None:
    paired = pair_via_rest(gateway, key)
    structured(
        call(
            gateway.url,
            paired["token"],
            "lease_job",
            {"protocol": 2, "capabilities": ["python", "claude"], "status": "idle"},
        )
    )
    status, runners = rest(gateway.url, "GET", "/api/runners", key)
    assert status == 200
    assert runners[0]["capabilities"] == ["claude", "python"]
    assert runners[0]["online"] is True and runners[0]["status"] == "idle"


def test_a_runner_with_free_slots_leases_several_jobs_in_one_call(
    gateway: Any, alice: Any, key: str
) -> None:
    paired = pair_via_rest(gateway, key)
    dispatch_all(gateway, alice, key, paired["id"], cases=5)
    first = lease(gateway, paired["token"], max_jobs=3)
    assert [g["job"]["case"]["key"] for g in first["jobs"]] == ["c0", "c1", "c2"]
    assert first["job"] == first["jobs"][0]["job"]
    assert {g["lease"]["lease_epoch"] for g in first["jobs"]} == {1}
    rest_of_it = lease(gateway, paired["token"], max_jobs=5)
    assert [g["job"]["case"]["key"] for g in rest_of_it["jobs"]] == ["c3", "c4"]
    empty = structured(
        call(gateway.url, paired["token"], "lease_job", {"protocol": 2, "max_jobs": 2})
    )
    assert empty == {"job": None, "lease": None, "update_required": False, "jobs": []}
    assert RunnerJob.objects.filter(status=JobStatus.LEASED).count() == 5
    assert JobAttempt.objects.filter(status="executing").count() == 5


def test_several_results_go_in_one_call_each_fenced_on_its_own(
    gateway: Any, alice: Any, key: str
) -> None:
    paired = pair_via_rest(gateway, key)
    run = dispatch_all(gateway, alice, key, paired["id"], cases=4)
    grants = lease(gateway, paired["token"], max_jobs=4)["jobs"]
    assert len(grants) == 4
    reports = [
        {
            "job_id": g["job"]["job_id"],
            "lease_epoch": g["job"]["lease_epoch"],
            "result": {**RESULT, "output": f"hello {i}\n"},
        }
        for i, g in enumerate(grants)
    ]
    stale = {**reports[3], "lease_epoch": reports[3]["lease_epoch"] + 7}
    token = paired["token"]

    # Bad input refuses the whole call and stores nothing.
    twice = call(gateway.url, token, "submit_job_results", {"results": [reports[0], reports[0]]})
    assert twice.is_error and "once per call" in error_text(twice)
    too_big = {**RESULT, "output": "x" * (1024 * 1024 - 10)}
    oversized = [{**r, "result": too_big} for r in reports] + [
        {**reports[0], "job_id": 10**9, "result": too_big}
    ]
    refused = call(gateway.url, token, "submit_job_results", {"results": oversized})
    assert refused.is_error and "fewer results per call" in error_text(refused)
    assert not CaseResultRow.objects.exists()

    acks = structured(
        call(gateway.url, token, "submit_job_results", {"results": [*reports[:3], stale]})
    )["acks"]
    assert [a["accepted"] for a in acks] == [True, True, True, False]
    assert acks[3]["reason"].startswith("stale lease")
    assert CaseResultRow.objects.filter(run_id=run["id"]).count() == 3
    assert set(CaseResultRow.objects.values_list("verdict", flat=True)) == {"pass"}
    assert RunnerJob.objects.filter(status=JobStatus.SUCCEEDED).count() == 3

    # The same results again are duplicates; the last one, now with its real fence, lands.
    again = structured(
        call(gateway.url, token, "submit_job_results", {"results": [reports[0], reports[3]]})
    )["acks"]
    assert again == [{"accepted": True, "reason": "duplicate"}, {"accepted": True, "reason": ""}]
    assert CaseResultRow.objects.filter(run_id=run["id"]).count() == 4
    status, done = rest(gateway.url, "GET", f"/api/runs/{run['id']}", key)
    assert status == 200 and done["status"] == "succeeded"
    assert JobAttempt.objects.filter(status="succeeded").count() == 4
