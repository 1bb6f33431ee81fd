"""Harnesses and datasets as code: the files of a member's `.everdict/` pushed as one change.

Each file becomes a new immutable version only where its canonical content differs from the
latest version's, so pushing the same tree twice creates nothing the second time. A push is
validated whole before anything is written, and written in one transaction: a bad file
refuses the push, and nothing of it is created.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from django.db import transaction

from core.errors import Invalid
from runnercli.protocol import HarnessSpec
from scorecards.models import Case, DatasetVersion, HarnessVersion, Membership, Role, Workspace
from scorecards.selectors.workspaces import memberships_of, require_role
from scorecards.services.catalog import (
    CaseIn,
    check_name,
    dataset_version_add,
    harness_source,
    harness_version_add,
    locked_workspace,
    validated_cases,
    validated_spec,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Kind = Literal["harness", "dataset"]
Status = Literal["created", "unchanged", "would create"]
# A change list that still reads as one: past this many, "and N more".
_MAX_CHANGES = 12
_MAX_VALUE_CHARS = 40


@dataclass(frozen=True)
class HarnessFile:
    """A harness as its file holds it: what the author wrote."""

    file: str
    name: str
    source: dict[str, Any]


@dataclass(frozen=True)
class DatasetFile:
    """A dataset as its JSONL file holds it; `lines[i]`: the line case i was read from."""

    file: str
    name: str
    cases: list[dict[str, Any]]
    lines: list[int] | None = None


@dataclass
class Pushed:
    """What a push did (or would do) with one file."""

    file: str
    kind: Kind
    name: str
    status: Status
    version: int
    previous: int | None
    changes: list[str] = field(default_factory=list)
    harness: HarnessVersion | None = None


@dataclass(frozen=True)
class _Checked:
    file: str
    kind: Kind
    name: str
    document: Any  # the canonical content compared with the latest version's
    spec: HarnessSpec | None = None
    source: dict[str, Any] | None = None
    cases: list[CaseIn] | None = None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _harness_document(spec: dict[str, Any], source: dict[str, Any] | None) -> Any:
    """What a harness version is compared by: the preset its author wrote, or its spec."""
    return source if source is not None else spec


def _short(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    """What changed between two JSON documents, a key path a line."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(old.keys() | new.keys()):
            where = f"{path}.{key}" if path else key
            if key not in old:
                lines.append(f"{where} added: {_short(new[key])}")
            elif key not in new:
                lines.append(f"{where} removed")
            else:
                lines += _differences(old[key], new[key], where)
        return lines
    if _canonical(old) == _canonical(new):
        return []
    return [f"{path or 'content'}: {_short(old)} → {_short(new)}"]


