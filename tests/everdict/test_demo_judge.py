"""The demo's judge script: deterministic verdicts with reasons, read strictly by the server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from everdict.demo_judge import JUDGED_HARNESS, judged_harness_spec, seed_judged
from everdict.demo_judge_script import judge
from runnercli.protocol import HarnessSpec
from scorecards.judging.answers import answer_read
from scorecards.models import HarnessVersion


def test_it_passes_the_reference_and_fails_the_rest_with_a_reason() -> None:
    said = judge({"output": json.dumps({"result": "Paris"}), "expected": "Paris"})
    assert said["pass"] is True and "Paris" in str(said["reason"])
    wrong = judge({"output": json.dumps({"result": "Sydney"}), "expected": "Canberra"})
    assert wrong["pass"] is False and "Sydney" in str(wrong["reason"])
    # What it prints is what the server reads as an answer.
    assert answer_read(json.dumps(wrong)).passed is False


@pytest.mark.django_db
def test_the_seed_is_a_judge_graded_harness_seeded_once(alice: Any, workspace: Any) -> None:
    spec = HarnessSpec.model_validate(judged_harness_spec())
    assert spec.grader.type == "judge" and spec.grader.judge is not None
    seed_judged(alice, "acme")
    seed_judged(alice, "acme")
    assert HarnessVersion.objects.filter(name=JUDGED_HARNESS).count() == 1
