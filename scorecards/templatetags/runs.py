"""Template filters of the run pages."""

from __future__ import annotations

from django import template

from scorecards.links import case_url as _case_url

register = template.Library()


@register.filter
def case_url(run_id: int, key: str) -> str:
    """`{{ run.pk|case_url:key }}`: the case page of that key."""
    return _case_url(run_id, key)


@register.filter
def percent(value: float | None) -> str:
    """0.8333 → `83%`; None → `—`."""
    return "—" if value is None else f"{value * 100:.0f}%"
