from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class RunnerQuerySet(models.QuerySet["Runner"]):
    def owned_by(self, user: User | int) -> RunnerQuerySet:
        return self.filter(owner=user)

    def active(self) -> RunnerQuerySet:
        return self.filter(revoked_at__isnull=True)

    def online(self) -> RunnerQuerySet:
        return self.active().filter(last_seen_at__gte=Runner.online_since())


class PairingMethod(models.TextChoices):
    PAGE = "page", "account page"
    API = "api", "REST API"
    MCP = "mcp", "MCP tool"
    DEVICE = "device", "device code"


class Runner(models.Model):
    """A member's own machine, paired once. Owned by a user; serves all their workspaces."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runners"
    )
    label = models.CharField(max_length=100)
    os = models.CharField(max_length=100, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=16)
    workspace = models.ForeignKey(
        "scorecards.Workspace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The workspace it was paired from (informative; it serves all of them).",
    )
    connected_at = models.DateTimeField(default=timezone.now)
    paired_via = models.CharField(
        max_length=10,
        choices=PairingMethod.choices,
        blank=True,
        help_text="How it was paired (blank: before this was recorded).",
    )
    last_seen_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A plan limit (its tool said "rate limited"): it leases nothing until then.
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.CharField(max_length=200, blank=True)
    # Why it leases nothing of its own accord, as its `hello` said ("on battery"; "" when
    # it leases): a runner that is seen but paused so does not keep idle jobs waiting.
    paused_reason = models.CharField(max_length=100, blank=True, db_default="", default="")
    # What its last `hello` or `lease_job` said it speaks and can do (protocol 3 features:
    # `repo`, `artifacts`, `trace`, …): a job needing a feature is leased only to a runner
    # that has it.
    protocol = models.PositiveSmallIntegerField(default=0, db_default=0)
    features = models.JSONField(default=list, blank=True)

    objects = RunnerQuerySet.as_manager()

    class Meta:
        ordering = ["label", "id"]

    def __str__(self) -> str:
        return f"{self.label} (#{self.pk})"

    @staticmethod
    def online_since() -> object:
        return timezone.now() - timedelta(seconds=settings.EVERDICT_PRESENCE_WINDOW_S)

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_online(self) -> bool:
        return (
            not self.is_revoked
            and self.last_seen_at is not None
            and self.last_seen_at >= self.online_since()  # type: ignore[operator]
        )

    @property
    def is_paused(self) -> bool:
        """Paused by a plan limit: it leases nothing until `paused_until`."""
        return (
            not self.is_revoked
            and self.paused_until is not None
            and self.paused_until > timezone.now()
        )

    def has_capabilities(self, required: list[str]) -> bool:
        return set(required) <= set(self.capabilities or [])

    def has_features(self, needed: Sequence[str]) -> bool:
        return set(needed) <= set(self.features or [])

    def update_features(self, protocol: int, features: Sequence[str]) -> None:
        """Store the protocol and features the runner reports now, when they changed."""
        wanted = sorted(set(features))
        if protocol != self.protocol or wanted != list(self.features or []):
            Runner.objects.filter(pk=self.pk).update(protocol=protocol, features=wanted)
            self.protocol, self.features = protocol, wanted

    def update_paused_reason(self, reason: str) -> None:
        """Store why the runner says it leases nothing (its `hello`), when it changed."""
        reason = reason[:100]
        if reason != self.paused_reason:
            Runner.objects.filter(pk=self.pk).update(paused_reason=reason)
            self.paused_reason = reason

    def update_capabilities(self, capabilities: Sequence[str]) -> None:
        """Store the capabilities the runner reports now, when they changed."""
        wanted = sorted(set(capabilities))
        if wanted != list(self.capabilities or []):
            Runner.objects.filter(pk=self.pk).update(capabilities=wanted)
            self.capabilities = wanted


class JobStatus(models.TextChoices):
    PENDING = "pending"
    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


class JobKind(models.TextChoices):
    CASE = "case"
    # Judges a case's stored output (protocol 3): outside the run's concurrency.
    JUDGE = "judge"


TERMINAL_JOB_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED)
ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.LEASED)


class JobBatch(models.Model):
    """What a dispatch's jobs share (harness, workspace, submitter), stored once, not per job."""

    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"batch {self.pk}"