def _case_differences(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    before = {case["key"]: _canonical(case) for case in old}
    after = {case["key"]: _canonical(case) for case in new}
    added = len(after.keys() - before.keys())
    removed = len(before.keys() - after.keys())
    changed = sum(1 for key in after.keys() & before.keys() if after[key] != before[key])
    lines = [
        f"{count} case{'s' if count != 1 else ''} {what}"
        for count, what in ((added, "added"), (removed, "removed"), (changed, "changed"))
        if count
    ]
    return lines or ["cases reordered"]


def _cut(lines: list[str]) -> list[str]:
    if len(lines) <= _MAX_CHANGES:
        return lines
    return [*lines[:_MAX_CHANGES], f"and {len(lines) - _MAX_CHANGES} more"]


def _located(exc: Invalid, prefix: str, lines: list[int] | None) -> list[str]:
    """A refusal's messages, each named by its file (and line, for a case of a dataset)."""
    detail = exc.detail if isinstance(exc.detail, dict) else {"detail": [exc.detail]}
    found = []
    for messages in detail.values():
        for message in messages if isinstance(messages, list) else [messages]:
            text = str(message)
            where = prefix
            if lines and text.startswith("cases["):
                index = int(text[len("cases[") : text.index("]")])
                if index < len(lines):
                    where = f"{prefix}:{lines[index]}"
            found.append(f"{where}: {text}")
    return found


def _check_harness(item: HarnessFile) -> _Checked:
    check_name(item.name)
    spec = validated_spec(item.source)
    source = harness_source(item.source)
    document = _harness_document(spec.model_dump(mode="json"), source)
    return _Checked(item.file, "harness", item.name, document, spec=spec, source=source)


def _check_dataset(item: DatasetFile) -> _Checked:
    check_name(item.name)
    cases = validated_cases(item.cases)
    document = [case.model_dump(mode="json") for case in cases]
    return _Checked(item.file, "dataset", item.name, document, cases=cases)


def _checked(harnesses: list[HarnessFile], datasets: list[DatasetFile]) -> list[_Checked]:
    """Every file validated, or Invalid naming every bad one (file, line, reason)."""
    checked, problems = [], []
    for kind, items in (("harness", harnesses), ("dataset", datasets)):
        seen: dict[str, str] = {}
        for item in items:
            if item.name in seen:
                problems.append(f"{item.file}: {kind} {item.name!r} is in {seen[item.name]} too")
                continue
            seen[item.name] = item.file
            try:
                if isinstance(item, HarnessFile):
                    checked.append(_check_harness(item))
                else:
                    checked.append(_check_dataset(item))
            except Invalid as exc:
                lines = item.lines if isinstance(item, DatasetFile) else None
                problems += _located(exc, item.file, lines)
    if problems:
        # One problem a line: a person fixes them in order, file by file.
        raise Invalid({"detail": "\n".join(problems)})
    return checked


def _pushed_workspace(user: User, workspace_slug: str | None) -> Membership:
    if workspace_slug:
        return require_role(user=user, slug=workspace_slug, role=Role.ADMIN)
    admin_of = [m for m in memberships_of(user) if m.allows(Role.ADMIN)]
    if len(admin_of) == 1:
        return admin_of[0]
    slugs = ", ".join(m.workspace.slug for m in admin_of) or "none"
    raise Invalid(f"Name the workspace to push to (you are an admin of: {slugs}).")


def _latest_harness(workspace: Workspace, name: str) -> tuple[int | None, Any]:
    latest = HarnessVersion.objects.filter(workspace=workspace, name=name).order_by("-version")
    found = latest.first()
    if found is None:
        return None, None
    return found.version, _harness_document(found.spec, found.source)


def _latest_dataset(workspace: Workspace, name: str) -> tuple[int | None, Any]:
    found = DatasetVersion.objects.filter(workspace=workspace, name=name).order_by("-version")
    latest = found.first()
    if latest is None:
        return None, None
    fields = list(CaseIn.model_fields)
    rows = Case.objects.filter(dataset=latest).order_by("position").values(*fields)
    return latest.version, [dict(row) for row in rows]


def _apply(workspace: Workspace, item: _Checked, user: User, dry_run: bool) -> Pushed:
    latest = _latest_harness if item.kind == "harness" else _latest_dataset
    previous, document = latest(workspace, item.name)
    if previous is not None and _canonical(document) == _canonical(item.document):
        harness = None
        if item.kind == "harness":
            harness = HarnessVersion.objects.get(
                workspace=workspace, name=item.name, version=previous
            )
        return Pushed(item.file, item.kind, item.name, "unchanged", previous, previous, [], harness)
    if previous is None:
        changes = ["new"]
    elif item.kind == "harness":
        changes = _cut(_differences(document, item.document))
    else:
        changes = _case_differences(document, item.document)
    pushed = Pushed(item.file, item.kind, item.name, "would create", (previous or 0) + 1, previous)
    pushed.changes = changes
    if dry_run:
        return pushed
    pushed.status = "created"
    if item.kind == "harness":
        assert item.spec is not None
        pushed.harness = harness_version_add(
            workspace=workspace, name=item.name, spec=item.spec, source=item.source, user=user
        )
        pushed.version = pushed.harness.version
    else:
        assert item.cases is not None
        added = dataset_version_add(
            workspace=workspace, name=item.name, cases=item.cases, user=user
        )
        pushed.version = added.version
    return pushed


def catalog_push(
    *,
    user: User,
    workspace_slug: str | None,
    harnesses: list[HarnessFile],
    datasets: list[DatasetFile],
    dry_run: bool = False,
) -> tuple[Workspace, list[Pushed]]:
    """Push a tree of harness and dataset files (admin): a new version of each file whose
    content differs from its latest version's, all in one transaction; with `dry_run`, say
    what would be created and create nothing."""
    membership = _pushed_workspace(user, workspace_slug)
    if not harnesses and not datasets:
        raise Invalid("Nothing to push: no harness or dataset file.")
    # Validation stays outside: the transaction holds SQLite's write lock.
    checked = _checked(harnesses, datasets)
    with transaction.atomic():
        workspace = locked_workspace(membership.workspace_id)
        return workspace, [_apply(workspace, item, user, dry_run) for item in checked]
