"""The versions of the tools behind a harness, for every result's fingerprint.

A score that moves between two runs is first asked "same `claude`?". Each tool a harness
relies on (its capabilities, and the program its argv starts) is asked its version once per
runner session — `claude --version`, `node --version`, a browser's `--version` — each bounded
in time: a tool that hangs is killed and recorded as such, it never stalls the runner. The
version is parsed from what it prints on stdout (a version pattern; its stderr and lines
without one are ignored); a tool that prints none is `(unknown)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import PurePath
from typing import Any

from runnercli.config import CONFIG_ENV, TOKEN_ENV
from runnercli.console.terminal import clean
from runnercli.protocol import MAX_FINGERPRINT_TOOLS, MAX_TOOL_VERSION_CHARS, CaseJob
from runnercli.tasks import within

PROBE_TIMEOUT_S = 5.0
# The programs that answer for a tool, in order of preference.
TOOLS: dict[str, tuple[str, ...]] = {
    "claude": ("claude",),
    "codex": ("codex",),
    "node": ("node",),
    "git": ("git",),
    "docker": ("docker",),
    "chromium": ("chromium", "chromium-browser"),
    "google-chrome": ("google-chrome", "google-chrome-stable"),
    "firefox": ("firefox",),
}
# Capabilities that name a tool by another name, or several tools.
ALIASES: dict[str, tuple[str, ...]] = {
    "chrome": ("google-chrome",),
    "browser": ("chromium", "google-chrome", "firefox"),
    "npm": ("node",),
    "npx": ("node",),
}
VERSION_RE = re.compile(r"\d+(?:\.\d+)+(?:[-+]?[0-9A-Za-z][0-9A-Za-z.-]*)?")
# Time a killed probe gets to be reaped.
REAP_S = 2.0


def tools_of(job: CaseJob) -> list[str]:
    """The tools this job's harness relies on: its capabilities and its program."""
    wanted = [*job.harness.spec.capabilities, *job.capabilities]
    program = PurePath(job.harness.spec.command[0]).name.lower().removesuffix(".exe")
    wanted.append(program)
    names: list[str] = []
    for name in wanted:
        for tool in ALIASES.get(name, (name,) if name in TOOLS else ()):
            if tool not in names:
                names.append(tool)
    return names[:MAX_FINGERPRINT_TOOLS]


UNKNOWN = "(unknown)"


def version_of(output: str) -> str:
    """The version in a `--version` answer (`git version 2.39.2` → `2.39.2`): the first line
    holding one, whatever lines (a wrapper's warning) come before it; `(unknown)` when none
    does, never a sentence in its place."""
    for line in output.splitlines():
        found = VERSION_RE.search(line)
        if found is not None:
            return clean(found.group(0))[:MAX_TOOL_VERSION_CHARS]
    return UNKNOWN


def _probe_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, CONFIG_ENV)}


def _end(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)


def _own_group() -> dict[str, Any]:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


async def probe(program: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Ask `program --version`; what it answers, or why it did not, within `timeout_s`."""
    path = shutil.which(program)
    if path is None:
        return "(not found)"
    try:
        proc = await asyncio.create_subprocess_exec(
            path,
            "--version",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # Warnings go there (a wrapper script's, Codex's about its home): not a version.
            stderr=subprocess.DEVNULL,
            env=_probe_env(),
            **_own_group(),
        )
    except OSError as exc:
        return clean(f"(cannot start: {exc.strerror or exc})")[:MAX_TOOL_VERSION_CHARS]
    try:
        out, _ = await within(proc.communicate(), timeout_s)
    except TimeoutError:
        return f"(no answer within {timeout_s:g}s)"
    finally:
        # The tool, and anything it started, goes: a version probe leaves nothing behind.
        _end(proc)
        with contextlib.suppress(TimeoutError):
            await within(proc.wait(), REAP_S)
    if proc.returncode != 0:
        return f"(exit {proc.returncode})"
    return version_of(out.decode("utf-8", errors="replace"))


class ToolVersions:
    """Each tool probed once per session; cases needing it at once share the one probe."""

    def __init__(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._probes: dict[str, asyncio.Task[str]] = {}

    async def of(self, job: CaseJob) -> dict[str, str]:
        names = tools_of(job)
        for name in names:
            if name not in self._probes:
                self._probes[name] = asyncio.create_task(self._first_answer(name))
        # Shielded: a case that ends early must not cancel a probe other cases wait for.
        answers = await asyncio.gather(*(asyncio.shield(self._probes[name]) for name in names))
        return dict(zip(names, answers, strict=True))

    async def _first_answer(self, tool: str) -> str:
        programs = TOOLS[tool]
        for program in programs:
            if shutil.which(program):
                return await probe(program, self.timeout_s)
        return "(not found)"
