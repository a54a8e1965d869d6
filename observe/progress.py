"""Progress reporting: nodes never print; long jobs report their progress to a ``Reporter`` they
are given, and lines go to the logging channel (``coevo.observe.log``).

``NullReporter`` (the default) does nothing; ``RichReporter`` draws rich progress bars with tasks
done, the mean score so far and an ETA on a terminal, or one line per finished job in a pipe, and
prints the channel's lines (it is the channel's consumer while it runs); a test can pass its own
object with the same methods.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from coevo.observe.log import CHANNEL, ChannelHandler, attach

log = logging.getLogger(f"{CHANNEL}.progress")
"""Where a finished job's line goes when no bars are drawn (topic ``progress``)."""


class Reporter(Protocol):
    """What a job may report: a bar per job (``start`` -> handle, ``update``, ``stop``). One-line
    messages go to the logging channel (``coevo.observe.log``)."""

    def start(self, label: str, total: int) -> Any:
        """Begin a job of ``total`` units named ``label``; returns a handle for ``update``/``stop``."""
        ...

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        """``done`` units finished so far; ``score`` the running mean score (None when unknown)."""
        ...

    def stop(self, handle: Any) -> None:
        """The job ended (finished or interrupted)."""
        ...


class NullReporter:
    """Reports nothing."""

    def start(self, label: str, total: int) -> Any:
        """Ignore the job; the handle is ``None``."""
        return None

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        """Ignore the progress."""

    def stop(self, handle: Any) -> None:
        """Ignore the end of the job."""


class RichReporter:
    """Progress for a person: on a terminal, rich progress bars (label, bar, done/total, mean score
    so far, elapsed and ETA); when the output is not a terminal (a pipe, a log file), no bars, but one
    line per finished job, written (and flushed) the moment it finishes, so a killed run's log holds
    every job it finished: ``[HH:MM:SS] progress <label>: 30/30 tasks, mean 0.123, 41.2 s`` (on the
    logging channel, topic ``progress``). While it runs, the logging channel's lines
    (``coevo.observe.log``: ``[HH:MM:SS] topic    message``) are printed verbatim (no rich markup or
    highlighting), one line each (never wrapped or suffixed with the source file, so piped output
    stays greppable), above the bars on a terminal.

    With ``every_s`` set (``coevo eval``: one long job), a pipe also gets a line while a job runs, as its
    tasks finish, at most one per ``every_s`` seconds, so a long evaluation is not silent until its end;
    without it (``coevo run``: many jobs) only finished jobs are written.

    Use as a context manager (``with RichReporter() as reporter: ...``) so the live display is
    closed, and the channel released, even on error; ``transient=True`` erases the bars when it closes.
    """

    def __init__(self, console: Console | None = None, transient: bool = False,
                 every_s: float | None = None) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("mean {task.fields[score]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=console, transient=transient,
        )
        self.bars = self.progress.console.is_interactive
        """Whether bars are drawn (a terminal); else each finished job is one line."""
        self._detach: Any = None
        self.every_s = every_s
        """In a pipe, the least seconds between two lines of a running job (None: finished jobs only)."""
        self._last: dict[Any, float] = {}

    def __enter__(self) -> "RichReporter":
        if self.bars:
            self.progress.start()
        self._detach = attach(ChannelHandler(self.line))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._detach is not None:
            self._detach()
            self._detach = None
        if self.bars:
            self.progress.stop()

    def line(self, text: str) -> None:
        """Print ``text`` above the bars, verbatim, on one line (never wrapped)."""
        self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def start(self, label: str, total: int) -> Any:
        """Add a bar named ``label`` for ``total`` units; returns its rich task id."""
        return self.progress.add_task(label, total=total, score="–")

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        """Move bar ``handle`` to ``done`` units and show ``score`` (3 decimals; "–" when None)."""
        self.progress.update(handle, completed=done, score="–" if score is None else f"{score:.3f}")
        if self.bars or self.every_s is None:
            return
        task = self._task(handle)
        if done <= 0 or (task.total and done >= task.total):
            return  # nothing finished yet, or ``stop`` writes the finished job's line
        now, last = time.monotonic(), self._last.get(handle)
        if last is None or now - last >= self.every_s:
            self._last[handle] = now
            self._write(task)

    def _task(self, handle: Any) -> Any:
        return self.progress.tasks[self.progress.task_ids.index(handle)]

    def _write(self, task: Any) -> None:
        log.info("%s: %d/%d tasks, mean %s, %.1f s", task.description, task.completed, task.total,
                 task.fields["score"], task.elapsed or 0.0)

    def stop(self, handle: Any) -> None:
        """On a terminal, redraw so the bar shows its last state (it stays until the reporter closes);
        otherwise write the job's one line now: label, units done of total, mean score, seconds."""
        if self.bars:
            self.progress.refresh()
            return
        self._last.pop(handle, None)
        self._write(self._task(handle))
