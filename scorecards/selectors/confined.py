"""Whether a comparison's regressions all ran on one host of several: "all 4 regressions ran
on laptop-2, claude 2.1.0".

Read from the database over B's results (its distinct runners and the distinct hosts of its first
repeats), not from the listed page of cases.
"""

from __future__ import annotations

from django.db.models import Count, QuerySet, TextField, Value
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Coalesce, Concat

from scorecards.models import CaseResult, Verdict
from scorecards.selectors.compare import Comparison
from scorecards.selectors.hosts import facts_text, host_facts


def _runner_label(entry: str) -> str:
    """`laptop-2` of a side's `3/laptop-2 by alice`."""
    return entry.partition("/")[2].rpartition(" by ")[0] or entry


def _runners(results: QuerySet[CaseResult]) -> set[str]:
    """Up to two of the distinct self-hosted runners (`3/laptop-2 by alice`) of these results."""
    text: TextField[str, str] = TextField()
    label = Concat(
        Coalesce(KT("provenance__runner"), Value(""), output_field=text),
        Value(" by ", output_field=text),
        Coalesce(KT("provenance__by"), Value(""), output_field=text),
        output_field=text,
    )
    hosted = results.filter(provenance__ran_on="self-hosted").annotate(label=label)
    return set(hosted.values_list("label", flat=True).order_by("label").distinct()[:2])


def _hosts(results: QuerySet[CaseResult], cases: int) -> set[str]:
    """The distinct hosts of the first repeats of these results of `cases` cases (a case
    without one: a host with no facts)."""
    rows = (
        results.filter(repeat=0)
        .values_list(
            KT("fingerprint__os"),
            KT("fingerprint__os_version"),
            KeyTransform("tools", "fingerprint"),
            KT("fingerprint__repo__sha"),
            KT("fingerprint__repo__dirty"),
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    hosts, first = set(), 0
    for *facts, n in rows:
        hosts.add(facts_text(host_facts(*facts)))
        first += n
    if first < cases:
        hosts.add("")
    return hosts


def confined_regressions(comparison: Comparison) -> str:
    """`all 4 regressions ran on laptop-2, claude 2.1.0` when run B ran on several hosts and
    every regression (two or more) on one of them; "" otherwise."""
    regressed = comparison.regressed
    if len(regressed) < 2:
        return ""
    ran = CaseResult.objects.filter(run=comparison.b).exclude(verdict=Verdict.SKIPPED)
    of_regressed = ran.filter(case_id__in=regressed)
    what = f"all {len(regressed)} regressions ran on"
    runners = _runners(of_regressed)
    if len(runners) == 1 and len(_runners(ran)) > 1:
        label = _runner_label(next(iter(runners)))
        hosts = _hosts(of_regressed, len(regressed))
        host = next(iter(hosts)) if len(hosts) == 1 else ""
        return f"{what} {label}" + (f", {host}" if host else "")
    hosts = _hosts(of_regressed, len(regressed))
    if len(hosts) == 1 and next(iter(hosts)) and len(_hosts(ran, comparison.cases_b)) > 1:
        return f"{what} {next(iter(hosts))}"
    return ""
