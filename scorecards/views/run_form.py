"""The run form: a harness and a dataset version, one of my runners, a concurrency."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.authentication import signed_in
from core.errors import ServiceError
from core.fields import ascii_int
from scorecards.models import Role
from scorecards.selectors.catalog import VersionHistory, dataset_histories, harness_histories
from scorecards.selectors.runs import runtime_choices
from scorecards.selectors.workspaces import membership_for
from scorecards.services import (
    MAX_BUDGET_USD,
    MAX_CONCURRENCY,
    MAX_METADATA_BYTES,
    MAX_REPEATS,
    MIN_BUDGET_USD,
    run_start,
)
from scorecards.views.common import add_errors, page


class RunForm(forms.Form):
    harness = forms.CharField(max_length=120)
    dataset = forms.CharField(max_length=120)
    runtime = forms.CharField(max_length=50)
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=1)
    repeats = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=1, required=False)
    metadata = forms.CharField(required=False, max_length=MAX_METADATA_BYTES * 2)
    max_cost_usd = forms.DecimalField(
        required=False,
        min_value=MIN_BUDGET_USD,
        max_value=MAX_BUDGET_USD,
        max_digits=12,
        decimal_places=4,
    )

    def clean_metadata(self) -> dict[str, Any] | None:
        text = self.cleaned_data.get("metadata", "").strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError('A JSON object, e.g. {"git_sha": "…"}.')
        return value


def _name_version(value: str) -> tuple[str, int | None]:
    """`name` is the latest version, `name@3` a pinned one."""
    name, at, version = value.rpartition("@")
    number = ascii_int(version) if at else None
    return (name, number) if number is not None else (value, None)


def _selected(histories: list[VersionHistory], value: str) -> Any:
    name, version = _name_version(value)
    for history in histories:
        if history.name == name:
            if version is None:
                return history.latest
            return next((v for v in history.versions if v.version == version), None)
    return None


def _version_options(histories: list[VersionHistory], selected: str) -> list[dict[str, Any]]:
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
                    "features": " ".join(getattr(version, "features", [])),
                    "selected": value == selected,
                }
            )
        groups.append({"name": history.name, "options": options})
    return groups


def _render_run_form(
    request: HttpRequest, slug: str, data: dict[str, Any], form: RunForm, status: int = 200
) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    harness_versions = harness_histories(user=user, workspace_slug=slug)
    dataset_versions = dataset_histories(user=user, workspace_slug=slug)
    harness_value = data.get("harness") or (harness_versions[0].name if harness_versions else "")
    chosen = _selected(harness_versions, harness_value)
    runtimes = runtime_choices(
        user=user,
        capabilities=chosen.capabilities if chosen else [],
        features=chosen.features if chosen else [],
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
            "harness_groups": _version_options(harness_versions, harness_value),
            "dataset_groups": _version_options(dataset_versions, data.get("dataset", "")),
            "runtimes": runtimes,
            "has_runners": len(runtimes) > 1,
            "runtime_value": runtime_value,
            "concurrency": data.get("concurrency") or 1,
            "max_concurrency": MAX_CONCURRENCY,
            "repeats": data.get("repeats") or 1,
            "max_repeats": MAX_REPEATS,
            "metadata": data.get("metadata", ""),
            "max_cost_usd": data.get("max_cost_usd", ""),
            "max_budget_usd": MAX_BUDGET_USD,
            "form": form,
        },
        status=status,
    )


@page
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
                user=signed_in(request),
                workspace_slug=slug,
                harness=harness,
                harness_version=harness_version,
                dataset=dataset,
                dataset_version=dataset_version,
                runtime=form.cleaned_data["runtime"],
                concurrency=form.cleaned_data["concurrency"],
                repeats=form.cleaned_data["repeats"] or 1,
                metadata=form.cleaned_data["metadata"],
                max_cost_usd=form.cleaned_data["max_cost_usd"],
            )
        except ServiceError as exc:
            add_errors(form, exc)
            status = exc.status
        else:
            return redirect("run", run_id=run.pk)
    return _render_run_form(request, slug, request.POST.dict(), form, status=status)
