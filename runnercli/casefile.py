"""How the case reaches the harness: a file always, the environment when it is small enough.

Linux refuses a single argument or environment string over 128 KiB (`E2BIG` at exec), so a
large case input could never start if it only travelled through `EVERDICT_CASE`. The case
JSON is written to a file in the case's temp dir (0600) and named by `EVERDICT_CASE_FILE`
and the argv placeholder `{case.file}`; `EVERDICT_CASE` is set too while the case is at most
`MAX_CASE_ENV_BYTES`. An argv element that would be refused at exec is refused before it,
with a message pointing at `{case.file}`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runnercli.protocol import MAX_ARG_BYTES, MAX_CASE_ENV_BYTES, CaseRef

CASE_ENV = "EVERDICT_CASE"
CASE_FILE_ENV = "EVERDICT_CASE_FILE"
CASE_FILE_NAME = "everdict-case.json"


class ArgumentTooLong(Exception):
    """An argv element the kernel would refuse at exec."""


def case_json(case: CaseRef) -> str:
    return json.dumps(case.model_dump())


def write_case_file(workdir: str | Path, text: str) -> Path:
    """Write the case JSON in the case's temp dir, readable by its owner only."""
    path = Path(workdir) / CASE_FILE_NAME
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
