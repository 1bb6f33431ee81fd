"""The case page's line beside a judge's reason: how often people agreed with that judge."""

from __future__ import annotations

from typing import Any

from django import template

from scorecards.models import Workspace
from scorecards.review.selectors import people_agreement

register = template.Library()


@register.simple_tag
def judge_agreement(workspace: Workspace, judged_by: dict[str, Any] | None) -> str:
    """`agreed with people on 31 of 34 reviewed, 91 % [77-97]` for the judge (prompt digest and
    model) of `judged_by`, in this workspace; '' when people never looked at its verdicts."""
    if not judged_by or not judged_by.get("prompt_digest"):
        return ""
    digest, model = str(judged_by["prompt_digest"]), str(judged_by.get("model", ""))
    for agreement in people_agreement(workspace=workspace):
        if (agreement.prompt_digest, agreement.model) == (digest, model):
            return agreement.text
    return ""
