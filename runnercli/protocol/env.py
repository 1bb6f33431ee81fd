"""Environment variables a harness may not set, on the server and again on the runner."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ValidationInfo

from runnercli.protocol.received import RUNNER_CONTEXT

# Environment variables a harness may not set: they change what runs (the loader, the shell,
# an interpreter's start-up, git's programs) rather than configure the tool. The runner
# refuses them again, with any the member adds in its config: a server can lie.
REFUSED_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "IFS",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
    }
)
REFUSED_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG")


def refused_env_keys(env: dict[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The keys of `env` a harness may not set (the list above, and `extra`: names, or
    prefixes ending in `*`), sorted. Case does not matter: Windows reads `Path` as `PATH`."""
    extra = [name.upper() for name in extra]
    names = REFUSED_ENV_NAMES | {name for name in extra if not name.endswith("*")}
    prefixes = REFUSED_ENV_PREFIXES + tuple(name[:-1] for name in extra if name.endswith("*"))
    return sorted(k for k in env if k.upper() in names or k.upper().startswith(prefixes))


def check_env(env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
    """Validate a harness's (or a service's) environment: names a shell can use, none that
    changes what runs. Under `RUNNER_CONTEXT` a refused name passes, for the runner to refuse
    the job by name."""
    for name in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
            raise ValueError(f"invalid environment variable name: {name!r}")
    if info.context == RUNNER_CONTEXT:
        return env
    if refused := refused_env_keys(env):
        raise ValueError(
            f"a harness may not set {', '.join(refused)}: it would change what runs on the "
            "member's machine, not configure the tool"
        )
    return env
