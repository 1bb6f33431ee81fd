"""End to end: judge-graded cases with daphne, the scheduler and `python -m runnercli`.

The judge is a small script: it answers valid JSON, garbage, `GRADE: CI` or JSON inside a
`result` field, as the case's input asks. The harness records what its process could see,
so the test can check that no expected answer reached it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runners.models import JobAttempt, RunnerJob
from scorecards.services import harness_create
from tests.live import runner_cli
from tests.runnercli.test_e2e import Api, api, dataset, start_runner, wait_file

__all__ = ["api"]

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Prints the case's answer and records its environment and case file where the test reads.
CASE = """
    import json, os, sys
    seen = sys.argv[1]
    case = json.load(open(os.environ["EVERDICT_CASE_FILE"]))
    record = {"env": dict(os.environ), "case_file": open(os.environ["EVERDICT_CASE_FILE"]).read(),
              "cwd_files": os.listdir(".")}
    with open(os.path.join(seen, case["key"] + ".json"), "w") as f:
        json.dump(record, f)
    # The input holds the answer reversed, so the expected text itself appears nowhere here.
    print(case["input"]["answer"][::-1])
"""

# Answers as the case's input says; vote 1 dissents when asked to.
JUDGE = """
    import json, os, stat, sys, time
    path = os.environ["EVERDICT_JUDGE_FILE"]
    seen = sys.argv[1]
    judge = json.load(open(path))
    mode = judge["input"]["mode"]
    modes = {"file": oct(os.stat(path).st_mode & 0o777),
             "dir": oct(os.stat(os.path.dirname(path)).st_mode & 0o777), "path": path,
             "pid": os.getpid()}
    with open(os.path.join(seen, f"judge-{judge['case_key']}-{judge['vote']}.json"), "w") as f:
        json.dump(modes, f)
    if mode == "slow" and not os.path.exists(os.path.join(seen, "slow-once")):
        open(os.path.join(seen, "slow-once"), "w").close()
        time.sleep(120)
    verdict = judge["output"].strip() == judge["expected"]
    if mode == "dissent" and judge["vote"] == 1:
        verdict = not verdict
    answer = json.dumps({"pass": verdict, "score": 1.0 if verdict else 0.0,
                         "reason": f"output {'matches' if verdict else 'differs'}"})
    if mode == "garbage":
        print("I think it is fine, probably")
    elif mode == "ci":
        print("GRADE: CI")
    elif mode == "wrapped":
        print(json.dumps({"type": "result", "result": answer, "total_cost_usd": 0.01}))
    else:
        print(answer)
