"""In Debian's chromium: the review queue walked with the keyboard — j/k move, c confirms the
judges' verdict, p passes a case the judges failed — and the run's summary and the judge's
agreement with people then count what was done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from tests.browser.test_run_page import Console, browser, log_in
from tests.live import daphne, rest
from tests.scorecards.test_review import judged_run

__all__ = ["browser"]

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]


@pytest.fixture
def seeded(transactional_db: Any, alice: Any, workspace: Any) -> tuple[int, str]:
    """Written before the browser starts its event loop (the ORM refuses it after)."""
    return judged_run(alice).pk, api_key_create(user=alice).key


def test_the_queue_walked_with_the_keyboard(
    seeded: tuple[int, str], browser: Any, tmp_path: Path
) -> None:
    run, key = seeded
    console = Console()
    with daphne(tmp_path) as server:
        status, before = rest(server.url, "GET", f"/api/runs/{run}", key)
        assert status == 200
        page = console.watch(browser.new_page())
        log_in(page, server.url)
        page.goto(f"{server.url}/w/acme/review?run={run}")
        assert page.inner_text("#review-remaining") == "4 to review"
        current = page.locator(".review-item.current")
        assert current.get_attribute("data-case") == "c0"
        page.keyboard.press("j")
        assert current.get_attribute("data-case") == "c1"
        page.keyboard.press("k")
        assert current.get_attribute("data-case") == "c0"

        page.keyboard.press("c")  # the judges' split pass stands
        page.wait_for_selector(".review-item[data-case=c0].done")
        assert current.get_attribute("data-case") == "c1"
        page.keyboard.press("p")  # the judges said fail: a person's pass
        page.wait_for_selector(".review-item[data-case=c1].done")
        assert page.inner_text("#review-remaining") == "2 to review"
        assert "pass by alice" in page.inner_text(".review-item[data-case=c1] .review-said")

        page.reload()
        assert page.inner_text("#review-remaining") == "2 to review"
        assert [page.locator(".review-item").nth(i).get_attribute("data-case") for i in (0, 1)] == [
            "c2",
            "c3",
        ]
        agreement = page.inner_text("#people-agreement")
        assert "agreed with people on 1 of 2 reviewed, 50 % [9\u201391]" in agreement
        assert "confirm" in page.inner_text("#review-log")

        status, after = rest(server.url, "GET", f"/api/runs/{run}", key)
        assert after["summary"]["pass"] == before["summary"]["pass"] + 1
    assert console.errors == []
