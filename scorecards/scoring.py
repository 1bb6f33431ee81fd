"""Scoring: the server judges a reported output, so the same output scores the same everywhere.

Pure functions, no database: `grade` turns one case's reported result into a verdict and
`extract_usage` reads the usage a harness printed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from runnercli.protocol import STREAM_OUTPUTS, HarnessSpec
from scorecards import verifying
from scorecards.patterns import PatternRefused, compile_pattern, parse_json

Verdict = Literal["pass", "fail", "error", "judging", "skipped"]

# Why a case that did not complete could not be judged.
_STATUS_REASONS = {
    "timeout": "timed out",
    "error": "runner reported an error",
    "canceled": "canceled",
}
_PREVIEW_CHARS = 200
_ERROR_CHARS = 500
_MISSING = object()


@dataclass(frozen=True)
class Grade:
    verdict: Verdict
    score: float
    detail: str = ""


# A judge grader's verdict waits for its judge jobs (`scorecards.judging`): none counts yet.
JUDGING = Grade(verdict="judging", score=0.0, detail="judging")


def _passed(detail: str = "") -> Grade:
    return Grade(verdict="pass", score=1.0, detail=detail)


def _failed(detail: str) -> Grade:
    return Grade(verdict="fail", score=0.0, detail=detail)


def _errored(detail: str) -> Grade:
    return Grade(verdict="error", score=0.0, detail=detail)


def _preview(text: str) -> str:
    """A value as the reason quotes it, on one line: `Paris`."""
    shown = text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…"
    return "`" + shown.replace("\r", "\\r").replace("\n", "\\n") + "`"


def _quoted(text: str) -> str:
    """An error's message as a reason quotes it: its first 500 characters, as printed."""
    text = text.strip()
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "…"


