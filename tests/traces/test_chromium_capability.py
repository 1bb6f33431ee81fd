"""A browser case needs chromium on the member's machine: the runner finds it on its PATH
(Debian's `chromium`, or `chromium-browser`) and offers the capability `chromium`; the run
form says a runner without it "needs chromium"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from runnercli.config import detected_capabilities
from scorecards.selectors.runs import runtime_refusal
from tests.scorecards.test_pages import _options
from tests.suites import ECHO_SPEC, pair, suite


def program(directory: Path, name: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\necho 'Chromium 1.2.3'\n")
    path.chmod(0o755)


@pytest.mark.parametrize("name", ["chromium", "chromium-browser"])
def test_the_runner_offers_chromium_when_it_is_on_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "chromium" not in detected_capabilities()
    program(tmp_path, name)
    assert "chromium" in detected_capabilities()


def test_a_runner_without_chromium_needs_it(
    client: Client, alice: Any, workspace: Any, db: Any
) -> None:
    assert runtime_refusal(["chromium", "gpu"], []) == (
        "lacks gpu; needs chromium (install it on that machine)"
    )
    suite(alice, spec={**ECHO_SPEC, "capabilities": ["chromium"]}, name="browser")
    plain = pair(alice, "plain")
    browsing = pair(alice, "browsing", capabilities=["python", "chromium"])
    client.force_login(alice)
    page = client.get("/w/acme/runs/new?harness=browser").content.decode()
    options = _options(page, "runtime")
    assert "disabled" in options[f"self:{plain.pk}"]
    assert "needs chromium (install it on that machine)" in options[f"self:{plain.pk}"]
    assert "disabled" not in options[f"self:{browsing.pk}"]
