"""``coevo decompose RUN``: which lever did what — the 2×2 of (H0, H_final) × (W0, W_final) on the run's
test split (``coevo.app.decompose``), printed with n and intervals and stored for the run's report."""

from __future__ import annotations

import typer
from rich.table import Table

from coevo.cli.common import DB_HELP, DEFAULT_DB, console, log_folder, open_archive, shown, user_errors
from coevo.evaluation.decompose import CELLS
from coevo.observe.progress import RichReporter
from coevo.report.decompose import CELL_NAMES, effect_rows
from coevo.report.numbers import score_text


def decompose_cmd(run_id: str = typer.Argument(..., help="The run id or a unique prefix (see `coevo archive list`)."),
                  env: str = typer.Option(None, "--env", help="Evaluate on this env reference's test split instead "
                                          "of the run's (e.g. the same suite drawn from another seed; the run's "
                                          "env.n_test tasks)."),
                  k: int = typer.Option(None, "--k", min=1, help="Rollouts per task (default: the run's eval.k)."),
                  db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP)) -> None:
    """Say which lever did what: the 2×2 of (H0, H_final) × (W0, W_final) on test.

    Evaluates the start and final harnesses under the start and final weights on the run's test
    tasks with its seeds (the start and final pairs are read back from the run's own test), and
    prints each cell with n and its 95 % interval, the harness effect under W0 and W_final, the
    weight effect under H0 and H_final and their interaction, each paired per task. Stored in the
    archive and shown in the run's HTML report, which is written again; run it again to continue
    an interrupted one.

    Example:

    `coevo decompose RUN_ID`"""
    from coevo.app.decompose import run_decompose
    from coevo.observe.log import framework_noise_to

    with user_errors():
        open_archive(db).close()  # a missing file is an error here, never a new empty archive
        # what the frameworks say (transformers' weight-loading bar and warnings) goes to a log file, as for coevo run
        with framework_noise_to(log_folder(db) / f"decompose-{run_id}.log"), \
                RichReporter(console=console, transient=True) as reporter:
            done = run_decompose(db, run_id, env, k, reporter)
    record, numbers = done.record, done.numbers
    trivial = next((r.trivial_baseline for r in done.results.values() if r.trivial_baseline is not None), None)
    cells = Table(title=f"run {record.run_id}: {record.env}/{record.split}, k = {record.k}, {numbers.n} tasks "
                        f"(trivial baseline {'-' if trivial is None else f'{trivial:.3f}'})")
    for column in ("cell", "harness", "checkpoint", "mean@k reward [95 %] n"):
        cells.add_column(column)
    for cell, (h, w) in CELLS.items():
        cells.add_row(CELL_NAMES[cell], record.harnesses[h][:12], record.checkpoints[w][:24],
                      score_text(numbers.cells[cell]))
    console.print(cells)
    diffs = Table(title="effects (paired per task)")
    diffs.add_column("effect")
    diffs.add_column("mean [95 % interval] n")
    for what, text in effect_rows(numbers):
        diffs.add_row(what, text)
    console.print(diffs)
    with user_errors():
        path = _report(db, record.run_id)
    console.print(f"decomposition {record.id[:12]} stored in {shown(db)}; the run's report shows it: {path}")


def _report(db: str, run_id: str):
    """Rewrite run ``run_id``'s HTML report (its own out_dir), now with the decomposition; returns its path."""
    import asyncio
    from pathlib import Path

    from coevo.app.run import read_state
    from coevo.records import RunRecord
    from coevo.report.html import write_report

    with open_archive(db) as archive:
        run = archive.get(RunRecord, run_id)
    state = asyncio.run(read_state(db, run_id, run.strategy))
    out_dir = Path(run.config.get("out_dir") or "coevo_runs") / "reports" / run_id
    return write_report(run_id, db, out_dir, state)
