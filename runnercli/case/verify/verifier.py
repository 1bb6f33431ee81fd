"""The verifier's command: run in the worktree with its own timeout, its process group (and
whatever it left behind) killed when it ends or outlives the timeout; its answer read."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.argv import StartError
from runnercli.case.spawn import KILL, TERM_GRACE_S, drain, signal_group, spawn, supervise
from runnercli.case.verify.report import ReportError, read_bounded, read_json, read_junit
from runnercli.protocol.verifying import (
    MAX_REPORT_BYTES,
    MAX_VERIFY_TAIL_BYTES,
    VerifyOutcome,
    VerifyReport,
    VerifySpec,
)
from runnercli.text.utf8 import clip_utf8


class _Kept:
    """A stream's head (what a JSON verdict on stdout needs) and its tail."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = b""
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(self.head) <= MAX_REPORT_BYTES:
            self.head += chunk[: MAX_REPORT_BYTES + 1 - len(self.head)]
        self.tail = (self.tail + chunk)[-MAX_VERIFY_TAIL_BYTES:]

    def tail_text(self) -> str:
        text = self.tail.decode("utf-8", "replace")
        return clip_utf8(text, MAX_VERIFY_TAIL_BYTES, keep_tail=True)


async def _pump(stream: asyncio.StreamReader | None, kept: _Kept) -> None:
    if stream is None:
        return
    while chunk := await stream.read(64 * 1024):
        kept.feed(chunk)


@dataclass
class Verified:
    report: VerifyReport
    seconds: float
    pid: int | None


def verifier_name(spec: VerifySpec) -> str:
    shown = shlex.join(spec.command)
    return shown if len(shown) <= 80 else shown[:77] + "..."


async def run_verifier(
    spec: VerifySpec,
    env: Mapping[str, str],
    worktree: Path,
    stop: asyncio.Event,
    *,
    term_grace_s: float = TERM_GRACE_S,
) -> Verified:
    """Run the verifier and read its answer; `stop` set (the case canceled) kills it."""
    started = time.monotonic()
    name = verifier_name(spec)
    try:
        proc = await spawn(list(spec.command), dict(env), str(worktree))
    except StartError as exc:
        report = VerifyReport(error=f"the verifier ({name}) could not start: {exc}")
        return Verified(report, time.monotonic() - started, None)
    stdout, stderr = _Kept(), _Kept()
    readers = [
        asyncio.create_task(_pump(proc.stdout, stdout)),
        asyncio.create_task(_pump(proc.stderr, stderr)),
    ]
    try:
        status = await supervise(proc, spec.timeout_s, stop, term_grace_s)
    finally:
        signal_group(proc, KILL)
        await drain(readers)
    seconds = time.monotonic() - started
    tails = VerifyReport(stdout_tail=stdout.tail_text(), stderr_tail=stderr.tail_text())
    if status == "timeout":
        why = (
            f"the verifier ({name}) outlived its {spec.timeout_s}-second timeout; "
            "its process group was killed"
        )
        return Verified(tails.model_copy(update={"error": why}), seconds, proc.pid)
    if status == "canceled":
        why = f"the verifier ({name}) was stopped: the case was canceled"
        return Verified(tails.model_copy(update={"error": why}), seconds, proc.pid)
    exit_code = proc.returncode
    try:
        outcome = _outcome(spec, worktree, bytes(stdout.head))
    except ReportError as exc:
        update = {"exit_code": exit_code, "error": str(exc)[:1000]}
        report = tails.model_copy(update=update)
        return Verified(report, seconds, proc.pid)
    report = tails.model_copy(update={"exit_code": exit_code, "outcome": outcome})
    return Verified(report, seconds, proc.pid)


def _outcome(spec: VerifySpec, worktree: Path, stdout: bytes) -> VerifyOutcome | None:
    if spec.output == "exit_code":
        return None
    if spec.report is not None:
        data = read_bounded(worktree / spec.report, f"the report {spec.report}")
    elif len(stdout) > MAX_REPORT_BYTES:
        raise ReportError(f"the verifier's stdout is over the {MAX_REPORT_BYTES}-byte bound")
    else:
        data = stdout
    if spec.output == "junit":
        return VerifyOutcome(tests=read_junit(data))
    return read_json(data.decode("utf-8", "replace"))
