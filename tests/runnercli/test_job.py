"""One leased job through the runner's pipeline — consent, prepare, execute, collect, deliver —
with its heartbeat and log: how each way a case can end is answered for."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from runnercli.case.consent.decide import Consent
from runnercli.case.consent.settings import ConsentSettings
from runnercli.case.delivery.ratelimit import Pauses
from runnercli.case.delivery.reports import Delivery
from runnercli.case.heartbeats import Heartbeats
from runnercli.case.jobs import Jobs
from runnercli.client import ToolCallError
from runnercli.protocol import CaseJob, HeartbeatAck
from runnercli.session import Session
from runnercli.slots import Slots
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_client, fake_session, held, said

Script = Callable[[str], list[str]]
ALLOW_ANY = ConsentSettings(allow_any=True)

SLEEPER = """
    import os, sys, time
    open(sys.argv[1], "w").write(f"{os.getpid()} {os.getcwd()}")
    time.sleep(60)
"""


def jobs(session: Session, consent: ConsentSettings = ALLOW_ANY) -> Jobs:
    delivery = Delivery(session)
    return Jobs(
        session,
        slots=Slots(1),
        consent=Consent(consent, session.status),
        heartbeats=Heartbeats(session),
        delivery=delivery,
        pauses=Pauses(session, delivery),
    )


def handle(session: Session, job: CaseJob, consent: ConsentSettings = ALLOW_ANY) -> bool:
    return asyncio.run(jobs(session, consent).handle(held(job)))


def gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


async def written(path: Path) -> str:
    async with asyncio.timeout(10):
        while not (path.exists() and path.read_text()):
            await asyncio.sleep(0.02)
    return path.read_text()


def test_a_case_that_ran_is_reported_with_its_start_and_outcome_lines(script: Script) -> None:
    session = fake_session()
    assert handle(session, make_job(script("print('ok')")))
    (sent,) = fake_client(session).of("submit_job_result")
    result = sent["result"]
    assert (result.status, result.exit_code, result.output) == ("completed", 0, "ok\n")
    assert result.log_tail[0] == "▶ started probe v1 case c1"
    assert result.log_tail[-1].startswith("✓ completed exit 0 in ")
    assert result.fingerprint.harness_digest
    assert session.running == {}
    assert session.status_text() == "idle"


def test_a_harness_that_cannot_start_is_failed_with_its_reason() -> None:
    session = fake_session()
    assert handle(session, make_job(["no-such-harness-binary"]))
    client = fake_client(session)
    (failure,) = client.of("fail_job")
    assert failure["message"] == "program not found: no-such-harness-binary"
    assert not failure["retryable"]
    assert client.of("submit_job_result") == []
    assert "run 1 case c1: ✗ failed: program not found: no-such-harness-binary" in said(session)
    assert session.status_text() == "last job failed: program not found: no-such-harness-binary"


def test_a_harness_the_member_has_not_allowed_never_runs_and_is_refused_naming_allow(
    script: Script, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    argv = [*script("import sys; open(sys.argv[1], 'w').write('ran')"), str(marker)]
    session = fake_session()
    assert handle(session, make_job(argv), ConsentSettings())
    (failure,) = fake_client(session).of("fail_job")
    assert "is not allowed on this runner" in failure["message"]
    assert "`python -m runnercli allow acme/probe@1`" in failure["message"]
    assert not marker.exists()
    assert session.status_text() == "last job failed: refused probe"


def test_a_lease_the_server_took_back_ends_the_case_and_nothing_is_reported(
    script: Script, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    session = fake_session()
    client = fake_client(session)
    client.answer("heartbeat_job", HeartbeatAck(accepted=False, reason="stale lease: epoch 1"))
    job_run = held(make_job([*script(SLEEPER), str(seen)], timeout_s=60), heartbeat_ms=200)
    assert not asyncio.run(jobs(session).handle(job_run))
    pid, cwd = seen.read_text().split()
    assert gone(int(pid))
    assert not os.path.exists(cwd)
    reports = ("submit_job_result", "submit_job_results", "fail_job", "release_job")
    assert [name for name, _ in client.calls if name in reports] == []
    assert "run 1 case c1: ■ stopped: stale lease: epoch 1" in said(session)


def test_the_second_signal_hands_the_running_case_back_after_cleaning_it_up(
    script: Script, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    session = fake_session()
    job_run = held(make_job([*script(SLEEPER), str(seen)], timeout_s=60))

    async def aborted() -> bool:
        handling = asyncio.create_task(jobs(session).handle(job_run))
        await written(seen)
        session.request_stop()  # drain: the case goes on
        await asyncio.sleep(0.2)
        assert not handling.done()
        session.request_stop()  # abort: it is handed back
        return await handling

    assert asyncio.run(aborted())
    pid, cwd = seen.read_text().split()
    assert gone(int(pid))
    assert not os.path.exists(cwd)
    (release,) = fake_client(session).of("release_job")
    assert release["reason"] == "the runner was stopped by its owner"
    assert release["until"] is None
    assert "run 1 case c1: ■ handed back" in said(session)


def test_a_rate_limited_case_goes_back_and_the_runner_pauses() -> None:
    session = fake_session()
    job = make_job([sys.executable, "-c", "raise SystemExit(75)"], retry_on={"exit_codes": [75]})
    part = jobs(session)
    assert asyncio.run(part.handle(held(job)))
    (release,) = fake_client(session).of("release_job")
    assert release["reason"] == "rate-limited (exit code 75)"
    assert release["until"] is not None
    assert part.pauses.paused_until is not None


def test_a_result_the_server_will_never_store_is_failed_saying_why(script: Script) -> None:
    session = fake_session()
    client = fake_client(session)
    client.answer("submit_job_result", ToolCallError("usage exceeds 16 KiB"))
    assert handle(session, make_job(script("print('ok')")))
    (failure,) = client.of("fail_job")
    assert failure["message"] == "the server refused the result: usage exceeds 16 KiB"


def test_its_slot_is_given_back_once_the_case_is_over(script: Script) -> None:
    session = fake_session()
    part = jobs(session)
    job_run = part.slots.take(held(make_job(script("print('ok')"))))
    assert part.slots.free == 0
    assert asyncio.run(part.handle(job_run))
    assert part.slots.free == 1
    assert job_run.finished
