"""The pictures of the documentation, taken from the real pages by the browser tests.

`keep` always takes the picture (so a page that cannot be drawn fails its test) and writes it
to `docs/` when `EVERDICT_UPDATE_SCREENSHOTS` is set (`make screenshots`) or when the picture
is missing there, so a test run leaves the checkout as it was. `PICTURES` names each picture a
test takes: `tests/test_docs.py` checks that the docs show no other, so none is drawn by hand
and none is left behind by a page that changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.required import ROOT

DOCS = ROOT / "docs"
# Each picture in docs/, and the test that takes it.
PICTURES = {
    "run-page.png": "tests/browser/test_run_page.py",
    "new-harness.png": "tests/browser/test_agent_harness.py",
    "harnesses.png": "tests/browser/test_agent_harness.py",
    "case-trace.png": "tests/browser/test_agent_harness.py",
}


def keep(page: Any, name: str, selector: str | None = None) -> Path:
    """Take `name` of the page (or of the element `selector` picks); refresh docs/'s copy
    when asked to, or when it is missing."""
    assert name in PICTURES, f"add {name} to PICTURES"
    shot = Path(tempfile.mkdtemp(prefix="shot-")) / name
    if selector is None:
        page.screenshot(path=str(shot), full_page=True)
    else:
        page.locator(selector).first.screenshot(path=str(shot))
    copy = DOCS / name
    if os.environ.get("EVERDICT_UPDATE_SCREENSHOTS") or not copy.exists():
        DOCS.mkdir(exist_ok=True)
        shutil.copyfile(shot, copy)
    return shot
