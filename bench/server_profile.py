"""What a server process spends CPU on: py-spy samples, summarised by frame."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path


class ServerProfile:
    """Sample a server process with py-spy until stopped.

    Only samples of a thread holding the GIL are kept (`--gil`): what the process spends
    CPU on in Python, not where its threads sit waiting for the database or the network.
    """

    def __init__(self, pid: int, out: Path, rate: int = 250) -> None:
        self.out = out
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.popen: subprocess.Popen[bytes] | None = None
        if Path(spy).exists():
            self.popen = subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(pid),
                    "-r",
                    str(rate),
                    "--gil",
                    "-f",
                    "raw",
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def stop(self) -> str:
        """Stop sampling and return the hottest frames as text ('' without py-spy)."""
        if self.popen is None:
            return "(py-spy is not installed: `pip install py-spy` to profile the server)"
        self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
        return hot_frames(self.out) if self.out.exists() else "(py-spy wrote no samples)"


def hot_frames(path: Path, top: int = 25) -> str:
    """Summarise py-spy's collapsed stacks: inclusive and self share of the samples per frame."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame_name(f) for f in stack.split(";")[1:]]  # [0] names the thread
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
    if not total:
        return "(no samples)"
    lines = [
        f"{total} samples; inclusive share (self share) of the hottest project/library frames:"
    ]
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])
    shown = 0
    for frame, count in ranked:
        if frame.startswith(
            (
                "<module>",
                "run (threading",
                "_bootstrap",
                "run_forever",
                "_run_once",
                "_run (asyncio",
                "worker (concurrent",
            )
        ):
            continue
        lines.append(f"  {count / total:6.1%} ({own.get(frame, 0) / total:6.1%})  {frame}")
        shown += 1
        if shown >= top:
            break
    lines.append("hottest frames by self time:")
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:15]:
        lines.append(f"  {count / total:6.1%}  {frame}")
    return "\n".join(lines)


def _frame_name(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)" with the package kept for context.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if len(parts) >= 2 else path
    return f"{name} ({short})"
