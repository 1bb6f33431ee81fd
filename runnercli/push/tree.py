"""A repo's catalog as code: `.everdict/harnesses/NAME.yaml` (or `.yml`, `.json`) and
`.everdict/datasets/NAME.jsonl`, found, read and checked here before anything is sent.

A harness is checked as the server will check it (the spec, or the expansion of its agent
preset: `runnercli.protocol`), so a bad file is refused on the member's machine with its
line; a dataset's cases are checked by the server, which is sent each case's line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from runnercli.protocol import HarnessSpec
from runnercli.protocol.jsonl import json_lines
from runnercli.protocol.presets import EXPANDED_KEYS, expand, is_preset
from runnercli.push.lines import FileProblem, check_plain, compose, line_at

CATALOG_DIR = ".everdict"
HARNESS_SUFFIXES = (".yaml", ".yml", ".json")
DATASET_SUFFIX = ".jsonl"
# A bad file may hold many mistakes: enough to fix it in one pass, few enough to read.
MAX_PROBLEMS = 20


class TreeError(Exception):
    """The push cannot be made: `problems` are `file:line: reason` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class HarnessDoc:
    file: str
    name: str
    source: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"file": self.file, "name": self.name, "source": self.source}


@dataclass(frozen=True)
class DatasetDoc:
    file: str
    name: str
    cases: list[Any]
    lines: list[int] = field(default_factory=list)

    def wire(self) -> dict[str, Any]:
        return {"file": self.file, "name": self.name, "cases": self.cases, "lines": self.lines}


@dataclass
class Tree:
    """What a push sends: the catalog's files, and those it left out (with why)."""

    root: Path
    harnesses: list[HarnessDoc] = field(default_factory=list)
    datasets: list[DatasetDoc] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def find_root(start: Path) -> Path:
    """The nearest directory at or above `start` holding `.everdict/`."""
    for directory in (start, *start.parents):
        if (directory / CATALOG_DIR).is_dir():
            return directory
    raise TreeError([f"no {CATALOG_DIR}/ directory in {start} or above it"])


def _messages(exc: ValidationError, node: yaml.Node | None, file: str) -> list[str]:
    lines = []
    for error in exc.errors()[:MAX_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"])
        reason = error["msg"].removeprefix("Value error, ")
        text = f"{where}: {reason}" if where else reason
        lines.append(f"{file}:{line_at(node, error['loc'])}: {text}")
    return lines


def _parsed(text: str, path: Path) -> tuple[Any, yaml.Node | None]:
    """The document and its nodes (a JSON file's nodes too, JSON being YAML)."""
    if path.suffix == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FileProblem(exc.lineno, f"not valid JSON: {exc.msg}") from exc
        try:
            return document, compose(text)
        except FileProblem:
            return document, None
    node = compose(text)
    if node is not None:
        check_plain(node)
    return yaml.safe_load(text), node


def read_harness(path: Path, relative: str) -> HarnessDoc:
    """A harness file, checked: TreeError names each problem by `file:line`."""
    try:
        document, node = _parsed(path.read_text(encoding="utf-8"), path)
    except FileProblem as problem:
        raise TreeError([f"{relative}:{problem.line}: {problem.reason}"]) from problem
    except (OSError, UnicodeDecodeError) as exc:
        raise TreeError([f"{relative}: cannot read it: {exc}"]) from exc
    if not isinstance(document, dict):
        raise TreeError([f"{relative}:1: a harness is a mapping of keys (command, grader, …)"])
    try:
        expand(document) if is_preset(document) else HarnessSpec.model_validate(document)
    except ValidationError as exc:
        raise TreeError(_messages(exc, node, relative)) from exc
    except ValueError as exc:
        written = next((key for key in EXPANDED_KEYS if key in document), "")
        raise TreeError([f"{relative}:{line_at(node, [written])}: {exc}"]) from exc
    return HarnessDoc(relative, path.stem, document)


def read_dataset(path: Path, relative: str) -> DatasetDoc:
    """A JSONL dataset: one case object per non-blank line, each with its line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TreeError([f"{relative}: cannot read it: {exc}"]) from exc
    dataset, problems = DatasetDoc(relative, path.stem, []), []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line, parse_constant=_no_constant)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            problems.append(f"{relative}:{number}: not valid JSON ({reason})")
            continue
        if not isinstance(case, dict):
            problems.append(f"{relative}:{number}: a case is a JSON object {{key, input, …}}")
            continue
        dataset.cases.append(case)
        dataset.lines.append(number)
    if problems:
        raise TreeError(problems[:MAX_PROBLEMS])
    return dataset


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_tree(root: Path) -> Tree:
    """Every harness and dataset file under `root/.everdict`; TreeError with every problem."""
    tree, problems = Tree(root), []
    catalog = root / CATALOG_DIR
    for kind, suffixes in (("harnesses", HARNESS_SUFFIXES), ("datasets", (DATASET_SUFFIX,))):
        for path in sorted((catalog / kind).glob("*")):
            relative = path.relative_to(root).as_posix()
            if path.name.startswith(".") or not path.is_file():
                continue
            if path.suffix not in suffixes:
                tree.skipped.append(f"{relative}: not {' or '.join(suffixes)}")
                continue
            try:
                if kind == "harnesses":
                    tree.harnesses.append(read_harness(path, relative))
                else:
                    tree.datasets.append(read_dataset(path, relative))
            except TreeError as refused:
                problems += refused.problems
    if problems:
        raise TreeError(problems)
    return tree
