"""The harness's argv and environment for one case: never a shell, never the runner's secrets.

Placeholders in each argv element: `{input.<path>}` and `{case.key}` from the case, and any
`{NAME}` a stage of the case adds (`{case.file}`, the case file `Prepare` writes). One
element stays one, whatever the case holds: a case input is data, not code.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from runnercli.case.input import CASE_ENV, CASE_FILE_ENV
from runnercli.config import CONFIG_ENV, TOKEN_ENV
from runnercli.protocol import CaseJob, CaseRef, refused_env_keys
from runnercli.protocol.presets import root_env

# Any `{name}`: one the case or a stage fills is replaced, any other is left as it is.
PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_.-]*)\}")
INPUT_PATH = re.compile(r"input\.[A-Za-z0-9_.-]+")


class StartError(Exception):
    """The case could not be started; it is reported with `fail_job`, not as a result."""


def _lookup(value: Any, path: list[str], placeholder: str) -> Any:
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise StartError(f"the case has no value for {{{placeholder}}}")
    return value


def render_argv(
    command: list[str], case: CaseRef, placeholders: Mapping[str, str] | None = None
) -> list[str]:
    """Substitute `{input.<path>}`, `{case.key}` and the `placeholders` (`{case.file}` is
    empty without one) in each argv element; one element stays one."""
    values = {"case.key": case.key, "case.file": "", **(placeholders or {})}

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        if not INPUT_PATH.fullmatch(name):
            return match.group(0)
        value = _lookup(case.input, name.split(".")[1:], name)
        return value if isinstance(value, str) else json.dumps(value)

    return [PLACEHOLDER.sub(substitute, element) for element in command]


def case_env(job: CaseJob, added: Mapping[str, str]) -> dict[str, str]:
    """The harness environment: ours, minus the runner's secrets (and any case variable it
    inherited), plus what an agent CLI run with `bypass` needs as root, the spec's and what
    the case's stages add."""
    if refused := refused_env_keys(job.harness.spec.env):
        # Consent refuses such a job before it gets here; this stays true for any caller.
        raise StartError(f"the harness may not set {', '.join(refused)}")
    env = dict(_inherited_env())
    env.update(root_env(job.harness.spec.command))
    env.update(job.harness.spec.env)
    env.update(added)
    return env


@functools.cache
def _inherited_env() -> dict[str, str]:
    """The runner's environment minus its secrets and any case variable it inherited, read
    once per session (copying `os.environ` decodes every variable each time)."""
    # A judge's file never reaches a case, even one started by a runner that inherited it.
    ours = (TOKEN_ENV, CONFIG_ENV, CASE_ENV, CASE_FILE_ENV, "EVERDICT_JUDGE_FILE")
    return {k: v for k, v in os.environ.items() if k not in ours}
