"""Workspace pages: overview, harnesses, datasets, runs, the run form, the run page, compare.

Server-rendered and usable without JavaScript; small scripts only enhance them (the run
form greys out incapable runners as the harness changes, the run page follows the run
live). Every page reads and writes through the same services as the API, so the rules
(who may start, cancel or create what) are the services' alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from everdict.errors import Invalid, NotFound, PermissionDenied, ServiceError
from scorecards import browse
from scorecards.catalog import (
    dataset_create,
    dataset_list,
    dataset_parse_jsonl,
    harness_create,
    harness_list,
)
from scorecards.models import Role, Run
from scorecards.run_replies import run_reply
from scorecards.services import MAX_CONCURRENCY, run_cancel, run_get, run_logs, run_start
from scorecards.workspaces import membership_for

# A dataset file is read into memory to be parsed; beyond this, use the API.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
RECENT_RUNS = 10
INITIAL_LOG_LINES = 1000

View = Callable[..., HttpResponse]


def _page(view: View) -> View:
    """Log in first; render the services' NotFound as a 404 and PermissionDenied as a 403."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(str(exc.detail)) from exc
        except PermissionDenied as exc:
            raise DjangoPermissionDenied(str(exc.detail)) from exc

    return login_required(wrapper)


def _add_errors(form: forms.Form, exc: ServiceError, rename: dict[str, str] | None = None) -> None:
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


def _result_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _run_row(run: Run) -> dict[str, Any]:
    done = getattr(run, "n_done", 0)
    return {
        "run": run,
        "runtime": browse.runtime_label(run),
        "done": done,
        "pass_rate": getattr(run, "n_pass", 0) / done if done else None,
        "duration": _duration(run),
    }


# ---------------------------------------------------------------- workspace


@_page
@require_GET
def workspace_overview(request: HttpRequest, slug: str) -> HttpResponse:
    membership = membership_for(user=request.user, slug=slug)
    runs = browse.run_list(user=request.user, workspace_slug=slug, limit=RECENT_RUNS)
    return render(
        request,
        "scorecards/workspace.html",
        {
            "workspace": membership.workspace,
            "membership": membership,
            "harnesses": harness_list(user=request.user, workspace_slug=slug),
            "datasets": dataset_list(user=request.user, workspace_slug=slug),
            "runs": [_run_row(r) for r in runs],
        },
    )


@_page
@require_GET
def run_list(request: HttpRequest, slug: str) -> HttpResponse:
    membership = membership_for(user=request.user, slug=slug)
    runs = browse.run_list(user=request.user, workspace_slug=slug, limit=200)
    return render(
        request,
        "scorecards/runs.html",
        {"workspace": membership.workspace, "runs": [_run_row(r) for r in runs]},
    )


# ---------------------------------------------------------------- catalog


class HarnessForm(forms.Form):
    name = forms.CharField(max_length=100)
    spec = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "mono"}),
        help_text='A JSON object: {"command": [...], "timeout_s": 600, "capabilities": [...], '
        '"output": "text"|"json", "grader": {"type": "exact"}}.',
    )

    def clean_spec(self) -> Any:
        try:
            return json.loads(self.cleaned_data["spec"])
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=100)
    jsonl = forms.CharField(
        label="Cases (JSONL)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text='One case per line: {"key": "c1", "input": {...}, "expected": ...}.',
    )
    file = forms.FileField(label="…or a JSONL file", required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError(
                    f"The file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB: use the API."
                )
            try:
                data["jsonl"] = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("The file is not UTF-8 text.") from exc
        if not (data.get("jsonl") or "").strip():
            self.add_error("jsonl", "Paste the cases or choose a file.")
        return data


def _catalog_page(
    request: HttpRequest, slug: str, template: str, form: forms.Form | None, status: int = 200
) -> HttpResponse:
    membership = membership_for(user=request.user, slug=slug)
    if template.endswith("harnesses.html"):
        histories = browse.harness_histories(user=request.user, workspace_slug=slug)
        for history in histories:
            for version in history.versions:
                version.spec_json = json.dumps(version.spec, indent=2)
    else:
        histories = browse.dataset_histories(user=request.user, workspace_slug=slug)
    return render(
        request,
        template,
        {
            "workspace": membership.workspace,
            "can_edit": membership.allows(Role.ADMIN),
            "histories": histories,
            "form": form,
        },
        status=status,
    )


@_page
@require_http_methods(["GET", "POST"])
def harnesses(request: HttpRequest, slug: str) -> HttpResponse:
    template = "scorecards/harnesses.html"
    if request.method != "POST":
        return _catalog_page(request, slug, template, HarnessForm())
    form = HarnessForm(request.POST)
    if form.is_valid():
        try:
            created = harness_create(
                user=request.user,
                workspace_slug=slug,
                name=form.cleaned_data["name"],
                spec=form.cleaned_data["spec"],
            )
        except Invalid as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, f"Harness {created} created.")
            return redirect(reverse("harnesses", args=[slug]) + f"#h-{created.name}")
    return _catalog_page(request, slug, template, form, status=400)


