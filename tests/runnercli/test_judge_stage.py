"""The `Judge` stage: the judge's own directory and file, removed after it, and the one
warning about an API key that would bill the judge instead of the member's login."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.judge.stage import BillingWarning, Judge
from runnercli.case.pipeline import CaseContext, Pipeline
from runnercli.protocol import CaseJob, JudgeInput
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import held

READS_ITS_FILE = (
    "import json, os, stat; p = os.environ['EVERDICT_JUDGE_FILE'];"
    " d = json.load(open(p));"
    " print(json.dumps({'expected': d['expected'], 'file': oct(stat.S_IMODE(os.stat(p).st_mode)),"
    " 'dir': oct(stat.S_IMODE(os.stat(os.path.dirname(p)).st_mode)), 'path': p,"
    " 'cwd': os.getcwd()}))"
)


def judge_job() -> CaseJob:
    job = make_job([sys.executable, "-c", READS_ITS_FILE])
    judge = JudgeInput(case_key="c1", rubric="r", input={"q": 1}, output="o", expected="42")
    return job.model_copy(update={"kind": "judge", "judge": judge})


def test_the_judge_reads_its_own_file_in_its_own_directory_removed_after() -> None:
    notes: list[str] = []
    case = CaseContext(held(judge_job()), notes=[notes.append])
    asyncio.run(Pipeline([Judge(BillingWarning()), Execute(), Collect()]).run(case))
    assert case.result is not None, case.ending
    seen = json.loads(case.result.output)
    assert (seen["expected"], seen["file"], seen["dir"]) == ("42", "0o600", "0o700")
    assert Path(seen["cwd"]) == Path(seen["path"]).parent
    assert not Path(seen["path"]).parent.exists()


def test_a_billing_key_is_warned_of_once_per_session() -> None:
    warning = BillingWarning()
    notes: list[str] = []
    case = CaseContext(held(judge_job()), notes=[notes.append])
    for _ in range(3):
        warning.check(case, {"ANTHROPIC_API_KEY": "sk-x", "HOME": "/home/m"})
    assert len(notes) == 1
    assert "this judge will bill that key, not your login" in notes[0]
    quiet: list[str] = []
    other = CaseContext(held(judge_job()), notes=[quiet.append])
    BillingWarning().check(other, {"HOME": "/home/m"})
    assert quiet == []


def test_the_consent_prompt_says_a_judge_job_reads_the_expected_answer() -> None:
    from runnercli.case.consent.disclosure import world_lines

    lines = world_lines(judge_job())
    assert any("judging:" in line and "expected answer" in line for line in lines)
    assert not any("judging:" in line for line in world_lines(make_job(["true"])))
