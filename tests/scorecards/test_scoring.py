from __future__ import annotations

import json
from typing import Any

import pytest

from runnercli.protocol import HarnessSpec
from scorecards.scoring import Grade, extract_usage, grade


def spec(grader: str, *, field: str | None = None, output: str = "text") -> HarnessSpec:
    return HarnessSpec.model_validate(
        {"command": ["run"], "output": output, "grader": {"type": grader, "field": field}}
    )


def judge(
    s: HarnessSpec,
    output: str,
    expected: Any,
    *,
    status: str = "completed",
    exit_code: int | None = 0,
) -> Grade:
    return grade(spec=s, status=status, output=output, exit_code=exit_code, expected=expected)


# --- statuses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason"),
    [("timeout", "timed out"), ("error", "runner reported an error"), ("canceled", "canceled")],
)
def test_a_case_that_did_not_complete_is_an_error_with_its_reason(status: str, reason: str) -> None:
    result = judge(spec("contains"), "", "42", status=status)
    assert result == Grade(verdict="error", score=0.0, detail=reason)


def test_an_error_the_runner_read_is_quoted_never_graded() -> None:
    message = 'API Error: 400 {"type":"error","error":{"message":"prompt is too long"}}'
    result = judge(spec("contains"), message, "prompt", status="error")
    assert result == Grade(
        verdict="error", score=0.0, detail=f"runner reported an error: {message}"
    )
    long = judge(spec("contains"), "x" * 2000, "x", status="error")
    assert long.detail == "runner reported an error: " + "x" * 500 + "…"


def test_an_unknown_status_is_an_error_naming_it() -> None:
    result = judge(spec("exact"), "42", "42", status="exploded")
    assert result.verdict == "error"
    assert "exploded" in result.detail


def test_a_completed_case_is_judged_on_its_output_whatever_its_exit_code() -> None:
    assert judge(spec("contains"), "answer: 42", "42", exit_code=3).verdict == "pass"
    assert judge(spec("exact"), "41", "42", exit_code=0).verdict == "fail"


# --- exact ----------------------------------------------------------------------------------


def test_exact_passes_on_the_stripped_output() -> None:
    result = judge(spec("exact"), "  42\n", "42")
    assert (result.verdict, result.score) == ("pass", 1.0)


def test_exact_fails_with_both_values_in_the_detail() -> None:
    result = judge(spec("exact"), "41\n", "42")
    assert (result.verdict, result.score) == ("fail", 0.0)
    assert result.detail == "expected `42`, got `41`"


def test_exact_compares_a_non_string_expected_as_its_json_form() -> None:
    assert judge(spec("exact"), "42", 42).verdict == "pass"
    assert judge(spec("exact"), '{"a": 1}', {"a": 1}).verdict == "pass"


def test_a_text_grader_without_an_expected_value_is_an_error() -> None:
    result = judge(spec("exact"), "42", None)
    assert result.verdict == "error"
    assert "no expected value" in result.detail


# --- contains -------------------------------------------------------------------------------


def test_contains_passes_when_the_expected_string_occurs() -> None:
    assert judge(spec("contains"), "the answer is Paris.", "Paris").verdict == "pass"


def test_contains_fails_when_it_does_not() -> None:
    result = judge(spec("contains"), "the answer is Lyon.", "Paris")
    assert result.verdict == "fail"
    assert "Paris" in result.detail


def test_contains_is_case_sensitive() -> None:
    assert judge(spec("contains"), "paris", "Paris").verdict == "fail"


# --- regex ----------------------------------------------------------------------------------


def test_regex_searches_anywhere_in_the_output() -> None:
    assert judge(spec("regex"), "result: 1234 ok", r"\d{4}").verdict == "pass"


def test_regex_fails_without_a_match() -> None:
    assert judge(spec("regex"), "result: 12 ok", r"^\d{4}$").verdict == "fail"


def test_an_invalid_regex_is_an_error_with_the_reason() -> None:
    result = judge(spec("regex"), "anything", "([a-z")
    assert result.verdict == "error"
    assert "invalid regex" in result.detail


# --- json_equals ----------------------------------------------------------------------------


def test_json_equals_compares_structures_not_text() -> None:
    s = spec("json_equals", output="json")
    assert judge(s, '{"b": [1, 2], "a": "x"}', {"a": "x", "b": [1, 2]}).verdict == "pass"
    assert judge(s, '{"b": [2, 1], "a": "x"}', {"a": "x", "b": [1, 2]}).verdict == "fail"


def test_json_equals_does_not_confuse_true_with_1_or_1_with_a_string() -> None:
    s = spec("json_equals")
    assert judge(s, "true", 1).verdict == "fail"
    assert judge(s, "1", "1").verdict == "fail"
    assert judge(s, "1.0", 1).verdict == "pass"


