"""The catalog: new immutable harness and dataset versions of a workspace.

Every create makes a new version; nothing here ever changes a stored version, so a run
pinned to `name v3` runs exactly what v3 was when it was created.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any

from django.db import transaction
from django.db.models import Max, QuerySet
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from core.errors import Invalid
from core.jsonbounds import MAX_JSON_DEPTH, json_depth_within, loads_bounded
from runnercli.protocol import HarnessSpec
from runnercli.protocol.jsonl import json_lines
from runnercli.protocol.presets import expand, is_preset
from runnercli.protocol.verifying import MAX_REPORT_TESTS, MAX_TEST_NAME_CHARS, check_hidden_files
from scorecards.models import Case, DatasetVersion, HarnessVersion, Role, Workspace
from scorecards.patterns import backtracking_only, pattern_refusal
from scorecards.selectors.workspaces import require_role

if TYPE_CHECKING:
    from django.contrib.auth.models import User

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_CASES = 100_000
_BULK_BATCH = 1000
# Enough reasons to fix a file in one pass, few enough to keep a reply readable.
_MAX_MESSAGES = 20


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _check_storable(value: Any) -> None:
    """Refuse what Python's JSON accepts and PostgreSQL's jsonb does not."""
    if not json_depth_within(value):
        raise ValueError(f"must be nested at most {MAX_JSON_DEPTH} levels deep")
    try:
        json.dumps(value, allow_nan=False)
        has_nul = _has_nul(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError("must be plain JSON (no NaN or Infinity), nested reasonably") from exc
    if has_nul:
        raise ValueError("must not contain NUL characters")


TestName = Annotated[str, Field(min_length=1, max_length=MAX_TEST_NAME_CHARS)]


class CaseTests(BaseModel):
    """SWE-bench's shape: the tests the change must make pass, and those it must keep passing
    (`path::name`, `classname.name` or `name`)."""

    model_config = ConfigDict(extra="forbid")

    fail_to_pass: list[TestName] = Field(default_factory=list, max_length=MAX_REPORT_TESTS)
    pass_to_pass: list[TestName] = Field(default_factory=list, max_length=MAX_REPORT_TESTS)


class CaseIn(BaseModel):
    """One case as a client sends it; the answer (`expected`) stays on the server."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200)
    input: Any = Field(default_factory=dict)
    expected: Any = None
    # Kept on the server like `expected`: the tests whose outcome decides a `verify` grader.
    tests: CaseTests | None = None
    # Sent beside the case, never in it: written for the verifier once the agent has ended.
    hidden_files: dict[str, str] | None = None

    @field_validator("hidden_files")
    @classmethod
    def _hidden_files(cls, files: dict[str, str] | None) -> dict[str, str] | None:
        if files is not None:
            check_hidden_files(files)
            _check_storable(files)
        return files

    @field_validator("key")
    @classmethod
    def _storable_key(cls, key: str) -> str:
        if "\x00" in key:
            raise ValueError("must not contain NUL characters")
        return key

    @field_validator("input", "expected")
    @classmethod
    def _strict_json(cls, value: Any) -> Any:
        _check_storable(value)
        return value

    @field_validator("input")
    @classmethod
    def _no_input_is_empty(cls, value: Any) -> Any:
        # The column holds JSON, not SQL NULL: a case without input has an empty one.
        return {} if value is None else value


_CASES = TypeAdapter(list[CaseIn])


def _location(prefix: str, loc: tuple[int | str, ...]) -> str:
    """`grader.type`, `command[0]`, `cases[3].key`."""
    location = prefix
    for part in loc:
        if isinstance(part, int):
            location += f"[{part}]"
        else:
            location += f".{part}" if location else str(part)
    return location


def _messages(exc: ValidationError, prefix: str = "") -> list[str]:
    """Pydantic errors as `location: reason` lines a person can act on."""
    lines = []
    for error in exc.errors()[:_MAX_MESSAGES]:
        location = _location(prefix, error["loc"])
        reason = error["msg"].removeprefix("Value error, ")
        lines.append(f"{location}: {reason}" if location else reason)
    return lines


