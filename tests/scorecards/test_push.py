"""`catalog_push`: a tree of harness and dataset files as one change — a new version only where
the content changed, said per file; a bad file refuses the whole push and nothing is created."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from core.errors import Forbidden, Invalid, NotFound
from scorecards.models import Case, DatasetVersion, HarnessVersion, Membership, Role, Workspace
from scorecards.services import DatasetFile, HarnessFile, catalog_push

pytestmark = pytest.mark.django_db

ECHO: dict[str, Any] = {"command": ["python", "-c", "print('{input.text}')"], "timeout_s": 30}
AGENT: dict[str, Any] = {"agent": {"cli": "claude-code"}, "grader": {"type": "contains"}}
CASES = [
    {"key": "a", "input": {"text": "hi"}, "expected": "hi"},
    {"key": "b", "input": {"text": "yo"}, "expected": "yo"},
]


def tree(
    echo: dict[str, Any] | None = None, cases: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "harnesses": [
            HarnessFile(".everdict/harnesses/echo.yaml", "echo", echo or ECHO),
            HarnessFile(".everdict/harnesses/fixer.yaml", "fixer", AGENT),
        ],
        "datasets": [
            DatasetFile(
                ".everdict/datasets/qa.jsonl",
                "qa",
                cases or CASES,
                [1, 2, 3][: len(cases or CASES)],
            )
        ],
    }


def push(user: Any, dry_run: bool = False, **files: Any) -> list[Any]:
    return catalog_push(user=user, workspace_slug="acme", dry_run=dry_run, **(files or tree()))[1]


def outcome(pushed: list[Any]) -> list[tuple[str, str, int, int | None]]:
    return [(p.name, p.status, p.version, p.previous) for p in pushed]


def test_the_same_tree_pushed_twice_creates_nothing_the_second_time(
    alice: Any, workspace: Any
) -> None:
    first = push(alice)
    assert outcome(first) == [
        ("echo", "created", 1, None),
        ("fixer", "created", 1, None),
        ("qa", "created", 1, None),
    ]
    assert [p.changes for p in first] == [["new"]] * 3
    second = push(alice)
    assert outcome(second) == [
        ("echo", "unchanged", 1, 1),
        ("fixer", "unchanged", 1, 1),
        ("qa", "unchanged", 1, 1),
    ]
    assert (HarnessVersion.objects.count(), DatasetVersion.objects.count()) == (2, 1)
    fixer = second[1].harness
    assert fixer.source == AGENT and fixer.spec["output"] == "claude-stream-json"


def test_one_changed_file_is_one_new_version_and_says_what_changed(
    alice: Any, workspace: Any
) -> None:
    push(alice)
    pushed = push(alice, **tree(echo={**ECHO, "timeout_s": 60, "env": {"NO_COLOR": "1"}}))
    assert outcome(pushed)[0] == ("echo", "created", 2, 1)
    assert pushed[0].changes == ['env.NO_COLOR added: "1"', "timeout_s: 30 → 60"]
    assert [p.status for p in pushed[1:]] == ["unchanged", "unchanged"]
    assert HarnessVersion.objects.filter(name="echo").count() == 2
    assert HarnessVersion.objects.get(name="echo", version=1).spec["timeout_s"] == 30


def test_a_spec_written_with_its_defaults_or_without_is_the_same_version(
    alice: Any, workspace: Any
) -> None:
    push(alice)
    spelled_out = {**ECHO, "env": {}, "output": "text", "grader": {"type": "exact"}}
    assert push(alice, **tree(echo=spelled_out))[0].status == "unchanged"


def test_a_dataset_says_how_many_cases_were_added_removed_and_changed(
    alice: Any, workspace: Any
) -> None:
    push(alice)
    cases = [
        {"key": "a", "input": {"text": "hi"}, "expected": "HI"},
        {"key": "c", "input": {"text": "new"}, "expected": "new"},
    ]
    pushed = push(alice, **tree(cases=cases))
    assert outcome(pushed)[2] == ("qa", "created", 2, 1)
    assert pushed[2].changes == ["1 case added", "1 case removed", "1 case changed"]
    latest = DatasetVersion.objects.get(name="qa", version=2)
    keys = list(Case.objects.filter(dataset=latest).order_by("position").values_list("key"))
    assert keys == [("a",), ("c",)]


def test_a_dry_run_says_what_would_be_created_and_creates_nothing(
    alice: Any, workspace: Any
) -> None:
    push(alice)
    pushed = push(alice, dry_run=True, **tree(echo={**ECHO, "timeout_s": 5}))
    assert outcome(pushed)[0] == ("echo", "would create", 2, 1)
    assert pushed[0].changes == ["timeout_s: 30 → 5"]
    assert HarnessVersion.objects.filter(name="echo").count() == 1


def test_a_bad_file_refuses_the_push_naming_file_and_line_and_nothing_is_created(
    alice: Any, workspace: Any
) -> None:
    files = tree(cases=[CASES[0], {"key": "", "input": {}}, CASES[1]])
    files["harnesses"].append(HarnessFile(".everdict/harnesses/bad.yaml", "bad", {"agent": {}}))
    with pytest.raises(Invalid) as refused:
        push(alice, **files)
    detail = refused.value.detail
    assert isinstance(detail, dict)
    problems = detail["detail"].splitlines()
    assert problems[0].startswith(".everdict/harnesses/bad.yaml: agent.cli: Field required")
    assert (
        ".everdict/datasets/qa.jsonl:2: cases[1].key: String should have at least 1"
        in (problems[-1])
    )
    assert not HarnessVersion.objects.exists() and not DatasetVersion.objects.exists()


def test_a_pattern_only_a_backtracking_engine_runs_is_refused_with_its_file(
    alice: Any, workspace: Any
) -> None:
    echo = {**ECHO, "retry_on": {"output_regex": r"(a)\1"}}
    with pytest.raises(Invalid, match=r"echo.yaml: retry_on.output_regex"):
        push(alice, **tree(echo=echo))
    assert not HarnessVersion.objects.exists()


def test_two_files_of_one_name_are_refused(alice: Any, workspace: Any) -> None:
    files = tree()
    files["harnesses"].append(HarnessFile(".everdict/harnesses/echo.json", "echo", ECHO))
    with pytest.raises(
        Invalid, match=re.escape("echo.json: harness 'echo' is in .everdict/harnesses/echo")
    ):
        push(alice, **files)


def test_only_an_admin_may_push_and_an_outsider_is_told_nothing(
    bob: Any, charlie: Any, workspace: Any
) -> None:
    with pytest.raises(Forbidden):
        push(bob)
    with pytest.raises(NotFound):
        push(charlie)
    assert not HarnessVersion.objects.exists()


def test_without_a_workspace_it_is_the_one_the_member_administers(
    alice: Any, bob: Any, workspace: Any
) -> None:
    workspace_of, pushed = catalog_push(user=alice, workspace_slug=None, **tree())
    assert workspace_of.slug == "acme" and len(pushed) == 3
    other = Workspace.objects.create(slug="beta", name="Beta")
    Membership.objects.create(workspace=other, user=alice, role=Role.OWNER)
    with pytest.raises(Invalid, match="you are an admin of: acme, beta"):
        catalog_push(user=alice, workspace_slug=None, **tree())
    with pytest.raises(Invalid, match="admin of: none"):
        catalog_push(
            user=get_user_model().objects.create_user("eve"), workspace_slug=None, **tree()
        )
