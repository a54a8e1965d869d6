"""Progress reporting: nodes never print; long jobs report their progress to a ``Reporter`` they
are given, and lines go to the logging channel (``coevo.observe.log``).

``NullReporter`` (the default) does nothing; ``RichReporter`` draws rich progress bars with tasks
done, the mean score so far and an ETA, and prints the channel's lines above them (it is the
channel's consumer while it runs); a test can pass its own object with the same methods.
"""

from __future__ import annotations

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

from coevo.observe.log import ChannelHandler, attach


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
    """Rich progress bars: label, bar, done/total, mean score so far, elapsed and ETA; while it runs,
    the logging channel's lines (``coevo.observe.log``: ``[HH:MM:SS] topic    message``) are printed
    above them verbatim (no rich markup or highlighting), one line each (never wrapped or suffixed
    with the source file, so piped output stays greppable).

    Use as a context manager (``with RichReporter() as reporter: ...``) so the live display is
    closed, and the channel released, even on error; ``transient=True`` erases the bars when it closes.
    """

    def __init__(self, console: Console | None = None, transient: bool = False) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("mean {task.fields[score]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=console, transient=transient,
        )
        self._detach: Any = None

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        self._detach = attach(ChannelHandler(self.line))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._detach is not None:
            self._detach()
            self._detach = None
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

    def stop(self, handle: Any) -> None:
        """Redraw so the bar shows its last state; the bar stays until the reporter closes."""
        self.progress.refresh()
