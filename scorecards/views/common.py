"""What the workspace pages share: the page decorator, errors on forms, run rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from core.errors import Forbidden, NotFound, ServiceError
from scorecards.models import Run
from scorecards.replies.runs import listed_status_detail
from scorecards.selectors.runs import runtime_label

View = Callable[..., HttpResponse]


def page(view: View) -> View:
    """Log in first; render the services' NotFound as a 404 and Forbidden as a 403."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(str(exc.detail)) from exc
        except Forbidden as exc:
            raise PermissionDenied(str(exc.detail)) from exc

    return login_required(wrapper)


def error_text(exc: ServiceError) -> str:
    """A service's error in one line, as a page's message says it."""
    if isinstance(exc.detail, dict):
        return "; ".join(str(r) for reasons in exc.detail.values() for r in reasons)
    return str(exc.detail)


def add_errors(form: forms.Form, exc: ServiceError, rename: dict[str, str] | None = None) -> None:
    """Show a service's error on the form: field details by their field, the rest on top."""
    details: dict[str, Any] = exc.detail if isinstance(exc.detail, dict) else {"": [exc.detail]}
    for name, reasons in details.items():
        target = (rename or {}).get(name, name)
        for reason in reasons if isinstance(reasons, list) else [reasons]:
            form.add_error(target if target in form.fields else None, str(reason))


def provenance_badge(provenance: dict[str, Any]) -> str:
    """`self-hosted · <runner label> · <user>`: where a result ran and on whose login."""
    if not provenance:
        return ""
    runner = str(provenance.get("runner", ""))
    label = runner.partition("/")[2] or runner
    return " · ".join(
        p for p in (provenance.get("ran_on", ""), label, provenance.get("by", "")) if p
    )


def result_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        | {
            "badge": provenance_badge(r["provenance"]),
            "runner_label": str(r["provenance"].get("runner", "")).partition("/")[2],
            "seconds": r["duration_ms"] / 1000,
        }
        for r in results
    ]


def _duration(run: Run) -> timedelta | None:
    if run.finished_at is None or run.started_at is None:
        return None
    return run.finished_at - run.started_at


def run_row(run: Run) -> dict[str, Any]:
    done = getattr(run, "n_done", 0)
    return {
        "run": run,
        "runtime": runtime_label(run),
        "done": done,
        "pass_rate": getattr(run, "n_pass", 0) / done if done else None,
        "status_detail": listed_status_detail(run),
        "duration": _duration(run),
    }
