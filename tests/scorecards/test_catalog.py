from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from core.errors import Forbidden, Invalid, NotFound
from scorecards.models import Case, DatasetVersion, HarnessVersion, Membership, Role
from scorecards.selectors.catalog import dataset_get, dataset_list, harness_get, harness_list
from scorecards.services import (
    dataset_create,
    dataset_parse_jsonl,
    harness_create,
    workspace_create,
)
from scorecards.services.catalog import MAX_CASES

SPEC = {
    "command": ["python", "solve.py", "{input.prompt}"],
    "timeout_s": 60,
    "output": "json",
    "grader": {"type": "contains", "field": "result"},
}
CASES = [
    {"key": "paris", "input": {"prompt": "Capital of France?"}, "expected": "Paris"},
    {"key": "rome", "input": {"prompt": "Capital of Italy?"}, "expected": "Rome"},
]


@pytest.fixture
def dave(workspace: Any) -> Any:
    """An admin of acme."""
    user = get_user_model().objects.create_user("dave")
    Membership.objects.create(workspace=workspace, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def erin(workspace: Any) -> Any:
    """A viewer of acme."""
    user = get_user_model().objects.create_user("erin")
    Membership.objects.create(workspace=workspace, user=user, role=Role.VIEWER)
    return user


def reasons(refused: Invalid, field: str) -> list[str]:
    assert isinstance(refused.detail, dict), refused.detail
    return list(refused.detail[field])


def new_harness(user: Any, name: str = "capitals", spec: Any = None) -> HarnessVersion:
    return harness_create(
        user=user, workspace_slug="acme", name=name, spec=SPEC if spec is None else spec
    )


def new_dataset(user: Any, name: str = "capitals", cases: Any = None) -> DatasetVersion:
    return dataset_create(
        user=user, workspace_slug="acme", name=name, cases=CASES if cases is None else cases
    )


# --- harnesses ------------------------------------------------------------------------------


def test_each_create_makes_the_next_version_of_that_name(alice: Any, workspace: Any) -> None:
    assert [new_harness(alice).version for _ in range(3)] == [1, 2, 3]
    assert new_harness(alice, name="other").version == 1


def test_versions_are_numbered_per_workspace(alice: Any, workspace: Any) -> None:
    workspace_create(user=alice, slug="globex", name="Globex")
    new_harness(alice)
    other = harness_create(user=alice, workspace_slug="globex", name="capitals", spec=SPEC)
    assert other.version == 1


def test_a_new_version_leaves_the_old_spec_unchanged(alice: Any, workspace: Any) -> None:
    first = new_harness(alice)
    new_harness(alice, spec={**SPEC, "timeout_s": 5, "command": ["other"]})
    first.refresh_from_db()
    assert first.spec["timeout_s"] == 60
    assert first.spec["command"] == ["python", "solve.py", "{input.prompt}"]


def test_the_stored_spec_is_the_validated_one_with_defaults(alice: Any, workspace: Any) -> None:
    harness = new_harness(alice, spec={"command": ["echo", "hi"]})
    assert harness.spec == {
        "command": ["echo", "hi"],
        "env": {},
        "timeout_s": 600,
        "capabilities": [],
        "output": "text",
        "grader": {"type": "exact", "field": None},
    }
    assert harness.created_by == alice


def test_an_admin_may_create_a_harness(dave: Any) -> None:
    assert new_harness(dave).version == 1


def test_a_member_may_not_create_a_harness(bob: Any, workspace: Any) -> None:
    with pytest.raises(Forbidden):
        new_harness(bob)
    assert not HarnessVersion.objects.exists()


def test_someone_outside_gets_not_found(charlie: Any, workspace: Any) -> None:
    with pytest.raises(NotFound):
        new_harness(charlie)
    with pytest.raises(NotFound):
        harness_list(user=charlie, workspace_slug="acme")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({**SPEC, "command": "python solve.py"}, "argv list"),
        ({**SPEC, "command": []}, "command"),
        ({**SPEC, "command": ["  "]}, "command[0] must name a program"),
        ({**SPEC, "grader": {"type": "vibes"}}, "grader.type"),
        ({**SPEC, "timeout_s": -5}, "timeout_s"),
        ({**SPEC, "shell": True}, "shell: Extra inputs are not permitted"),
        ({**SPEC, "capabilities": ["Has Spaces"]}, "capabilities[0]"),
        ({**SPEC, "env": {"1BAD": "x"}}, "invalid environment variable name"),
        ({**SPEC, "env": {"OK": "a\x00b"}}, "NUL"),
        ({**SPEC, "output": "yaml"}, "output"),
        ("python solve.py", "JSON object"),
    ],
)
def test_an_invalid_spec_is_refused_with_its_reason_and_nothing_is_stored(
    alice: Any, workspace: Any, spec: Any, reason: str
) -> None:
    with pytest.raises(Invalid) as refused:
        new_harness(alice, spec=spec)
    messages = reasons(refused.value, "spec")
    assert any(reason in m for m in messages), messages
    assert not HarnessVersion.objects.exists()


