"""The protected part of a result's `repo.diff`: the sections of the paths the agent changed,
found by every name a section gives its file."""

from __future__ import annotations

import pytest

from scorecards.blobs.diffs import CUT, MAX_SHOWN_CHARS, diff_of_paths

pytestmark = pytest.mark.once

FIX = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a - b\n+a + b\n"
EDIT = (
    "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n"
    "+++ b/tests/test_calc.py\n@@ -4 +4 @@\n-    assert add(2, 3) == 5\n"
    "+    assert add(2, 3) == -1\n"
    # A line of the hunk that reads like a header names nothing.
    "--- a/calc.py\n"
)
PLANT = (
    "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/conftest.py\n@@ -0,0 +1 @@\n+import pytest\n"
)
RENAME = (
    "diff --git a/tests/test_calc.py b/elsewhere/test calc.py\nsimilarity index 100%\n"
    "rename from tests/test_calc.py\nrename to elsewhere/test calc.py\n"
)
MODE = "diff --git a/pytest.ini b/pytest.ini\nold mode 100644\nnew mode 100755\n"


def test_it_keeps_the_sections_of_the_protected_paths_alone() -> None:
    diff = FIX + EDIT + PLANT + MODE
    assert diff_of_paths(diff, ["tests/test_calc.py", "conftest.py"]) == EDIT + PLANT
    assert diff_of_paths(diff, ["pytest.ini"]) == MODE
    assert diff_of_paths(diff, ["calc.py"]) == FIX
    assert diff_of_paths(diff, ["tests/other.py"]) == ""


def test_a_renamed_path_is_found_by_either_name() -> None:
    assert diff_of_paths(FIX + RENAME, ["tests/test_calc.py"]) == RENAME
    assert diff_of_paths(FIX + RENAME, ["elsewhere/test calc.py"]) == RENAME


def test_a_long_protected_diff_is_cut_saying_where_the_rest_is() -> None:
    big = PLANT + "".join(f"+line {n}\n" for n in range(20_000))
    shown = diff_of_paths(FIX + big, ["conftest.py"])
    assert shown == big[:MAX_SHOWN_CHARS] + CUT
