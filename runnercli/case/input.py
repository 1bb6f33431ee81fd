"""How the case reaches the harness: a file always, the environment when it is small enough.

Linux refuses a single argument or environment string over 128 KiB (`E2BIG` at exec), so a
large case input could never start if it only travelled through `EVERDICT_CASE`. The case
JSON is written to a file of its own (0600) and named by `EVERDICT_CASE_FILE`
and the argv placeholder `{case.file}`; `EVERDICT_CASE` is set too while the case is at most
`MAX_CASE_ENV_BYTES`. An argv element that would be refused at exec is refused before it,
with a message pointing at `{case.file}`.

The case files of a runner share one directory (0700, made once per session and removed at
exit) rather than each having a directory made beside its case's working directory: a case
costs one directory made and removed, not two, which at hundreds of cases a second was a
fifth of the runner's own work.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

from runnercli.protocol import MAX_ARG_BYTES, MAX_CASE_ENV_BYTES, CaseRef

CASE_ENV = "EVERDICT_CASE"
CASE_FILE_ENV = "EVERDICT_CASE_FILE"
CASE_FILE_NAME = "everdict-case.json"
_numbers = itertools.count(1)


class ArgumentTooLong(Exception):
    """An argv element the kernel would refuse at exec."""


def case_json(case: CaseRef) -> str:
    return json.dumps(case.model_dump())


@functools.cache
def case_files_dir() -> Path:
    """This process's directory of case files (0700), removed when it exits."""
    directory = Path(tempfile.mkdtemp(prefix="everdict-cases-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def write_case_file(directory: str | Path, text: str) -> Path:
    """Write the case JSON under a name of its own in `directory`, readable by its owner
    only; the caller removes it."""
    path = Path(directory) / f"{next(_numbers)}-{CASE_FILE_NAME}"
    # Created 0600 from the start: the input may be confidential, and /tmp is shared.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def case_variables(text: str, path: Path) -> dict[str, str]:
    """The environment that carries the case: the file always, the JSON when small enough."""
    variables = {CASE_FILE_ENV: str(path)}
    if len(text.encode()) <= MAX_CASE_ENV_BYTES:
        variables[CASE_ENV] = text
    return variables


def check_argv(argv: list[str]) -> None:
    """Refuse an argv element the kernel would refuse (with its NUL, over MAX_ARG_BYTES)."""
    for index, element in enumerate(argv):
        size = len(element.encode("utf-8", "surrogatepass"))
        if size + 1 > MAX_ARG_BYTES:
            raise ArgumentTooLong(
                f"argv element {index} is {size} bytes once the case is substituted; an "
                f"argument may not exceed {MAX_ARG_BYTES // 1024} KiB. Pass the case through "
                f"the {{case.file}} placeholder (or ${CASE_FILE_ENV}) and read it from there"
            )
