"""Run one case on this machine: render the argv, start the harness, bound what it says, report.

The harness runs as the member, so it is started as an argv (never through a shell: a case
input is data, not code), in a fresh temporary directory, in a process group of its own so a
timeout or a cancel can end everything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runnercli.casefile import (
    CASE_ENV,
    CASE_FILE_ENV,
    ArgumentTooLong,
    case_files_dir,
    case_json,
    case_variables,
    check_argv,
    write_case_file,
)
from runnercli.config import CONFIG_ENV, TOKEN_ENV, os_name, runnercli_version
from runnercli.protocol import (
    MAX_LOG_LINE_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_RUNNER_INFO_CHARS,
    MAX_RUNNERCLI_VERSION_CHARS,
    MAX_STDERR_TAIL_BYTES,
    MAX_TOOL_VERSION_CHARS,
    PLACEHOLDER_RE,
    CaseJob,
    CaseRef,
    CaseResult,
    Fingerprint,
    harness_digest,
    refused_env_keys,
)

USAGE_FIELDS = ("total_cost_usd", "input_tokens", "output_tokens")
# Time a process group gets between SIGTERM and SIGKILL when its timeout passes.
TERM_GRACE_S = 2.0
# Time the pipes get to drain once the group is gone (a daemon that escaped the group can
# hold them open forever).
DRAIN_S = 2.0
READ_CHUNK = 64 * 1024
EXIT_POLL_S = 0.02
# Windows has no SIGKILL; there `signal_group` ends the process with TerminateProcess anyway.
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)

LineSink = Callable[[str], None]
EndStatus = Literal["completed", "timeout", "canceled"]


class StartError(Exception):
    """The case could not be started; it is reported with `fail_job`, not as a result."""


def clip_utf8(text: str, limit: int, *, keep_tail: bool = False) -> str:
    """Cut `text` to at most `limit` UTF-8 bytes, never splitting a character."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    cut = raw[-limit:] if keep_tail else raw[:limit]
    return cut.decode("utf-8", errors="ignore")


def _lookup(value: Any, path: list[str], placeholder: str) -> Any:
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise StartError(f"the case has no value for {{{placeholder}}}")
    return value


def render_argv(command: list[str], case: CaseRef, case_file: str = "") -> list[str]:
    """Substitute `{input.<path>}`, `{case.key}` and `{case.file}` in each argv element; one
    element stays one."""

    def substitute(match: Any) -> str:
        placeholder = match.group(1)
        if placeholder == "case.key":
            return case.key
        if placeholder == "case.file":
            return case_file
        value = _lookup(case.input, placeholder.split(".")[1:], placeholder)
        return value if isinstance(value, str) else json.dumps(value)

    return [PLACEHOLDER_RE.sub(substitute, element) for element in command]


def case_env(job: CaseJob, case_variables: dict[str, str]) -> dict[str, str]:
    """The harness environment: ours, minus the runner's secrets (and any case variable it
    inherited), plus the spec's and the case's."""
    if refused := refused_env_keys(job.harness.spec.env):
        # Consent refuses such a job before it gets here; this stays true for any caller.
        raise StartError(f"the harness may not set {', '.join(refused)}")
    env = dict(_inherited_env())
    env.update(job.harness.spec.env)
    env.update(case_variables)
    return env


@functools.cache
def _inherited_env() -> dict[str, str]:
    """The runner's environment minus its secrets and any case variable it inherited, read
    once per session (copying `os.environ` decodes every variable each time)."""
    ours = (TOKEN_ENV, CONFIG_ENV, CASE_ENV, CASE_FILE_ENV)
    return {k: v for k, v in os.environ.items() if k not in ours}


def advisory_usage(output: str) -> dict[str, Any] | None:
    """Usage the harness printed as JSON (`total_cost_usd`, tokens); the server re-derives it."""
    try:
        parsed = json.loads(output)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    usage: dict[str, Any] = {}
    for source in (parsed.get("usage"), parsed):
        if isinstance(source, dict):
            for name in USAGE_FIELDS:
                value = source.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    usage.setdefault(name, value)
    return usage or None


