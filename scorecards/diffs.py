"""Line diffs as plain values: a case's expected value against its output (the case page and
reply), and one run's output against another's (comparing runs). Nothing here reads the
database."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from runnercli.protocol import HarnessSpec
from scorecards import scoring

MAX_DIFF_LINES = 2000
_DIFF_GRADERS = ("exact", "contains")


@dataclass(frozen=True)
class Line:
    op: str  # ' ' in both, '-' only in the first (expected, run A), '+' only in the second
    text: str


def _expected_text(expected: Any) -> str:
    return expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)


def expected_diff(spec: HarnessSpec, output: str, expected: Any) -> list[Line] | None:
    """Expected against what the grader read, line by line, for the exact and contains
    graders; None for other graders or when there is nothing to compare."""
    if spec.grader.type not in _DIFF_GRADERS or expected is None:
        return None
    subject = scoring.graded_text(spec=spec, output=output)
    if subject is None:
        return None
    wanted = _expected_text(expected)
    if spec.grader.type == "exact":
        wanted, subject = wanted.strip(), subject.strip()
    a, b = wanted.splitlines()[:MAX_DIFF_LINES], subject.splitlines()[:MAX_DIFF_LINES]
    lines: list[Line] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            lines += [Line(op=" ", text=text) for text in a[i1:i2]]
            continue
        lines += [Line(op="-", text=text) for text in a[i1:i2]]
        lines += [Line(op="+", text=text) for text in b[j1:j2]]
    return lines


def outputs_diff(before: str, after: str) -> list[Line]:
    """One output against another, line by line."""
    return [
        Line(op=line[0], text=line[2:])
        for line in difflib.ndiff(before.splitlines(), after.splitlines())
        if not line.startswith("? ")
    ]
