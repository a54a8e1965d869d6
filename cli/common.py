"""Shared CLI helpers: one rich console, the archive option every command shares, and turning
coevo errors into readable exits."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement

from coevo.config import ConfigError, RunConfig
from coevo.errors import CoevoError
from coevo.harnesses.errors import HarnessError
from coevo.masking import redact
from coevo.storage import Archive, ArchiveError
from coevo.storage.connection import exists, location

WIDEST = 100_000
"""The widest line a renderable is measured against in a pipe (characters)."""


class PipeConsole(Console):
    """The CLI's rich console. When its output is not a terminal (a pipe, a file) there is no width to
    fit, so a table, JSON block or other renderable is printed at its natural width: every column and
    value whole, where rich's 80-column fallback would cut scores to ``0.…`` and ids to ``e6c22…``;
    a line of text (a message, a log line) is written as one line, never wrapped, so what a script greps
    for (``run id: ID``) stays on the line it is on. On a terminal everything is printed as rich prints it."""

    def __init__(self, width: int | None = None, **kwargs: Any) -> None:
        super().__init__(width=width, **kwargs)
        self._fixed = width

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """``Console.print``, at the renderables' natural width when not on a terminal (class docstring)."""
        natural = 0
        if not self.is_terminal and all(isinstance(o, str) for o in objects):
            kwargs.setdefault("soft_wrap", True)  # one line as written, however long
        elif not self.is_terminal and kwargs.get("width") is None:
            options = self.options.update(max_width=WIDEST)
            natural = max((Measurement.get(self, options, o).maximum for o in objects if not isinstance(o, str)),
                          default=0)
        if natural <= self.width:
            super().print(*objects, **kwargs)
            return
        self.width = natural
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = self._fixed  # type: ignore[assignment]  (None: detect again)


console = PipeConsole()

DEFAULT_DB = RunConfig.model_fields["db"].default
"""The archive every command reads and writes unless told otherwise: where ``coevo run`` puts it."""
DB_HELP = (f"Archive: a SQLite file path or a SQLAlchemy URL (env COEVO_DB; default {DEFAULT_DB}, where coevo run "
           "writes).")
RUN_DB_HELP = ("Archive + checkpointer database: a SQLite file or a PostgreSQL URL (postgresql+psycopg://...) "
               "(env COEVO_DB; default from the config).")


def open_archive(db: str, migrate: bool = True) -> Archive:
    """The existing archive at ``db`` for a command that only reads it (``migrate``: see ``Archive``).
    Raises ``ArchiveError`` naming the path and the fix when ``db`` is a file path with no file (no
    empty database is left behind)."""
    if not exists(db):
        raise ArchiveError(f"no archive at {db}: pass --db with the database a run or evaluation printed "
                           f"(coevo run writes {DEFAULT_DB} by default; coevo eval and the archive commands "
                           "also read $COEVO_DB)")
    return Archive(db, migrate=migrate)


def shown(db: str) -> str:
    """The archive ``db`` as a message shows it: absolute (a file) and with its password masked (a URL)."""
    return redact(location(db))


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a user's mistake and exit 1: a ``HarnessError`` with every problem and its path, any other
    ``coevo.errors.CoevoError`` (a bad config key, model or env reference, archive path, run id or
    answer, a missing optional package) as its one-paragraph message in red, and likewise a
    ``ValueError`` / ``FileNotFoundError`` / ``KeyError`` raised by a library on bad input. Secrets in
    a message (a database password, an API key) are masked (``coevo.masking.redact``)."""
    try:
        yield
    except HarnessError as err:
        console.print(f"[red]{err.source}: {len(err.problems)} problem(s)[/red]")
        for p in err.problems:
            console.print(f"  [bold]{p.path or '/'}[/bold]: {escape(redact(p.message))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except (CoevoError, ValueError, FileNotFoundError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        # an error's own brackets (pip install 'coevo[ray]') are text, not markup
        # one paragraph, never folded (a path or id split across lines could not be copied back)
        console.print(f"[red]error:[/red] {escape(redact(str(message)))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def key_values(pairs: list[str], example: str) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as a dict, each value parsed as a TOML value when it parses (numbers,
    booleans, lists) and kept as text otherwise. Raises ``ValueError`` (showing ``example``) for a
    pair without ``=``."""
    import tomllib

    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set {pair!r}: write KEY=VALUE, e.g. --set {example}")
        key, value = pair.split("=", 1)
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except Exception:
            out[key] = value
    return out


def print_failure(err: BaseException, max_frames: int = 8) -> None:
    """Print ``err``'s traceback (at most ``max_frames`` frames) with every secret in its messages
    masked (``coevo.masking.redact``): a failure of coevo or of something it calls, not a user's mistake."""
    from rich.traceback import Traceback

    trace = Traceback.extract(type(err), err, err.__traceback__)
    for stack in trace.stacks:
        stack.exc_value = redact(stack.exc_value)
    console.print(Traceback(trace, max_frames=max_frames))


def log_folder(db: str) -> Path:
    """Where a command's log file goes: ``logs/`` beside a SQLite archive, else ``coevo_runs/logs``."""
    return (Path(db).parent if "://" not in db else Path("coevo_runs")) / "logs"
