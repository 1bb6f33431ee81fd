"""A case's worktree of the member's checkout: at head, working and run; the member's
checkout, index and stash list untouched; several at once; removal however it ended."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runnercli.case.repo import DIFF_CUT_MARKER, RepoError, Worktree, Worktrees, repo_diff
from tests.runnercli.gitrepos import PNG, PNG2, git, make_checkout, snapshot, worktree_paths, write

NAME = "acme/app"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "app"
    make_checkout(path)
    return path


def case_dir(tmp_path: Path, n: int = 1) -> Path:
    path = tmp_path / "cases" / f"everdict-case-{n}"
    path.mkdir(parents=True)
    return path


def add(checkout: Path, tmp_path: Path, ref: str, sha: str | None = None) -> Worktree:
    return asyncio.run(
        Worktrees().add(name=NAME, checkout=checkout, case_dir=case_dir(tmp_path), ref=ref, sha=sha)
    )


def test_plain_git_stash_create_rewrites_this_checkouts_index(checkout: Path) -> None:
    # What the temporary copy of the index is for: the fixture's stale stat data is real.
    before = snapshot(checkout)
    subprocess.run(["git", "-C", str(checkout), "stash", "create"], check=True, capture_output=True)
    assert snapshot(checkout)["index"] != before["index"]


def test_a_worktree_at_head_holds_heads_commit_and_none_of_the_uncommitted_work(
    checkout: Path, tmp_path: Path
) -> None:
    before = snapshot(checkout)
    tree = add(checkout, tmp_path, "head")
    head = git(checkout, "rev-parse", "HEAD")
    assert tree.path == tmp_path / "cases" / "everdict-case-1" / "repo"
    assert tree.state.fingerprint() == {"name": NAME, "sha": head, "dirty": False, "base": "head"}
    assert git(tree.path, "rev-parse", "HEAD") == head
    assert (tree.path / "src/app.py").read_text() == "print(1)\n"
    assert (tree.path / "README.md").read_text() == "hello\n"
    assert (tree.path / "gone.txt").exists()
    assert not (tree.path / "notes.txt").exists()
    assert (tree.path / "logo.png").read_bytes() == PNG
    assert not (tree.path / "staged-new.txt").exists()
    assert git(tree.path, "status", "--porcelain") == ""
    assert snapshot(checkout) == before


def test_a_worktree_at_working_adds_the_uncommitted_tracked_changes_and_leaves_all_as_it_was(
    checkout: Path, tmp_path: Path
) -> None:
    before = snapshot(checkout)
    tree = add(checkout, tmp_path, "working")
    head = git(checkout, "rev-parse", "HEAD")
    assert tree.state.fingerprint() == {"name": NAME, "sha": head, "dirty": True, "base": "working"}
    assert tree.start != head
    assert git(tree.path, "rev-parse", "HEAD") == head
    assert (tree.path / "src/app.py").read_text() == "print(2)\n"
    assert (tree.path / "README.md").read_text() == "hello, staged\n"
    assert not (tree.path / "gone.txt").exists()
    assert (tree.path / "logo.png").read_bytes() == PNG2
    assert (tree.path / "staged-new.txt").read_text() == "added, not committed\n"
    assert not (tree.path / "notes.txt").exists()  # untracked: not part of `working`
    status = git(tree.path, "status", "--porcelain").splitlines()
    assert sorted(status) == [
        " D gone.txt",
        " M README.md",
        " M logo.png",
        " M src/app.py",
        "?? staged-new.txt",
    ]
    assert snapshot(checkout) == before
    assert git(checkout, "stash", "list") == ""


def test_working_on_a_clean_checkout_is_head_and_not_dirty(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    make_checkout(clean)
    git(clean, "checkout", "--quiet", "--", ".")
    git(clean, "reset", "--quiet", "--hard")
    tree = add(clean, tmp_path, "working")
    assert tree.state.dirty is False
    assert tree.start == tree.state.sha == git(clean, "rev-parse", "HEAD")


def test_a_worktree_at_run_holds_the_runs_commit(checkout: Path, tmp_path: Path) -> None:
    first = git(checkout, "rev-list", "--max-parents=0", "HEAD")
    before = snapshot(checkout)
    tree = add(checkout, tmp_path, "run", sha=first[:10].upper())
    assert tree.state.fingerprint() == {"name": NAME, "sha": first, "dirty": False, "base": "run"}
    assert (tree.path / "src/app.py").read_text() == "print(0)\n"
    assert not (tree.path / "gone.txt").exists()
    assert snapshot(checkout) == before


def test_a_run_commit_missing_from_the_clone_says_to_fetch_it(
    checkout: Path, tmp_path: Path
) -> None:
    with pytest.raises(RepoError) as missing:
        add(checkout, tmp_path, "run", sha="abc123")
    assert str(missing.value) == (
        f"commit abc123 is not in the local clone of acme/app at {checkout}: fetch it first"
    )
    for bad in (None, "HEAD", "--output=x", "abc", "g" * 40):
        with pytest.raises(RepoError, match="is not a commit SHA"):
            asyncio.run(
                Worktrees().add(name=NAME, checkout=checkout, case_dir=tmp_path, ref="run", sha=bad)
            )
    assert worktree_paths(checkout) == []


def test_an_unknown_ref_or_a_vanished_checkout_is_a_clear_error(
    checkout: Path, tmp_path: Path
) -> None:
    with pytest.raises(RepoError, match="'main' is not one of head, working, run"):
        add(checkout, tmp_path, "main")
    tree = add(checkout, tmp_path / "again", "head")
    with pytest.raises(RepoError, match="it exists already"):
        asyncio.run(
            Worktrees().add(name=NAME, checkout=checkout, case_dir=tree.case_dir, ref="head")
        )
    with pytest.raises(RepoError, match="repo add acme/app PATH"):
        asyncio.run(
            Worktrees().add(name=NAME, checkout=tmp_path / "nope", case_dir=tmp_path, ref="head")
        )


def test_four_concurrent_cases_of_one_repo_each_get_their_own_worktree(
    checkout: Path, tmp_path: Path
) -> None:
    worktrees = Worktrees()
    refs = ["head", "working", "head", "working"]

    async def four() -> tuple[list[Worktree], list[str], list[str], list[str]]:
        trees = await asyncio.gather(
            *(
                worktrees.add(name=NAME, checkout=checkout, case_dir=case_dir(tmp_path, n), ref=ref)
                for n, ref in enumerate(refs)
            )
        )
        registered = worktree_paths(checkout)
        seen = [(tree.path / "src/app.py").read_text() for tree in trees]
        await asyncio.gather(*(worktrees.remove(tree) for tree in trees))
        return trees, registered, seen, worktree_paths(checkout)

    before = snapshot(checkout)
    trees, registered, seen, after = asyncio.run(four())
    assert len({tree.path for tree in trees}) == 4
    assert sorted(registered) == sorted(str(tree.path) for tree in trees)
    assert [tree.state.dirty for tree in trees] == [False, True, False, True]
    assert seen == ["print(1)\n", "print(2)\n", "print(1)\n", "print(2)\n"]
    assert after == []
    assert not any(tree.path.exists() for tree in trees)
    assert snapshot(checkout) == before


ADDER = """
import asyncio, sys
from pathlib import Path
from runnercli.case.repo import Worktrees

