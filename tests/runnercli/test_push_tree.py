"""A repo's `.everdict/` read on the member's machine: harness files checked as the server will
check them, every problem named `file:line: reason` before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runnercli.push.tree import TreeError, find_root, read_tree

pytestmark = pytest.mark.once

CLAUDE = """\
# The agent fixes the bug the case describes.
agent:
  cli: claude-code
  prompt: "{input.prompt}"
  model: claude-sonnet-4-5
repo:
  name: acme/app
timeout_s: 900
grader:
  type: contains
"""


def catalog(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / ".everdict" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def problems(root: Path) -> list[str]:
    with pytest.raises(TreeError) as refused:
        read_tree(root)
    return refused.value.problems


def test_harness_and_dataset_files_are_read_with_their_names_and_lines(tmp_path: Path) -> None:
    catalog(
        tmp_path,
        {
            "harnesses/fixer.yaml": CLAUDE,
            "harnesses/echo.json": '{"command": ["echo", "{input.text}"]}',
            "harnesses/README.md": "notes",
            "datasets/bugs.jsonl": '{"key": "a"}\n\n{"key": "b", "input": {"prompt": "x"}}\n',
        },
    )
    (tmp_path / "src").mkdir()
    tree = read_tree(find_root(tmp_path / "src"))
    assert [(h.file, h.name) for h in tree.harnesses] == [
        (".everdict/harnesses/echo.json", "echo"),
        (".everdict/harnesses/fixer.yaml", "fixer"),
    ]
    assert tree.harnesses[1].source["agent"]["model"] == "claude-sonnet-4-5"
    assert tree.datasets[0].name == "bugs" and tree.datasets[0].lines == [1, 3]
    assert tree.skipped == [".everdict/harnesses/README.md: not .yaml or .yml or .json"]


def test_a_dataset_line_holding_line_separators_raw_is_one_case(tmp_path: Path) -> None:
    # U+0085, U+2028 and U+2029 end a line for str.splitlines, not for JSON Lines.
    said = "one\u2028two\u0085three\u2029"
    text = json.dumps({"key": "a", "expected": said}, ensure_ascii=False) + '\n{"key": "b"}\n'
    catalog(tmp_path, {"harnesses/echo.json": '{"command": ["echo"]}', "datasets/d.jsonl": text})
    [dataset] = read_tree(find_root(tmp_path)).datasets
    assert dataset.lines == [1, 2]
    assert dataset.cases[0]["expected"] == said


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CLAUDE.replace("timeout_s: 900", "timeout_s: [900"), ":9: not valid YAML"),
        (CLAUDE.replace("cli: claude-code", "cli: aider"), ":3: agent.cli: Input should be"),
        (CLAUDE.replace("timeout_s: 900", "timeout_s: -1"), ":8: timeout_s: Input should be"),
        (CLAUDE.replace("  type: contains", "  type: vibes"), ":10: grader.type: Input should"),
        (CLAUDE + "command: [claude]\n", ":11: command: the agent preset writes it"),
        (CLAUDE + "timeout_s: 5\n", ":11: the key 'timeout_s' is given twice"),
        (CLAUDE.replace("timeout_s: 900", "timeout_s: 2024-01-01"), ":8: '2024-01-01' is not"),
        (CLAUDE.replace("timeout_s: 900", "timeout_s: .nan"), ":8: NaN and infinity"),
        ("- just a list\n", ":1: a harness is a mapping"),
        ('!!python/object:os.system "true"\n', ":1: 'true' is not plain JSON data"),
    ],
)
def test_a_bad_harness_file_is_named_by_file_and_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    catalog(tmp_path, {"harnesses/fixer.yaml": text})
    found = problems(tmp_path)
    assert any(p.startswith(".everdict/harnesses/fixer.yaml" + problem) for p in found), found


def test_a_bad_json_harness_and_bad_dataset_lines_are_named_together(tmp_path: Path) -> None:
    catalog(
        tmp_path,
        {
            "harnesses/echo.json": '{\n  "command": ["echo"],\n  "timeout_s": 0\n}\n',
            "harnesses/broken.json": '{\n  "command": [\n}',
            "datasets/qa.jsonl": '{"key": "a"}\n[1]\n{"key": NaN}\n{oops\n',
        },
    )
    assert problems(tmp_path) == [
        ".everdict/harnesses/broken.json:3: not valid JSON: Expecting value",
        ".everdict/harnesses/echo.json:3: timeout_s: Input should be greater than or equal to 1",
        ".everdict/datasets/qa.jsonl:2: a case is a JSON object {key, input, …}",
        ".everdict/datasets/qa.jsonl:3: not valid JSON (NaN is not valid JSON)",
        ".everdict/datasets/qa.jsonl:4: not valid JSON (Expecting property name enclosed in "
        "double quotes)",
    ]


def test_without_a_catalog_directory_it_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(TreeError, match=f"no .everdict/ directory in {tmp_path}"):
        find_root(tmp_path)
