"""A harness's `retry_on`: when a finished case is a plan limit, and how long to wait."""

from __future__ import annotations

import time

from runnercli.case.delivery.ratelimit import DEFAULT_RETRY_AFTER_S, MAX_RETRY_AFTER_S, rate_limited
from runnercli.protocol import CaseResult, RetryOn


def finished(exit_code: int = 0, output: str = "", stderr: str = "") -> CaseResult:
    return CaseResult(status="completed", exit_code=exit_code, output=output, stderr_tail=stderr)


def test_an_exit_code_it_names_is_a_plan_limit_with_the_default_wait() -> None:
    limit = rate_limited(RetryOn(exit_codes=[75]), finished(75))
    assert limit is not None
    assert (limit.wait_s, limit.why) == (DEFAULT_RETRY_AFTER_S, "exit code 75")
    assert rate_limited(RetryOn(exit_codes=[75]), finished(1)) is None
    assert rate_limited(None, finished(75)) is None


def test_the_wait_comes_from_the_json_output_first_then_the_regex_group() -> None:
    retry_on = RetryOn(exit_codes=[2], stderr_regex=r"retry after (?P<retry_after>\d+)s")
    both = finished(2, output='{"retry_after_s": 42}', stderr="limit hit, retry after 7s\n")
    assert rate_limited(retry_on, both).wait_s == 42  # type: ignore[union-attr]
    group = finished(0, stderr="warming up\nlimit hit, retry after 7s\nbye\n")
    limit = rate_limited(retry_on, group)
    assert limit is not None
    assert limit.wait_s == 7
    assert limit.why == "stderr: limit hit, retry after 7s"


def test_a_stated_wait_is_bounded_and_nonsense_falls_back_to_the_default() -> None:
    retry_on = RetryOn(exit_codes=[1])
    assert rate_limited(retry_on, finished(1, output='{"retry_after_s": 1e9}')).wait_s == (  # type: ignore[union-attr]
        MAX_RETRY_AFTER_S
    )
    for output in ('{"retry_after_s": "soon"}', '{"retry_after_s": true}', "[1]", "not json"):
        limit = rate_limited(retry_on, finished(1, output=output))
        assert limit is not None and limit.wait_s == DEFAULT_RETRY_AFTER_S, output


def test_only_a_case_that_ran_to_its_end_can_be_rate_limited() -> None:
    retry_on = RetryOn(stderr_regex="rate limit")
    timed_out = CaseResult(status="timeout", stderr_tail="rate limit\n")
    assert rate_limited(retry_on, timed_out) is None
    assert rate_limited(retry_on, finished(0, stderr="all good\n")) is None


def test_the_stderr_pattern_runs_in_linear_time_and_one_re2_refuses_is_ignored() -> None:
    # Python's backtracking `re` takes minutes on this; RE2 answers at once.
    retry_on = RetryOn(stderr_regex=r"^(a+)+$")
    began = time.monotonic()
    assert rate_limited(retry_on, finished(0, stderr="a" * 34 + "!\n")) is None
    assert time.monotonic() - began < 5
    # A backreference is beyond RE2: never a fallback to backtracking, no match.
    assert rate_limited(RetryOn(stderr_regex=r"(a)\1"), finished(0, stderr="aa\n")) is None
