"""Workspace pages: my workspaces, a workspace's overview and runs, harnesses and datasets."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounts.authentication import signed_in
from core.errors import Invalid
from scorecards import lifecycle
from scorecards.models import Role
from scorecards.replies.harness_summary import HarnessSummary
from scorecards.selectors.catalog import (
    dataset_histories,
    dataset_list,
    harness_histories,
    harness_list,
)
from scorecards.selectors.runs import runs_latest
from scorecards.selectors.workspaces import membership_for, memberships_of
from scorecards.services import dataset_create, dataset_parse_jsonl, harness_create
from scorecards.views.common import add_errors, page, run_row
from scorecards.views.harness_form import HarnessForm, as_json

# A dataset file is read into memory to be parsed; beyond this, use the API.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
RECENT_RUNS = 10


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"memberships": memberships_of(signed_in(request))})


@page
@require_GET
def workspace_overview(request: HttpRequest, slug: str) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    runs = runs_latest(user=user, workspace_slug=slug, limit=RECENT_RUNS)
    return render(
        request,
        "scorecards/workspace.html",
        {
            "workspace": membership.workspace,
            "membership": membership,
            "harnesses": harness_list(user=user, workspace_slug=slug),
            "datasets": dataset_list(user=user, workspace_slug=slug),
            "runs": [run_row(r) for r in runs],
        },
    )


@page
@require_GET
def run_list(request: HttpRequest, slug: str) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    runs = runs_latest(user=user, workspace_slug=slug, limit=200)
    return render(
        request,
        "scorecards/runs.html",
        {"workspace": membership.workspace, "runs": [run_row(r) for r in runs]},
    )


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


def _catalogpage(
    request: HttpRequest, slug: str, template: str, form: forms.Form | None, status: int = 200
) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    if template.endswith("harnesses.html"):
        histories = harness_histories(user=user, workspace_slug=slug)
        for history in histories:
            history.people_agreement = lifecycle.harness_figures(
                membership.workspace, history.name
            ).get("people_agreement", [])
            for version in history.versions:
                version.summary = HarnessSummary.of(version)
                version.spec_json = as_json(version.spec)
                version.source_json = as_json(version.source) if version.source else ""
    else:
        histories = dataset_histories(user=user, workspace_slug=slug)
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


@page
@require_http_methods(["GET", "POST"])
def harnesses(request: HttpRequest, slug: str) -> HttpResponse:
    template = "scorecards/harnesses.html"
    if request.method != "POST":
        return _catalogpage(request, slug, template, HarnessForm())
    form = HarnessForm(request.POST)
    if form.is_valid() and "show_json" in request.POST:
        # The advanced view of what the fields say, to edit before saving.
        spec = as_json(form.cleaned_data["source"])
        shown = HarnessForm({**request.POST.dict(), "kind": "json", "spec": spec})
        return _catalogpage(request, slug, template, shown)
    if form.is_valid():
        try:
            created = harness_create(
                user=signed_in(request),
                workspace_slug=slug,
                name=form.cleaned_data["name"],
                spec=form.cleaned_data["source"],
            )
        except Invalid as exc:
            add_errors(form, exc, rename={"spec": form.spec_errors_field})
        else:
            messages.success(request, f"Harness {created} created.")
            return redirect(reverse("harnesses", args=[slug]) + f"#h-{created.name}")
    return _catalogpage(request, slug, template, form, status=400)


@page
@require_http_methods(["GET", "POST"])
def datasets(request: HttpRequest, slug: str) -> HttpResponse:
    template = "scorecards/datasets.html"
    if request.method != "POST":
        return _catalogpage(request, slug, template, DatasetForm())
    form = DatasetForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            cases = dataset_parse_jsonl(form.cleaned_data["jsonl"])
            created = dataset_create(
                user=signed_in(request),
                workspace_slug=slug,
                name=form.cleaned_data["name"],
                cases=cases,
            )
        except Invalid as exc:
            add_errors(form, exc, rename={"cases": "jsonl"})
        else:
            messages.success(request, f"Dataset {created} imported: {created.case_count} cases.")
            return redirect(reverse("datasets", args=[slug]) + f"#d-{created.name}")
    return _catalogpage(request, slug, template, form, status=400)
