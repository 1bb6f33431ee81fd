"""The `Files` stage: while the case runs, its working directory may be read on request (the
fs rendezvous, `rendezvous`); from its cleanup on, it may not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnercli.case.pipeline import CaseContext, Given, Stage

if TYPE_CHECKING:
    from runnercli.case.files.rendezvous import CaseFiles


class Files(Stage):
    name = "files"
    needs = frozenset({Given.DIRECTORY})

    def __init__(self, files: CaseFiles) -> None:
        self.files = files

    async def start(self, case: CaseContext) -> None:
        self.files.open(case.job_run, case.workdir)

    async def cleanup(self, case: CaseContext) -> None:
        self.files.close(case.job_run)
