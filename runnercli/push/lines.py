"""Where in a YAML (or JSON) file a value is: its line, from the nodes PyYAML composes, so a
refusal reads `file:line: reason`. Read with the safe loader only: a file is data, never code."""

from __future__ import annotations

import math
from collections.abc import Sequence

import yaml

# The scalar types a harness may hold: what JSON has. A date or binary would not survive the
# trip to the server; YAML 1.1's surprises (`on: yes` as booleans) are the author's to quote.
_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


class FileProblem(Exception):
    """What is wrong with a file, at its line (1-based)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def compose(text: str) -> yaml.Node | None:
    """The file's node tree; FileProblem (with its line) when it is not valid YAML."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        # A problem found at the end of the file is something left open (a bracket, a
        # quote): the line that opened it is where the mistake is read.
        mark = exc.problem_mark
        if mark is None or (mark.index >= len(text.rstrip()) and exc.context_mark is not None):
            mark = exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        said = f"{exc.problem} ({exc.context})" if exc.context else exc.problem
        raise FileProblem(line, f"not valid YAML: {said}") from exc
    except yaml.YAMLError as exc:
        raise FileProblem(1, f"not valid YAML: {exc}") from exc


def check_plain(node: yaml.Node) -> None:
    """Refuse what JSON cannot say: a duplicated or non-text key, a date, binary, NaN."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                raise FileProblem(line_of(key), "a key must be text (quote it)")
            if key.value in seen:
                raise FileProblem(line_of(key), f"the key {key.value!r} is given twice")
            seen.add(key.value)
            check_plain(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            check_plain(item)
    elif isinstance(node, yaml.ScalarNode):
        if node.tag not in _PLAIN_TAGS:
            raise FileProblem(line_of(node), f"{node.value!r} is not plain JSON data (quote it)")
        if node.tag.endswith(":float") and not math.isfinite(float(_float_text(node.value))):
            raise FileProblem(line_of(node), "NaN and infinity are not JSON numbers")


def _float_text(value: str) -> str:
    lowered = value.lower().replace("_", "")
    return {".nan": "nan", ".inf": "inf", "+.inf": "inf", "-.inf": "-inf"}.get(lowered, lowered)


def line_at(root: yaml.Node | None, location: Sequence[int | str]) -> int:
    """The line of the value at `location` (keys and indexes), or of the nearest value above
    it the file has (an expanded key is not in the file: its parent's line)."""
    if root is None:
        return 1
    node, line = root, line_of(root)
    for part in location:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            pair = next(((k, v) for k, v in node.value if k.value == part), None)
            if pair is None:
                break
            line, node = line_of(pair[0]), pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = line_of(node)
        else:
            break
    return line