class RunnerJob(models.Model):
    """One case of one run in the lease queue, keyed by (owner, runner|any).

    The queue knows jobs, leases and fences; the run is a lazy reference and the case
    travels as an opaque payload, so nothing here knows what a case or a score is.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Null means `self:any`: any of the owner's runners with the capabilities.
    runner = models.ForeignKey(
        Runner, null=True, blank=True, on_delete=models.CASCADE, related_name="pinned_jobs"
    )
    # Indexed by runnerjob_run_seq_unique, which leads with it.
    run = models.ForeignKey(
        "scorecards.Run", on_delete=models.CASCADE, related_name="jobs", db_index=False
    )
    seq = models.PositiveIntegerField(help_text="Admission order within the run.")
    case_key = models.CharField(max_length=200)
    repeat = models.PositiveSmallIntegerField(
        default=0, db_default=0, help_text="Which run of the case (0-based)."
    )
    batch = models.ForeignKey(JobBatch, on_delete=models.CASCADE, related_name="jobs")
    payload = models.JSONField(help_text="This job's part of the case job (its case).")
    required_capabilities = models.JSONField(default=list, blank=True)
    # The runner features its harness uses (protocol 3): only a runner with all of them may
    # lease it.
    needs_features = models.JSONField(default=list, blank=True)
    kind = models.CharField(
        max_length=8, choices=JobKind.choices, default=JobKind.CASE, db_default=JobKind.CASE
    )
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    lease_epoch = models.PositiveIntegerField(default=0)
    leased_by = models.ForeignKey(
        Runner, null=True, blank=True, on_delete=models.SET_NULL, related_name="leased_jobs"
    )
    leased_until = models.DateTimeField(null=True, blank=True)
    current_attempt = models.ForeignKey(
        "JobAttempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    # Log lines kept for this job, and those dropped past the per-job bounds.
    log_kept = models.PositiveIntegerField(default=0, db_default=0)
    log_bytes = models.PositiveBigIntegerField(default=0, db_default=0)
    log_dropped = models.PositiveIntegerField(default=0, db_default=0)
    # A scheduler step that raised on this job: how often, why, and until when it is set aside.
    sweep_failures = models.PositiveIntegerField(default=0, db_default=0)
    sweep_error = models.CharField(max_length=500, blank=True, db_default="")
    sweep_held_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The claim walks only queued rows, oldest first: finished rows never slow it.
            models.Index(
                fields=["owner", "created_at", "id"],
                condition=Q(status="queued"),
                name="runnerjob_claim",
            ),
            models.Index(
                fields=["leased_until"], condition=Q(status="leased"), name="runnerjob_leased"
            ),
            models.Index(fields=["queued_at"], condition=Q(status="queued"), name="runnerjob_idle"),
            models.Index(fields=["run", "status", "seq"], name="runnerjob_run_status"),
            # A run's pending jobs in order (its admission, and whether any is left). Beside
            # (run, seq), which gives the same order, the planner must not weigh how soon a
            # pending job comes: on statistics from the run's start (most jobs pending) it
            # would read in (run, seq) order the jobs already done, more with every batch.
            models.Index(
                fields=["run", "seq"], condition=Q(status="pending"), name="runnerjob_pending"
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="runnerjob_run_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.case_key}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_JOB_STATUSES


class AttemptStatus(models.TextChoices):
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    CANCELED = "canceled"


class JobAttempt(models.Model):
    """The ledger: one row per physical execution of a job, named by its lease epoch."""

    # Indexed by jobattempt_job_epoch_unique, which leads with it.
    job = models.ForeignKey(
        RunnerJob, on_delete=models.CASCADE, related_name="attempt_set", db_index=False
    )
    epoch = models.PositiveIntegerField()
    runner = models.ForeignKey(Runner, null=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(
        max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.EXECUTING
    )
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    result_digest = models.CharField(max_length=64, blank=True)
    # Taken back by its holder after its lease expired: when last, how often, and the time
    # it spent expired in all.
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumes = models.PositiveIntegerField(default=0, db_default=0)
    gap_ms = models.PositiveBigIntegerField(default=0, db_default=0)
    # A late result refused by the fence, kept (bounded) and never counted.
    shadow_result = models.JSONField(null=True, blank=True)
    shadow_at = models.DateTimeField(null=True, blank=True)
    shadow_reason = models.CharField(max_length=500, blank=True, db_default="")

    class Meta:
        ordering = ["job_id", "epoch"]
        constraints = [
            models.UniqueConstraint(fields=["job", "epoch"], name="jobattempt_job_epoch_unique"),
            # At most one executing attempt per job, enforced by the database itself.
            models.UniqueConstraint(
                fields=["job"],
                condition=Q(status="executing"),
                name="jobattempt_one_executing",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.epoch} of job {self.job_id} ({self.status})"


class DevicePairingStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    CONSUMED = "consumed"


class DevicePairing(models.Model):
    """A machine asking to be paired (RFC 8628's shape): the CLI shows a short code, a signed-in
    member approves it in the browser, the CLI then receives its runner token once."""

    device_code_hash = models.CharField(max_length=64, unique=True, editable=False)
    user_code = models.CharField(max_length=9, unique=True)
    label = models.CharField(max_length=100)
    os = models.CharField(max_length=100, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    requested_from = models.CharField(max_length=100, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    interval_s = models.PositiveSmallIntegerField(default=5)
    last_polled_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=10, choices=DevicePairingStatus.choices, default=DevicePairingStatus.PENDING
    )
    # The member who last opened its page while it was pending: listed on their account page.
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    runner = models.ForeignKey(
        Runner, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user_code} ({self.label}, {self.status})"


class JobLogLine(models.Model):
    """A log line pushed by the runner for a job; its id is the run log's sequence number."""

    job = models.ForeignKey(RunnerJob, on_delete=models.CASCADE, related_name="log_lines")
    # Indexed by joblogline_run_seq, which leads with it.
    run = models.ForeignKey(
        "scorecards.Run", on_delete=models.CASCADE, related_name="log_lines", db_index=False
    )
    epoch = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    line = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="joblogline_run_seq")]

    def __str__(self) -> str:
        return self.line[:80]
