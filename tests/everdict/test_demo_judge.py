"""The demo's judge script: deterministic verdicts with reasons, read strictly by the server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from everdict.demo_judge import JUDGED_HARNESS, judged_harness_spec
from everdict.demo_judge_script import judge
from everdict.demo_seed import JUDGED, harness_seed
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
    harness_seed(alice, "acme", JUDGED)
    harness_seed(alice, "acme", JUDGED)
    assert HarnessVersion.objects.filter(name=JUDGED_HARNESS).count() == 1


@pytest.mark.django_db
def test_the_demo_seeds_each_harness_and_dataset_of_its_table_once() -> None:
    from everdict.demo_seed import DATASETS, HARNESSES, WORKSPACE, demo_seed, demo_user
    from scorecards.models import DatasetVersion

    user = demo_user()
    demo_seed(user)
    demo_seed(user)

    harnesses = HarnessVersion.objects.filter(workspace__slug=WORKSPACE)
    assert sorted(harnesses.values_list("name", "version")) == sorted(
        (harness.name, 1) for harness in HARNESSES
    )
    datasets = DatasetVersion.objects.filter(workspace__slug=WORKSPACE)
    assert sorted(datasets.values_list("name", "case_count")) == sorted(
        (dataset.name, len(dataset.cases)) for dataset in DATASETS
    )