@functools.cache
def machine_fingerprint() -> Fingerprint:
    """This machine and runner as every result reports them (read once per session)."""
    return Fingerprint(
        runnercli_version=runnercli_version()[:MAX_RUNNERCLI_VERSION_CHARS],
        os=os_name()[:MAX_RUNNER_INFO_CHARS],
        os_version=platform.release()[:MAX_TOOL_VERSION_CHARS],
        arch=platform.machine()[:MAX_RUNNER_INFO_CHARS],
        python=platform.python_version(),
    )


def fingerprint(job: CaseJob) -> Fingerprint:
    """The machine's fingerprint with the digest of the harness content this case executed."""
    return machine_fingerprint().model_copy(
        update={"harness_digest": harness_digest(job.harness.spec)}
    )


@dataclass
class _Stdout:
    """The first MAX_OUTPUT_BYTES of stdout; the rest is read and dropped, never blocking."""

    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        room = MAX_OUTPUT_BYTES - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)

    def text(self) -> str:
        return clip_utf8(self.data.decode("utf-8", errors="replace"), MAX_OUTPUT_BYTES)


@dataclass
class _Stderr:
    """The last MAX_STDERR_TAIL_BYTES of stderr, and each line handed to `sink` as it comes."""

    sink: LineSink
    tail: bytearray = field(default_factory=bytearray)
    partial: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        self.tail += chunk
        if len(self.tail) > MAX_STDERR_TAIL_BYTES:
            del self.tail[: len(self.tail) - MAX_STDERR_TAIL_BYTES]
        self.partial += chunk
        *lines, rest = self.partial.split(b"\n")
        for line in lines:
            self._emit(line)
        self.partial = bytearray(rest)
        # A line with no end in sight is still shown, in pieces, and never grows unbounded.
        while len(self.partial) > MAX_LOG_LINE_BYTES:
            cut = _utf8_cut(self.partial, MAX_LOG_LINE_BYTES)
            self._emit(self.partial[:cut])
            del self.partial[:cut]

    def close(self) -> None:
        if self.partial:
            self._emit(self.partial)
            self.partial = bytearray()

    def _emit(self, line: bytes | bytearray) -> None:
        """Hand one line to the sink, in pieces of at most MAX_LOG_LINE_BYTES."""
        rest = bytes(line).rstrip(b"\r")
        while True:
            cut = _utf8_cut(rest, MAX_LOG_LINE_BYTES)
            text = rest[:cut].decode("utf-8", errors="replace")
            self.sink(clip_utf8(text, MAX_LOG_LINE_BYTES))
            rest = rest[cut:]
            if not rest:
                return

    def text(self) -> str:
        decoded = self.tail.decode("utf-8", errors="replace")
        return clip_utf8(decoded, MAX_STDERR_TAIL_BYTES, keep_tail=True)


def _utf8_cut(data: bytes | bytearray, limit: int) -> int:
    """The largest cut point ≤ limit that does not split a UTF-8 character."""
    if len(data) <= limit:
        return len(data)
    cut = limit
    while cut > limit - 4 and cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut if cut > 0 else limit


async def _pump(stream: asyncio.StreamReader | None, feed: Callable[[bytes], None]) -> None:
    if stream is None:
        return
    while chunk := await stream.read(READ_CHUNK):
        feed(chunk)