@pytest.mark.parametrize("name", ["", "-dash-first", "has space", "x" * 101, "a/b"])
def test_a_bad_name_is_refused(alice: Any, workspace: Any, name: str) -> None:
    with pytest.raises(Invalid) as refused:
        new_harness(alice, name=name)
    assert "name" in refused.value.detail


def test_harness_get_returns_the_latest_or_the_asked_version(alice: Any, workspace: Any) -> None:
    new_harness(alice)
    second = new_harness(alice)
    assert harness_get(workspace=workspace, name="capitals", version=None) == second
    assert harness_get(workspace=workspace, name="capitals", version=1).version == 1


def test_harness_get_names_what_it_did_not_find(alice: Any, workspace: Any) -> None:
    new_harness(alice)
    with pytest.raises(NotFound, match=r"Harness 'capitals' v7 not found"):
        harness_get(workspace=workspace, name="capitals", version=7)
    with pytest.raises(NotFound, match=r"Harness 'nope' not found in workspace 'acme'"):
        harness_get(workspace=workspace, name="nope", version=None)


def test_harness_get_does_not_cross_workspaces(alice: Any, workspace: Any) -> None:
    globex = workspace_create(user=alice, slug="globex", name="Globex")
    new_harness(alice)
    with pytest.raises(NotFound):
        harness_get(workspace=globex, name="capitals", version=None)


def test_harness_list_shows_each_name_at_its_latest_version(
    alice: Any, bob: Any, erin: Any, workspace: Any
) -> None:
    new_harness(alice, name="b-harness")
    new_harness(alice, name="a-harness")
    latest = new_harness(alice, name="a-harness", spec={"command": ["v2"]})
    entries = harness_list(user=erin, workspace_slug="acme")
    assert [(e.latest.name, e.latest.version, e.versions) for e in entries] == [
        ("a-harness", 2, 2),
        ("b-harness", 1, 1),
    ]
    assert entries[0].latest == latest
    assert entries[0].latest.spec["command"] == ["v2"]
    assert len(harness_list(user=bob, workspace_slug="acme")) == 2


# --- datasets -------------------------------------------------------------------------------


def test_a_dataset_keeps_its_cases_in_order(alice: Any, workspace: Any) -> None:
    dataset = new_dataset(alice)
    assert dataset.version == 1
    assert dataset.case_count == 2
    cases = list(Case.objects.filter(dataset=dataset))
    assert [(c.position, c.key, c.input, c.expected) for c in cases] == [
        (0, "paris", {"prompt": "Capital of France?"}, "Paris"),
        (1, "rome", {"prompt": "Capital of Italy?"}, "Rome"),
    ]


def test_input_and_expected_are_optional(alice: Any, workspace: Any) -> None:
    dataset = new_dataset(alice, cases=[{"key": "a"}, {"key": "b", "input": None}])
    assert [(c.input, c.expected) for c in Case.objects.filter(dataset=dataset)] == [
        ({}, None),
        ({}, None),
    ]


