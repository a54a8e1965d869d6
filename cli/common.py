"""Shared CLI helpers: one rich console, the archive option every command shares, and turning
coevo errors into readable exits."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import typer
from rich.console import Console

from coevo.config import RunConfig
from coevo.envs.common import MissingExtraError
from coevo.harnesses.errors import HarnessError
from coevo.models.smollm2 import SmolLM2NotInstalledError
from coevo.storage import Archive, ArchiveError

console = Console()

DEFAULT_DB = RunConfig.model_fields["db"].default
"""The archive every command reads and writes unless told otherwise: where ``coevo run`` puts it."""
DB_HELP = (f"Archive: a SQLite file path or a SQLAlchemy URL (env COEVO_DB; default {DEFAULT_DB}, where coevo run "
           "writes).")


def open_archive(db: str) -> Archive:
    """The existing archive at ``db`` for a command that only reads it. Raises ``ArchiveError`` naming
    the path and the fix when ``db`` is a file path with no file (no empty database is left behind)."""
    if "://" not in db and db != ":memory:" and not Path(db).expanduser().is_file():
        raise ArchiveError(f"no archive at {db}: pass --db with the database a run or evaluation printed "
                           f"(coevo run writes {DEFAULT_DB} by default; coevo eval and the archive commands "
                           "also read $COEVO_DB)")
    return Archive(db)


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a ``HarnessError`` (every problem with its path), or an ``ArchiveError`` (bad path, not a
    database, newer schema, unknown id) / ``ValueError`` (bad config, model or env reference,
    ``RunError``) / ``FileNotFoundError`` / ``KeyError`` / a missing optional package, as a red
    message and exit 1."""
    try:
        yield
    except HarnessError as err:
        console.print(f"[red]{err.source}: {len(err.problems)} problem(s)[/red]")
        for p in err.problems:
            console.print(f"  [bold]{p.path or '/'}[/bold]: {p.message}")
        raise typer.Exit(1) from None
    except (ArchiveError, ValueError, FileNotFoundError, KeyError, MissingExtraError,
            SmolLM2NotInstalledError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        console.print(f"[red]error:[/red] {message}", highlight=False)
        raise typer.Exit(1) from None
