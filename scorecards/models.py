from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from runnercli.protocol import HarnessSpec, spec_features

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class Role(models.TextChoices):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


# What a reason, an error, a person's note or an event's message may hold: their columns'
# length, to which every writer cuts them.
TEXT_CHARS = 1000

# Each role can do what the ones after it can.
ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


class WorkspaceQuerySet(models.QuerySet["Workspace"]):
    def visible_to(self, user: User) -> WorkspaceQuerySet:
        return self.filter(memberships__user=user)


class Workspace(models.Model):
    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # Runs per calendar month; null means unlimited.
    run_quota = models.PositiveIntegerField(null=True, blank=True)
    budget_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    spent_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    spent_tokens = models.PositiveBigIntegerField(default=0)

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    # Indexed by membership_unique, which leads with it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="memberships", db_index=False
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    def allows(self, role: str) -> bool:
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]

    def may_cancel(self, run: Run) -> bool:
        """A member may cancel the runs they started; an admin, any run of the workspace."""
        own = run.submitted_by_id == self.user_id and self.allows(Role.MEMBER)
        return own or self.allows(Role.ADMIN)


class HarnessVersion(models.Model):
    """An immutable version of a harness: how to run one case."""

    # Indexed by harnessversion_unique, which leads with it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="harnesses", db_index=False
    )
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    # What the author wrote, when the spec is its expansion (an agent preset): shown beside
    # the version, never sent to runners (null: the author wrote the spec itself).
    source = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace_id", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name", "version"], name="harnessversion_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def capabilities(self) -> list[str]:
        """What a runner must have for it: the spec's capabilities, `repo:NAME` for its
        repo, `docker` for a container service."""
        spec = self.parsed_spec
        return spec.required_capabilities() if spec else list(self.spec.get("capabilities", []))

    @property
    def features(self) -> list[str]:
        """The runner features its cases need (protocol 3)."""
        spec = self.parsed_spec
        return spec_features(spec) if spec else []

    @cached_property
    def parsed_spec(self) -> HarnessSpec | None:
        """The spec as today's runners read it (None for one stored under older rules)."""
        try:
            return HarnessSpec.model_validate(self.spec)
        except ValidationError:
            return None


class DatasetVersion(models.Model):
    """An immutable version of a dataset: cases with expected outputs."""

    # Indexed by datasetversion_unique, which leads with it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="datasets", db_index=False
    )
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    case_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["workspace_id", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name", "version"], name="datasetversion_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Case(models.Model):
    # Indexed by case_key_unique, which leads with it.
    dataset = models.ForeignKey(
        DatasetVersion, on_delete=models.CASCADE, related_name="cases", db_index=False
    )
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=200)
    input = models.JSONField(default=dict)
    expected = models.JSONField(null=True)
    # Kept on the server, never sent to a runner: the tests whose outcome decides a `verify`
    # grader (`{fail_to_pass, pass_to_pass}`).
    tests = models.JSONField(null=True, blank=True)
    # Sent beside the case, never in it: written into the worktree once the agent has ended.
    hidden_files = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["dataset_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="case_key_unique"),
        ]

    def __str__(self) -> str:
        return self.key


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


TERMINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED)


class RunQuerySet(models.QuerySet["Run"]):
    def visible_to(self, user: User) -> RunQuerySet:
        return self.filter(workspace__memberships__user=user)


