"""Where a run's cases ran, on its page and in a comparison: small includes over the
fingerprint and holder selectors, so the pages that show them need one line each."""

from __future__ import annotations

from typing import Any

from django import template

from scorecards.models import Run
from scorecards.selectors.compare import Comparison
from scorecards.selectors.confined import confined_regressions
from scorecards.selectors.fingerprints import fingerprint_changes, run_fingerprints
from scorecards.selectors.holders import run_holders

register = template.Library()


@register.inclusion_tag("scorecards/_fingerprints.html")
def run_fingerprint_groups(run: Run) -> dict[str, Any]:
    return {"groups": run_fingerprints(run)}


@register.inclusion_tag("scorecards/_fingerprint_changes.html")
def comparison_fingerprint_changes(comparison: Comparison) -> dict[str, Any]:
    return {"changes": fingerprint_changes(comparison), "a": comparison.a, "b": comparison.b}


@register.inclusion_tag("scorecards/_run_holders.html")
def run_holder_statuses(run: Run) -> dict[str, Any]:
    return {"holders": run_holders(run)}


@register.simple_tag
def comparison_confined(comparison: Comparison) -> str:
    """`all 4 regressions ran on laptop-2, claude 2.1.0`, or ""."""
    return confined_regressions(comparison)
