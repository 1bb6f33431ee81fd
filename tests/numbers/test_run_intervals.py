"""A run's intervals where its summary is shown: the summary reply (REST), the run page and the
harness history, Wilson for one repeat and a bootstrap over cases with repeats; errors count as
not passing, results still judging and skipped ones are left out and counted; the same run and
settlement read from the cache, a person's verdict changing them."""

from __future__ import annotations

from typing import Any

import numpy as np
from bulk import seeded_run
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.services import api_key_create
from scorecards.numbers import SEED, bootstrap_interval
from scorecards.selectors.summary import run_summary
from scorecards.verdicts.services import verdict_set

# c0-c6 pass, c7 and c8 fail, c9 errs, c10 is still being judged, c11 was skipped.
VERDICTS = ["pass"] * 7 + ["fail", "fail", "error", "judging", "skipped"]


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def test_one_repeat_carries_wilson_and_counts_what_it_left_out(
    alice: Any, bob: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=12, verdict=lambda case, repeat: VERDICTS[case])

    summary = api(bob).get(f"/api/runs/{run.pk}").json()["summary"]

    # Wilson for 7 of 10, worked by hand: (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    # with p = 0.7, n = 10, z = 1.95996 gives [0.3968, 0.8922]. The error is one of the 10.
    assert summary["pass_rate_ci"] == {
        "value": 0.7,
        "ci": [0.3968, 0.8922],
        "method": "wilson",
        "cases": 10,
        "unsettled": 2,
        "judging": 1,
        "skipped": 1,
    }
    assert summary["skipped"] == 1 and summary["judging"] == 1
    page = Client()
    page.force_login(bob)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert "70 % [40\u201389]" in html
    assert "95 % Wilson interval over 10 cases; 1 judging, 1 skipped, 2 unsettled left out" in html

    # A person's verdict changes the pass rate, and the interval with it (not a stale cache).
    verdict_set(user=bob, run_id=run.pk, key="c7", verdict="pass")
    # Wilson for 8 of 10, by the same formula.
    assert run_summary(run)["pass_rate_ci"]["ci"] == [0.4902, 0.9433]


def test_repeats_bootstrap_over_cases_and_the_same_settlement_is_cached(
    alice: Any, bob: Any, workspace: Any
) -> None:
    # Case i passes on repeats below i % 4: fractions 0, 1/3, 2/3, 1, 0, ... over 3 repeats.
    run = seeded_run(
        alice, cases=20, repeats=3, verdict=lambda case, r: "pass" * (r < case % 4) or "fail"
    )
    fractions = np.array([min(1.0, (i % 4) / 3) for i in range(20)])

    with CaptureQueriesContext(connection) as computed:
        first = run_summary(run)
    with CaptureQueriesContext(connection) as cached:
        again = run_summary(run)

    expected = bootstrap_interval(fractions, seed=SEED)
    assert expected is not None
    assert first["pass_rate_ci"]["method"] == "bootstrap"
    assert tuple(first["pass_rate_ci"]["ci"]) == expected
    assert first["pass_rate_ci"]["value"] == round(float(fractions.mean()), 4)
    assert first["mean_score_ci"]["ci"] == first["pass_rate_ci"]["ci"]
    # The same settlement again: the same figures, without reading each case's tally.
    assert again == first
    assert len(cached.captured_queries) == len(computed.captured_queries) - 1

    page = Client()
    page.force_login(bob)
    html = page.get("/w/acme/harnesses/bulk/").content.decode()
    lo, hi = (round(bound * 100) for bound in expected)
    assert f'<span class="small" data-ci>[{lo}%\u2013{hi}%]</span>' in html