def test_json_equals_on_text_output_parses_it() -> None:
    assert judge(spec("json_equals"), " [1, 2, 3]\n", [1, 2, 3]).verdict == "pass"


def test_json_equals_on_text_output_that_is_not_json_fails() -> None:
    result = judge(spec("json_equals"), "not json", [1])
    assert result.verdict == "fail"
    assert "not valid JSON" in result.detail


def test_json_equals_with_a_field_compares_that_value() -> None:
    s = spec("json_equals", field="result.items", output="json")
    output = json.dumps({"result": {"items": [{"id": 1}]}, "noise": True})
    assert judge(s, output, [{"id": 1}]).verdict == "pass"


# --- exit_code ------------------------------------------------------------------------------


def test_exit_code_defaults_to_expecting_zero() -> None:
    assert judge(spec("exit_code"), "", None, exit_code=0).verdict == "pass"
    result = judge(spec("exit_code"), "", None, exit_code=1)
    assert result.verdict == "fail"
    assert result.detail == "exit code 1, expected 0"


def test_exit_code_compares_the_expected_code() -> None:
    assert judge(spec("exit_code"), "", 2, exit_code=2).verdict == "pass"
    assert judge(spec("exit_code"), "", "2", exit_code=2).verdict == "pass"
    assert judge(spec("exit_code"), "", 2, exit_code=0).verdict == "fail"


def test_exit_code_does_not_judge_the_output_even_when_json_is_promised() -> None:
    assert judge(spec("exit_code", output="json"), "not json", 0).verdict == "pass"


def test_exit_code_with_a_missing_exit_code_fails() -> None:
    assert judge(spec("exit_code"), "", 0, exit_code=None).verdict == "fail"


def test_a_non_integer_expected_exit_code_is_an_error() -> None:
    assert judge(spec("exit_code"), "", "zero").verdict == "error"
    assert judge(spec("exit_code"), "", True).verdict == "error"


# --- json output and field paths ------------------------------------------------------------


def test_json_output_that_does_not_parse_is_an_error() -> None:
    result = judge(spec("contains", output="json"), "Traceback: boom", "boom")
    assert result == Grade(verdict="error", score=0.0, detail="output is not valid JSON")


def test_a_field_picks_the_value_a_text_grader_judges() -> None:
    s = spec("contains", field="result", output="json")
    output = json.dumps({"result": "The capital is Paris.", "is_error": False})
    assert judge(s, output, "Paris").verdict == "pass"
    assert judge(s, json.dumps({"result": "Lyon", "other": "Paris"}), "Paris").verdict == "fail"


def test_a_dotted_field_walks_objects_and_array_indexes() -> None:
    s = spec("exact", field="choices.0.message.content", output="json")
    output = json.dumps({"choices": [{"message": {"content": " 42 "}}]})
    assert judge(s, output, "42").verdict == "pass"


def test_a_negative_index_counts_from_the_end() -> None:
    s = spec("exact", field="steps.-1", output="json")
    assert judge(s, json.dumps({"steps": ["a", "b", "last"]}), "last").verdict == "pass"


@pytest.mark.parametrize(
    "output",
    [
        '{"other": 1}',
        '{"result": {"text": "x"}}',
        '{"result": [1, 2]}',
        '["result"]',
        '"result"',
    ],
)
def test_a_missing_field_fails_naming_the_field(output: str) -> None:
    s = spec("exact", field="result.answer", output="json")
    assert judge(s, output, "x") == Grade(
        verdict="fail", score=0.0, detail="field result.answer missing"
    )


def test_an_out_of_range_index_is_a_missing_field() -> None:
    s = spec("exact", field="items.5", output="json")
    assert judge(s, '{"items": [1]}', "1").detail == "field items.5 missing"


def test_a_non_string_field_value_is_compared_as_json() -> None:
    s = spec("exact", field="answer", output="json")
    assert judge(s, '{"answer": 42}', "42").verdict == "pass"
    assert judge(s, '{"answer": [1, 2]}', [1, 2]).verdict == "pass"
    assert judge(s, '{"answer": null}', "null").verdict == "pass"


def test_a_field_on_text_output_reads_the_output_as_json() -> None:
    s = spec("exact", field="answer")
    assert judge(s, '{"answer": "yes"}', "yes").verdict == "pass"
    assert judge(s, "yes", "yes").verdict == "fail"


def test_without_a_field_json_output_is_judged_as_printed() -> None:
    s = spec("contains", output="json")
    assert judge(s, '{"result": "Paris"}', '"result": "Paris"').verdict == "pass"


