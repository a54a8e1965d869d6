"""``coevo report RUN_ID``: write the run's HTML report (``coevo.report.html``) and print where."""

from __future__ import annotations

from pathlib import Path

import typer

from coevo.cli.common import console, user_errors
from coevo.report.html import write_report


def report_cmd(run_id: str = typer.Argument(..., help="The run id (see `coevo archive list`)."),
               db: str = typer.Option("coevo_runs/coevo.db", "--db", help="The run's database."),
               out: Path = typer.Option(None, "-o", "--out",
                                        help="Output folder (default: coevo_runs/reports/RUN_ID).")) -> None:
    """Write an HTML report with plots (validation per round, train reward per step, lineage) and the final diff."""
    with user_errors():
        path = write_report(run_id, db, out or Path("coevo_runs") / "reports" / run_id)
    console.print(f"wrote {path}")
