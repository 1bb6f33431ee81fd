"""The README's tour works as written, and the docs show only pictures the tests take.

The tour names commands, flags, make targets, pages and files: each must exist, and the
harness and cases it writes must be ones `push` accepts — so a renamed flag or page breaks
this test before it breaks a newcomer's first five minutes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import Resolver404, resolve

from runnercli.cli import cli
from runnercli.push.tree import read_dataset, read_harness
from tests.browser.screenshots import DOCS, PICTURES
from tests.required import ROOT

pytestmark = pytest.mark.once

README = (ROOT / "README.md").read_text()
TOUR = README[README.index("## Five minutes") : README.index("## Benchmarks")]
RUNNERCLI = re.compile(r"python -m runnercli\s+([a-z-]+)((?:\s+(?:--?[a-z-]+|[^\s`-][^\s`]*))*)")


def test_every_runnercli_command_and_flag_the_tour_names_exists() -> None:
    named = RUNNERCLI.findall(" ".join(TOUR.split()))
    assert {command for command, _ in named} >= {"pair", "doctor", "push", "run", "submit"}
    for command, args in named:
        assert command in cli.commands, f"runnercli has no command {command!r}"
        flags = {opt for param in cli.commands[command].params for opt in param.opts}
        for flag in re.findall(r"(--?[a-z-]+)", args):
            assert flag in flags, f"`runnercli {command}` has no {flag}"


def test_the_make_targets_it_names_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"`make (\w+)`", README)) | {"demo", "test", "docs"}:
        assert re.search(rf"^{target}:", makefile, re.M), f"no make target {target!r}"


@pytest.mark.parametrize(
    ("named", "path"),
    [("/account/", "/account/"), ("/pair/<code>", "/pair/WDJB-MJHT"), ("/runs/<id>/", "/runs/1/")],
)
def test_the_pages_it_sends_a_newcomer_to_exist(named: str, path: str) -> None:
    assert f"`{named}`" in TOUR
    try:
        resolve(path)
    except Resolver404:
        pytest.fail(f"{path} is no page")


def test_the_harness_and_cases_it_writes_are_what_push_accepts(tmp_path: Path) -> None:
    assert "`.everdict/harnesses/hello.yaml`" in TOUR and "`.everdict/datasets/hello.jsonl`" in TOUR
    harness, cases = tmp_path / "hello.yaml", tmp_path / "hello.jsonl"
    harness.write_text(_dedent(re.findall(r"```yaml\n(.*?)```", TOUR, re.S)[0]))
    cases.write_text(_dedent(re.findall(r"```json\n(.*?)```", TOUR, re.S)[0]))
    assert read_harness(harness, "hello.yaml").source["agent"]["cli"] == "claude-code"
    assert read_dataset(cases, "hello.jsonl").cases[0]["expected"] == "Paris"


def test_the_docs_it_links_to_exist() -> None:
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).is_file(), f"README links to {target}, which is missing"


def test_every_picture_in_the_docs_is_one_a_browser_test_takes() -> None:
    shown = set()
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        shown |= {Path(src).name for src in re.findall(r"!\[[^]]*\]\(([^)]+)\)", page.read_text())}
    on_disk = {path.name for path in DOCS.glob("*.png")}
    assert shown <= set(PICTURES), f"drawn by no test: {shown - set(PICTURES)}"
    assert on_disk <= set(PICTURES), f"taken by no test: {on_disk - set(PICTURES)}"
    assert shown == on_disk, f"in docs/ but shown nowhere: {on_disk - shown}"


def _dedent(block: str) -> str:
    lines = block.splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines) + "\n"
