"""Template filters of the run pages."""

from __future__ import annotations

from typing import Any

from django import template

from scorecards.links import case_url as _case_url
from scorecards.numbers import Estimate, estimate_text

register = template.Library()


@register.filter
def case_url(run_id: int, key: str) -> str:
    """`{{ run.pk|case_url:key }}`: the case page of that key."""
    return _case_url(run_id, key)


@register.filter
def interval(estimate: dict[str, Any] | None) -> str:
    """A summary's `pass_rate_ci` or `mean_score_ci` → `62 % [48-74]` (an en dash between the
    ends); nothing settled → `—`."""
    if not estimate or estimate.get("value") is None:
        return "—"
    return estimate_text(Estimate.model_validate(estimate))


@register.filter
def interval_note(estimate: dict[str, Any] | None) -> str:
    """How an interval was computed and what it left out: `95 % Wilson interval over 40
    cases; 2 judging left out`."""
    if not estimate or not estimate.get("method"):
        return ""
    method = "Wilson" if estimate["method"] == "wilson" else "bootstrap over cases"
    text = f"95 % {method} interval over {estimate['cases']} cases"
    left = [f"{estimate[k]} {k}" for k in ("judging", "skipped", "unsettled") if estimate.get(k)]
    return text + ("; " + ", ".join(left) + " left out" if left else "")


@register.filter
def percent(value: float | None) -> str:
    """0.8333 → `83%`; None → `—`."""
    return "—" if value is None else f"{value * 100:.0f}%"
