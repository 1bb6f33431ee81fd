"""A member, their workspace and API key, suites of no-op cases and paired runners."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NO_OP_SPEC: dict[str, Any] = {
    "command": ["true"],
    "timeout_s": 60,
    "output": "text",
    "grader": {"type": "exit_code"},
}


@dataclass(frozen=True)
class Member:
    user: Any
    api_key: str
    slug: str


def seed_member(username: str = "bench", slug: str = "bench") -> Member:
    """A member, their workspace and a personal API key (through the services)."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_key_create
    from scorecards.services import workspace_create

    user = get_user_model().objects.create_user(username, password=None)
    workspace_create(user=user, slug=slug, name=slug.title())
    return Member(user=user, api_key=api_key_create(user=user, name="bench").key, slug=slug)


def seed_suite(
    member: Member,
    *,
    name: str,
    cases: int,
    spec: dict[str, Any] | None = None,
    expected: str = "0",
) -> None:
    """A harness and a dataset of `cases` cases expecting `expected`, both named `name`."""
    from scorecards.services import dataset_create, harness_create

    harness_create(user=member.user, workspace_slug=member.slug, name=name, spec=spec or NO_OP_SPEC)
    dataset_create(
        user=member.user,
        workspace_slug=member.slug,
        name=name,
        cases=[{"key": f"c{i}", "input": {"i": i}, "expected": expected} for i in range(cases)],
    )


def pair_runners(
    owner: Any, count: int, *, label: str = "bench", capabilities: Sequence[str] = ("python",)
) -> list[tuple[int, str]]:
    """Pair `count` runners for `owner` through `runner_pair`; returns (id, token) pairs."""
    from django.db import transaction

    from runners.services import runner_pair

    paired = []
    with transaction.atomic():
        for i in range(count):
            p = runner_pair(owner=owner, label=f"{label}-{i}", capabilities=list(capabilities))
            paired.append((p.runner.pk, p.token))
    return paired
