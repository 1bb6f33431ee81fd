"""A harness's services as the server stores them: a 400 naming what is wrong (the service,
the key, the rule), the rules of the harness's own env, and what a runner then needs (the
feature `services`; `docker` for a container)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runnercli.protocol import HarnessSpec, harness_digest, spec_features
from tests.scorecards.test_catalog_api import HARNESSES, Api

WEB = {"run": ["python", "-m", "http.server", "{port}"], "ready": {"http": "/"}}
DB = {"image": "postgres:16", "ports": [5432], "ready": {"tcp": 5432, "timeout_s": 30}}


@pytest.fixture
def as_alice(alice: Any, workspace: Any) -> Api:
    return Api(alice)


def spec(**services: Any) -> dict[str, Any]:
    return {"command": ["python", "check.py", "{service.web.url}"], "services": services}


@pytest.mark.parametrize(
    ("services", "said"),
    [
        ({"Web": WEB}, "service name 'Web': 1-32 characters of a-z, 0-9 and '_'"),
        (
            {"web": {**WEB, "env": {"LD_PRELOAD": "/x.so"}}},
            "services.web.env: a harness may not set LD_PRELOAD",
        ),
        ({"web": {**WEB, "env": {"1BAD": "x"}}}, "invalid environment variable name: '1BAD'"),
        (
            {"db": {**DB, "ports": [5432, 5432]}},
            "services.db.ports: ports names the same port twice",
        ),
        (
            {"db": {**DB, "ports": [0]}},
            "services.db.ports[0]: Input should be greater than or equal to 1",
        ),
        (
            {"db": {**DB, "ready": {"tcp": 5433}}},
            "ready probes port 5433, which ports does not publish",
        ),
        (
            {"db": {**DB, "ready": {"http": "/", "tcp": 5432}}},
            "ready needs exactly one of tcp: PORT or http: PATH",
        ),
        (
            {"db": {**DB, "ready": {"http": "health", "port": 5432}}},
            "services.db.ready.http: String should match pattern '^/'",
        ),
        ({"db": {**DB, "image": "Not An Image"}}, "image 'Not An Image' is not an image reference"),
        (
            {"db": {**DB, "run": ["x"]}},
            "a service is a container (image) or a process (run), not both",
        ),
        (
            {"web": {**WEB, "cwd": "case"}},
            "a process with cwd: case runs per case: set scope: case",
        ),
        ({"web": {**WEB, "cwd": "repo"}}, "a service with cwd: repo needs the harness's repo"),
        ({"web": {**WEB, "run": [" "]}}, "run[0] must name a program"),
        ({"web": {**WEB, "ports": [80]}}, "command and ports are for a container service (image)"),
        ({f"s{i}": WEB for i in range(17)}, "a harness may declare at most 16 services"),
    ],
)
def test_a_wrong_service_is_refused_with_a_400_naming_it(
    as_alice: Api, services: dict[str, Any], said: str
) -> None:
    response = as_alice.post(HARNESSES, {"name": "site", "spec": spec(**services)})
    assert response.status_code == 400, response.content
    messages = json.loads(response.content)["spec"]
    assert any(said in message for message in messages), messages


def test_services_are_stored_in_the_digest_and_need_the_feature_and_docker(as_alice: Api) -> None:
    given = spec(web=WEB, db=DB)
    response = as_alice.post(HARNESSES, {"name": "site", "spec": given})
    assert response.status_code == 201, response.content
    stored = HarnessSpec.model_validate(given)
    assert stored.required_capabilities() == ["docker"]
    assert spec_features(stored) == ["services"]
    plain = HarnessSpec.model_validate({"command": given["command"]})
    assert harness_digest(stored) != harness_digest(plain)
    other_port = spec(web=WEB, db={**DB, "ports": [5432, 5433]})
    assert harness_digest(HarnessSpec.model_validate(other_port)) != harness_digest(stored)
    processes_only = HarnessSpec.model_validate(spec(web=WEB))
    assert processes_only.required_capabilities() == []
