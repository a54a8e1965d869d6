"""``coevo report RUN_ID``: write the run's HTML report (``coevo.report.html``) and print where."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from coevo.cli.common import console, user_errors
from coevo.graphs.registry import STRATEGIES
from coevo.report.html import write_report
from coevo.storage import Archive


def report_cmd(run_id: str = typer.Argument(..., help="The run id (see `coevo archive list`)."),
               db: str = typer.Option("coevo_runs/coevo.db", "--db", help="The run's database."),
               out: Path = typer.Option(None, "-o", "--out",
                                        help="Output folder (default: coevo_runs/reports/RUN_ID).")) -> None:
    """Write an HTML report with plots (validation per round, train reward per step, lineage), the test
    scores with their intervals and paired difference, and the final diff."""
    with user_errors():
        run = Archive(db).get_run(run_id) if Path(db).is_file() else None
        state = None
        if run is not None and run.strategy in STRATEGIES:  # a meta-loop run: its final state is checkpointed
            from coevo.meta.run import read_state

            state = asyncio.run(read_state(db, run_id, run.strategy))
        path = write_report(run_id, db, out or Path("coevo_runs") / "reports" / run_id, state)
    console.print(f"wrote {path}")