"""


def judged_harness(user: Any, tmp_path: Path, seen: Path, name: str, votes: int = 1) -> None:
    case, judge = tmp_path / "case.py", tmp_path / "judge.py"
    case.write_text(textwrap.dedent(CASE))
    judge.write_text(textwrap.dedent(JUDGE))
    grader: dict[str, Any] = {
        "type": "judge",
        "rubric": "Is the output the expected answer?",
        "judge": {
            "command": [sys.executable, str(judge), str(seen), "--model", "script-1"],
            "capabilities": ["python"],
            "timeout_s": 300,
        },
    }
    if votes != 1:
        grader["votes"] = votes
    harness_create(
        user=user,
        workspace_slug="acme",
        name=name,
        spec={
            "command": [sys.executable, str(case), str(seen)],
            "timeout_s": 60,
            "capabilities": ["python"],
            "grader": grader,
        },
    )


def secret(key: str) -> str:
    return f"EXPECTED-{key}-7f3a"


def case(key: str, mode: str, right: bool = True) -> dict[str, Any]:
    answer = secret(key) if right else "something else"
    return {"key": key, "input": {"mode": mode, "answer": answer[::-1]}, "expected": secret(key)}


def results_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["case"]: r for r in run["results"]}


def test_judged_verdicts_strict_reading_and_no_expected_answer_in_the_case(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    judged_harness(alice, tmp_path, seen, "judged")
    cases = [
        case("valid-pass", "valid"),
        case("valid-fail", "valid", right=False),
        case("garbage", "garbage"),
        case("ci", "ci"),
        case("wrapped", "wrapped"),
    ]
    dataset(alice, "judged", cases)
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop")
    try:
        run_id = api.start_run("judged", "judged", f"self:{runner_id}", concurrency=2)
        run = api.wait_run(run_id, timeout=90)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    verdicts = {key: r["verdict"] for key, r in results_of(run).items()}
    assert verdicts == {
        "valid-pass": "pass",
        "valid-fail": "fail",
        "garbage": "error",
        "ci": "error",
        "wrapped": "pass",
    }, run
    results = results_of(run)
    assert results["ci"]["error"].startswith("judge's answer unreadable: not JSON: `GRADE: CI`")
    judged_by = results["wrapped"]["judged_by"]
    assert judged_by["runner"] == f"{runner_id}/laptop" and judged_by["user"] == "alice"
    assert judged_by["model"] == "script-1" and isinstance(judged_by["tools"], dict)
    assert run["status"] == "failed" and run["summary"]["judge_cost_usd"] == 0.01
    # Each unreadable answer was asked again once: two judge jobs for each.
    judge_jobs = RunnerJob.objects.filter(run_id=run_id, kind="judge")
    per_case = {key: judge_jobs.filter(case_key=key).count() for key in verdicts}
    assert per_case == {"valid-pass": 1, "valid-fail": 1, "garbage": 2, "ci": 2, "wrapped": 1}
    for c in cases:
        record = json.loads((seen / f"{c['key']}.json").read_text())
        assert secret(c["key"]) not in json.dumps(record["env"]) + record["case_file"]
        assert "EVERDICT_JUDGE_FILE" not in record["env"] and record["cwd_files"] == []
        modes = json.loads((seen / f"judge-{c['key']}-0.json").read_text())
        assert (modes["file"], modes["dir"]) == ("0o600", "0o700")
        assert not os.path.exists(modes["path"]), "the judge's directory outlived its job"
    case_page = api.ok("GET", f"/api/runs/{run_id}/cases/wrapped")
    assert "script-1" in json.dumps(case_page)


def test_three_judges_with_one_dissenter(api: Api, alice: Any, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    judged_harness(alice, tmp_path, seen, "voted", votes=3)
    dataset(alice, "voted", [case("only", "dissent")])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "3")
    try:
        run = api.wait_run(api.start_run("voted", "voted", f"self:{runner_id}"), timeout=60)
    finally:
        runner.stop(signal.SIGTERM)
    [result] = run["results"]
    assert result["verdict"] == "pass", run
    assert result["judged_by"]["agreement"] == "2 of 3 judges"
    assert result["reason"].startswith("2 of 3 judges")


def test_a_judge_job_lost_with_its_runner_is_leased_again(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    judged_harness(alice, tmp_path, seen, "slow")
    dataset(alice, "slow", [case("only", "slow")])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop")
    run_id = api.start_run("slow", "slow", f"self:{runner_id}")
    first = json.loads(wait_file(seen / "judge-only-0.json", timeout=60))
    runner.stop(signal.SIGKILL)
    # The judge the killed runner started sleeps on, orphaned: end it, as its member would.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(first["pid"], signal.SIGKILL)
    again = start_runner(tmp_path, "laptop")
    try:
        run = api.wait_run(run_id, timeout=90)
    finally:
        again.stop(signal.SIGTERM)
    assert run["results"][0]["verdict"] == "pass", (run, again.output())
    job = RunnerJob.objects.get(run_id=run_id, kind="judge")
    statuses = list(
        JobAttempt.objects.filter(job=job).order_by("pk").values_list("status", flat=True)
    )
    assert statuses[-1] == "succeeded" and len(statuses) >= 2, statuses


def test_a_judge_is_allowed_like_a_harness_and_warns_of_a_billing_key(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    judged_harness(alice, tmp_path, seen, "judged")
    dataset(alice, "judged", [case("only", "valid")])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    # The harness allowed, its judge not: the judge job is refused, naming what allows it.
    runner = start_runner(tmp_path, "laptop", "--allow", "acme/judged")
    try:
        refused = api.wait_run(api.start_run("judged", "judged", f"self:{runner_id}"))
    finally:
        runner.stop(signal.SIGTERM)
    [result] = refused["results"]
    assert result["verdict"] == "error" and "acme/judged.judge" in result["error"], result
    allows = ["--allow", "acme/judged", "--allow", "acme/judged.judge"]
    allowed = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "2000", *allows],
        name="laptop",
        ANTHROPIC_API_KEY="sk-not-a-real-key",
    )
    try:
        run_id = api.start_run("judged", "judged", f"self:{runner_id}")
        run = api.wait_run(run_id)
    finally:
        allowed.stop(signal.SIGTERM)
    assert run["results"][0]["verdict"] == "pass", run
    lines = [line["line"] for line in api.logs(run_id)]
    warned = [line for line in lines if "this judge will bill that key, not your login" in line]
    assert len(warned) == 1, lines
