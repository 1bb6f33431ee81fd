"""The case page of a long trace: what a browser loads and how soon it shows the timeline.

Used by `trace_screens.py`. The trace is seeded through the server's own service, in batches
as a runner sends them; the page is opened in headless chromium (Debian's), a fresh context
each time, and measured from navigation to the first timeline row painted: the bytes the
browser received by then (the page and every request it made) and the time.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass
from typing import Any

from trace_load import events

PASSWORD = "bench-password"


def seed_trace(member: Any, runner: Any, name: str, count: int) -> int:
    """A one-case run of `name` whose case's trace holds `count` events; its run id."""
    from seeding import seed_suite

    from runners import queue
    from scorecards.services import run_start
    from scorecards.traces.services import trace_report

    seed_suite(member, name=name, cases=1)
    run = run_start(
        user=member.user,
        workspace_slug=member.slug,
        harness=name,
        dataset=name,
        runtime=f"self:{runner.pk}",
    )
    (grant,) = queue.job_lease(runner=runner)
    fence = {"runner": runner, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}
    for first in range(0, count, 200):
        batch = events(first, min(200, count - first), 1_700_000_000_000 + first * 100)
        ack = trace_report(**fence, events=batch)
        assert ack.accepted, ack
    return int(run.pk)


def can_log_in(member: Any) -> None:
    member.user.set_password(PASSWORD)
    member.user.save()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageLoad:
    ms: float
    kib: float
    rows: int


FIRST_ROW = """() => new Promise(resolve => {
  function look() {
    const row = document.querySelector("[data-timeline] li[data-seq]");
    if (!row) { requestAnimationFrame(look); return; }
    // The frame after the row is in the DOM: it has been painted.
    requestAnimationFrame(() => {
      const navigation = performance.getEntriesByType("navigation")[0];
      let bytes = navigation ? navigation.transferSize : 0;
      for (const r of performance.getEntriesByType("resource")) bytes += r.transferSize;
      resolve({ms: performance.now(),
               bytes: bytes,
               rows: document.querySelectorAll("[data-timeline] li[data-seq]").length});
    });
  }
  look();
})"""


def page_loads(url: str, username: str, paths: list[str], repeat: int) -> dict[str, list[PageLoad]]:
    """Each page opened `repeat` times in a fresh context (nothing cached), signed in."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
    loads: dict[str, list[PageLoad]] = {path: [] for path in paths}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=args)
        try:
            signed = browser.new_context()
            page = signed.new_page()
            page.goto(f"{url}/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            state = signed.storage_state()
            signed.close()
            for _ in range(repeat + 1):
                for path in paths:
                    context = browser.new_context(storage_state=state)
                    page = context.new_page()
                    page.goto(f"{url}{path}", wait_until="commit")
                    seen = page.evaluate(FIRST_ROW)
                    loads[path].append(PageLoad(seen["ms"], seen["bytes"] / 1024, seen["rows"]))
                    context.close()
        finally:
            browser.close()
    # The first round warms the server's code paths; it is not counted.
    return {path: found[1:] for path, found in loads.items()}


def median(loads: list[PageLoad]) -> PageLoad:
    return PageLoad(
        statistics.median(x.ms for x in loads),
        statistics.median(x.kib for x in loads),
        int(statistics.median(x.rows for x in loads)),
    )
