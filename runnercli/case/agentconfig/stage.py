"""The `AgentConfig` stage: an agent CLI run with the member's login and nothing else of theirs.

With `agent_config: clean`, a case (or a judge job, whose harness says so) that runs `claude`
or `codex` gets a fresh configuration directory, made for it under the runner's own state
directory (never the temporary directory: Codex warns there at every call) and removed when
it ends. It holds a copy of the member's login file alone (Claude Code's `.credentials.json`
in `CLAUDE_CONFIG_DIR`, Codex's `auth.json` in `CODEX_HOME`), and the CLI is given the flags
that leave user settings out (`--setting-sources project,local`; `--ignore-user-config`):
the member's settings, hooks, instructions, MCP servers and plugins are dropped, the repo's
own project files stay. A token the CLI refreshed during the case is written back to the
member's own file, only if that file is still what was copied (compare-and-swap), so a clean
case never logs the member out. Without a login file to carry (a keychain), the case says so
and runs with the member's configuration. The result's fingerprint records which it was, and
the digests of the configuration the CLI ran with (`personal`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path, PurePath

from runnercli.case.agentconfig.personal import personal_config
from runnercli.case.pipeline import CaseContext, Given, Stage
from runnercli.protocol.agents import AGENT_CLIS, AgentCli

# The member's configuration directory of each CLI when its variable is not set.
DEFAULT_DIRS = {"CLAUDE_CONFIG_DIR": ".claude", "CODEX_HOME": ".codex"}
AGENT_CONFIG_DIR = "agent-config"


def agent_of(command: list[str]) -> AgentCli | None:
    """The agent CLI an argv runs, by its program's name."""
    program = PurePath(command[0]).name.lower().removesuffix(".exe") if command else ""
    return next((agent for agent in AGENT_CLIS if agent.tool == program), None)


def member_config_dir(agent: AgentCli, environ: dict[str, str] | None = None) -> Path:
    """Where the member's own configuration of this CLI is (its variable, else its default)."""
    environ = dict(os.environ) if environ is None else environ
    named = environ.get(agent.config_env)
    return Path(named) if named else Path.home() / DEFAULT_DIRS[agent.config_env]


def with_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """The argv with `flags` among its options: before `--` when it has one, else at its end."""
    if "--" in argv:
        at = argv.index("--")
        return [*argv[:at], *flags, *argv[at:]]
    return [*argv, *flags]


class AgentConfig(Stage):
    """Give an agent CLI a fresh configuration holding only the member's login."""

    name = "agent-config"
    needs = frozenset({Given.DIRECTORY})

    def __init__(self, state_dir: Path | None) -> None:
        # The runner's own state directory (beside its config file); without one (a case run
        # on its own), the case's directory.
        self.state_dir = state_dir
        self.made: Path | None = None
        self.login: Path | None = None
        self.copied: bytes | None = None
        self.agent: AgentCli | None = None

    async def start(self, case: CaseContext) -> None:
        spec = case.job.harness.spec
        agent = agent_of(spec.command)
        if agent is None:
            # Not an agent CLI: nothing of it to leave out (a harness's own script may still
            # start one, with the member's configuration).
            return
        if spec.agent_config != "clean":
            self._member(case, agent)
            return
        self.agent = agent
        login = member_config_dir(agent) / agent.login_file
        try:
            copied = login.read_bytes()
        except OSError:
            case.note(
                f"⚠ agent_config clean: no {agent.login_file} to carry from {login.parent} "
                f"(a login in a keychain?): {agent.tool} runs with your own configuration"
            )
            self._member(case, agent, "member (login not carried)")
            return
        root = (self.state_dir or case.directory) / AGENT_CONFIG_DIR
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.made = made = Path(tempfile.mkdtemp(prefix=f"{agent.tool}-", dir=root))
        fresh = made / agent.login_file
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(copied)
        self.login, self.copied = login, copied
        case.env[agent.config_env] = str(made)
        case.argv = with_flags(case.argv or list(spec.command), agent.clean_flags)
        case.fingerprint["agent_config"] = "clean"
        case.fingerprint["agent_settings"] = {agent.tool: personal_config(agent, made)}

    @staticmethod
    def _member(case: CaseContext, agent: AgentCli, said: str = "member") -> None:
        case.fingerprint["agent_config"] = said
        settings = personal_config(agent, member_config_dir(agent))
        case.fingerprint["agent_settings"] = {agent.tool: settings}

    async def finish(self, case: CaseContext) -> None:
        self._write_back(case)

    async def cleanup(self, case: CaseContext) -> None:
        self._write_back(case)
        if self.made is not None:
            shutil.rmtree(self.made, ignore_errors=True)
            self.made = None

    def _write_back(self, case: CaseContext) -> None:
        """A login the CLI refreshed goes back to the member's file, if that file is still
        the one copied (another process may have refreshed it meanwhile: theirs stands)."""
        agent, made, login, copied = self.agent, self.made, self.login, self.copied
        if agent is None or made is None or login is None or copied is None:
            return
        try:
            now = (made / agent.login_file).read_bytes()
        except OSError:
            return
        if now == copied or not now.strip():
            return
        staged = login.with_name(f".{login.name}.everdict-{os.getpid()}")
        try:
            if login.read_bytes() != copied:
                case.note(f"{agent.tool} refreshed its login, but yours changed meanwhile: kept")
                return
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(now)
            os.replace(staged, login)
        except OSError as exc:
            with contextlib.suppress(OSError):
                staged.unlink()
            case.note(f"⚠ could not write {agent.tool}'s refreshed login back to {login}: {exc}")
            return
        self.copied = now
        case.note(f"{agent.tool} refreshed its login: written back to {login}")
