"""What needs a person, and how often each judge agrees with people.

A result needs a person when its judges split, a judge's answer could not be read, its case
both passed and did not across repeats, the agent changed a protected file, or it is an
error — until someone passes, fails or confirms it (or set a person's verdict on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Exists, F, OuterRef, Q

from core.errors import NotFound
from scorecards.models import CaseResult, Run, Verdict, Workspace
from scorecards.numbers import wilson_interval
from scorecards.numbers.sentences import EN_DASH
from scorecards.review.models import DECIDING, Review, ReviewAction
from scorecards.selectors.workspaces import membership_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# The newest runs a workspace's or a harness's queue looks through.
QUEUE_RUNS = 20
QUEUE_ITEMS = 500
OUTPUT_CHARS = 4096
SETTLED = (Verdict.PASS, Verdict.FAIL, Verdict.ERROR)


@dataclass
class Item:
    result: CaseResult
    reasons: list[str]
    judges: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Queue:
    workspace: Workspace
    runs: list[Run]
    items: list[Item]
    remaining: int
    reviews: list[Review]


def _runs(workspace: Workspace, run_id: int | None, harness: str | None) -> list[Run]:
    runs = Run.objects.filter(workspace=workspace).select_related("harness", "dataset")
    if run_id is not None:
        found = list(runs.filter(pk=run_id))
        if not found:
            raise NotFound(f"Run {run_id} not found in workspace {workspace.slug!r}.")
        return found
    if harness:
        runs = runs.filter(harness__name=harness)
    return list(runs.order_by("-id")[:QUEUE_RUNS])


def _votes(result: CaseResult) -> list[dict[str, Any]]:
    votes = (result.judged_by or {}).get("votes")
    return [v for v in votes if isinstance(v, dict)] if isinstance(votes, list) else []


def reasons_of(result: CaseResult, flaky: bool) -> list[str]:
    """Why the result needs a person (none: it does not)."""
    reasons = []
    votes = _votes(result)
    if len({v.get("pass") for v in votes if v.get("state") == "readable"}) > 1:
        reasons.append("judges split")
    if any(v.get("state") in ("unreadable", "failed") for v in votes):
        reasons.append("judge's answer unreadable")
    if flaky:
        reasons.append("flaky across repeats")
    if result.tampered:
        reasons.append("protected files changed")
    if result.verdict == Verdict.ERROR:
        reasons.append("error")
    return reasons


def review_queue(
    *, user: User, workspace_slug: str, run_id: int | None = None, harness: str | None = None
) -> Queue:
    """The results of the workspace's newest runs (or one run's, or one harness's) that need a
    person, in run and case order; outsiders get NotFound."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    runs = _runs(workspace, run_id, harness)
    flaky = set(
        CaseResult.objects.filter(run__in=runs, verdict__in=SETTLED)
        .values("run_id", "case_id")
        .annotate(p=Count("pk", filter=Q(verdict=Verdict.PASS)), n=Count("pk"))
        .filter(p__gt=0, p__lt=F("n"))
        .values_list("run_id", "case_id")
    )
    decided = Review.objects.filter(result=OuterRef("pk"), action__in=DECIDING)
    candidates = (
        CaseResult.objects.filter(run__in=runs, verdict__in=SETTLED, verdict_by__isnull=True)
        .filter(
            Q(verdict=Verdict.ERROR)
            | Q(tampered__0__isnull=False)
            | Q(judged_by__has_key="votes")
            | Q(case_id__in={case for _, case in flaky})
        )
        .exclude(Exists(decided))
        .select_related("case", "run")
        .order_by("run_id", "case__position", "repeat")
    )
    items = []
    for result in candidates.iterator(chunk_size=500):
        reasons = reasons_of(result, (result.run_id, result.case_id) in flaky)
        if reasons:
            items.append(Item(result, reasons, _votes(result)))
    reviews = list(
        Review.objects.filter(result__run__in=runs)
        .select_related("by", "result__case")
        .order_by("-at", "-id")[:50]
    )
    return Queue(workspace, runs, items[:QUEUE_ITEMS], len(items), reviews)


@dataclass(frozen=True)
class Agreement:
    model: str
    prompt_digest: str
    agreed: int
    reviewed: int
    ci: tuple[float, float] | None

    @property
    def text(self) -> str:
        """`agreed with people on 31 of 34 reviewed, 91 % [77-97]` (an en dash between the ends)."""
        if not self.reviewed:
            return "not reviewed by people yet"
        share = f"{self.agreed / self.reviewed * 100:.0f} %"
        if self.ci is not None:
            lo, hi = (round(bound * 100) for bound in self.ci)
            share += f" [{lo}{EN_DASH}{hi}]"
        return f"agreed with people on {self.agreed} of {self.reviewed} reviewed, {share}"


def people_agreement(*, workspace: Workspace, harness: str | None = None) -> list[Agreement]:
    """Per judge (prompt digest and model), how often people agreed with its verdict where a
    person looked: a person's verdict agrees when it is the judges' (`grader_verdict`), a
    confirm always does. The newest look at a result counts."""
    results = CaseResult.objects.filter(
        run__workspace=workspace, judged_by__has_key="prompt_digest"
    ).filter(Q(verdict_by__isnull=False) | Q(reviews__action=ReviewAction.CONFIRM))
    if harness:
        results = results.filter(run__harness__name=harness)
    rows = results.distinct().values_list(
        "pk", "judged_by", "verdict", "grader_verdict", "verdict_by"
    )
    tallies: dict[tuple[str, str], list[int]] = {}
    for _pk, judged_by, verdict, grader_verdict, by in rows:
        judge = (str(judged_by.get("prompt_digest", "")), str(judged_by.get("model", "")))
        agreed = grader_verdict == verdict if by is not None else True
        tally = tallies.setdefault(judge, [0, 0])
        tally[0] += agreed
        tally[1] += 1
    return [
        Agreement(
            model=model,
            prompt_digest=digest,
            agreed=agreed,
            reviewed=reviewed,
            ci=wilson_interval(passes=agreed, trials=reviewed),
        )
        for (digest, model), (agreed, reviewed) in sorted(tallies.items())
    ]
