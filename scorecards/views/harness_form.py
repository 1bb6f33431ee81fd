"""The "New harness" form: Claude Code, Codex or any command as fields, the JSON as an
advanced view. The form only writes what the author means as a harness source (a preset, or a
spec); `harness_create` validates and expands it, as it does for the API and `push`."""

from __future__ import annotations

import json
import shlex
from typing import Any

from django import forms

KINDS = [
    ("claude-code", "Claude Code"),
    ("codex", "Codex"),
    ("command", "Any command"),
    ("json", "JSON (advanced)"),
]
PERMISSIONS = [
    ("worktree", "worktree: edits and commands without asking, inside the case's directory"),
    ("bypass", "bypass: everything, without a sandbox (the member is told loudly)"),
]
REFS = [
    ("head", "head: its HEAD commit"),
    ("working", "working: HEAD plus the member's uncommitted changes"),
    ("run", "run: the commit the run names (metadata.git_sha)"),
]
GRADERS = [
    ("contains", "contains: the expected text is in the output"),
    ("exact", "exact: the output is the expected text"),
    ("regex", "regex: the expected pattern matches (RE2)"),
    ("json_equals", "json_equals: the output as JSON equals the expected value"),
    ("exit_code", "exit_code: the expected exit code (default 0)"),
]
OUTPUTS = [("text", "text"), ("json", "json")]
MONO = {"spellcheck": "false", "class": "mono"}


class HarnessForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(
        choices=KINDS, required=False, initial="claude-code", widget=forms.RadioSelect
    )
    prompt = forms.CharField(
        required=False,
        initial="{input.prompt}",
        widget=forms.Textarea(attrs={"rows": 3, **MONO}),
        help_text="What the agent is asked; {input.NAME} is the case's input NAME.",
    )
    model = forms.CharField(
        required=False, max_length=200, help_text="Empty: the CLI's own default."
    )
    permissions = forms.ChoiceField(choices=PERMISSIONS, initial="worktree", required=False)
    command = forms.CharField(
        required=False,
        max_length=8000,
        widget=forms.TextInput(attrs=MONO),
        help_text="Split into arguments as a shell would, but never run through one: "
        "python solve.py {input.prompt}",
    )
    output = forms.ChoiceField(choices=OUTPUTS, initial="text", required=False)
    repo = forms.CharField(
        required=False,
        max_length=100,
        help_text="OWNER/NAME of a repo members map (runnercli repo add); empty: none.",
    )
    ref = forms.ChoiceField(choices=REFS, initial="head", required=False)
    artifacts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, **MONO}),
        help_text="Files to keep after each case: one glob a line (out/**/*.json).",
    )
    timeout_s = forms.IntegerField(label="Timeout (s)", min_value=1, initial=600, required=False)
    grader = forms.ChoiceField(choices=GRADERS, initial="contains", required=False)
    field = forms.CharField(
        required=False,
        max_length=200,
        help_text="For JSON output: the dotted path of the value judged (e.g. result).",
    )
    spec = forms.CharField(
        label="Spec (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, **MONO}),
        help_text='A JSON object: {"command": [...], "timeout_s": 600, "grader": {"type": '
        '"exact"}}, or {"agent": {"cli": "claude-code", "prompt": "{input.prompt}"}, …}.',
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # A post without a kind is the JSON alone (as scripts and older pages send it).
        data["kind"] = data.get("kind") or ("json" if data.get("spec") else "claude-code")
        try:
            data["source"] = self._source(data)
        except forms.ValidationError as exc:
            self.add_error("spec" if data["kind"] == "json" else "command", exc)
        return data

    @property
    def spec_errors_field(self) -> str:
        """Where the service's refusal of the spec is shown: under the JSON when the author
        wrote it, above the form when the fields did."""
        return "spec" if self.cleaned_data.get("kind") == "json" else ""

    def _source(self, data: dict[str, Any]) -> Any:
        kind = data["kind"]
        if kind == "json":
            try:
                return json.loads(data.get("spec") or "")
            except ValueError as exc:
                raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        source: dict[str, Any] = {}
        if kind == "command":
            source["command"] = _argv(data.get("command") or "")
            source["output"] = data.get("output") or "text"
        else:
            agent = {"cli": kind, "prompt": data.get("prompt") or "{input.prompt}"}
            if data.get("model"):
                agent["model"] = data["model"].strip()
            agent["permissions"] = data.get("permissions") or "worktree"
            source["agent"] = agent
        if data.get("repo"):
            source["repo"] = {"name": data["repo"].strip(), "ref": data.get("ref") or "head"}
        globs = [line.strip() for line in (data.get("artifacts") or "").splitlines()]
        if any(globs):
            source["artifacts"] = [glob for glob in globs if glob]
        if data.get("timeout_s") is not None:
            source["timeout_s"] = data["timeout_s"]
        grader: dict[str, Any] = {"type": data.get("grader") or "contains"}
        if data.get("field"):
            grader["field"] = data["field"].strip()
        source["grader"] = grader
        return source


def _argv(line: str) -> list[str]:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise forms.ValidationError(f"The command cannot be split into arguments: {exc}") from exc
    if not argv:
        raise forms.ValidationError("Give the command to run, e.g. python solve.py {input.prompt}")
    return argv


def as_json(source: dict[str, Any]) -> str:
    """A source as the advanced view shows it."""
    return json.dumps(source, indent=2, ensure_ascii=False)
