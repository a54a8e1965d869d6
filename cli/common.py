"""Shared CLI helpers: one rich console and turning coevo errors into readable exits."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import typer
from rich.console import Console
from rich.markup import escape

from coevo.harnesses.errors import HarnessError
from coevo.storage import ArchiveError

console = Console()


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a ``HarnessError`` (every problem with its path), or an ``ArchiveError`` (bad path, newer
    schema, unknown id) / ``ValueError`` / ``FileNotFoundError`` / ``KeyError``, as a red message and exit 1."""
    try:
        yield
    except HarnessError as err:
        console.print(f"[red]{err.source}: {len(err.problems)} problem(s)[/red]")
        for p in err.problems:
            console.print(f"  [bold]{p.path or '/'}[/bold]: {p.message}")
        raise typer.Exit(1) from None
    except (ArchiveError, ValueError, FileNotFoundError, KeyError) as err:
        console.print(f"[red]error:[/red] {escape(str(err))}")  # an error's own brackets are text, not markup
        raise typer.Exit(1) from None


def key_values(pairs: list[str], example: str) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as a dict, each value parsed as a TOML value when it parses (numbers,
    booleans, lists) and kept as text otherwise. Raises ``ValueError`` (showing ``example``) for a
    pair without ``=``."""
    import tomllib

    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--set {pair!r}: write KEY=VALUE, e.g. --set {example}")
        key, value = pair.split("=", 1)
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except Exception:
            out[key] = value
    return out
