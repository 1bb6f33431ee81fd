"""Asking the member, on their terminal, whether a harness version may run here.

The question shows exactly what would run — the argv with each element quoted (and said
plainly when it starts a shell), the environment it adds with values, the timeout, the
workspace, who wrote the version and who started the run — every string of it made harmless
for the terminal. Answers are read by a thread of their own, so waiting never blocks the
runner's heartbeats; lines typed while nothing is asked are dropped, never taken as an answer
to a later question.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable
from pathlib import PurePath
from typing import Literal, TextIO, TypeVar

from runnercli.case.argv import StartError, render_argv
from runnercli.case.consent.disclosure import (
    bypass_lines,
    leaving_lines,
    world_lines,
    world_summary,
)
from runnercli.case.input import CASE_ENV, CASE_FILE_ENV
from runnercli.console.status import StatusLine
from runnercli.console.terminal import clean, quote_arg, quote_argv
from runnercli.protocol import CaseJob
from runnercli.protocol.presets import bypassing
from runnercli.tasks import cancel_and_wait

BACKGROUND_RETRY_S = 0.5
Answer = Literal["once", "always", "no", "timeout", "eof", "interrupted"]
T = TypeVar("T")

SHELLS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"}
    | {"cmd", "powershell", "pwsh"}
)
# Interpreters that run code given on their command line (`python -c …`, `node -e …`).
INLINE_FLAGS = {
    "python": ("-c",),
    "python3": ("-c",),
    "node": ("-e", "--eval", "-p", "--print"),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "deno": ("eval",),
}
ANSWERS: dict[str, Answer] = {
    "o": "once",
    "once": "once",
    "y": "once",
    "yes": "once",
    "a": "always",
    "always": "always",
    "n": "no",
    "no": "no",
    "": "no",
}


def _program(arg: str) -> str:
    return PurePath(arg.replace("\\", "/")).name.lower().removesuffix(".exe")


def _started(argv: list[str]) -> list[str]:
    """The argv of what actually starts: past `env [-i] [NAME=value]…` and `exec`."""
    args = list(argv)
    while args and _program(args[0]) in ("env", "exec", "nohup", "command"):
        args = args[1:]
        while args and (args[0].startswith("-") or "=" in args[0]):
            args = args[1:]
    return args


def how_it_runs(argv: list[str]) -> str:
    """Say whether the argv runs a program directly or hands code to a shell or interpreter."""
    args = _started(argv)
    program = _program(args[0]) if args else ""
    if program in SHELLS:
        inline = any(
            arg.lower() in ("/c", "/k", "-command", "-c", "-encodedcommand")
            or (arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:])
            for arg in args[1:]
        )
        what = "its argument is shell code" if inline else "it runs shell code"
        return f"THROUGH A SHELL ({program}): {what}, not a single program"
    if any(arg in INLINE_FLAGS.get(program, ()) for arg in args[1:]):
        return f"argv, no shell — but {program} runs the code given on its command line"
    return "argv, no shell: each quoted element is one argument"


def describe(
    job: CaseJob, withheld: frozenset[str] = frozenset(), redact_patterns: int = 0
) -> list[str]:
    """What will run if the member says yes, one fact a line, and what may leave the
    machine (`withheld`: what the member keeps here this session)."""
    harness, spec = job.harness, job.harness.spec
    lines = [
        f"  harness:     {clean(harness.name)} version {harness.version} "
        f"(sha256:{clean(harness.digest)[:16]}…)",
        f"  workspace:   {clean(job.workspace)}",
        f"  written by:  {clean(harness.author) or '(unknown)'}",
        f"  run by:      {clean(job.submitted_by)} (run {job.run_id}, case "
        f"{quote_arg(job.case.key)})",
        f"  command:     {quote_argv(spec.command)}",
        f"               ({how_it_runs(spec.command)})",
        *bypass_lines(spec.command),
    ]
    with contextlib.suppress(StartError):
        rendered = render_argv(spec.command, job.case)
        if rendered != spec.command:
            lines.append(f"  this case:   {quote_argv(rendered)}")
    env = [f"{clean(key)}={quote_arg(value)}" for key, value in sorted(spec.env.items())]
    lines.append(f"  env:         {env[0] if env else '(adds nothing)'}")
    lines += [f"               {line}" for line in env[1:]]
    where = "a fresh temporary directory"
    if spec.repo is not None:
        where = f"its own worktree of {clean(spec.repo.name)} in {where}"
    lines += [
        f"  timeout:     {job.timeout_s} s",
        f"  needs:       {clean(', '.join(spec.required_capabilities())) or 'nothing'}",
        f"  runs in:     {where}, as you; the case JSON in "
        f"${CASE_FILE_ENV} (and ${CASE_ENV} up to 64 KiB)",
        *world_lines(job),
        *leaving_lines(job, withheld, redact_patterns),
    ]
    return lines


def one_line(job: CaseJob, withheld: frozenset[str] = frozenset()) -> str:
    """The description printed before a version allowed without asking first runs here."""
    harness, spec = job.harness, job.harness.spec
    env = ", ".join(f"{key}={quote_arg(value)}" for key, value in sorted(spec.env.items()))
    where = f"a worktree of {spec.repo.name}" if spec.repo is not None else "a fresh temp dir"
    world = world_summary(job, withheld)
    agent = bypassing(spec.command)
    loud = (
        f"PERMISSIONS: BYPASS ({agent.tool} runs everything unasked, unsandboxed) " if agent else ""
    )
    return (
        f"{loud}harness {harness.name} v{harness.version} will run: {quote_argv(spec.command)} "
        f"({how_it_runs(spec.command)}) in {where}; workspace {job.workspace}, "
        f"written by {harness.author or '(unknown)'}; env: {env or 'nothing added'}; "
        f"timeout {job.timeout_s}s; needs {', '.join(spec.required_capabilities()) or 'nothing'}; "
        f"case JSON in ${CASE_FILE_ENV}" + (f"; {world}" if world else "")
    )


async def first_of(
    work: Awaitable[T], events: list[asyncio.Event], timeout: float
) -> tuple[bool, T | None]:
    """(True, `work`'s result), or (False, None) when an event is set or `timeout` passes."""
    task = asyncio.ensure_future(work)
    watchers = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait([task, *watchers], timeout=timeout, return_when="FIRST_COMPLETED")
    finally:
        for watcher in watchers:
            watcher.cancel()
        if not task.done():
            await cancel_and_wait(task)
    if task.done() and not task.cancelled():
        return True, task.result()
    return False, None


class TerminalPrompt:
    """Questions on the member's terminal, answered by a line on stdin."""

    def __init__(self, status: StatusLine, stdin: TextIO | None = None) -> None:
        self.status = status
        self.stdin = stdin or sys.stdin
        self._lines: asyncio.Queue[str | None] | None = None
        self.gone = False

    def _queue(self) -> asyncio.Queue[str | None]:
        if self._lines is None:
            loop = asyncio.get_running_loop()
            lines: asyncio.Queue[str | None] = asyncio.Queue()

            def read() -> None:
                while True:
                    try:
                        line = self.stdin.readline()
                    except OSError:  # a read from the background (EIO): wait for `fg`
                        time.sleep(BACKGROUND_RETRY_S)
                        continue
                    except ValueError:  # stdin was closed
                        line = ""
                    try:
                        loop.call_soon_threadsafe(lines.put_nowait, line or None)
                    except RuntimeError:  # the loop is closed: the runner is leaving
                        return
                    if not line:
                        return

            # A read from a background job would stop the whole runner (SIGTTIN), its
            # heartbeats with it; ignored, the read fails instead and is tried again.
            with contextlib.suppress(AttributeError, ValueError, OSError):
                signal.signal(signal.SIGTTIN, signal.SIG_IGN)
            threading.Thread(target=read, name="consent-answers", daemon=True).start()
            self._lines = lines
        return self._lines

    def _in_foreground(self) -> bool:
        """Whether the member can answer: the runner is not a background job of its shell."""
        try:
            return os.tcgetpgrp(self.stdin.fileno()) == os.getpgrp()
        except (AttributeError, OSError, ValueError):
            return True  # no job control here (Windows): the terminal is the runner's

    def _drop_typed_ahead(self, lines: asyncio.Queue[str | None]) -> None:
        while not lines.empty():
            if lines.get_nowait() is None:
                self.gone = True

    async def ask(
        self, lines: list[str], question: str, timeout_s: float, interrupts: list[asyncio.Event]
    ) -> Answer:
        """Ask until a valid answer, the end of stdin, an interrupt or `timeout_s`."""
        answers = self._queue()
        self._drop_typed_ahead(answers)
        if self.gone or not self._in_foreground():
            return "eof"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        with self.status.paused():
            self.status.ask(lines, question)
            while True:
                remaining = max(0.0, deadline - loop.time())
                got, line = await first_of(answers.get(), interrupts, remaining)
                if not got or line is None:
                    self.status.console.print()
                if not got:
                    interrupted = any(event.is_set() for event in interrupts)
                    return "interrupted" if interrupted else "timeout"
                if line is None:
                    self.gone = True
                    return "eof"
                answer = ANSWERS.get(line.strip().lower())
                if answer is not None:
                    return answer
                self.status.ask([], "  please answer o (once), a (always) or n (no): ")
