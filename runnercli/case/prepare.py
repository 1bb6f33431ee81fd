"""The `Prepare` stage: the case's own directory, and the case file the harness reads.

The harness starts in an empty directory made for this case alone (removed after it, with
whatever it left there); the case JSON is in a file of its own (`runnercli.case.input`),
named by `{case.file}` and `$EVERDICT_CASE_FILE`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from runnercli.case.input import case_files_dir, case_json, case_variables, write_case_file
from runnercli.case.pipeline import CaseContext, Given, Stage


class Prepare(Stage):
    name = "prepare"
    gives = frozenset({Given.DIRECTORY})

    def __init__(self) -> None:
        self.directory: Path | None = None
        self.case_file: Path | None = None

    async def start(self, case: CaseContext) -> None:
        case.directory = self.directory = Path(tempfile.mkdtemp(prefix="everdict-case-"))
        text = case_json(case.job.case)
        self.case_file = write_case_file(case_files_dir(), text)
        case.placeholders["case.file"] = str(self.case_file)
        case.env.update(case_variables(text, self.case_file))

    async def cleanup(self, case: CaseContext) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        if self.case_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.case_file.unlink()
