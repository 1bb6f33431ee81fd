from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runners.models import JobAttempt, JobLogLine, Runner


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
    list_display = [
        "label",
        "owner",
        "os",
        "capabilities",
        "token_prefix",
        "workspace",
        "connected_at",
        "last_seen_at",
        "paused_until",
        "revoked_at",
    ]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "os"]
    search_fields = ["label", "owner__username"]
    list_select_related = ["owner", "workspace"]
    # token_hash is never shown.
    fields = [
        "label",
        "owner",
        "os",
        "capabilities",
        "token_prefix",
        "workspace",
        "connected_at",
        "last_seen_at",
        "paused_until",
        "pause_reason",
        "revoked_at",
    ]
    readonly_fields = [
        "owner",
        "token_prefix",
        "workspace",
        "connected_at",
        "last_seen_at",
        "revoked_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A runner is paired by its owner, who alone ever sees its token.
        return False


ATTEMPT_FIELDS: tuple[str, ...] = (
    "epoch",
    "runner",
    "status",
    "started_at",
    "ended_at",
    "reason",
    "resumes",
    "gap_ms",
)
ATTEMPT_COLUMNS = ["id", "job", "epoch", "runner", "status", "started_at", "ended_at", "reason"]


class JobAttemptInline(_ReadOnlyInline):
    model = JobAttempt
    fields = readonly_fields = ATTEMPT_FIELDS


# Registered by scorecards.admin, with the operator actions (requeue, fail) whose results
# only scorecards may record.
class RunnerJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "run",
        "case_key",
        "owner",
        "runner",
        "status",
        "lease_epoch",
        "leased_by",
        "leased_until",
        "attempts",
        "sweep_failures",
    ]
    list_filter = ["status", "owner", "runner"]
    search_fields = ["case_key"]
    list_select_related = ["run", "owner", "runner", "leased_by"]
    raw_id_fields = ["owner", "runner", "run", "batch", "leased_by", "current_attempt"]
    readonly_fields = [
        "lease_epoch",
        "attempts",
        "created_at",
        "queued_at",
        "finished_at",
        "log_kept",
        "log_bytes",
        "log_dropped",
        "sweep_failures",
        "sweep_error",
        "sweep_held_until",
    ]
    inlines = [JobAttemptInline]


# Registered by scorecards.admin, with the late results (shadows) graded for display.
class JobAttemptAdmin(admin.ModelAdmin):
    list_display = [*ATTEMPT_COLUMNS, "resumes"]
    list_filter = ["status"]
    list_select_related = ["job", "runner"]
    raw_id_fields = ["job", "runner"]
    search_fields = ["job__case_key"]


@admin.register(JobLogLine)
class JobLogLineAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "job", "epoch", "at", "line"]
    list_select_related = ["run", "job"]
    raw_id_fields = ["job", "run"]
    search_fields = ["line"]
    # The log table can be large: no full COUNT(*) on every page.
    show_full_result_count = False
