"""One case of a run: input, expected, each repeat's output and diff, reason, attempts, logs."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.authentication import signed_in
from scorecards.cases.replies import CaseReply
from scorecards.cases.selectors import case_detail
from scorecards.links import api_case_url
from scorecards.models import Role
from scorecards.selectors.runs import run_get
from scorecards.selectors.workspaces import membership_for
from scorecards.views.common import page, provenance_badge


def _pretty(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


@page
@require_GET
def case_page(request: HttpRequest, run_id: int, key: str | None = None) -> HttpResponse:
    user = signed_in(request)
    key = key if key is not None else request.GET.get("key", "")
    reply = CaseReply.of(case_detail(user=user, run_id=run_id, key=key))
    run = run_get(user=user, run_id=run_id)
    case = reply.data()
    for repeat in case["runs"]:
        result = repeat["result"]
        if result is not None:
            result["badge"] = provenance_badge(result["provenance"])
            result["seconds"] = result["duration_ms"] / 1000
    return render(
        request,
        "scorecards/case.html",
        {
            "run": run,
            "case": case,
            "input_text": _pretty(reply.input),
            "expected_text": "—" if reply.expected is None else _pretty(reply.expected),
            "api_url": api_case_url(run.pk, reply.case),
            "can_set_verdict": membership_for(user=user, slug=run.workspace.slug).allows(
                Role.MEMBER
            ),
        },
    )
