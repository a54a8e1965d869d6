"""``coevo report RUN_ID``: write the run's HTML report (``coevo.report.html``) and print where."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from coevo.cli.common import DB_HELP, DEFAULT_DB, console, open_archive, user_errors
from coevo.graphs.registry import STRATEGIES
from coevo.records import RunRecord
from coevo.report.html import write_report


def report_cmd(run_id: str = typer.Argument(..., help="The run id or a unique prefix (see `coevo archive list`)."),
               db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP),
               out: Path = typer.Option(None, "-o", "--out",
                                        help="Output folder (default: OUT_DIR/reports/RUN_ID, OUT_DIR the run's "
                                             "own out_dir).")) -> None:
    """Write a run's HTML report with its plots.

    Validation per round, train reward per step, the lineage, the test scores with their intervals
    and paired difference, and the final diff.

    Example:

    `coevo report RUN_ID`"""
    with user_errors():
        with open_archive(db) as archive:  # a missing file is an error here, never a new empty archive
            run = archive.get(RunRecord, archive.resolve_id("runs", run_id))  # an id or a unique prefix
        assert run is not None
        run_id = run.id
        out_dir = run.config.get("out_dir") or "coevo_runs"
        state = None
        if run.strategy in STRATEGIES:  # its final state is checkpointed (SQLite or Postgres)
            from coevo.app.run import read_state

            state = asyncio.run(read_state(db, run_id, run.strategy))
        path = write_report(run_id, db, out or Path(out_dir) / "reports" / run_id, state)
    console.print(f"wrote {path}")
