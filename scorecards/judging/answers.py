"""Reading a judge's answer, strictly, and the verdict of several judges.

Pure functions, no database. A judge answers exactly `{"pass": bool, "score": 0 to 1,
"reason": str}` — on its own, or as the `result` field of a JSON-output CLI (`claude -p
--output-format json`), or as the last agent message of a JSON-lines one (`codex exec
--json`). Anything else is unreadable, never a `fail`: loose reading is how `GRADE: CI`
comes to be read as a grade.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runnercli.protocol.jsonl import json_lines
from scorecards.models import TEXT_CHARS

ANSWER_KEYS = frozenset({"pass", "score", "reason"})
_PREVIEW_CHARS = 120
# One fenced block and nothing else: still one unambiguous object.
_FENCED = re.compile(r"\A```(?:json)?\s*\n(?P<body>.*)\n```\Z", re.DOTALL)
# Options that name the judge's model in the usual CLIs (`--model X`, `-m X`, `--model=X`).
_MODEL_FLAGS = ("--model", "-m")


class Unreadable(ValueError):
    """A judge's answer that is not the one object a judge answers."""


@dataclass(frozen=True)
class Answer:
    passed: bool
    score: float
    reason: str


def _preview(text: str) -> str:
    text = text.strip().replace("\n", "\\n")
    return "`" + (text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…") + "`"


def _loads(text: str) -> Any:
    fenced = _FENCED.match(text.strip())
    try:
        return json.loads(fenced["body"] if fenced else text)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"not JSON: {_preview(text)}") from exc


def _answer(document: Any) -> Answer:
    if not isinstance(document, dict) or set(document) != ANSWER_KEYS:
        shown = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise Unreadable(f'expected exactly {{"pass", "score", "reason"}}, got {shown}')
    passed, score, reason = document["pass"], document["score"], document["reason"]
    if not isinstance(passed, bool):
        raise Unreadable(f"`pass` must be true or false, got {json.dumps(passed)}")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise Unreadable(f"`score` must be a number from 0 to 1, got {json.dumps(score)}")
    if not isinstance(reason, str):
        raise Unreadable(f"`reason` must be a string, got {json.dumps(reason)}")
    return Answer(passed=passed, score=float(score), reason=reason[:TEXT_CHARS])


def _last_agent_message(lines: list[str]) -> str | None:
    """The text of the last `agent_message` item of a `codex exec --json` stream."""
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            return None
        item = event.get("item") if isinstance(event, dict) else None
        if isinstance(item, dict) and item.get("type") == "agent_message":
            text = item.get("text")
            return text if isinstance(text, str) else None
    return None


def answer_read(output: str) -> Answer:
    """The judge's answer in its output, or Unreadable saying why."""
    text = output.strip()
    if not text:
        raise Unreadable("the judge printed nothing")
    lines = [line for line in json_lines(text) if line.strip()]
    if len(lines) > 1 and all(line.lstrip().startswith("{") for line in lines):
        message = _last_agent_message(lines)
        if message is not None:
            return _answer(_loads(message))
    document = _loads(text)
    if isinstance(document, dict) and set(document) != ANSWER_KEYS and "result" in document:
        inner = document["result"]
        return _answer(_loads(inner) if isinstance(inner, str) else inner)
    return _answer(document)


def model_named(argv: Sequence[str]) -> str:
    """The model a judge's argv names (`--model X`, `-m X`, `--model=X`), or ""."""
    for index, arg in enumerate(argv):
        if arg in _MODEL_FLAGS and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--model="):
            return arg.removeprefix("--model=")
    return ""


def prompt_digest(command: Sequence[str], rubric: str) -> str:
    """The digest of what a judge is told to do (its argv and the rubric): a change of
    judge or rubric shows as another digest beside the verdict it gave."""
    canonical = json.dumps({"command": list(command), "rubric": rubric}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Decision:
    verdict: Literal["pass", "fail", "error"]
    score: float
    reason: str
    agreement: str


def majority(answers: Sequence[Answer | None], *, why_not: Sequence[str] = ()) -> Decision:
    """The verdict of `answers` (None: a vote with no readable answer). One vote decides
    alone; of three, at least two readable votes must agree, else the case is an error."""
    votes = len(answers)
    readable = [a for a in answers if a is not None]
    for side in (True, False):
        agreeing = [a for a in readable if a.passed is side]
        if agreeing and len(agreeing) * 2 > votes:
            score = sum(a.score for a in agreeing) / len(agreeing)
            agreement = f"{len(agreeing)} of {votes} judges" if votes > 1 else "1 judge"
            reason = agreeing[0].reason if votes == 1 else f"{agreement}: {agreeing[0].reason}"
            score = min(1.0, max(0.0, score))
            return Decision("pass" if side else "fail", score, reason, agreement)
    why = "; ".join(w for w in why_not if w) or "the judges did not agree"
    if votes > 1 and len(readable) >= 2 and not why_not:
        why = f"fewer than two of {votes} judges agreed"
    return Decision("error", 0.0, why, f"{len(readable)} of {votes} readable")
