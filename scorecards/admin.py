from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.authentication import signed_in
from runners.admin import (
    ATTEMPT_COLUMNS,
    ATTEMPT_FIELDS,
    JobAttemptAdmin,
    JobAttemptInline,
    RunnerJobAdmin,
)
from runners.models import JobAttempt, RunnerJob
from scorecards.models import (
    Case,
    CaseResult,
    DatasetVersion,
    HarnessVersion,
    Membership,
    Run,
    RunEvent,
    Workspace,
)
from scorecards.selectors.ledger import shadow_summary
from scorecards.services import operator_job_fail, operator_job_requeue


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "run_quota",
        "budget_usd",
        "budget_tokens",
        "spent_usd",
        "spent_tokens",
        "created_at",
    ]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(HarnessVersion)
class HarnessVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "workspace", "created_by", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["name"]
    list_select_related = ["workspace", "created_by"]
    # Versions are immutable: what a run used must stay what it was.
    readonly_fields = ["workspace", "name", "version", "spec", "created_by", "created_at"]


class CaseInline(_ReadOnlyInline):
    model = Case
    fields = readonly_fields = ("position", "key", "input", "expected")


@admin.register(DatasetVersion)
class DatasetVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "workspace", "case_count", "created_by", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["name"]
    list_select_related = ["workspace", "created_by"]
    readonly_fields = ["workspace", "name", "version", "case_count", "created_by", "created_at"]
    inlines = [CaseInline]


class RunEventInline(_ReadOnlyInline):
    model = RunEvent
    fields = readonly_fields = ("at", "level", "message")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "workspace",
        "harness",
        "dataset",
        "runtime",
        "status",
        "submitted_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "workspace"]
    search_fields = ["submitted_by__username", "runtime"]
    list_select_related = ["workspace", "harness", "dataset", "submitted_by"]
    raw_id_fields = ["workspace", "harness", "dataset", "runner", "submitted_by"]
    readonly_fields = ["created_at", "started_at", "finished_at"]
    inlines = [RunEventInline]


@admin.register(CaseResult)
class CaseResultAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "case", "verdict", "score", "status", "runner", "duration_ms"]
    list_filter = ["verdict", "status"]
    search_fields = ["case__key"]
    list_select_related = ["run", "case", "runner"]
    raw_id_fields = ["run", "case", "attempt", "runner"]


# Operator actions on the queue live here, beside the services that record their results:
# the runners app knows nothing of results and must not import this one.
@admin.action(description="Requeue selected open jobs now (fences off their runner)")
def requeue_jobs(modeladmin: Any, request: HttpRequest, queryset: Any) -> None:
    done = sum(
        operator_job_requeue(job_id=pk, operator=signed_in(request))
        for pk in queryset.values_list("pk", flat=True)
    )
    modeladmin.message_user(request, f"Requeued {done} job(s); closed ones were left alone.")


@admin.action(description="Fail selected open jobs (records an error result)")
def fail_jobs(modeladmin: Any, request: HttpRequest, queryset: Any) -> None:
    done = sum(
        operator_job_fail(job_id=pk, operator=signed_in(request))
        for pk in queryset.values_list("pk", flat=True)
    )
    modeladmin.message_user(request, f"Failed {done} job(s); closed ones were left alone.")


@admin.display(description="late result")
def late_result(attempt: JobAttempt) -> str:
    """A refused late result kept on the attempt, graded for display (never counted)."""
    summary = shadow_summary(attempt)
    if summary and attempt.shadow_reason:
        summary = f"{summary} — {attempt.shadow_reason}"
    return summary or "—"


class LedgerInline(JobAttemptInline):
    """The attempt ledger of a job, with each attempt's late result, if one was kept."""

    fields = readonly_fields = (*ATTEMPT_FIELDS, "late_result")

    @admin.display(description="late result")
    def late_result(self, attempt: JobAttempt) -> str:
        return late_result(attempt)


@admin.register(RunnerJob)
class OperatorJobAdmin(RunnerJobAdmin):
    """The queue's job admin, with the operator actions that record a result."""

    actions = [requeue_jobs, fail_jobs]
    inlines = [LedgerInline]


@admin.register(JobAttempt)
class LedgerAdmin(JobAttemptAdmin):
    """The attempt ledger, with the late results kept as shadows graded for display."""

    list_display = [*ATTEMPT_COLUMNS, "resumes", "late_result"]
    readonly_fields = ["late_result"]

    @admin.display(description="late result")
    def late_result(self, attempt: JobAttempt) -> str:
        return late_result(attempt)