def _as_text(value: Any) -> str:
    """A JSON value as the text graders compare: strings as themselves, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _pick(document: Any, path: str) -> Any:
    """Walk a dotted path through objects (by key) and arrays (by index); _MISSING if absent."""
    value = document
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif (
            isinstance(value, list) and _is_integer(part) and -len(value) <= int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _is_integer(text: str) -> bool:
    """An optionally signed run of ASCII digits (`int()` also reads other scripts' digits)."""
    digits = text.removeprefix("-")
    return digits.isascii() and digits.isdigit()


def _json_equal(left: Any, right: Any) -> bool:
    """Structural JSON equality: unlike Python's ==, true is not 1 and 1 is not "1"."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and left == right


def _grade_exit_code(exit_code: int | None, expected: Any) -> Grade:
    if expected is None:
        wanted = 0
    elif isinstance(expected, int) and not isinstance(expected, bool):
        wanted = expected
    elif isinstance(expected, str) and _is_integer(expected.strip()):
        wanted = int(expected)
    else:
        return _errored(
            f"expected exit code must be an integer, got {_preview(_as_text(expected))}"
        )
    if exit_code == wanted:
        return _passed(f"exit code {wanted}")
    return _failed(f"exit code {exit_code}, expected {wanted}")


def _grade_text(kind: str, subject: str, expected: Any) -> Grade:
    if expected is None:
        return _errored(f"the case has no expected value for the {kind} grader")
    wanted = _as_text(expected)
    if kind == "exact":
        if subject.strip() == wanted.strip():
            return _passed("output equals expected")
        return _failed(f"expected {_preview(wanted.strip())}, got {_preview(subject.strip())}")
    if kind == "contains":
        if wanted in subject:
            return _passed("output contains expected")
        return _failed(f"expected {_preview(wanted)} in the output, got {_preview(subject)}")
    try:
        # RE2: linear in the output whatever the pattern; one it cannot run is an error,
        # never handed to a backtracking engine.
        pattern = compile_pattern(wanted)
    except PatternRefused as exc:
        return _errored(str(exc))
    if pattern.search(subject):
        return _passed("output matches pattern")
    return _failed(f"pattern {_preview(wanted)} does not match output {_preview(subject)}")


def grade(
    *,
    spec: HarnessSpec,
    status: str,
    output: str,
    exit_code: int | None,
    expected: Any,
    verify: Any = None,
    tampered: Any = None,
    tests: Any = None,
) -> Grade:
    """Judge one case's reported result against its expected value (and, protocol 4, what
    its verifier said, the protected paths its agent changed and the tests it lists)."""
    if status != "completed":
        reason = _STATUS_REASONS.get(status, f"runner reported status {status!r}")
        # An error the runner read (an agent's stream ended in the model API's error) is
        # quoted: its output is that message.
        if status == "error" and output.strip():
            reason = f"{reason}: {_quoted(output)}"
        return _errored(reason)
    if tamper_reason := verifying.tampering_fails(spec, tampered):
        return _failed(tamper_reason)
    grader = spec.grader
    if grader.type == "judge":
        return JUDGING
    if grader.type == "verify":
        output_kind = spec.verify.output if spec.verify is not None else "exit_code"
        verdict, score, detail = verifying.grade_verify(verify, tests, output_kind)
        return Grade(verdict=verdict, score=score, detail=detail)  # type: ignore[arg-type]
    # The exit_code grader judges the process, not what it printed.
    if grader.type == "exit_code":
        return _grade_exit_code(exit_code, expected)
    document: Any = _MISSING
    if spec.output == "json" or grader.field or grader.type == "json_equals":
        try:
            document = parse_json(output)
        except ValueError as exc:
            # A harness that promises JSON and breaks it is broken, not wrong.
            why = f" ({exc})" if "nested" in str(exc) else ""
            if spec.output == "json":
                return _errored(f"output is not valid JSON{why}")
            return _failed(f"output is not valid JSON{why}: {_preview(output)}")
    subject: Any = document
    if grader.field:
        subject = _pick(document, grader.field)
        if subject is _MISSING:
            return _failed(f"field {grader.field} missing")
    if grader.type == "json_equals":
        if _json_equal(subject, expected):
            return _passed("output equals expected")
        return _failed(
            f"expected {_preview(_as_text(expected))}, got {_preview(_as_text(subject))}"
        )
    # Without a field, text graders judge the output as printed (JSON or not).
    text = _as_text(subject) if grader.field else output
    return _grade_text(grader.type, text, expected)


def graded_text(*, spec: HarnessSpec, output: str) -> str | None:
    """The text a text grader (exact, contains, regex) judged in this output, or None when
    the grader is not a text grader or the output does not hold the field it reads."""
    grader = spec.grader
    if grader.type not in ("exact", "contains", "regex"):
        return None
    if not grader.field:
        return output
    try:
        subject = _pick(json.loads(output), grader.field)
    except ValueError:
        return None
    return None if subject is _MISSING else _as_text(subject)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _usage_in(document: Any) -> dict[str, Any]:
    """Usage fields at the top level, else under `usage`; junk values are ignored."""
    if not isinstance(document, dict):
        return {}
    nested = document.get("usage")
    sources = [document, nested] if isinstance(nested, dict) else [document]
    found: dict[str, Any] = {}
    for source in sources:
        for key, names in (
            ("total_cost_usd", ("total_cost_usd", "cost_usd")),
            ("input_tokens", ("input_tokens",)),
            ("output_tokens", ("output_tokens",)),
            # Tokens read from or written to a prompt cache (Claude Code, Codex).
            ("cache_read_input_tokens", ("cache_read_input_tokens",)),
            ("cache_creation_input_tokens", ("cache_creation_input_tokens",)),
            ("cached_input_tokens", ("cached_input_tokens",)),
        ):
            if key in found:
                continue
            for name in names:
                number = _number(source.get(name))
                if number is None:
                    continue
                if key == "total_cost_usd":
                    found[key] = number
                elif number.is_integer():
                    found[key] = int(number)
                else:
                    continue
                break
    return found


def extract_usage(output: str, output_kind: str, advisory: dict[str, Any] | None) -> dict | None:
    """Return the usage the output carries, else the runner's advisory usage, else None.

    For an agent's event stream (`claude-stream-json`, `codex-jsonl`) the output is the final
    result's text, and the usage is what the runner read from that result event."""
    document: Any = None
    if output_kind in STREAM_OUTPUTS:
        return _usage_in(advisory) or None
    if output_kind == "json" or output.lstrip().startswith("{"):
        try:
            document = parse_json(output)
        except ValueError:
            document = None
    found = _usage_in(document) or _usage_in(advisory)
    return found or None