def _group_options() -> dict[str, Any]:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Send `sig` to the case's whole process group (its leader may already be gone)."""
    if sys.platform == "win32":
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return
    # start_new_session made the child a session and group leader: its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def watch_children_by_pidfd() -> bool:
    """On Linux with Python 3.11, have the event loop learn of a case's exit from a pidfd it
    polls, rather than from a thread started per case to wait for it (Python 3.11's default;
    3.12 picks the pidfd watcher itself). Call once, in the loop the cases run in, before any
    case starts; return whether the pidfd watcher is in use."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel before 5.3, or a sandbox refusing it
        return False
    watcher = asyncio.PidfdChildWatcher()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(watcher)
    watcher.attach_loop(asyncio.get_running_loop())
    return True


class _CaseProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The streams of `create_subprocess_exec`, and an event set the moment the leader exits
    (the loop's child watcher tells the transport), whether or not its pipes are closed."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """Wait for the leader to exit.

    Not `proc.wait()`: on Python 3.11 it also waits for the pipes to close, which a
    grandchild holding stderr can put off for as long as it lives.
    """
    protocol = getattr(proc, "_protocol", None)
    if isinstance(protocol, _CaseProtocol):
        await protocol.exited.wait()
    while proc.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)
    return proc.returncode


async def _end_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    if grace_s > 0:
        signal_group(proc, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_exited(proc), grace_s)
    signal_group(proc, KILL)
    await _exited(proc)


async def _start(argv: list[str], env: dict[str, str], workdir: str) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec`, with a protocol that says when the leader exits."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _CaseProtocol(limit=READ_CHUNK, loop=loop),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            **_group_options(),
        )
        return asyncio.subprocess.Process(transport, protocol, loop)
    except FileNotFoundError as exc:
        raise StartError(f"program not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise StartError(f"program is not executable: {argv[0]}") from exc
    except OSError as exc:
        raise StartError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc


async def run_case(
    job: CaseJob,
    *,
    on_stderr_line: LineSink,
    on_note: LineSink | None = None,
    kill: asyncio.Event | None = None,
    term_grace_s: float = TERM_GRACE_S,
) -> CaseResult:
    """Run the case to completion, timeout or `kill`; raise StartError if it cannot start.

    A set `kill` event ends the process group at once and gives status `canceled`; so does
    cancelling the task that runs this, which then re-raises.
    """
    # The harness's working directory starts empty; the case file is beside it, in the
    # runner's directory of case files.
    workdir = tempfile.mkdtemp(prefix="everdict-case-")
    case_file: Path | None = None
    try:
        text = case_json(job.case)
        case_file = write_case_file(case_files_dir(), text)
        argv = render_argv(job.harness.spec.command, job.case, str(case_file))
        try:
            check_argv(argv)
        except ArgumentTooLong as exc:
            raise StartError(str(exc)) from exc
        env = case_env(job, case_variables(text, case_file))
        started = time.monotonic()
        proc = await _start(argv, env, workdir)
        stdout, stderr = _Stdout(), _Stderr(on_stderr_line)
        readers = [
            asyncio.create_task(_pump(proc.stdout, stdout.feed)),
            asyncio.create_task(_pump(proc.stderr, stderr.feed)),
        ]
        try:
            status = await _supervise(proc, job.timeout_s, kill, term_grace_s)
        except asyncio.CancelledError:
            signal_group(proc, KILL)
            for reader in readers:
                reader.cancel()
            raise
        # The leader is gone; whatever it left running in its group goes with it.
        signal_group(proc, KILL)
        _, stuck = await asyncio.wait(readers, timeout=DRAIN_S)
        for reader in stuck:
            reader.cancel()
        stderr.close()
        output = stdout.text()
        if stdout.total > MAX_OUTPUT_BYTES and on_note is not None:
            on_note(f"stdout was {stdout.total} bytes; kept the first {MAX_OUTPUT_BYTES}")
        return CaseResult(
            status=status,
            exit_code=proc.returncode if status == "completed" else None,
            output=output,
            stderr_tail=stderr.text(),
            duration_ms=int((time.monotonic() - started) * 1000),
            usage=advisory_usage(output) if status == "completed" else None,
            fingerprint=fingerprint(job),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if case_file is not None:
            with contextlib.suppress(FileNotFoundError):
                case_file.unlink()


async def _supervise(
    proc: asyncio.subprocess.Process,
    timeout_s: float,
    kill: asyncio.Event | None,
    term_grace_s: float,
) -> EndStatus:
    exited = asyncio.create_task(_exited(proc))
    killed = asyncio.create_task(kill.wait()) if kill is not None else None
    waiting = {exited} if killed is None else {exited, killed}
    try:
        done, _ = await asyncio.wait(waiting, timeout=timeout_s, return_when="FIRST_COMPLETED")
    finally:
        exited.cancel()
        if killed is not None:
            killed.cancel()
    if exited in done:
        return "completed"
    if killed is not None and killed in done:
        await _end_group(proc, grace_s=0)
        return "canceled"
    await _end_group(proc, grace_s=term_grace_s)
    return "timeout"
