"""A compare says whether B differs from A beyond noise: REST and the compare page carry the
paired test on the cases both runs settled (values worked by hand in the comments), the same
numbers every time, per-case Fisher tests with their FDR mark when cases repeat, and clear
answers where nothing pairs."""

from __future__ import annotations

from typing import Any

import pytest
from bulk import seeded_run
from django.test import Client

from accounts.services import api_key_create

CASES = 40


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def passes_below(n: int, *extra: int) -> Any:
    return lambda case, repeat: "pass" if case < n or case in extra else "fail"


def test_a_significant_regression_and_noise(alice: Any, bob: Any, workspace: Any) -> None:
    a = seeded_run(alice, cases=CASES, verdict=passes_below(30))
    # 9 cases A passed fail in B (c21-c29) and one A failed passes (c35): 10 discordant pairs
    # split 9 to 1, two-sided exact McNemar p = 2 * (1 + 10) / 2^10 = 22/1024 = 0.021484375.
    worse = seeded_run(alice, cases=CASES, verdict=passes_below(21, 35))
    # 2 worse, 1 better: p = 2 * (1 + 3) / 2^3 = 1 (capped).
    noisy = seeded_run(alice, cases=CASES, verdict=passes_below(28, 35))
    client = api(bob)

    reply = client.get(f"/api/runs/{worse.pk}/compare?baseline={a.pk}")
    assert reply.status_code == 200, reply.content
    numbers = reply.json()["numbers"]
    s = numbers["significance"]
    assert s["method"] == "mcnemar_exact"
    assert s["p_value"] == 22 / 1024
    assert (s["pairs"], s["discordant"], s["delta_pp"]) == (40, 10, -20.0)
    assert s["verdict"] == "worse"
    # (z0.975 + z0.8) * sqrt(10) / 40 = (1.959964 + 0.841621) * 3.162278 / 40 = 22.15 pp.
    assert s["detectable_pp"] == 22.15
    lo, hi = s["ci_pp"]
    assert lo < -20 < hi < 0
    assert numbers["a"]["value"] == 0.75 and numbers["b"]["value"] == 0.55
    assert numbers["sentence"].startswith("pass rate 75 % [")
    assert numbers["sentence"].endswith("p = 0.021 (McNemar, 40 pairs): B is worse")
    assert (numbers["only_a"], numbers["only_b"], numbers["scores"]) == (0, 0, None)
    # The same compare loaded again gives the same numbers.
    assert client.get(f"/api/runs/{worse.pk}/compare?baseline={a.pk}").json()["numbers"] == numbers

    calm = client.get(f"/api/runs/{noisy.pk}/compare?baseline={a.pk}").json()["numbers"]
    assert calm["significance"]["p_value"] == 1.0
    assert calm["significance"]["verdict"] == "no_detectable_difference"
    assert "no detectable difference — these pairs detect ≥ " in calm["sentence"]

    page = Client()
    page.force_login(bob)
    html = page.get(f"/w/acme/compare?a={a.pk}&b={worse.pk}").content.decode()
    sentence = html.index('id="compare-sentence"')
    assert sentence < html.index('<table class="cards compare">')
    assert "B is worse" in html[sentence : sentence + 400]
    assert "10 of them different" in html


def test_repeats_mark_cases_and_nothing_paired_is_said(
    alice: Any, bob: Any, workspace: Any
) -> None:
    # c0 passes 5 of 5 in A, 0 of 5 in B: Fisher's exact p = 2 / C(10, 5) = 2/252. c1 passes
    # 3 of 5 then 2 of 5: p = 1. Benjamini-Hochberg over the two keeps c0 (0.0079 ≤ 0.025).
    a = seeded_run(
        alice, cases=4, repeats=5, verdict=lambda c, r: "pass" if c == 0 or r < 3 else "fail"
    )
    b = seeded_run(
        alice,
        cases=4,
        repeats=5,
        verdict=lambda c, r: (
            "fail" if c == 0 or (r >= 2 and c == 1) else ("pass" if r < 3 else "fail")
        ),
    )
    client = api(bob)

    reply = client.get(f"/api/runs/{b.pk}/compare?baseline={a.pk}").json()
    assert reply["numbers"]["significance"]["method"] == "paired_permutation"
    tests = {item["case"]: item["test"] for item in reply["regressions"] + reply["fixes"]}
    assert tests["c0"]["p_value"] == pytest.approx(2 / 252, rel=1e-12)
    assert tests["c0"]["fdr_significant"]
    assert tests["c1"] == {"p_value": 1.0, "fdr_significant": False}

    # Runs of the same dataset with no settled case in common: 200, said.
    skipped = seeded_run(alice, cases=4, repeats=5, verdict=lambda c, r: "skipped")
    none = client.get(f"/api/runs/{skipped.pk}/compare?baseline={a.pk}")
    assert none.status_code == 200, none.content
    assert none.json()["numbers"]["sentence"].endswith("; no paired cases")
    assert none.json()["numbers"]["only_a"] == 4

    # Runs of different datasets stay a 400.
    other = seeded_run(alice, name="other", cases=4)
    refused = client.get(f"/api/runs/{other.pk}/compare?baseline={a.pk}")
    assert refused.status_code == 400
    assert "compare two runs of the same dataset" in refused.content.decode()


def test_a_large_compare_lists_a_page_of_cases_and_counts_them_all(
    alice: Any, bob: Any, workspace: Any
) -> None:
    # 450 cases: B fails c0-c9 (regressed) and passes c445-c449 (fixed) where A did not.
    a = seeded_run(alice, cases=450, verdict=lambda c, r: "fail" if c >= 445 else "pass")
    b = seeded_run(alice, cases=450, verdict=lambda c, r: "fail" if c < 10 else "pass")
    client = api(bob)

    first = client.get(f"/api/runs/{b.pk}/compare?baseline={a.pk}").json()
    assert (first["page"], first["pages"], first["next_page"], first["cases"]) == (1, 3, 2, 450)
    assert first["counts"]["regressed"] == 10 and first["counts"]["fixed"] == 5
    assert first["counts"]["unchanged"] == 435
    # Regressions first, then fixes, then the unchanged cases in the dataset's order.
    assert [r["case"] for r in first["regressions"]] == [f"c{i}" for i in range(10)]
    assert [r["case"] for r in first["fixes"]] == [f"c{i}" for i in range(445, 450)]
    assert first["unchanged"] == [f"c{i}" for i in range(10, 195)]
    assert first["regressions"][0]["b"] == {
        "passes": 0,
        "settled": 1,
        "pass_fraction": 0.0,
        "verdicts": ["fail"],
        "tampered": 0,
    }

    last = client.get(f"/api/runs/{b.pk}/compare?baseline={a.pk}&page=3").json()
    assert (last["next_page"], last["regressions"]) == (None, [])
    assert last["unchanged"] == [f"c{i}" for i in range(395, 445)]
    assert last["numbers"] == first["numbers"]
    beyond = client.get(f"/api/runs/{b.pk}/compare?baseline={a.pk}&page=4")
    assert beyond.status_code == 400 and "pages are numbered 1 to 3" in beyond.content.decode()
    assert client.get(f"/api/runs/{b.pk}/compare?baseline={a.pk}&page=x").status_code == 400

    page = Client()
    page.force_login(bob)
    html = page.get(f"/w/acme/compare?a={a.pk}&b={b.pk}").content.decode()
    assert html.count('data-change="unchanged"') == 185
    assert "Cases 1\u2013200 of 450, regressions first" in html
    assert f'href="?a={a.pk}&amp;b={b.pk}&amp;page=2">next page' in html
