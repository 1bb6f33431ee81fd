from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import Case, DatasetVersion, HarnessVersion, Membership, Role

HARNESSES = "/api/workspaces/acme/harnesses"
DATASETS = "/api/workspaces/acme/datasets"
SPEC = {
    "command": ["python", "solve.py", "{input.prompt}"],
    "output": "json",
    "grader": {"type": "contains", "field": "result"},
}
JSONL = (
    '{"key": "paris", "input": {"prompt": "Capital of France?"}, "expected": "Paris"}\n'
    "\n"
    '{"key": "rome", "input": {"prompt": "Capital of Italy?"}, "expected": "Rome"}\n'
)


class Api:
    """The test client speaking as one user, through a personal API key."""

    def __init__(self, user: Any) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {api_key_create(user=user).key}"}

    def get(self, path: str) -> Any:
        return self.client.get(path, headers=self.headers)

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(
            path, json.dumps(body), content_type="application/json", headers=self.headers
        )

    def post_raw(self, path: str, body: str | bytes, content_type: str) -> Any:
        return self.client.post(path, body, content_type=content_type, headers=self.headers)


@pytest.fixture
def as_alice(alice: Any, workspace: Any) -> Api:
    return Api(alice)


@pytest.fixture
def as_bob(bob: Any, workspace: Any) -> Api:
    return Api(bob)


@pytest.fixture
def as_charlie(charlie: Any, workspace: Any) -> Api:
    return Api(charlie)


@pytest.fixture
def as_viewer(workspace: Any) -> Api:
    user = get_user_model().objects.create_user("erin")
    Membership.objects.create(workspace=workspace, user=user, role=Role.VIEWER)
    return Api(user)


# --- harnesses ------------------------------------------------------------------------------


def test_posting_a_harness_creates_version_one(as_alice: Api) -> None:
    response = as_alice.post(HARNESSES, {"name": "capitals", "spec": SPEC})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["version"]) == ("capitals", 1)
    assert body["spec"]["timeout_s"] == 600


def test_posting_again_creates_a_new_version_and_keeps_the_old_one(as_alice: Api) -> None:
    as_alice.post(HARNESSES, {"name": "capitals", "spec": SPEC})
    response = as_alice.post(HARNESSES, {"name": "capitals", "spec": {**SPEC, "timeout_s": 30}})
    assert response.json()["version"] == 2
    first = HarnessVersion.objects.get(name="capitals", version=1)
    assert first.spec["timeout_s"] == 600


def test_listing_harnesses_shows_the_latest_versions(as_alice: Api, as_viewer: Api) -> None:
    as_alice.post(HARNESSES, {"name": "capitals", "spec": SPEC})
    as_alice.post(HARNESSES, {"name": "capitals", "spec": {**SPEC, "timeout_s": 30}})
    as_alice.post(HARNESSES, {"name": "arith", "spec": {"command": ["calc"]}})
    response = as_viewer.get(HARNESSES)
    assert response.status_code == 200
    items = response.json()
    assert [(i["name"], i["version"], i["versions"]) for i in items] == [
        ("arith", 1, 1),
        ("capitals", 2, 2),
    ]
    assert items[1]["spec"]["timeout_s"] == 30
    assert set(items[0]) == {
        "name",
        "version",
        "versions",
        "spec",
        "source",
        "created_at",
        "people_agreement",
    }
    assert items[0]["people_agreement"] == []


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({**SPEC, "command": "python solve.py"}, "argv list"),
        ({**SPEC, "grader": {"type": "vibes"}}, "grader.type"),
        ({**SPEC, "timeout_s": -1}, "timeout_s"),
        ({**SPEC, "shell": True}, "shell: Extra inputs are not permitted"),
    ],
)
def test_an_invalid_spec_is_a_400_with_the_reason(as_alice: Api, spec: Any, reason: str) -> None:
    response = as_alice.post(HARNESSES, {"name": "capitals", "spec": spec})
    assert response.status_code == 400
    assert any(reason in m for m in response.json()["spec"]), response.json()
    assert not HarnessVersion.objects.exists()


@pytest.mark.parametrize(
    "body",
    [{"name": "capitals"}, {"spec": SPEC}, {"name": "bad name", "spec": SPEC}, [], "text"],
)
def test_a_malformed_harness_body_is_a_400(as_alice: Api, body: Any) -> None:
    assert as_alice.post(HARNESSES, body).status_code == 400
    assert not HarnessVersion.objects.exists()


def test_malformed_json_is_a_400_not_a_500(as_alice: Api) -> None:
    response = as_alice.post_raw(HARNESSES, '{"name": "x", "spec": {', "application/json")
    assert response.status_code == 400
    assert "detail" in response.json()


def test_a_member_may_not_create_a_harness_but_may_list(as_bob: Api) -> None:
    assert as_bob.post(HARNESSES, {"name": "capitals", "spec": SPEC}).status_code == 403
    assert as_bob.get(HARNESSES).status_code == 200


def test_a_viewer_may_not_create_a_harness(as_viewer: Api) -> None:
    assert as_viewer.post(HARNESSES, {"name": "capitals", "spec": SPEC}).status_code == 403


