"""An agent CLI's stream that ends in the model API's error, and its plan limit, as the runner
reads them: the error quoted, the plan limit's reset time parsed from the CLI's own words (the
patterns its preset writes), the pause named after the plan."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta

import pytest

from runnercli.case.delivery.ratelimit import (
    MAX_RESET_WAIT_S,
    Pauses,
    RateLimited,
    clock,
    rate_limited,
    reset_at,
)
from runnercli.case.delivery.reports import Delivery
from runnercli.case.trace import ClaudeStreamParser, CodexJsonParser
from runnercli.protocol import CaseResult, RetryOn
from runnercli.protocol.presets import expand
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_client, fake_session, held, said

pytestmark = pytest.mark.once

CLAUDE_LIMIT = "You've hit your session limit · resets 6:59pm (UTC)"
CODEX_LIMIT = (
    "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again at 6:56 PM."
)


def lines(*objects: object) -> bytes:
    return b"".join(json.dumps(obj).encode() + b"\n" for obj in objects)


def claude_result(**fields: object) -> dict[str, object]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": "", **fields}


def test_a_claude_result_that_is_an_error_is_the_case_error_and_a_turn_limit_is_not() -> None:
    api = ClaudeStreamParser()
    api.feed(lines(claude_result(is_error=True, result="API Error: 400 prompt is too long")))
    assert api.final_error() == "API Error: 400 prompt is too long"
    errors_only = ClaudeStreamParser()
    errors_only.feed(lines(claude_result(subtype="error_during_execution", result=None)))
    assert errors_only.final_error() == "Claude Code ended with error_during_execution"
    turns = ClaudeStreamParser()
    turns.feed(lines(claude_result(subtype="error_max_turns", is_error=True, errors=["max"])))
    assert turns.final_error() is None
    fine = ClaudeStreamParser()
    fine.feed(lines(claude_result(result="42")))
    assert fine.final_error() is None and fine.final_output() == "42"
    assert ClaudeStreamParser().final_error() is None  # no result line at all


def test_a_codex_turn_that_failed_is_the_case_error_its_retries_are_not() -> None:
    parser = CodexJsonParser()
    parser.feed(lines({"type": "error", "message": "Reconnecting... 1/5 (overloaded)"}))
    assert parser.final_error() is None
    parser.feed(lines({"type": "turn.failed", "error": {"message": '{"error":"bad request"}'}}))
    assert parser.final_error() == '{"error":"bad request"}'
    parser.feed(lines({"type": "turn.completed", "usage": {"input_tokens": 1}}))
    assert parser.final_error() is None


@pytest.mark.parametrize(
    ("printed", "expected"),
    [
        ("6:59pm", datetime(2026, 12, 3, 18, 59)),
        ("7pm", datetime(2026, 12, 3, 19, 0)),
        ("6:56 PM", datetime(2026, 12, 3, 18, 56)),
        ("12:05am", datetime(2026, 12, 4, 0, 5)),
        ("9:00 AM", datetime(2026, 12, 4, 9, 0)),  # past today: tomorrow's
        ("Dec 6, 4:59pm", datetime(2026, 12, 6, 16, 59)),
        ("Dec 6th, 2026 4:56 PM", datetime(2026, 12, 6, 16, 56)),
        ("Jan 2, 1am", datetime(2027, 1, 2, 1, 0)),
        ("13:00 PM", None),
        ("Foo 2, 1am", None),
        ("Feb 30, 1am", None),
        ("soon", None),
    ],
)
def test_a_reset_time_as_the_clis_print_it(printed: str, expected: datetime | None) -> None:
    assert reset_at(printed, datetime(2026, 12, 3, 15, 0)) == expected


@pytest.mark.parametrize(
    ("cli", "message", "plan"),
    [("claude-code", CLAUDE_LIMIT, "Claude"), ("codex", CODEX_LIMIT, "Codex")],
)
def test_a_presets_retry_on_hands_a_plan_limit_back_until_its_reset(
    cli: str, message: str, plan: str
) -> None:
    retry_on = expand({"agent": {"cli": cli}, "grader": {"type": "contains"}}).retry_on
    assert retry_on is not None and retry_on.output_regex
    result = CaseResult(status="error", exit_code=1, output=message)
    limit = rate_limited(retry_on, result)
    assert limit is not None
    assert limit.plan == plan and limit.reason == f"{plan} plan limit"
    reset = reset_at("6:59pm" if plan == "Claude" else "6:56 PM")
    assert reset is not None
    assert abs(limit.wait_s - (reset.timestamp() - time.time())) < 5
    # Another error of the same CLI is an error, not a plan limit.
    other = CaseResult(status="error", exit_code=1, output="API Error: 400 bad request")
    assert rate_limited(retry_on, other) is None


def test_a_weekly_reset_days_ahead_is_kept_and_a_pattern_of_ones_own_names_no_plan() -> None:
    days = (datetime.now() + timedelta(days=5)).strftime("%b %-d, %-I:%M%p").lower()
    days = days[0].upper() + days[1:]
    claude = expand({"agent": {"cli": "claude-code"}, "grader": {"type": "contains"}})
    weekly = CaseResult(
        status="error", output=f"You've hit your weekly limit · resets {days} (UTC)"
    )
    limit = rate_limited(claude.retry_on, weekly)
    assert limit is not None and 4 * 86400 < limit.wait_s <= MAX_RESET_WAIT_S
    own = RetryOn(output_regex=r"quota until (?P<reset>\d+:\d\d [AP]M)")
    mine = rate_limited(own, CaseResult(status="completed", output="quota until 6:56 PM\n"))
    assert mine is not None and mine.plan is None
    assert mine.reason == "rate-limited (output: quota until 6:56 PM)"


def test_a_plan_limit_is_handed_back_named_after_its_plan() -> None:
    session = fake_session()
    pauses = Pauses(session, Delivery(session))
    limit = RateLimited(600, "output: " + CLAUDE_LIMIT, plan="Claude")
    assert asyncio.run(pauses.release_rate_limited(held(make_job(["claude"])), limit))
    (release,) = fake_client(session).of("release_job")
    assert release["reason"] == "Claude plan limit"
    assert pauses.paused_until is not None
    assert pauses.text() == f"paused until {clock(pauses.paused_until)} — Claude plan limit"
    assert "⏸ Claude plan limit: handed back; this runner pauses until" in said(session)
