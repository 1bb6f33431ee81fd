"""Reply shapes of the review queue (`GET /api/workspaces/<slug>/review`) and of one review."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.links import case_url
from scorecards.review.models import Review
from scorecards.review.selectors import OUTPUT_CHARS, Agreement, Item, Queue


class JudgeVote(Reply):
    state: str = Field(description="readable, unreadable or failed")
    passed: bool | None
    reason: str


class QueueItem(Reply):
    result: int
    run: int
    case: str
    repeat: int
    verdict: str
    reasons: list[str] = Field(
        description="judges split, judge's answer unreadable, flaky across repeats, protected "
        "files changed, error"
    )
    output: str = Field(description=f"The first {OUTPUT_CHARS} characters.")
    expected: str
    reason: str = Field(description="The grader's (or the judges') reason.")
    judges: list[JudgeVote]
    url: str = Field(description="The case page: its trace, files and artifacts.")

    @classmethod
    def of(cls, item: Item) -> QueueItem:
        r = item.result
        expected = r.case.expected
        return cls(
            result=r.pk,
            run=r.run_id,
            case=r.case.key,
            repeat=r.repeat,
            verdict=r.verdict,
            reasons=item.reasons,
            output=r.output[:OUTPUT_CHARS],
            expected=expected if isinstance(expected, str) else str(expected),
            reason=r.reason,
            judges=[
                JudgeVote(
                    state=str(v.get("state", "")),
                    passed=v.get("pass") if isinstance(v.get("pass"), bool) else None,
                    reason=str(v.get("reason", "")),
                )
                for v in item.judges
            ],
            url=case_url(r.run_id, r.case.key),
        )


class ReviewItem(Reply):
    result: int
    run: int
    case: str
    repeat: int
    action: str = Field(description="pass, fail (a person's verdict), confirm or note")
    machine_verdict: str = Field(description="What the grader or judges said then.")
    note: str
    by: str
    at: Timestamp

    @classmethod
    def of(cls, review: Review) -> ReviewItem:
        return cls(
            result=review.result_id,
            run=review.result.run_id,
            case=review.result.case.key,
            repeat=review.result.repeat,
            action=review.action,
            machine_verdict=review.machine_verdict,
            note=review.note,
            by=review.by.get_username() if review.by else "",
            at=review.at,
        )


class AgreementItem(Reply):
    model: str
    prompt_digest: str
    agreed: int
    reviewed: int
    ci: tuple[float, float] | None = Field(description="95 % Wilson interval of agreed/reviewed.")
    text: str = Field(description="`agreed with people on 31 of 34 reviewed, 91 % [77-97]`")

    @classmethod
    def of(cls, agreement: Agreement) -> AgreementItem:
        return cls(
            model=agreement.model,
            prompt_digest=agreement.prompt_digest,
            agreed=agreement.agreed,
            reviewed=agreement.reviewed,
            ci=agreement.ci,
            text=agreement.text,
        )


class QueueReply(Reply):
    """The results that need a person, oldest run first; who reviewed what; per judge, how
    often people agreed with it."""

    workspace: str
    runs: list[int]
    remaining: int = Field(description="Results that still need a person.")
    items: list[QueueItem] = Field(description="The first 500 of them.")
    reviewed: list[ReviewItem] = Field(description="The newest 50 reviews of these runs.")
    people_agreement: list[AgreementItem]

    @classmethod
    def of(cls, queue: Queue, agreement: list[Agreement]) -> QueueReply:
        return cls(
            workspace=queue.workspace.slug,
            runs=[run.pk for run in queue.runs],
            remaining=queue.remaining,
            items=[QueueItem.of(item) for item in queue.items],
            reviewed=[ReviewItem.of(review) for review in queue.reviews],
            people_agreement=[AgreementItem.of(a) for a in agreement],
        )
