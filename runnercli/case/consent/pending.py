"""Consent without a terminal: questions kept pending beside the config, answered by
`python -m runnercli allow --pending N`.

A runner started as a service has no terminal to ask on. It writes each question to
`runner.json` → `runner.pending/N.json` (the same detail the prompt shows) and waits, its
lease heartbeating, up to `--consent-timeout`, for `N.answer` to appear; `pending` lists the
questions, `allow --pending N [--always | --refuse [--reason …]]` writes the answer. The
runner and those commands are separate processes: a directory of small files, each written
atomically by one of them, needs no lock. A desktop notification says a question waits
where one can be sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.consent.prompt import Answer, first_of
from runnercli.config import ConfigError, write_private

POLL_S = 0.2
ANSWERS = ("once", "always", "no")


def pending_dir(config_file: Path) -> Path:
    """Where the runner of `config_file` keeps its questions."""
    return config_file.with_name(f"{config_file.stem}.pending")


@dataclass(frozen=True)
class Question:
    number: int
    harness: str
    lines: list[str]


class PendingError(Exception):
    """No such question, or an answer that cannot be written."""


def questions(directory: Path) -> list[Question]:
    """The questions waiting in `directory`, oldest first."""
    found = []
    for path in sorted(directory.glob("*.json"), key=lambda p: _number(p.stem)):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found.append(Question(int(data["number"]), str(data["harness"]), list(data["lines"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def _number(stem: str) -> int:
    return int(stem) if stem.isdigit() else 0


def answer(directory: Path, number: int, reply: str, reason: str = "") -> Question:
    """Answer question `number` with "once", "always" or "no" (with the member's reason)."""
    if reply not in ANSWERS:
        raise PendingError(f"{reply!r} is not an answer: once, always or no")
    waiting = {q.number: q for q in questions(directory)}
    if number not in waiting:
        listed = ", ".join(str(n) for n in waiting) or "none"
        raise PendingError(f"no question {number} is pending (pending: {listed})")
    payload = json.dumps({"answer": reply, "reason": reason})
    try:
        write_private(directory / f"{number}.answer", payload + "\n")
    except ConfigError as exc:
        raise PendingError(f"cannot write the answer in {directory}: {exc}") from exc
    return waiting[number]


def notify(title: str, body: str) -> None:
    """A desktop notification where one can be sent; nothing where none can."""
    if sys.platform == "darwin" and (program := shutil.which("osascript")):
        script = f"display notification {json.dumps(body)} with title {json.dumps(title)}"
        argv = [program, "-e", script]
    elif program := shutil.which("notify-send"):
        argv = [program, "--app-name=everdict-runner", title, body]
    else:
        return
    with contextlib.suppress(OSError):
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


class PendingPrompt:
    """The prompt of a runner with no terminal: questions in files, answers in files."""

    def __init__(
        self,
        directory: Path,
        *,
        allow_command: Callable[[int], str] = lambda n: f"python -m runnercli allow --pending {n}",
    ) -> None:
        self.directory = directory
        self.allow_command = allow_command
        self.reason = ""
        # The harness the next question is about (its label in `pending`).
        self.about = ""
        self._next = 1
        # Questions left by a runner that is gone would never be answered.
        with contextlib.suppress(OSError):
            shutil.rmtree(directory)

    async def ask(
        self, lines: list[str], question: str, timeout_s: float, interrupts: list[asyncio.Event]
    ) -> Answer:
        number, self._next = self._next, self._next + 1
        record = {"number": number, "harness": self.about, "lines": lines}
        path = self.directory / f"{number}.json"
        answer_path = self.directory / f"{number}.answer"
        write_private(path, json.dumps(record) + "\n")
        notify(
            "Everdict runner: waiting for consent",
            f"{self.about or question} waits: `{self.allow_command(number)}` runs it",
        )
        try:
            got, found = await first_of(self._answer(answer_path), interrupts, timeout_s)
        finally:
            path.unlink(missing_ok=True)
            answer_path.unlink(missing_ok=True)
        if not got or found is None:
            return "interrupted" if any(e.is_set() for e in interrupts) else "timeout"
        reply, self.reason = found
        return "once" if reply == "once" else "always" if reply == "always" else "no"

    async def _answer(self, path: Path) -> tuple[str, str]:
        while True:
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text(encoding="utf-8"))
                return str(data["answer"]), str(data.get("reason", ""))
            await asyncio.sleep(POLL_S)
