"""In Debian's chromium: the compare page leads with whether B differs beyond noise — the
sentence and the interval of the difference — before the per-case table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bulk import seeded_run

from tests.browser.test_run_page import Console, browser, log_in
from tests.live import daphne

__all__ = ["browser"]

pytestmark = [pytest.mark.browser, pytest.mark.once, pytest.mark.e2e]
CASES = 40


def passes_below(n: int, *extra: int) -> Any:
    return lambda case, repeat: "pass" if case < n or case in extra else "fail"


@pytest.fixture
def runs(transactional_db: Any, alice: Any, workspace: Any) -> tuple[int, int, int]:
    """A: 30 of 40 pass. B: 9 of those fail and one other passes (p = 22/1024). Noise: 2
    fail and one other passes (p = 1). Written before the browser starts its event loop."""
    a = seeded_run(alice, cases=CASES, verdict=passes_below(30))
    worse = seeded_run(alice, cases=CASES, verdict=passes_below(21, 35))
    noise = seeded_run(alice, cases=CASES, verdict=passes_below(28, 35))
    return a.pk, worse.pk, noise.pk


def test_the_compare_page_leads_with_the_verdict_and_its_interval(
    runs: tuple[int, int, int], browser: Any, tmp_path: Path
) -> None:
    a, worse, noise = runs
    console = Console()
    with daphne(tmp_path) as server:
        page = console.watch(browser.new_page())
        log_in(page, server.url)

        page.goto(f"{server.url}/w/acme/compare?a={a}&b={worse}")
        sentence = page.locator("#compare-sentence")
        text = sentence.inner_text()
        assert text.startswith("pass rate 75 % [")
        assert "Δ \u221220 pp [\u2212" in text
        assert text.endswith("p = 0.021 (McNemar, 40 pairs): B is worse")
        # It comes first: above the counts and the per-case table, and drawn as a warning.
        top = sentence.bounding_box()["y"]
        assert top < page.locator("#compare-counts").bounding_box()["y"]
        assert top < page.locator("table.compare").bounding_box()["y"]
        assert "verdict-worse" in (sentence.get_attribute("class") or "")
        assert "10 of them different" in page.inner_text("#compare-numbers")

        page.goto(f"{server.url}/w/acme/compare?a={a}&b={noise}")
        calm = page.inner_text("#compare-sentence")
        assert "p = 1 (McNemar, 40 pairs): no detectable difference — these pairs detect ≥ " in calm
    assert console.errors == []
