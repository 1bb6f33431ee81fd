"""The member's repos: which checkout serves a repo name, and each case's worktree of it."""

from __future__ import annotations

from runnercli.case.repo.diff import DIFF_ARTIFACT_PATH, DIFF_CUT_MARKER, DIFF_MEDIA_TYPE, repo_diff
from runnercli.case.repo.leftovers import CASE_DIR_PREFIX
from runnercli.case.repo.mapping import (
    MappingError,
    repo_add,
    repo_capabilities,
    repo_list,
    repo_path,
    repo_remove,
)
from runnercli.case.repo.worktree import REFS, RepoError, RepoState, Worktree, Worktrees
from runnercli.protocol.names import (
    REPO_CAPABILITY_PREFIX,
    RepoNameError,
    check_repo_name,
    repo_capability,
)

__all__ = [
    "CASE_DIR_PREFIX",
    "DIFF_ARTIFACT_PATH",
    "DIFF_CUT_MARKER",
    "DIFF_MEDIA_TYPE",
    "REFS",
    "REPO_CAPABILITY_PREFIX",
    "MappingError",
    "RepoError",
    "RepoNameError",
    "RepoState",
    "Worktree",
    "Worktrees",
    "check_repo_name",
    "repo_add",
    "repo_capabilities",
    "repo_capability",
    "repo_diff",
    "repo_list",
    "repo_path",
    "repo_remove",
]