def test_someone_outside_gets_404_for_everything(as_charlie: Api) -> None:
    assert as_charlie.post(HARNESSES, {"name": "capitals", "spec": SPEC}).status_code == 404
    assert as_charlie.get(HARNESSES).status_code == 404
    assert as_charlie.post(DATASETS, {"name": "d", "cases": [{"key": "a"}]}).status_code == 404
    assert as_charlie.get(DATASETS).status_code == 404


def test_an_unknown_workspace_is_a_404(as_alice: Api) -> None:
    response = as_alice.get("/api/workspaces/nowhere/harnesses")
    assert response.status_code == 404


def test_no_credentials_is_a_401(workspace: Any) -> None:
    assert Client().get(HARNESSES).status_code == 401


# --- datasets -------------------------------------------------------------------------------


def test_posting_a_json_dataset_creates_a_version(as_alice: Api) -> None:
    cases = [{"key": "a", "input": {"x": 1}, "expected": "1"}, {"key": "b"}]
    response = as_alice.post(DATASETS, {"name": "numbers", "cases": cases})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["version"], body["cases"]) == ("numbers", 1, 2)
    again = as_alice.post(DATASETS, {"name": "numbers", "cases": cases[:1]}).json()
    assert (again["version"], again["cases"]) == (2, 1)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-ndjson",
        "application/jsonl",
        "text/plain",
        "application/x-ndjson; charset=utf-8",
    ],
)
def test_a_jsonl_body_imports_a_dataset(as_alice: Api, content_type: str) -> None:
    response = as_alice.post_raw(f"{DATASETS}?name=capitals", JSONL, content_type)
    assert response.status_code == 201, response.content
    assert (response.json()["version"], response.json()["cases"]) == (1, 2)
    dataset = DatasetVersion.objects.get()
    assert list(dataset.cases.values_list("key", "expected")) == [
        ("paris", "Paris"),
        ("rome", "Rome"),
    ]


def test_a_bad_jsonl_line_is_a_400_naming_the_line(as_alice: Api) -> None:
    body = JSONL + '{"key": "oops"\n'
    response = as_alice.post_raw(f"{DATASETS}?name=capitals", body, "application/x-ndjson")
    assert response.status_code == 400
    [message] = response.json()["cases"]
    assert message.startswith("line 4:")
    assert not DatasetVersion.objects.exists()


def test_a_jsonl_body_needs_a_name(as_alice: Api) -> None:
    response = as_alice.post_raw(DATASETS, JSONL, "application/x-ndjson")
    assert response.status_code == 400
    assert "name" in response.json()


def test_a_jsonl_body_of_blank_lines_is_a_400(as_alice: Api) -> None:
    response = as_alice.post_raw(f"{DATASETS}?name=capitals", "\n \n", "application/x-ndjson")
    assert response.status_code == 400
    assert "at least one case" in response.json()["cases"][0]


def test_a_jsonl_body_that_is_not_utf8_is_a_400(as_alice: Api) -> None:
    response = as_alice.post_raw(f"{DATASETS}?name=c", b'{"key": "\xff"}', "application/x-ndjson")
    assert response.status_code == 400


def test_duplicate_case_keys_are_a_400_and_nothing_is_created(as_alice: Api) -> None:
    cases = [{"key": "a"}, {"key": "a"}]
    response = as_alice.post(DATASETS, {"name": "dups", "cases": cases})
    assert response.status_code == 400
    assert response.json() == {"cases": ["Duplicate case keys: 'a'."]}
    assert not DatasetVersion.objects.exists()
    assert not Case.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "d"},
        {"cases": [{"key": "a"}]},
        {"name": "d", "cases": "not a list"},
        {"name": "d", "cases": [{"key": "a", "answer": 1}]},
        {"name": "d", "cases": []},
    ],
)
def test_a_malformed_dataset_body_is_a_400(as_alice: Api, body: Any) -> None:
    assert as_alice.post(DATASETS, body).status_code == 400
    assert not DatasetVersion.objects.exists()


def test_an_unsupported_content_type_is_a_415(as_alice: Api) -> None:
    response = as_alice.post_raw(f"{DATASETS}?name=c", "<cases/>", "application/xml")
    assert response.status_code == 415


def test_only_an_admin_may_create_a_dataset(as_bob: Api, as_viewer: Api) -> None:
    body = {"name": "d", "cases": [{"key": "a"}]}
    assert as_bob.post(DATASETS, body).status_code == 403
    assert as_viewer.post(DATASETS, body).status_code == 403
    assert as_bob.post_raw(f"{DATASETS}?name=d", JSONL, "application/x-ndjson").status_code == 403


def test_listing_datasets_shows_the_latest_versions(as_alice: Api, as_viewer: Api) -> None:
    as_alice.post(DATASETS, {"name": "capitals", "cases": [{"key": "a"}]})
    as_alice.post_raw(f"{DATASETS}?name=capitals", JSONL, "application/x-ndjson")
    response = as_viewer.get(DATASETS)
    assert response.status_code == 200
    [item] = response.json()
    assert (item["name"], item["version"], item["versions"], item["cases"]) == (
        "capitals",
        2,
        2,
        2,
    )


def test_the_schema_documents_the_catalog_routes(as_alice: Api) -> None:
    response = as_alice.get("/api/schema/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "/api/workspaces/{slug}/harnesses" in text
    assert "/api/workspaces/{slug}/datasets" in text