class Run(models.Model):
    """A scorecard run: one harness version over one dataset version on a runtime."""

    # Indexed by run_ws_created, which leads with it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    # Indexed by run_history, which leads with it.
    harness = models.ForeignKey(
        HarnessVersion, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    dataset = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="runs")
    runtime = models.CharField(max_length=50)
    # The resolved runner for `self:<id>`; null for `self:any`.
    runner = models.ForeignKey(
        "runners.Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    concurrency = models.PositiveIntegerField(default=1)
    repeats = models.PositiveSmallIntegerField(default=1, help_text="Runs of each case.")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The run this one re-runs cases of.",
    )
    rerun_of = models.CharField(
        max_length=12, blank=True, help_text="Which cases of the parent: failed or unfinished."
    )
    metadata = models.JSONField(default=dict, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs"
    )
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The harness version whose grader scored the current verdicts, when a regrade applied
    # another version's grader to this run's stored outputs (null: the run's own).
    graded_with = models.ForeignKey(
        HarnessVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    regraded_at = models.DateTimeField(null=True, blank=True)
    # The cost its cases may report before the cases not started are skipped (null: none).
    max_cost_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)

    objects = RunQuerySet.as_manager()
    # Set by `run_start` on the instance it returns, not stored: what it wrote besides the row,
    # so the start's reply is built without reading any of it back.
    dispatched: Dispatched | None = None

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "created_at"], name="run_ws_created"),
            models.Index(fields=["harness", "dataset", "created_at"], name="run_history"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


@dataclass(frozen=True)
class Dispatched:
    """What a run's start wrote: its jobs (all parked or queued) and its events."""

    jobs: int
    events: list[RunEvent]


class EventLevel(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class RunEvent(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now)
    level = models.CharField(max_length=10, choices=EventLevel.choices, default=EventLevel.INFO)
    message = models.CharField(max_length=TEXT_CHARS)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return self.message


class Verdict(models.TextChoices):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    # A judge-graded case whose judgements are not all in yet: no verdict counts yet.
    JUDGING = "judging"
    # Never started: the run's budget was spent first. Counted apart, in no rate or pair.
    SKIPPED = "skipped"


class CaseResult(models.Model):
    """The settled outcome of one case of a run, scored by the server."""

    # Indexed by caseresult_unique, which leads with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results", db_index=False)
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="+")
    repeat = models.PositiveSmallIntegerField(default=0)
    # Settlement order within the run, given under the run's row lock: a cursor over it is
    # stable while results keep arriving.
    seq = models.PositiveBigIntegerField(default=0)
    attempt = models.ForeignKey(
        "runners.JobAttempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    runner = models.ForeignKey(
        "runners.Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    score = models.FloatField(default=0.0)
    status = models.CharField(max_length=20)
    output = models.TextField(blank=True)
    error = models.CharField(max_length=TEXT_CHARS, blank=True)
    reason = models.CharField(max_length=TEXT_CHARS, blank=True, help_text="The grader's reason.")
    exit_code = models.IntegerField(null=True, blank=True)
    stderr_tail = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    usage = models.JSONField(null=True, blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    fingerprint = models.JSONField(default=dict, blank=True)
    # Who judged a judge-graded case: {runner, user, tools, model, prompt_digest, agreement}.
    judged_by = models.JSONField(default=dict, blank=True, db_default={})
    # Protocol 4, as the runner reported them: what the verifier said, the protected paths the
    # agent changed (null: none were protected), what stopped the agent, each phase's time.
    verify = models.JSONField(null=True, blank=True)
    tampered = models.JSONField(null=True, blank=True)
    stopped = models.JSONField(null=True, blank=True)
    phases = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # A person's verdict, when one stands: `verdict` and `score` are theirs, and what the
    # grader says underneath is kept in `grader_verdict` / `grader_score` (a regrade updates
    # those, never the person's) until it is withdrawn.
    verdict_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verdict_at = models.DateTimeField(null=True, blank=True)
    verdict_note = models.CharField(max_length=TEXT_CHARS, blank=True)
    grader_verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    grader_score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "case__position", "repeat"]
        indexes = [
            models.Index(fields=["run", "seq"], name="caseresult_run_seq"),
            models.Index(fields=["run", "verdict", "seq"], name="caseresult_run_verdict_seq"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "case", "repeat"], name="caseresult_unique"),
            models.CheckConstraint(
                condition=Q(score__gte=0.0) & Q(score__lte=1.0), name="caseresult_score_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.case} {self.verdict}"


class VerdictSource(models.TextChoices):
    GRADER = "grader"  # scored when the case settled
    REGRADE = "regrade"  # a grader applied again to the stored output
    PERSON = "person"  # a workspace member's verdict
    WITHDRAWN = "withdrawn"  # a person's verdict withdrawn: the grader's stands again


class VerdictEntry(models.Model):
    """One verdict a result had: who or what set it, when, with which grader, and whether it
    became the one that counts (a regrade under a person's verdict is recorded, not counted)."""

    result = models.ForeignKey(CaseResult, on_delete=models.CASCADE, related_name="verdicts")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    score = models.FloatField(default=0.0)
    reason = models.CharField(max_length=TEXT_CHARS, blank=True)
    source = models.CharField(max_length=10, choices=VerdictSource.choices)
    harness = models.ForeignKey(
        HarnessVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=TEXT_CHARS, blank=True)
    counted = models.BooleanField(default=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["result_id", "at", "id"]

    def __str__(self) -> str:
        return f"{self.verdict} ({self.source})"
