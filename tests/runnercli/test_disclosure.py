"""The consent question for the case's world: every protocol-3 key a harness sets is shown,
with what may leave the machine and what the member keeps here this session."""

from __future__ import annotations

from typing import Any

from runnercli.case.consent.prompt import describe, one_line
from runnercli.protocol import CaseJob, HarnessSpec, harness_digest
from tests.runnercli.conftest import make_job

WORLD: dict[str, Any] = {
    "command": ["claude", "-p", "{input.q}", "--output-format", "stream-json"],
    "repo": {"name": "acme/app", "ref": "working"},
    "artifacts": ["out/**/*.json", "report\x1b]0;t\x07.html"],
    "output": "claude-stream-json",
    "slots": 2,
    "services": {
        "db": {
            "image": "postgres:16",
            "command": ["postgres", "-c", "fsync=off"],
            "ports": [5432, 5433],
            "env": {"POSTGRES_PASSWORD": "pw"},
            "ready": {"tcp": 5432},
        },
        "web": {
            "run": ["npm", "run", "dev", "--", "--port", "{port}"],
            "cwd": "repo",
            "scope": "case",
            "ready": {"http": "/health"},
        },
    },
    "grader": {
        "type": "judge",
        "rubric": "Is it right?",
        "judge": {"command": ["claude", "-p", "--model", "opus"], "capabilities": ["claude"]},
        "votes": 3,
    },
}


def world_job(**spec: Any) -> CaseJob:
    harness = HarnessSpec.model_validate({**WORLD, **spec})
    return CaseJob.model_validate(
        {
            "job_id": 1,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 7,
            "workspace": "acme",
            "submitted_by": "bob",
            "case": {"key": "c1", "input": {"q": "fix the bug"}},
            "harness": {
                "name": "agent",
                "version": 3,
                "digest": harness_digest(harness),
                "author": "alice",
                "spec": harness.model_dump(mode="json"),
            },
            "timeout_s": 600,
        }
    )


def test_every_protocol_3_key_a_harness_sets_is_shown_in_full() -> None:
    lines = "\n".join(describe(world_job()))
    assert "repo:        acme/app at working: a worktree of your checkout at HEAD plus your " in (
        lines
    )
    assert "runs in:     its own worktree of acme/app in a fresh temporary directory" in lines
    assert "artifacts:   'out/**/*.json', 'report\\x1b]0;t\\x07.html'" in lines
    assert "output:      claude-stream-json" in lines
    assert (
        "service:     db: container 'postgres:16', command 'postgres' '-c' 'fsync=off', "
        "ports 5432, 5433 on 127.0.0.1 (shared by this version's cases)"
    ) in lines
    assert "db env POSTGRES_PASSWORD='pw'" in lines
    assert "db ready: tcp :5432 within 60s" in lines
    assert (
        "service:     web: process 'npm' 'run' 'dev' '--' '--port' '{port}' in the repo's "
        "worktree, on a free port (one per case)"
    ) in lines
    assert "web ready: http GET /health on its {port} answering 200 within 60s" in lines
    assert "slots:       2 of this runner's slots per case" in lines
    assert "judge:       'claude' '-p' '--model' 'opus'" in lines
    assert "3 votes, timeout 300 s, needs claude" in lines
    assert "needs:       docker, repo:acme/app" in lines
    assert "\x1b" not in lines


def test_what_may_leave_the_machine_is_listed_and_what_the_member_keeps_is_marked() -> None:
    lines = describe(world_job(), frozenset({"files", "trace"}), redact_patterns=2)
    leaves = lines[lines.index(next(line for line in lines if "leaves:" in line)) :]
    assert [line.strip() for line in leaves] == [
        "leaves:      its output, stderr tail and log lines",
        "files of its directory, when a workspace page asks — NOT SENT this session (--no-files)",
        "screens it writes to $EVERDICT_SCREEN_DIR",
        "its trace: the steps parsed from its stdout and $EVERDICT_TRACE_FILE"
        " — NOT SENT this session (--no-trace)",
        "the files its artifacts globs match",
        "repo.diff: what it changed in acme/app",
        "(your 2 redact patterns hide what they match)",
    ]


def test_a_harness_of_protocol_2_shows_no_world_keys_and_what_always_leaves() -> None:
    lines = "\n".join(describe(make_job(["python", "run.py"])))
    for key in ("repo:", "artifacts:", "service:", "slots:", "judge:", "repo.diff"):
        assert key not in lines
    assert "runs in:     a fresh temporary directory, as you" in lines
    assert "leaves:      its output, stderr tail and log lines" in lines
    assert "the steps it writes to $EVERDICT_TRACE_FILE" in lines
    assert "redact" not in lines


def test_the_line_of_a_version_allowed_already_names_the_world_keys() -> None:
    line = one_line(world_job(), frozenset({"screens"}))
    assert "in a worktree of acme/app;" in line
    assert "repo: acme/app at working" in line
    assert "service: db: container 'postgres:16'" in line
    assert "judge: 'claude' '-p' '--model' 'opus'" in line
    assert line.endswith("; not sent: screens")
    plain = one_line(make_job(["python", "run.py"]))
    assert "in a fresh temp dir;" in plain and plain.endswith("case JSON in $EVERDICT_CASE_FILE")