asyncio.run(Worktrees().add(name="acme/app", checkout=Path(sys.argv[1]),
                            case_dir=Path(sys.argv[2]), ref=sys.argv[3]))
"""


def test_runners_in_separate_processes_add_worktrees_of_one_repo_at_once(
    checkout: Path, tmp_path: Path
) -> None:
    dirs = [case_dir(tmp_path, n) for n in range(4)]
    adders = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(checkout), str(path), ref],
            stderr=subprocess.PIPE,
        )
        for path, ref in zip(dirs, ["head", "working"] * 2, strict=True)
    ]
    for adder in adders:
        _, stderr = adder.communicate(timeout=60)
        assert adder.returncode == 0, stderr.decode()
    assert sorted(worktree_paths(checkout)) == sorted(str(path / "repo") for path in dirs)


def test_removal_deregisters_a_worktree_whose_directory_is_gone(
    checkout: Path, tmp_path: Path
) -> None:
    tree = add(checkout, tmp_path, "working")
    shutil.rmtree(tree.case_dir)
    asyncio.run(Worktrees().remove(tree))
    assert worktree_paths(checkout) == []


def test_removal_survives_a_case_that_deleted_the_git_file_and_made_files_read_only(
    checkout: Path, tmp_path: Path
) -> None:
    tree = add(checkout, tmp_path, "head")
    (tree.path / ".git").unlink()
    (tree.path / "src").chmod(0o500)
    asyncio.run(Worktrees().remove(tree))
    assert worktree_paths(checkout) == []
    assert not tree.path.exists()
    assert tree.case_dir.exists()  # the case directory belongs to whoever made it


def changed_files(diff: bytes) -> set[str]:
    return {
        line.split(b" b/")[0].removeprefix(b"diff --git a/").decode()
        for line in diff.splitlines()
        if line.startswith(b"diff --git ")
    }


def tree_files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and path.name != ".git"
    }


def test_the_diff_holds_just_what_the_case_changed_and_applies_at_its_start(
    checkout: Path, tmp_path: Path
) -> None:
    tree = add(checkout, tmp_path, "working")
    own_index = Path(git(tree.path, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    index_before = own_index.read_bytes()
    before = snapshot(checkout)
    (tree.path / "src/app.py").write_text("print(3)\n")
    (tree.path / "new").mkdir()
    (tree.path / "new/data.json").write_text('{"made": "by the case"}\n')
    (tree.path / "README.md").unlink()
    (tree.path / "logo.png").write_bytes(PNG + b"\x00changed")
    (tree.path / "blob.bin").write_bytes(bytes(range(256)) * 4)

    diff = asyncio.run(repo_diff(tree, 1 << 20))

    assert changed_files(diff) == {
        "src/app.py",
        "new/data.json",
        "README.md",
        "logo.png",
        "blob.bin",
    }
    assert b"-print(2)\n+print(3)\n" in diff  # relative to the member's changes, not HEAD
    assert b"-hello, staged\n" in diff
    assert b"GIT binary patch" in diff
    assert own_index.read_bytes() == index_before
    assert snapshot(checkout) == before

    fresh = asyncio.run(
        Worktrees().add(name=NAME, checkout=checkout, case_dir=case_dir(tmp_path, 2), ref="working")
    )
    check = subprocess.run(
        ["git", "-C", str(fresh.path), "apply", "--check", "-"], input=diff, capture_output=True
    )
    assert check.returncode == 0, check.stderr
    subprocess.run(["git", "-C", str(fresh.path), "apply", "-"], input=diff, check=True)
    assert tree_files(fresh.path) == tree_files(tree.path)


def test_a_case_that_changed_nothing_has_an_empty_diff(checkout: Path, tmp_path: Path) -> None:
    tree = add(checkout, tmp_path, "working")
    assert asyncio.run(repo_diff(tree, 1 << 20)) == b""


def test_a_diff_past_its_limit_is_cut_at_a_line_end_with_a_marker(
    checkout: Path, tmp_path: Path
) -> None:
    tree = add(checkout, tmp_path, "head")
    write(tree.path, {f"file{n}.txt": "line\n" * 200 for n in range(50)})
    whole = asyncio.run(repo_diff(tree, 1 << 20))
    assert DIFF_CUT_MARKER not in whole
    cut = asyncio.run(repo_diff(tree, 4096))
    assert len(cut) <= 4096
    assert cut.endswith(b"\n" + DIFF_CUT_MARKER + b"\n")
    assert whole.startswith(cut[: -len(DIFF_CUT_MARKER) - 1])


HOLDER = """
import asyncio, sys
from pathlib import Path
from runnercli.case.repo import Worktrees