@_page
@require_http_methods(["GET", "POST"])
def datasets(request: HttpRequest, slug: str) -> HttpResponse:
    template = "scorecards/datasets.html"
    if request.method != "POST":
        return _catalog_page(request, slug, template, DatasetForm())
    form = DatasetForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            cases = dataset_parse_jsonl(form.cleaned_data["jsonl"])
            created = dataset_create(
                user=request.user,
                workspace_slug=slug,
                name=form.cleaned_data["name"],
                cases=cases,
            )
        except Invalid as exc:
            _add_errors(form, exc, rename={"cases": "jsonl"})
        else:
            messages.success(request, f"Dataset {created} imported: {created.case_count} cases.")
            return redirect(reverse("datasets", args=[slug]) + f"#d-{created.name}")
    return _catalog_page(request, slug, template, form, status=400)


# ---------------------------------------------------------------- run form


class RunForm(forms.Form):
    harness = forms.CharField(max_length=120)
    dataset = forms.CharField(max_length=120)
    runtime = forms.CharField(max_length=50)
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=1)


def _name_version(value: str) -> tuple[str, int | None]:
    """`name` is the latest version, `name@3` a pinned one."""
    name, at, version = value.rpartition("@")
    if at and version.isdigit():
        return name, int(version)
    return value, None


def _selected(histories: list[browse.VersionHistory], value: str) -> Any:
    name, version = _name_version(value)
    for history in histories:
        if history.name == name:
            if version is None:
                return history.latest
            return next((v for v in history.versions if v.version == version), None)
    return None


def _version_options(histories: list[browse.VersionHistory], selected: str) -> list[dict[str, Any]]:
    """Option groups per name: the latest (value `name`), then pinned older versions."""
    groups = []
    for history in histories:
        options = []
        for i, version in enumerate(history.versions):
            value = history.name if i == 0 else f"{history.name}@{version.version}"
            options.append(
                {
                    "value": value,
                    "label": f"{version}" + (" (latest)" if i == 0 else ""),
                    "capabilities": " ".join(getattr(version, "capabilities", [])),
                    "selected": value == selected,
                }
            )
        groups.append({"name": history.name, "options": options})
    return groups


def _render_run_form(
    request: HttpRequest, slug: str, data: dict[str, Any], form: RunForm, status: int = 200
) -> HttpResponse:
    membership = membership_for(user=request.user, slug=slug)
    harness_histories = browse.harness_histories(user=request.user, workspace_slug=slug)
    dataset_histories = browse.dataset_histories(user=request.user, workspace_slug=slug)
    harness_value = data.get("harness") or (harness_histories[0].name if harness_histories else "")
    chosen = _selected(harness_histories, harness_value)
    runtimes = browse.runtime_choices(
        user=request.user, capabilities=chosen.capabilities if chosen else []
    )
    runtime_value = data.get("runtime") or next(
        (c.value for c in runtimes if not c.disabled and c.online),
        next((c.value for c in runtimes if not c.disabled), ""),
    )
    return render(
        request,
        "scorecards/run_form.html",
        {
            "workspace": membership.workspace,
            "can_start": membership.allows(Role.MEMBER),
            "harness_groups": _version_options(harness_histories, harness_value),
            "dataset_groups": _version_options(dataset_histories, data.get("dataset", "")),
            "runtimes": runtimes,
            "has_runners": len(runtimes) > 1,
            "runtime_value": runtime_value,
            "concurrency": data.get("concurrency") or 1,
            "max_concurrency": MAX_CONCURRENCY,
            "form": form,
        },
        status=status,
    )


