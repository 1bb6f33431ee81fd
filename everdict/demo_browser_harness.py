"""The demo's browser harness: drives Debian's chromium headless through a small page, as a
browser agent would, and lets the run page watch it.

Each step (fill a field, click a button, read the answer) is written to `$EVERDICT_TRACE_FILE`
as a tool call and its result, and the page's screen after it is written into
`$EVERDICT_SCREEN_DIR` (a PNG, written whole and then renamed into place): the runner sends the
newest frame at most once a second and the case page keeps a filmstrip. Stdout is the answer
the page computed. Needs the `playwright` package and a chromium on PATH (`chromium` or
`chromium-browser`); either variable unset, that part is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

STEP_S = float(os.environ.get("DEMO_STEP_S", "0.8"))
PAGE = """<!doctype html>
<html><head><style>
  body { font: 28px system-ui, sans-serif; margin: 40px; transition: background 0.2s; }
  input { font: inherit; width: 6em; } button { font: inherit; }
  #answer { font-size: 64px; margin-top: 30px; }
</style></head>
<body>
  <h1>Adder</h1>
  <p><input id="a" aria-label="first number"> + <input id="b" aria-label="second number">
     <button id="add">Add</button></p>
  <div id="answer">?</div>
  <script>
    document.getElementById("add").onclick = function () {
      var a = Number(document.getElementById("a").value);
      var b = Number(document.getElementById("b").value);
      document.getElementById("answer").textContent = String(a + b);
      document.body.style.background = "#dafbe1";
    };
  </script>
</body></html>"""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def trace(kind: str, name: str, **data: Any) -> None:
    path = os.environ.get("EVERDICT_TRACE_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            event = {"kind": kind, "name": name, "ts": now_ms(), "data": data}
            handle.write(json.dumps(event) + "\n")


class Frames:
    """The page's screen after each step, into `$EVERDICT_SCREEN_DIR`."""

    def __init__(self) -> None:
        where = os.environ.get("EVERDICT_SCREEN_DIR")
        self.directory = Path(where) if where else None
        self.count = 0

    def take(self, page: Any) -> None:
        if self.directory is None:
            return
        data = page.screenshot(type="png")
        name = f"frame-{self.count:04d}.png"
        partial = self.directory / f".{name}"
        partial.write_bytes(data)
        os.replace(partial, self.directory / name)
        self.count += 1


def step(page: Any, frames: Frames, action: str, selector: str, value: str = "") -> None:
    call_id, tool = f"step-{frames.count}", f"browser.{action}"
    said = f"{selector} = {value}" if value else selector
    trace("tool_call", tool, id=call_id, selector=selector, value=value, description=said)
    started = now_ms()
    print(f"{action} {selector} {value}".rstrip(), file=sys.stderr, flush=True)
    if action == "fill":
        page.fill(selector, value)
    elif action == "click":
        page.click(selector)
    text = page.inner_text("#answer")
    trace("tool_result", tool, call_id=call_id, duration_ms=now_ms() - started, answer=text)
    frames.take(page)
    time.sleep(STEP_S)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    sys.exit("no chromium on PATH: install Debian's chromium (apt-get install chromium)")


def main() -> None:
    from playwright.sync_api import sync_playwright

    case = json.loads(os.environ.get("EVERDICT_CASE", "{}"))
    given = case.get("input", {})
    a, b, note = str(given.get("a", 1)), str(given.get("b", 2)), str(given.get("note", ""))
    if note:
        print(f"note: {note}", file=sys.stderr, flush=True)
        trace("message", "note", text=note)
    frames = Frames()
    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=args)
        try:
            page = browser.new_page(viewport={"width": 640, "height": 360})
            trace("tool_call", "browser.open", id="open", description="the adder page")
            started = now_ms()
            page.set_content(PAGE)
            trace("tool_result", "browser.open", call_id="open", duration_ms=now_ms() - started)
            frames.take(page)
            step(page, frames, "fill", "#a", a)
            step(page, frames, "fill", "#b", b)
            step(page, frames, "click", "#add")
            answer = page.inner_text("#answer")
        finally:
            browser.close()
    trace("message", "assistant", text=f"The page says {answer}.")
    print(answer)


if __name__ == "__main__":
    main()