def check_name(name: Any) -> None:
    """Refuse a harness or dataset name that is not 1-100 plain characters."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise Invalid(
            {
                "name": [
                    "A name is 1-100 characters of letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit."
                ]
            }
        )


def locked_workspace(workspace_id: int) -> Workspace:
    # Serializes version numbering per workspace on PostgreSQL; SQLite writers are
    # already serialized (transactions BEGIN IMMEDIATE).
    return Workspace.objects.select_for_update().get(pk=workspace_id)


def _next_version(versions: QuerySet[Any]) -> int:
    return (versions.aggregate(top=Max("version"))["top"] or 0) + 1


def validated_spec(spec: Any) -> HarnessSpec:
    """The spec a harness version stores: as written, or the expansion of its agent preset."""
    if not isinstance(spec, dict):
        raise Invalid({"spec": ["Must be a JSON object."]})
    if isinstance(spec.get("command"), str) and not is_preset(spec):
        # The one mistake worth naming: commands are never run through a shell.
        raise Invalid(
            {"spec": ['command: must be an argv list such as ["python", "run.py"], not a string']}
        )
    try:
        validated = expand(spec) if is_preset(spec) else HarnessSpec.model_validate(spec)
        _check_storable(validated.model_dump(mode="json"))
        if is_preset(spec):
            _check_storable(spec)
    except ValidationError as exc:
        raise Invalid({"spec": _messages(exc)}) from exc
    except ValueError as exc:
        raise Invalid({"spec": [str(exc)]}) from exc
    _refuse_backtracking_retry(validated)
    return validated


def _refuse_backtracking_retry(spec: HarnessSpec) -> None:
    retry_on = spec.retry_on
    for key in ("stderr_regex", "output_regex"):
        pattern = getattr(retry_on, key, None)
        if pattern and (refusal := pattern_refusal(pattern)) is not None:
            raise Invalid({"spec": [f"retry_on.{key}: {refusal}"]})


def harness_source(spec: Any) -> dict[str, Any] | None:
    """What a version keeps of what its author wrote: the preset (null for a plain spec)."""
    return dict(spec) if is_preset(spec) else None


def harness_create(
    *, user: User, workspace_slug: str, name: str, spec: dict[str, Any]
) -> HarnessVersion:
    """Store a new immutable version of a harness (admin); the spec is validated first, and
    a harness written as an agent preset is stored as its expansion, beside what was written."""
    membership = require_role(user=user, slug=workspace_slug, role=Role.ADMIN)
    check_name(name)
    validated = validated_spec(spec)
    source = harness_source(spec)
    # Validation stays outside: the transaction holds SQLite's write lock.
    with transaction.atomic():
        workspace = locked_workspace(membership.workspace_id)
        return harness_version_add(
            workspace=workspace, name=name, spec=validated, source=source, user=user
        )


def harness_version_add(
    *,
    workspace: Workspace,
    name: str,
    spec: HarnessSpec,
    source: dict[str, Any] | None,
    user: User,
) -> HarnessVersion:
    """Add the next version of a harness, validated already, inside the caller's transaction
    (which holds the workspace's row)."""
    version = _next_version(HarnessVersion.objects.filter(workspace=workspace, name=name))
    return HarnessVersion.objects.create(
        workspace=workspace,
        name=name,
        version=version,
        spec=spec.model_dump(mode="json"),
        source=source,
        created_by=user,
    )


def validated_cases(cases: Any) -> list[CaseIn]:
    if not isinstance(cases, list):
        raise Invalid({"cases": ["Must be a list of cases."]})
    if not cases:
        raise Invalid({"cases": ["A dataset needs at least one case."]})
    if len(cases) > MAX_CASES:
        raise Invalid({"cases": [f"A dataset holds at most {MAX_CASES} cases, got {len(cases)}."]})
    try:
        parsed = _CASES.validate_python(cases)
    except ValidationError as exc:
        raise Invalid({"cases": _messages(exc, prefix="cases")}) from exc
    _refuse_backtracking_patterns(parsed)
    duplicated = [key for key, seen in Counter(c.key for c in parsed).items() if seen > 1]
    if duplicated:
        shown = ", ".join(repr(k) for k in duplicated[:_MAX_MESSAGES])
        more = (
            f" and {len(duplicated) - _MAX_MESSAGES} more"
            if len(duplicated) > _MAX_MESSAGES
            else ""
        )
        raise Invalid({"cases": [f"Duplicate case keys: {shown}{more}."]})
    return parsed


def _refuse_backtracking_patterns(cases: list[CaseIn]) -> None:
    """Refuse an expected value that is a pattern only a backtracking engine runs: the regex
    grader runs RE2 (linear time) and would judge every such case an error."""
    problems = []
    for index, case in enumerate(cases):
        if isinstance(case.expected, str) and (refusal := backtracking_only(case.expected)):
            problems.append(f"cases[{index}].expected (case {case.key!r}): {refusal}")
            if len(problems) >= _MAX_MESSAGES:
                break
    if problems:
        raise Invalid({"cases": problems})


def dataset_create(
    *, user: Any, workspace_slug: str, name: str, cases: list[dict[str, Any]]
) -> DatasetVersion:
    """Store a new immutable version of a dataset (admin) with its cases, in order."""
    membership = require_role(user=user, slug=workspace_slug, role=Role.ADMIN)
    check_name(name)
    # Validating up to 100,000 cases stays outside: the transaction holds SQLite's write lock.
    parsed = validated_cases(cases)
    with transaction.atomic():
        workspace = locked_workspace(membership.workspace_id)
        return dataset_version_add(workspace=workspace, name=name, cases=parsed, user=user)


def dataset_version_add(
    *, workspace: Workspace, name: str, cases: list[CaseIn], user: User
) -> DatasetVersion:
    """Add the next version of a dataset with its cases, validated already, inside the
    caller's transaction (which holds the workspace's row)."""
    dataset = DatasetVersion.objects.create(
        workspace=workspace,
        name=name,
        version=_next_version(DatasetVersion.objects.filter(workspace=workspace, name=name)),
        created_by=user,
        case_count=len(cases),
    )
    Case.objects.bulk_create(
        (
            Case(
                dataset=dataset,
                position=i,
                key=c.key,
                input=c.input,
                expected=c.expected,
                tests=None if c.tests is None else c.tests.model_dump(),
                hidden_files=c.hidden_files,
            )
            for i, c in enumerate(cases)
        ),
        batch_size=_BULK_BATCH,
    )
    return dataset


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def dataset_parse_jsonl(text: str) -> list[dict[str, Any]]:
    """Parse JSONL: one case object per non-blank line; bad lines are named by number."""
    cases: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            value = loads_bounded(line, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            problems.append(f"line {number}: not valid JSON ({reason})")
        else:
            if isinstance(value, dict):
                cases.append(value)
            else:
                problems.append(f"line {number}: must be a JSON object")
        if len(problems) >= _MAX_MESSAGES:
            break
    if problems:
        raise Invalid({"cases": problems})
    return cases