def test_every_score_is_within_zero_and_one() -> None:
    cases = [
        judge(spec("exact"), "x", "x"),
        judge(spec("exact"), "x", "y"),
        judge(spec("regex"), "x", "("),
        judge(spec("exit_code"), "", None, exit_code=9),
        judge(spec("json_equals", output="json"), "{", {}),
        judge(spec("exact"), "x", "x", status="timeout"),
    ]
    assert all(0.0 <= g.score <= 1.0 for g in cases)
    assert {g.score for g in cases if g.verdict == "pass"} == {1.0}
    assert {g.score for g in cases if g.verdict != "pass"} == {0.0}


# --- usage ----------------------------------------------------------------------------------


def test_usage_is_read_from_the_top_level_of_json_output() -> None:
    output = json.dumps({"result": "x", "total_cost_usd": 0.0123, "input_tokens": 10})
    assert extract_usage(output, "json", None) == {"total_cost_usd": 0.0123, "input_tokens": 10}


def test_usage_is_read_from_under_usage_too() -> None:
    output = json.dumps(
        {"total_cost_usd": 0.5, "usage": {"input_tokens": 100, "output_tokens": 20}}
    )
    assert extract_usage(output, "json", None) == {
        "total_cost_usd": 0.5,
        "input_tokens": 100,
        "output_tokens": 20,
    }


def test_cost_usd_is_accepted_for_the_total_cost() -> None:
    output = json.dumps({"usage": {"cost_usd": 2}})
    assert extract_usage(output, "json", None) == {"total_cost_usd": 2.0}


def test_the_top_level_value_wins_over_the_nested_one() -> None:
    output = json.dumps({"input_tokens": 5, "usage": {"input_tokens": 7}})
    assert extract_usage(output, "json", None) == {"input_tokens": 5}


def test_text_output_that_is_a_json_object_carries_usage() -> None:
    output = '  {"output_tokens": 3}\n'
    assert extract_usage(output, "text", None) == {"output_tokens": 3}


@pytest.mark.parametrize(
    "document",
    [
        {"total_cost_usd": "a lot", "input_tokens": "10", "output_tokens": None},
        {"total_cost_usd": True, "input_tokens": 1.5, "output_tokens": -4},
        {"usage": "free"},
        {"usage": [1, 2]},
    ],
)
def test_junk_usage_values_are_ignored(document: dict[str, Any]) -> None:
    assert extract_usage(json.dumps(document), "json", None) is None


def test_non_finite_numbers_are_ignored() -> None:
    assert extract_usage('{"total_cost_usd": NaN, "input_tokens": 4}', "json", None) == {
        "input_tokens": 4
    }


def test_integral_floats_count_as_tokens() -> None:
    assert extract_usage('{"input_tokens": 12.0}', "json", None) == {"input_tokens": 12}


def test_the_runners_usage_is_used_only_when_the_output_carries_none() -> None:
    advisory = {"total_cost_usd": 9.99, "input_tokens": 1}
    assert extract_usage('{"input_tokens": 50}', "json", advisory) == {"input_tokens": 50}
    assert extract_usage("plain text", "text", advisory) == {
        "total_cost_usd": 9.99,
        "input_tokens": 1,
    }
    assert extract_usage("{broken", "json", advisory) == {
        "total_cost_usd": 9.99,
        "input_tokens": 1,
    }


def test_the_runners_usage_is_sanitised_like_the_output() -> None:
    advisory = {"usage": {"output_tokens": 7}, "total_cost_usd": "lots", "extra": {"x": 1}}
    assert extract_usage("", "text", advisory) == {"output_tokens": 7}


def test_no_usage_anywhere_is_none() -> None:
    assert extract_usage("hello", "text", None) is None
    assert extract_usage("[1, 2]", "json", None) is None
    assert extract_usage('{"result": "x"}', "json", {}) is None


def test_the_usage_of_an_agents_stream_is_what_the_runner_read_from_its_final_result() -> None:
    # The output is the final result's text; a JSON answer in it is no usage report.
    answer = json.dumps({"answer": 4, "input_tokens": 999, "total_cost_usd": 9.0})
    advisory = {
        "input_tokens": 28,
        "output_tokens": 446,
        "cache_read_input_tokens": 77477,
        "cache_creation_input_tokens": 6273,
        "total_cost_usd": 0.0873215,
        "num_turns": 9,
    }
    assert extract_usage(answer, "claude-stream-json", advisory) == {
        "total_cost_usd": 0.0873215,
        "input_tokens": 28,
        "output_tokens": 446,
        "cache_read_input_tokens": 77477,
        "cache_creation_input_tokens": 6273,
    }
    codex = {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
    assert extract_usage("Fixed it.", "codex-jsonl", codex) == codex
    assert extract_usage("Fixed it.", "codex-jsonl", None) is None