async def main():
    await Worktrees().add(name="acme/app", checkout=Path(sys.argv[1]), case_dir=Path(sys.argv[2]),
                          ref="head")
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_leftovers_of_a_killed_runner_are_removed_and_nothing_else(
    checkout: Path, tmp_path: Path
) -> None:
    root = tmp_path / "cases"
    killed_dir = case_dir(tmp_path, 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(checkout), str(killed_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    worktrees = Worktrees()
    live = asyncio.run(
        worktrees.add(name=NAME, checkout=checkout, case_dir=case_dir(tmp_path, 1), ref="head")
    )
    gone = asyncio.run(
        Worktrees().add(name=NAME, checkout=checkout, case_dir=case_dir(tmp_path, 2), ref="head")
    )
    shutil.rmtree(gone.case_dir)
    unowned = case_dir(tmp_path, 3) / "repo"
    mine, mine_gone = tmp_path / "member-wt", tmp_path / "member-gone"
    for path in (unowned, mine, mine_gone):
        git(checkout, "worktree", "add", "--detach", "--quiet", str(path))
    shutil.rmtree(mine_gone)
    sibling = tmp_path / "cases-other" / "everdict-case-9"
    sibling.mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-c",
            HOLDER.replace("await asyncio.sleep(600)", ""),
            str(checkout),
            str(sibling),
        ],
        check=True,
        capture_output=True,
    )

    removed = asyncio.run(worktrees.remove_leftovers([checkout], root=root))

    assert sorted(removed) == sorted([killed_dir / "repo", gone.path])
    assert sorted(worktree_paths(checkout)) == sorted(
        str(path) for path in (live.path, unowned, mine, mine_gone, sibling / "repo")
    )
    assert not killed_dir.exists()
    assert live.path.is_dir() and mine.is_dir() and unowned.is_dir()
