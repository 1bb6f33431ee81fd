"""Judge-graded cases: judge jobs queued on completion, answers read strictly, the majority."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.errors import Invalid
from runners import queue
from runners.models import JobKind, JobStatus, Runner
from scorecards.judging.answers import Unreadable, answer_read, majority, model_named
from scorecards.models import RunStatus
from scorecards.services import failure_report, result_submit
from tests.suites import ECHO_SPEC, completed, pair, start, suite

pytestmark = pytest.mark.django_db

JUDGE_COMMAND = ["python", "judge.py", "--model", "judge-model-1"]


def judge_spec(votes: int = 1, capabilities: list[str] | None = None) -> dict[str, Any]:
    grader: dict[str, Any] = {
        "type": "judge",
        "rubric": "Does the output greet like the expected answer?",
        "judge": {"command": JUDGE_COMMAND, "capabilities": capabilities or ["python"]},
    }
    if votes != 1:
        grader["votes"] = votes
    return {**ECHO_SPEC, "grader": grader}


def answer(passed: bool, score: float = 1.0, reason: str = "it greets") -> str:
    return json.dumps({"pass": passed, "score": score, "reason": reason})


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Runner:
    runner = pair(alice)
    Runner.objects.filter(pk=runner.pk).update(features=["judge"], protocol=3)
    runner.refresh_from_db()
    return runner


def lease_one(runner: Runner) -> Any:
    [grant] = queue.job_lease(runner=runner)
    return grant


def run_case(alice: Any, laptop: Runner, *, votes: int = 1, cases: int = 1, **kw: Any) -> Any:
    suite(alice, spec=judge_spec(votes), name="judged", cases=cases)
    run = start(alice, laptop, harness="judged", dataset="judged", **kw)
    grant = lease_one(laptop)
    ack = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
    )
    assert ack.accepted
    return run


def judge(laptop: Runner, output: str, **kwargs: Any) -> Any:
    grant = lease_one(laptop)
    assert grant.job.kind == JobKind.JUDGE
    result = completed(output)
    if kwargs:
        result = result.model_copy(update=kwargs)
    return result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, result=result
    )


# Reading answers, strictly.


def test_it_reads_the_answer_alone_or_inside_result() -> None:
    assert answer_read(answer(True, 0.9)).score == 0.9
    wrapped = json.dumps({"type": "result", "result": answer(False, 0.0, "no"), "cost": 1})
    assert answer_read(wrapped).passed is False
    fenced = json.dumps({"result": "```json\n" + answer(True) + "\n```"})
    assert answer_read(fenced).passed is True


@pytest.mark.parametrize(
    "output",
    [
        "GRADE: CI",
        "garbage",
        "",
        '{"pass": "yes", "score": 1, "reason": "r"}',
        '{"pass": true, "score": 2, "reason": "r"}',
        '{"pass": true, "score": true, "reason": "r"}',
        '{"pass": true, "score": 1, "reason": "r", "extra": 1}',
        '{"pass": true, "reason": "r"}',
        '{"result": "GRADE: C"}',
        "[1, 2]",
    ],
)
def test_anything_else_is_unreadable(output: str) -> None:
    with pytest.raises(Unreadable):
        answer_read(output)


def test_it_reads_the_last_agent_message_of_a_codex_stream() -> None:
    stream = "\n".join(
        [
            json.dumps({"type": "thread.started"}),
            json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": "x"}}),
            json.dumps(
                {"type": "item.completed", "item": {"type": "agent_message", "text": answer(True)}}
            ),
        ]
    )
    assert answer_read(stream).passed is True


def test_a_codex_stream_whose_messages_hold_line_separators_raw_is_read() -> None:
    said = "thinking\u2028it over\u0085"
    events = [
        {"type": "item.completed", "item": {"type": "reasoning", "text": said}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": answer(True)}},
    ]
    # Raw, as codex's encoder writes them (str.splitlines would cut the first event).
    stream = "\n".join(json.dumps(event, ensure_ascii=False) for event in events)
    assert "\u2028" in stream
    assert answer_read(stream).passed is True


def test_the_model_comes_from_the_argv() -> None:
    assert model_named(["claude", "-p", "--model", "sonnet"]) == "sonnet"
    assert model_named(["codex", "exec", "--model=gpt-5"]) == "gpt-5"
    assert model_named(["codex", "exec", "-m", "o3"]) == "o3"
    assert model_named(["judge.sh"]) == ""


def test_two_of_three_decide_and_the_agreement_is_said() -> None:
    yes, no = answer_read(answer(True)), answer_read(answer(False))
    decision = majority([yes, no, yes])
    assert (decision.verdict, decision.agreement) == ("pass", "2 of 3 judges")
    assert majority([yes, None, None], why_not=["unreadable"]).verdict == "error"


# Judge jobs through the queue and the settlement.


def test_a_completed_case_queues_its_judge_and_waits(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    row = run.results.get()
    assert row.verdict == "judging"
    [job] = run.jobs.filter(kind=JobKind.JUDGE)
    assert job.status == JobStatus.QUEUED and job.needs_features == ["judge"]
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    from scorecards.selectors.summary import run_summary

    summary = run_summary(run)
    assert (summary["judging"], summary["total"], summary["pass_rate"]) == (1, 1, None)


def test_the_case_job_never_carries_the_expected_answer(alice: Any, laptop: Runner) -> None:
    suite(alice, spec=judge_spec(), name="judged", cases=1)
    start(alice, laptop, harness="judged", dataset="judged")
    grant = lease_one(laptop)
    wire = grant.case_job.model_dump_json()
    assert grant.case_job.judge is None and "hello 0" not in json.dumps(grant.case_job.case.key)
    assert '"expected"' not in wire


def test_the_judge_job_carries_what_it_judges(alice: Any, laptop: Runner) -> None:
    run_case(alice, laptop)
    grant = lease_one(laptop)
    job = grant.case_job
    assert job.kind == "judge" and job.judge is not None
    assert (job.judge.output, job.judge.expected) == ("hello 0", "hello 0")
    assert job.harness.name == "judged.judge" and job.harness.spec.command == JUDGE_COMMAND
    assert job.harness.spec.env == {} and job.timeout_s == 300


def test_a_readable_answer_decides_and_records_who_judged(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    tools = {"python": "3.11.9"}
    from runnercli.protocol import Fingerprint

    fingerprint = Fingerprint(os="linux", python="3.11", runnercli_version="t", tools=tools)
    out = json.dumps({"result": answer(True, 0.8, "greets"), "total_cost_usd": 0.02})
    assert judge(laptop, out, fingerprint=fingerprint).accepted
    row = run.results.get()
    assert (row.verdict, row.score, row.reason) == ("pass", 0.8, "greets")
    assert row.judged_by["runner"] == f"{laptop.pk}/laptop"
    assert row.judged_by["user"] == "alice"
    assert row.judged_by["model"] == "judge-model-1"
    assert row.judged_by["tools"] == tools and len(row.judged_by["prompt_digest"]) == 64
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    from scorecards.selectors.summary import run_summary

    assert run_summary(run)["judge_cost_usd"] == 0.02


def test_an_unreadable_answer_is_asked_again_once_then_an_error(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    judge(laptop, "GRADE: CI")
    assert run.results.get().verdict == "judging"
    assert run.jobs.filter(kind=JobKind.JUDGE, status=JobStatus.QUEUED).count() == 1
    judge(laptop, "garbage")
    row = run.results.get()
    assert row.verdict == "error"
    assert row.error.startswith("judge's answer unreadable: not JSON")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_a_retry_that_answers_decides(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    judge(laptop, "GRADE: CI")
    judge(laptop, answer(False, 0.1, "wrong greeting"))
    assert run.results.get().verdict == "fail"


def test_three_votes_with_one_dissenter(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop, votes=3)
    judging_seq = run.results.get().seq
    assert run.jobs.filter(kind=JobKind.JUDGE).count() == 3
    judge(laptop, answer(True))
    judge(laptop, answer(False, 0.0, "dissent"))
    assert run.results.get().verdict == "judging"
    judge(laptop, answer(True))
    row = run.results.get()
    assert row.verdict == "pass" and row.judged_by["agreement"] == "2 of 3 judges"
    assert row.reason.startswith("2 of 3 judges")
    # Decided, it settles again: the live page and a results cursor see it anew.
    assert row.seq > judging_seq


def test_a_judge_job_that_fails_for_good_is_an_error(alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    grant = lease_one(laptop)
    failure_report(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, message="refused"
    )
    row = run.results.get()
    assert (row.verdict, row.error) == ("error", "judge failed: refused")


def test_judge_jobs_are_outside_concurrency_and_before_pending_cases(
    alice: Any, laptop: Runner
) -> None:
    run = run_case(alice, laptop, cases=3)
    # The next case was admitted beside the judge job: concurrency 1 counts cases only.
    kinds = list(run.jobs.filter(status=JobStatus.QUEUED).values_list("kind", flat=True))
    assert sorted(kinds) == ["case", "judge"]
    assert lease_one(laptop).job.kind == JobKind.JUDGE


def test_dispatch_refuses_when_no_runner_can_judge(alice: Any, workspace: Any) -> None:
    plain = pair(alice, "old")
    Runner.objects.filter(pk=plain.pk).update(features=[], protocol=3)
    suite(alice, spec=judge_spec(), name="judged", cases=1)
    with pytest.raises(Invalid, match="judge"):
        start(alice, plain, harness="judged", dataset="judged")
    suite(alice, spec=judge_spec(capabilities=["claude"]), name="smart", cases=1)
    Runner.objects.filter(pk=plain.pk).update(features=["judge"])
    with pytest.raises(Invalid, match="claude"):
        start(alice, plain, harness="smart", dataset="smart")


def test_the_pages_show_judging_then_who_judged(client: Any, alice: Any, laptop: Runner) -> None:
    run = run_case(alice, laptop)
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "1 judging" in page and "v-judging" in page
    judge(laptop, answer(True, 1.0, "greets well"))
    case = client.get(f"/runs/{run.pk}/cases/c0/").content.decode()
    assert "greets well" in case and "judge-model-1" in case and "1 judge" in case
    export = client.get(f"/api/runs/{run.pk}/results.jsonl")
    line = json.loads(b"".join(export.streaming_content).decode().splitlines()[0])
    assert line["judged_by"]["model"] == "judge-model-1"
    csv = b"".join(client.get(f"/api/runs/{run.pk}/results.csv").streaming_content).decode()
    header, first = csv.splitlines()[:2]
    assert "judged_by" in header.split(",") and "judge-model-1" in first


def test_a_cancel_ends_the_wait_for_judges(alice: Any, laptop: Runner) -> None:
    from scorecards.services import run_cancel

    run = run_case(alice, laptop)
    run_cancel(user=alice, run_id=run.pk)
    row = run.results.get()
    assert (row.verdict, row.error) == ("error", "canceled while judging")
    assert not run.jobs.filter(kind=JobKind.JUDGE, status=JobStatus.QUEUED).exists()


def test_a_stored_output_can_be_judged_again_without_running_its_case(
    alice: Any, laptop: Runner
) -> None:
    from django.db import transaction

    from runnercli.protocol import HarnessSpec
    from scorecards.judging.services import judgements_queue

    run = run_case(alice, laptop)
    judge(laptop, answer(True))
    row = run.results.get()
    cases_before = run.jobs.filter(kind=JobKind.CASE).count()
    other = HarnessSpec.model_validate(judge_spec(votes=3))
    with transaction.atomic():
        judgements_queue(result=row, spec=other)
    assert run.results.get().verdict == "judging"
    for _ in range(3):
        judge(laptop, answer(False, 0.0, "stricter"))
    row = run.results.get()
    assert (row.verdict, row.judged_by["agreement"]) == ("fail", "3 of 3 judges")
    assert run.jobs.filter(kind=JobKind.CASE).count() == cases_before


def test_a_judge_job_no_runner_takes_ends_the_case_as_an_error_and_the_run(
    alice: Any, laptop: Runner
) -> None:
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    from scorecards.management.commands.scheduler import process_pass

    run = run_case(alice, laptop)
    with time_machine.travel(timezone.now() + timedelta(seconds=4000), tick=False):
        process_pass()
    row = run.results.get()
    assert row.verdict == "error" and row.error.startswith("judge failed: no_runner"), row.error
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
