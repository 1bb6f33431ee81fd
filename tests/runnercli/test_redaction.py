"""The member's `redact` patterns on everything of a job that leaves the machine: log lines
(sent on their own and riding with the result), the output the server grades, the stderr
tail, a failure's reason and the status line. Through the runner's own job pipeline, over a
fake of the network only."""

from __future__ import annotations

from collections.abc import Callable

from runnercli.case.log import CaseLog
from runnercli.protocol import MAX_LOG_LINE_BYTES, MAX_OUTPUT_BYTES, CaseResult
from runnercli.text.redact import Redactor
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import FakeClient, fake_client, fake_session
from tests.runnercli.test_job import handle

Script = Callable[[str], list[str]]
TOKEN = "ghp_" + "Z" * 36
PATTERNS = [r"ghp_[A-Za-z0-9]{36}", r"(?i)password=\S+"]

LEAKY = f"""
    import sys, time
    for n in range(3):
        print("working with {TOKEN} step", n, file=sys.stderr, flush=True)
    print("PASSWORD=hunter2 and the answer is 42, token {TOKEN}")
"""


def test_a_token_never_leaves_in_the_output_the_stderr_tail_or_the_log_lines(
    script: Script,
) -> None:
    session = fake_session(redactor=Redactor(PATTERNS))
    assert handle(session, make_job(script(LEAKY)))
    client = fake_client(session)
    (sent,) = client.of("submit_job_result")
    result: CaseResult = sent["result"]
    assert result.output == "[redacted] and the answer is 42, token [redacted]\n"
    assert result.stderr_tail.count("working with [redacted] step") == 3
    logged = [line for call in client.of("report_case_log") for line in call["lines"]]
    every = logged + result.log_tail
    assert sum("working with [redacted] step" in line for line in every) == 3
    everything = repr(client.calls)
    assert TOKEN not in everything and "hunter2" not in everything


def test_without_patterns_nothing_is_changed(script: Script) -> None:
    session = fake_session()
    assert handle(session, make_job(script(LEAKY)))
    (sent,) = fake_client(session).of("submit_job_result")
    assert TOKEN in sent["result"].output and TOKEN in sent["result"].stderr_tail


def test_a_redacted_output_stays_within_its_bound(script: Script) -> None:
    # Every "x" becomes "[redacted]": ten times longer, cut back to the output's bound.
    session = fake_session(redactor=Redactor(["x"]))
    big = f"import sys; sys.stdout.write('x' * {MAX_OUTPUT_BYTES})"
    assert handle(session, make_job(script(big)))
    (sent,) = fake_client(session).of("submit_job_result")
    output = sent["result"].output
    assert len(output.encode()) <= MAX_OUTPUT_BYTES
    assert output.startswith("[redacted][redacted]") and "x" not in output


def test_a_log_line_is_redacted_before_it_is_kept_and_cut_to_its_bound_after() -> None:
    client = FakeClient()
    log = CaseLog(client, 1, lambda: 1, redact=Redactor(["s"]).text)
    log.add(f"password is {TOKEN}")
    log.add("s" * MAX_LOG_LINE_BYTES)
    assert log.pending[0] == f"pa[redacted][redacted]word i[redacted] {TOKEN}"
    assert len(log.pending[1].encode()) <= MAX_LOG_LINE_BYTES
    assert set(log.pending[1].replace("[redacted]", "")) <= set("[redacted]")


def test_a_failures_reason_and_the_status_line_are_redacted(script: Script) -> None:
    session = fake_session(redactor=Redactor(PATTERNS))
    job = make_job([f"/nonexistent/{TOKEN}/tool"])
    assert handle(session, job)
    (failed,) = fake_client(session).of("fail_job")
    assert failed["message"] == "program not found: /nonexistent/[redacted]/tool"
    session.last_failure = f"exit 1 with {TOKEN}"
    assert session.status_text() == "last job failed: exit 1 with [redacted]"