@_page
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest, slug: str) -> HttpResponse:
    if request.method != "POST":
        return _render_run_form(request, slug, request.GET.dict(), RunForm())
    form = RunForm(request.POST)
    status = 400
    if form.is_valid():
        harness, harness_version = _name_version(form.cleaned_data["harness"])
        dataset, dataset_version = _name_version(form.cleaned_data["dataset"])
        try:
            run = run_start(
                user=request.user,
                workspace_slug=slug,
                harness=harness,
                harness_version=harness_version,
                dataset=dataset,
                dataset_version=dataset_version,
                runtime=form.cleaned_data["runtime"],
                concurrency=form.cleaned_data["concurrency"],
            )
        except ServiceError as exc:
            _add_errors(form, exc)
            status = exc.status
        else:
            return redirect("run", run_id=run.pk)
    return _render_run_form(request, slug, request.POST.dict(), form, status=status)


# ---------------------------------------------------------------- run page


def _can_cancel(request: HttpRequest, run: Run) -> bool:
    if run.is_terminal:
        return False
    membership = membership_for(user=request.user, slug=run.workspace.slug)
    own = run.submitted_by_id == request.user.pk and membership.allows(Role.MEMBER)
    return own or membership.allows(Role.ADMIN)


@_page
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_get(user=request.user, run_id=run_id)
    reply = run_reply(run)
    reply["results"] = _result_rows(reply["results"])
    logs = run_logs(user=request.user, run_id=run_id, limit=INITIAL_LOG_LINES)
    return render(
        request,
        "scorecards/run.html",
        {
            "run": run,
            "reply": reply,
            "runtime": browse.runtime_label(run),
            "logs": logs,
            "can_cancel": _can_cancel(request, run),
            "comparable": browse.comparable_runs(run=run),
            "live": {
                "id": run.pk,
                "after": logs[-1]["seq"] if logs else 0,
                "terminal": run.is_terminal,
                "api": reverse("api-run", args=[run.pk]),
                "logs_api": reverse("api-run-logs", args=[run.pk]),
                "socket": f"/ws/runs/{run.pk}/",
            },
        },
    )


@_page
@require_POST
def run_cancel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_cancel(user=request.user, run_id=run_id)
    except PermissionDenied as exc:
        messages.error(request, str(exc.detail))
    else:
        messages.success(request, f"Run {run.pk} is {run.status}.")
    return redirect("run", run_id=run_id)


# ---------------------------------------------------------------- compare


def _run_id(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _error_text(exc: ServiceError) -> str:
    if isinstance(exc.detail, dict):
        return "; ".join(str(r) for reasons in exc.detail.values() for r in reasons)
    return str(exc.detail)


@_page
@require_GET
def compare(request: HttpRequest, slug: str) -> HttpResponse:
    membership = membership_for(user=request.user, slug=slug)
    a, b = _run_id(request.GET.get("a")), _run_id(request.GET.get("b"))
    comparison, error, status = None, "", 200
    if a is not None and b is not None:
        try:
            comparison = browse.run_compare(user=request.user, workspace_slug=slug, a=a, b=b)
        except (Invalid, NotFound) as exc:
            error = _error_text(exc)
            status = exc.status
    runs = browse.run_list(user=request.user, workspace_slug=slug, limit=100)
    return render(
        request,
        "scorecards/compare.html",
        {
            "workspace": membership.workspace,
            "runs": runs,
            "a": a,
            "b": b,
            "comparison": comparison,
            "error": error,
        },
        status=status,
    )
