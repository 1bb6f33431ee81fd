"""Settings read from the environment: safe defaults, and bad values refused by name."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ROOT

pytestmark = pytest.mark.once

SHOW = (
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.DEBUG); print(settings.SECRET_KEY)"
)


def settings_of(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Load the settings in a process of their own, with this environment."""
    child = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    child.update(
        DJANGO_SETTINGS_MODULE="everdict.settings",
        EVERDICT_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", SHOW],
        cwd=ROOT,
        env=child,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_debug_is_off_and_the_embedded_default_generates_its_secret_key_once(
    tmp_path: Path,
) -> None:
    first = settings_of(tmp_path)
    assert first.returncode == 0, first.stderr
    debug, key = first.stdout.split()
    assert debug == "False" and len(key) >= 50
    kept = tmp_path / "var" / "secret_key"
    assert kept.read_text().strip() == key
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert f"generated one in {kept}" in first.stderr
    again = settings_of(tmp_path)
    assert again.stdout.split()[1] == key
    assert "generated" not in again.stderr
    given = settings_of(tmp_path, SECRET_KEY="from-the-environment")
    assert given.stdout.split() == ["False", "from-the-environment"]


def test_an_idle_timeout_not_above_the_presence_write_interval_is_refused(
    tmp_path: Path,
) -> None:
    done = settings_of(tmp_path, EVERDICT_QUEUE_IDLE_TIMEOUT_S="15", EVERDICT_PRESENCE_WRITE_S="15")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "EVERDICT_QUEUE_IDLE_TIMEOUT_S (15) must be above EVERDICT_PRESENCE_WRITE_S" in (
        done.stderr
    )
    shortened = settings_of(
        tmp_path, EVERDICT_QUEUE_IDLE_TIMEOUT_S="8", EVERDICT_PRESENCE_WRITE_S="2"
    )
    assert shortened.returncode == 0, shortened.stderr


def test_a_long_poll_above_the_protocols_is_refused(tmp_path: Path) -> None:
    done = settings_of(tmp_path, EVERDICT_MAX_WAIT_MS="90000")
    assert done.returncode != 0
    assert "EVERDICT_MAX_WAIT_MS must be <= 55000" in done.stderr
