"""The ``coevo`` command line (typer). Offline by default: importing coevo sets the offline env vars."""

from __future__ import annotations

import typer

import coevo  # noqa: F401  (sets the offline environment variables first)
from coevo.cli import archive, envs, harness
from coevo.cli.compare import compare_cmd
from coevo.cli.decompose import decompose_cmd
from coevo.cli.eval import eval_cmd
from coevo.cli.export import export_cmd, release
from coevo.cli.report import report_cmd
from coevo.cli.run import run_cmd

app = typer.Typer(help="coevo: co-evolve an LLM agent's harness and its model weights.\n\n"
                       "Example: `coevo run` (the default job: VACE on the showcase suite)",
                  no_args_is_help=True, rich_markup_mode="markdown")
app.command("run")(run_cmd)
app.command("eval")(eval_cmd)
app.command("compare")(compare_cmd)
app.command("report")(report_cmd)
app.command("decompose")(decompose_cmd)
app.command("export")(export_cmd)
app.add_typer(harness.app, name="harness")
app.add_typer(envs.app, name="envs")
app.add_typer(archive.app, name="archive")
app.add_typer(release, name="release")


def main() -> None:
    """Entry point of the ``coevo`` script."""
    app()


if __name__ == "__main__":
    main()
