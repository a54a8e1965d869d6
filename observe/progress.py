"""Progress reporting for nodes: nodes never print, they call a ``Reporter`` they are given.

``NullReporter`` (the default) does nothing; ``RichReporter`` draws rich progress bars with tasks
done, the mean score so far and an ETA; a test can pass its own object with the same methods.
"""

from __future__ import annotations

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


class Reporter(Protocol):
    """What a node may report: a bar per job (``start`` -> handle, ``update``, ``stop``) and
    one-line messages (``log``)."""

    def start(self, label: str, total: int) -> Any:
        """Begin a job of ``total`` units named ``label``; returns a handle for ``update``/``stop``."""
        ...

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        """``done`` units finished so far; ``score`` the running mean score (None when unknown)."""
        ...

    def stop(self, handle: Any) -> None:
        """The job ended (finished or interrupted)."""
        ...

    def log(self, message: str) -> None:
        """A one-line message."""
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

    def log(self, message: str) -> None:
        """Drop the message."""


class RichReporter:
    """Rich progress bars: label, bar, done/total, mean score so far, elapsed and ETA; ``log``
    lines as ``[HH:MM:SS] message``, one line each (never wrapped or suffixed with the source
    file, so piped output stays greppable).

    Use as a context manager (``with RichReporter() as reporter: ...``) so the live display is
    closed even on error; ``transient=True`` erases the bars when it closes.
    """

    def __init__(self, console: Console | None = None, transient: bool = False) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("mean {task.fields[score]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=console, transient=transient,
        )

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def start(self, label: str, total: int) -> Any:
        """Add a bar named ``label`` for ``total`` units; returns its rich task id."""
        return self.progress.add_task(label, total=total, score="–")

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        """Move bar ``handle`` to ``done`` units and show ``score`` (3 decimals; "–" when None)."""
        self.progress.update(handle, completed=done, score="–" if score is None else f"{score:.3f}")

    def stop(self, handle: Any) -> None:
        """Redraw so the bar shows its last state; the bar stays until the reporter closes."""
        self.progress.refresh()

    def log(self, message: str) -> None:
        """Print ``[HH:MM:SS] message`` above the bars, verbatim (no rich markup or highlighting), on one
        line: never wrapped, never suffixed with the source file (piped output stays greppable)."""
        self.progress.console.print(f"[{time.strftime('%H:%M:%S')}] {message}", markup=False, highlight=False,
                                    soft_wrap=True)
