from __future__ import annotations

import subprocess
import sys
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from accounts.services import api_key_authenticate
from tests.live import ROOT, server_env


@pytest.mark.django_db
def test_create_api_key_prints_only_a_key_that_authenticates(alice: Any) -> None:
    out, err = StringIO(), StringIO()

    call_command("create_api_key", "alice", "--name", "ci", stdout=out, stderr=err)

    key = out.getvalue()
    assert key.endswith("\n") and key.count("\n") == 1
    key = key.strip()
    assert key.startswith("evk_")
    api_key = api_key_authenticate(key)
    assert api_key is not None
    assert api_key.user == alice and api_key.name == "ci"
    assert err.getvalue() == ""


@pytest.mark.django_db
def test_create_api_key_refuses_an_unknown_user() -> None:
    with pytest.raises(CommandError, match="nobody"):
        call_command("create_api_key", "nobody", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_create_api_key_stdout_is_the_key_alone_when_run_as_a_command(alice: Any) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "create_api_key", "alice"],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evk_")
    assert api_key_authenticate(lines[0]) is not None
