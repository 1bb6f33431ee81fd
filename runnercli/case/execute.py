"""The `Execute` stage: run the harness on this machine, as the member, and see how it ends.

It starts as an argv (never through a shell), with the placeholders and the environment the
stages before it added, in the case's working directory, in a process group of its own so a
timeout or a kill ends everything it started. Stdout keeps its head and stderr its tail,
each also handed as it comes to whoever observes it.
"""

from __future__ import annotations

import asyncio
import time

from runnercli.case.argv import StartError, case_env, render_argv
from runnercli.case.input import ArgumentTooLong, check_argv
from runnercli.case.pipeline import CaseContext, Given, RunOutcome, Stage
from runnercli.case.spawn import (
    KILL,
    TERM_GRACE_S,
    drain,
    pump,
    reap,
    signal_group,
    spawn,
    supervise,
)
from runnercli.case.streams import Stderr, Stdout
from runnercli.protocol import MAX_OUTPUT_BYTES


class Execute(Stage):
    """Run the harness to completion, its timeout or a kill (`case.kill`): `case.outcome`."""

    name = "execute"
    needs = frozenset({Given.DIRECTORY})
    gives = frozenset({Given.OUTCOME})

    def __init__(self, *, term_grace_s: float = TERM_GRACE_S) -> None:
        self.term_grace_s = term_grace_s
        self.proc: asyncio.subprocess.Process | None = None
        self.readers: list[asyncio.Task[None]] = []
        self.ended = False

    async def start(self, case: CaseContext) -> None:
        job = case.job
        argv = render_argv(case.argv or job.harness.spec.command, job.case, case.placeholders)
        try:
            check_argv(argv)
        except ArgumentTooLong as exc:
            raise StartError(str(exc)) from exc
        env = case_env(job, case.env)
        started = case.agent_started = time.monotonic()
        proc = self.proc = await spawn(argv, env, str(case.workdir))
        case.agent_pid = proc.pid
        stdout, stderr = Stdout(case.stdout_chunks), Stderr(case.stderr_lines)
        self.readers = [
            asyncio.create_task(pump(proc.stdout, stdout.feed)),
            asyncio.create_task(pump(proc.stderr, stderr.feed)),
        ]
        status = await supervise(
            proc, job.timeout_s, case.kill, self.term_grace_s, stop=case.stop_agent
        )
        # The leader is gone; whatever it left running in its group goes with it.
        signal_group(proc, KILL)
        self.ended = True
        case.agent_ended = time.monotonic()
        await drain(self.readers)
        stdout.close()
        stderr.close()
        case.exited.set()
        if stdout.total > MAX_OUTPUT_BYTES:
            case.note(f"stdout was {stdout.total} bytes; kept the first {MAX_OUTPUT_BYTES}")
        case.outcome = RunOutcome(
            status=status,
            exit_code=proc.returncode if status == "completed" else None,
            stdout=stdout.text(),
            stdout_bytes=stdout.total,
            stderr_tail=stderr.text(),
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    async def cleanup(self, case: CaseContext) -> None:
        # Cut short (the task running the case was cancelled): the whole group goes now.
        if self.proc is not None and not self.ended:
            signal_group(self.proc, KILL)
            await reap(self.proc)
        for reader in self.readers:
            reader.cancel()
        case.exited.set()