def test_any_json_is_a_valid_input_or_expected_value(alice: Any, workspace: Any) -> None:
    cases = [
        {"key": "list", "input": [1, "two", None], "expected": {"a": [True, 1.5]}},
        {"key": "scalar", "input": "just text", "expected": 0},
    ]
    dataset = new_dataset(alice, cases=cases)
    stored = {c.key: (c.input, c.expected) for c in Case.objects.filter(dataset=dataset)}
    assert stored == {
        "list": ([1, "two", None], {"a": [True, 1.5]}),
        "scalar": ("just text", 0),
    }


def test_each_dataset_create_is_a_new_version_and_the_old_cases_stay(
    alice: Any, workspace: Any
) -> None:
    first = new_dataset(alice)
    second = new_dataset(alice, cases=[{"key": "only", "expected": "x"}])
    assert second.version == 2
    assert list(first.cases.values_list("key", flat=True)) == ["paris", "rome"]
    assert list(second.cases.values_list("key", flat=True)) == ["only"]


def test_duplicate_case_keys_are_named_and_nothing_is_stored(alice: Any, workspace: Any) -> None:
    cases = [{"key": "a"}, {"key": "b"}, {"key": "a"}, {"key": "c"}, {"key": "c"}]
    with pytest.raises(Invalid) as refused:
        new_dataset(alice, cases=cases)
    assert refused.value.detail == {"cases": ["Duplicate case keys: 'a', 'c'."]}
    assert not DatasetVersion.objects.exists()
    assert not Case.objects.exists()


@pytest.mark.parametrize(
    ("cases", "reason"),
    [
        ([], "at least one case"),
        ({"key": "a"}, "list of cases"),
        ([{"key": "a", "answer": 1}], "cases[0].answer: Extra inputs are not permitted"),
        ([{"key": "ok"}, {"input": {}}], "cases[1].key: Field required"),
        ([{"key": ""}], "cases[0].key"),
        ([{"key": "x" * 201}], "cases[0].key"),
        ([{"key": 7}], "cases[0].key"),
        (["just a string"], "cases[0]"),
        ([{"key": "nan", "input": {"x": float("nan")}}], "cases[0].input"),
        ([{"key": "nul", "expected": "a\x00b"}], "NUL"),
        ([{"key": "a\x00b"}], "NUL"),
    ],
)
def test_invalid_cases_are_refused_with_their_location(
    alice: Any, workspace: Any, cases: Any, reason: str
) -> None:
    with pytest.raises(Invalid) as refused:
        new_dataset(alice, cases=cases)
    messages = reasons(refused.value, "cases")
    assert any(reason in m for m in messages), messages
    assert not DatasetVersion.objects.exists()


def test_too_many_cases_are_refused(alice: Any, workspace: Any) -> None:
    with pytest.raises(Invalid, match="at most"):
        new_dataset(alice, cases=[{"key": str(i)} for i in range(MAX_CASES + 1)])


def test_a_large_dataset_is_stored_in_batches(alice: Any, workspace: Any) -> None:
    dataset = new_dataset(alice, cases=[{"key": f"k{i}", "input": {"n": i}} for i in range(2500)])
    assert dataset.case_count == 2500 == dataset.cases.count()
    last = dataset.cases.order_by("position").last()
    assert last is not None
    assert (last.position, last.key, last.input) == (2499, "k2499", {"n": 2499})


def test_only_an_admin_may_create_a_dataset(
    bob: Any, erin: Any, charlie: Any, dave: Any, workspace: Any
) -> None:
    with pytest.raises(Forbidden):
        new_dataset(bob)
    with pytest.raises(Forbidden):
        new_dataset(erin)
    with pytest.raises(NotFound):
        new_dataset(charlie)
    assert not DatasetVersion.objects.exists()
    assert new_dataset(dave).version == 1


def test_dataset_get_returns_the_latest_or_the_asked_version(alice: Any, workspace: Any) -> None:
    new_dataset(alice)
    second = new_dataset(alice)
    assert dataset_get(workspace=workspace, name="capitals", version=None) == second
    assert dataset_get(workspace=workspace, name="capitals", version=1).version == 1
    with pytest.raises(NotFound, match=r"Dataset 'capitals' v3 not found"):
        dataset_get(workspace=workspace, name="capitals", version=3)
    with pytest.raises(NotFound, match=r"Dataset 'nope' not found"):
        dataset_get(workspace=workspace, name="nope", version=None)


