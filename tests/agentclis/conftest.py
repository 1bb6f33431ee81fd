from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TypeVar

import pytest

from tests.agentclis.clis import AgentHome, agent_home, git_repo
from tests.agentclis.scripted import ScriptedEndpoint

Endpoint = TypeVar("Endpoint", bound=ScriptedEndpoint)


@pytest.fixture
def home() -> Iterator[AgentHome]:
    with agent_home() as made:
        yield made


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"hello.txt": "hello\n", "notes.md": "# Notes\n"})


@pytest.fixture
def serve() -> Iterator[Callable[[Endpoint], Endpoint]]:
    """Start a scripted endpoint for the test; it stops when the test ends."""
    with ExitStack() as stack:

        def start(endpoint: Endpoint) -> Endpoint:
            stack.enter_context(endpoint.serve())
            return endpoint

        yield start
