"""What the runner shows: one live status line on a terminal, plain log lines otherwise.

Everything printed goes through `runnercli.console.terminal.clean`: messages carry the server's
strings (case keys, harness names, reasons), and none of them may drive the terminal.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from runnercli.console.terminal import clean


class StatusLine:
    """A status that changes in place, and events that stay on screen above it.

    On a terminal the status is a rich Live line, redrawn on its own timer (4 times a second),
    never by the change itself: a busy runner changes it several times per case. In a log
    file (not a TTY) every change of status and every event is one timestamped line, so
    `tail -f` reads the same story.
    """

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live_mode = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, highlight=False, soft_wrap=True)
        self.current = ""
        self.last_result = ""
        self._live: Live | None = None
        self._paused = False

    def __enter__(self) -> StatusLine:
        if self.live_mode:
            self._start_live()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_live()

    def _start_live(self) -> None:
        self._live = Live(self._line(), console=self.console, refresh_per_second=4, transient=True)
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the live line while the member is asked something: it would redraw over
        the question and the answer being typed. Events still print, as plain lines."""
        was_live = self._live is not None
        self._stop_live()
        self._paused = True
        try:
            yield
        finally:
            self._paused = False
            if was_live:
                self._start_live()

    def set(self, status: str) -> None:
        """Show `status` as the current state (printed only when it changes)."""
        status = clean(status)
        if status == self.current:
            return
        self.current = status
        if self._live is not None:
            self._live.update(self._line())
        elif not self._paused:
            self._plain(f"status: {status}")

    def result(self, message: str) -> None:
        """Print a case's outcome, and keep it on the live line as the last result."""
        self.last_result = clean(message)
        self.event(message)
        if self._live is not None:
            self._live.update(self._line())

    def _line(self) -> Text:
        line = Text(f"● {self.current}")
        if self.last_result:
            line.append(f"  (last: {self.last_result})", style="dim")
        return line

    def event(self, message: str) -> None:
        """Print a line that stays (a case started, finished, a harness described)."""
        message = clean(message)
        if self._live is not None:
            self._live.console.print(Text(message))
        elif self._paused:
            self.console.print(Text(message))
        else:
            self._plain(message)

    def ask(self, lines: list[str], question: str) -> None:
        """Print a question for the member (within `paused`), leaving the cursor after it."""
        for line in lines:
            self.console.print(Text(clean(line)))
        self.console.print(Text(clean(question)), end="")
        self.stream.flush()

    def _plain(self, message: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"{stamp} {message}\n")
        self.stream.flush()


def shorten(reason: str, limit: int = 120) -> str:
    """Return the first line of `reason`, cut to `limit` characters, to show on one line."""
    first = reason.strip().splitlines()[0] if reason.strip() else "unknown"
    return first if len(first) <= limit else first[: limit - 1] + "…"
