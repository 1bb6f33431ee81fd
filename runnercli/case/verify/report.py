"""The verifier's answer, read with bounds: a JUnit report's tests by outcome, or a JSON
verdict `{pass, score?, reason?}` read strictly.

A JUnit report is read with `defusedxml` (no DTD, so no entity is ever expanded), at most
MAX_REPORT_BYTES, MAX_REPORT_DEPTH elements deep and MAX_REPORT_TESTS test cases; past any
bound, or malformed, it is refused with the reason (the case is then `error`). A test is named
`classname.name` (`name` alone without a class), as pytest, Jest's and Go's JUnit reporters
write them; the server matches the names a case lists against these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeTree
from defusedxml import DefusedXmlException
from pydantic import ValidationError

from runnercli.protocol.verifying import (
    MAX_REPORT_BYTES,
    MAX_REPORT_TESTS,
    MAX_TEST_NAME_CHARS,
    TestOutcome,
    VerifyOutcome,
)

MAX_REPORT_DEPTH = 32


class ReportError(Exception):
    """The verifier's report could not be read; the message says why."""


def read_bounded(path: Path, what: str) -> bytes:
    try:
        size = path.lstat().st_size
        if path.is_symlink() or not path.is_file():
            raise ReportError(f"{what} is not a regular file")
        if size > MAX_REPORT_BYTES:
            raise ReportError(f"{what} is {size} bytes, over the {MAX_REPORT_BYTES}-byte bound")
        return path.read_bytes()[:MAX_REPORT_BYTES]
    except FileNotFoundError as exc:
        raise ReportError(f"{what} was not written") from exc
    except OSError as exc:
        raise ReportError(f"{what} could not be read: {exc.strerror or exc}") from exc


def read_junit(data: bytes) -> TestOutcome:
    """The tests of a JUnit report, by outcome."""
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"the JUnit report is over the {MAX_REPORT_BYTES}-byte bound")
    try:
        root = SafeTree.fromstring(data, forbid_dtd=True, forbid_entities=True)
    except DefusedXmlException as exc:
        why = f"{type(exc).__name__}: no DTD or entity is read"
        raise ReportError(f"the JUnit report was refused ({why})") from exc
    except ParseError as exc:
        raise ReportError(f"the JUnit report is malformed XML: {exc}") from exc
    passed: list[str] = []
    failed: list[str] = []
    errored: list[str] = []
    count = 0
    todo: list[tuple[Element, int]] = [(root, 1)]
    while todo:
        element, depth = todo.pop()
        if depth > MAX_REPORT_DEPTH:
            raise ReportError(f"the JUnit report nests deeper than {MAX_REPORT_DEPTH} elements")
        if element.tag == "testcase":
            count += 1
            if count > MAX_REPORT_TESTS:
                raise ReportError(f"the JUnit report holds over {MAX_REPORT_TESTS} tests")
            name = _name(element)
            kinds = {child.tag for child in element}
            if "error" in kinds:
                errored.append(name)
            elif "failure" in kinds:
                failed.append(name)
            elif "skipped" not in kinds:
                passed.append(name)
            continue
        todo.extend((child, depth + 1) for child in reversed(list(element)))
    return TestOutcome(passed=passed, failed=failed, errored=errored)


def _name(case: Element) -> str:
    name, classname = case.get("name", ""), case.get("classname", "")
    full = f"{classname}.{name}" if classname else name
    return full[:MAX_TEST_NAME_CHARS]


def read_json(text: str) -> VerifyOutcome:
    """A JSON verifier's verdict: an object with `pass` (a boolean), and maybe `score` (0 to
    1) and `reason`; nothing else."""
    try:
        document: Any = json.loads(text)
    except ValueError as exc:
        raise ReportError(f"the verifier's JSON is malformed: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("pass"), bool):
        raise ReportError('the verifier\'s JSON must be an object with "pass": true or false')
    if "tests" in document:
        raise ReportError('the verifier\'s JSON may hold only "pass", "score" and "reason"')
    try:
        return VerifyOutcome.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the object"
        raise ReportError(f"the verifier's JSON is refused at {where}: {first['msg']}") from exc