def test_dataset_list_shows_each_name_at_its_latest_version(
    alice: Any, erin: Any, workspace: Any
) -> None:
    new_dataset(alice)
    new_dataset(alice, cases=[{"key": "one"}])
    new_dataset(alice, name="another")
    entries = dataset_list(user=erin, workspace_slug="acme")
    assert [
        (e.latest.name, e.latest.version, e.latest.case_count, e.versions) for e in entries
    ] == [
        ("another", 1, 2, 1),
        ("capitals", 2, 1, 2),
    ]


def test_an_empty_workspace_lists_nothing(bob: Any, workspace: Any) -> None:
    assert harness_list(user=bob, workspace_slug="acme") == []
    assert dataset_list(user=bob, workspace_slug="acme") == []


# --- JSONL ----------------------------------------------------------------------------------


def test_jsonl_is_one_case_per_line_and_blank_lines_are_skipped() -> None:
    text = '{"key": "a", "expected": "1"}\n\n   \n{"key": "b", "input": {"x": 2}}\r\n'
    assert dataset_parse_jsonl(text) == [
        {"key": "a", "expected": "1"},
        {"key": "b", "input": {"x": 2}},
    ]


def test_a_bad_jsonl_line_is_named_by_its_number() -> None:
    text = '{"key": "a"}\n\n{"key": "b",\n{"key": "c"}\n'
    with pytest.raises(Invalid) as refused:
        dataset_parse_jsonl(text)
    [message] = reasons(refused.value, "cases")
    assert message.startswith("line 3: not valid JSON")


def test_a_jsonl_line_is_not_split_at_the_separators_a_json_string_may_hold_raw() -> None:
    # U+0085, U+2028 and U+2029 end a line for str.splitlines, not for JSON Lines; a JSON
    # string may hold them unescaped (ensure_ascii=False, JavaScript's JSON.stringify).
    said = "one\u2028two\u0085three\u2029"
    text = json.dumps({"key": "a", "expected": said}, ensure_ascii=False) + '\n{"key": "b"}\n'
    assert "\u2028" in text
    assert dataset_parse_jsonl(text) == [{"key": "a", "expected": said}, {"key": "b"}]


def test_a_jsonl_line_that_is_not_an_object_is_named() -> None:
    with pytest.raises(Invalid) as refused:
        dataset_parse_jsonl('{"key": "a"}\n[1, 2]\n"text"\n')
    assert reasons(refused.value, "cases") == [
        "line 2: must be a JSON object",
        "line 3: must be a JSON object",
    ]


def test_jsonl_refuses_nan() -> None:
    with pytest.raises(Invalid, match="line 1"):
        dataset_parse_jsonl('{"key": "a", "expected": NaN}')


def test_jsonl_cases_are_stored_like_any_others(alice: Any, workspace: Any) -> None:
    cases = dataset_parse_jsonl('{"key": "a", "expected": "x"}\n{"key": "b"}\n')
    dataset = new_dataset(alice, cases=cases)
    assert dataset.case_count == 2


# --- concurrency ----------------------------------------------------------------------------


def test_concurrent_creates_never_share_a_version_number(
    transactional_db: Any, alice: Any, workspace: Any
) -> None:
    errors: list[BaseException] = []

    def create_some(kind: str) -> None:
        try:
            for _ in range(4):
                if kind == "harness":
                    new_harness(alice)
                else:
                    new_dataset(alice)
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=create_some, args=(kind,))
        for kind in ("harness", "harness", "harness", "dataset", "dataset", "dataset")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    harness_versions = HarnessVersion.objects.values_list("version", flat=True)
    dataset_versions = DatasetVersion.objects.values_list("version", flat=True)
    assert sorted(harness_versions) == list(range(1, 13))
    assert sorted(dataset_versions) == list(range(1, 13))
