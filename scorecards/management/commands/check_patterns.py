"""List the stored patterns RE2 refuses: expected values of datasets graded by `regex`, others
that only a backtracking engine would run, and harnesses' `retry_on.stderr_regex`.

Versions are immutable and reruns reuse old ones, so patterns stored before graders ran RE2
may still be graded: each such case is judged `error` (saying why), never handed to a
backtracking engine. This lists them so their authors can store a fixed version.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand

from scorecards.models import Case, HarnessVersion, Run
from scorecards.patterns import backtracking_only, pattern_refusal


def _regex_graded_datasets() -> set[int]:
    """Datasets a run has paired with a harness whose grader is `regex`."""
    return {
        dataset_id
        for dataset_id, spec in Run.objects.values_list("dataset_id", "harness__spec").distinct()
        if isinstance(spec, dict) and (spec.get("grader") or {}).get("type") == "regex"
    }


def refused_patterns() -> Iterator[str]:
    """One line per stored pattern RE2 refuses, saying where it is and why."""
    for harness in HarnessVersion.objects.select_related("workspace").order_by("pk").iterator():
        pattern = ((harness.spec or {}).get("retry_on") or {}).get("stderr_regex")
        if isinstance(pattern, str) and pattern and (refusal := pattern_refusal(pattern)):
            yield f"{harness.workspace.slug}/{harness} retry_on.stderr_regex: {refusal}"
    graded = _regex_graded_datasets()
    cases = Case.objects.select_related("dataset__workspace").order_by("dataset_id", "position")
    for case in cases.iterator(chunk_size=2000):
        if not isinstance(case.expected, str):
            continue
        if case.dataset_id in graded:
            refusal = pattern_refusal(case.expected)
        else:
            refusal = backtracking_only(case.expected)
        if refusal:
            where = f"{case.dataset.workspace.slug}/{case.dataset}"
            yield f"{where} case {case.key!r}: {refusal}"


class Command(BaseCommand):
    help = "List stored patterns RE2 refuses (graded as errors, never run by backtracking)."

    def handle(self, *args: Any, **options: Any) -> None:
        found = 0
        for line in refused_patterns():
            self.stdout.write(line)
            found += 1
        self.stdout.write(f"{found} stored pattern{'s' if found != 1 else ''} RE2 refuses.")
