"""The ``coevo`` command line (typer). Offline by default: importing coevo sets the offline env vars."""

from __future__ import annotations

import typer

import coevo  # noqa: F401  (sets the offline environment variables first)
from coevo.cli import harness

app = typer.Typer(help="coevo: co-evolve an LLM agent's harness and its model weights.", no_args_is_help=True)
app.add_typer(harness.app, name="harness")


def main() -> None:
    """Entry point of the ``coevo`` script."""
    app()


if __name__ == "__main__":
    main()
