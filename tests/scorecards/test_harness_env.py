"""A harness may not set what changes what runs on a member's machine: 400 at creation."""

from __future__ import annotations

from typing import Any

import pytest

from scorecards.models import HarnessVersion
from tests.scorecards.test_catalog_api import HARNESSES, SPEC, Api

pytestmark = pytest.mark.django_db

# Every name the design refuses, and examples of each refused prefix (LD_*, DYLD_*,
# GIT_CONFIG*), written here rather than read from the code under test.
REFUSED = [
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "IFS",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYOPT",
    "RUBYLIB",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "Path",
    "ld_preload",
]


@pytest.fixture
def as_alice(alice: Any, workspace: Any) -> Api:
    return Api(alice)


HARMLESS = ["PYTHONUNBUFFERED", "NO_COLOR", "PYTHONIOENCODING", "GIT_AUTHOR_NAME", "PATHEXT_X"]


@pytest.mark.parametrize("key", REFUSED)
def test_each_refused_environment_key_is_a_400_naming_it(as_alice: Api, key: str) -> None:
    reply = as_alice.post(HARNESSES, {"name": "h", "spec": {**SPEC, "env": {key: "x"}}})
    assert reply.status_code == 400, reply.content
    [message] = reply.json()["spec"]
    assert message.startswith(f"env: a harness may not set {key}: "), message
    assert not HarnessVersion.objects.exists()


def test_several_refused_keys_are_all_named(as_alice: Api) -> None:
    env = {"PATH": "/x", "NO_COLOR": "1", "LD_PRELOAD": "/y.so"}
    reply = as_alice.post(HARNESSES, {"name": "h", "spec": {**SPEC, "env": env}})
    assert reply.status_code == 400
    assert "a harness may not set LD_PRELOAD, PATH:" in reply.json()["spec"][0]


def test_harmless_environment_keys_are_accepted(as_alice: Api, alice: Any) -> None:
    env = dict.fromkeys(HARMLESS, "1")
    reply = as_alice.post(HARNESSES, {"name": "h", "spec": {**SPEC, "env": env}})
    assert reply.status_code == 201, reply.content
    assert HarnessVersion.objects.get().spec["env"] == env
