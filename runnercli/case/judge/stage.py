"""The `Judge` stage: a judge job's own directory and the file that holds what it judges.

A judge job (`kind: judge`) runs the judge's command instead of a harness. What it judges —
the rubric, the case's input, the output the case gave and the expected answer — is in
`$EVERDICT_JUDGE_FILE` (also `{judge.file}`), 0600, in a 0700 directory made for this judge
job alone, outside every case's directory, and removed when it ends. The expected answer
reaches no case: only a judge job carries it, and only this file holds it here.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from runnercli.case.pipeline import CaseContext, CaseEnded, Failed, Given, Stage

JUDGE_FILE_ENV = "EVERDICT_JUDGE_FILE"
JUDGE_FILE_NAME = "everdict-judge.json"
# Keys that make a CLI bill an API account instead of the member's login.
BILLING_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


class BillingWarning:
    """Says once per runner session that a judge will bill an API key set in its environment."""

    def __init__(self) -> None:
        self.said = False

    def check(self, case: CaseContext, environ: dict[str, str] | None = None) -> None:
        environ = dict(os.environ) if environ is None else environ
        keys = [key for key in BILLING_KEYS if environ.get(key)]
        if keys and not self.said:
            self.said = True
            case.note(
                f"⚠ {' and '.join(keys)} is set in the runner's environment: "
                "this judge will bill that key, not your login"
            )


def judge_json(case: CaseContext) -> str:
    judge = case.job.judge
    if judge is None:
        raise CaseEnded(Failed("a judge job without what to judge"))
    return json.dumps(judge.model_dump(mode="json"), ensure_ascii=False)


class Judge(Stage):
    name = "judge"
    gives = frozenset({Given.DIRECTORY})

    def __init__(self, warning: BillingWarning) -> None:
        self.warning = warning
        self.directory: Path | None = None

    async def start(self, case: CaseContext) -> None:
        text = judge_json(case)
        # mkdtemp makes it 0700: nobody else on the machine lists or opens the file.
        directory = self.directory = Path(tempfile.mkdtemp(prefix="everdict-judge-"))
        case.directory = directory
        path = directory / JUDGE_FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        case.env[JUDGE_FILE_ENV] = str(path)
        case.placeholders["judge.file"] = str(path)
        self.warning.check(case)

    async def cleanup(self, case: CaseContext) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
