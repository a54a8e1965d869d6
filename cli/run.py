"""``coevo run [CONFIG]``: run a meta-loop strategy (VACE by default) end to end, durably."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from coevo.cli.common import console, key_values, user_errors
from coevo.config import RunConfig, load_config
from coevo.evaluation.executors import make_executor
from coevo.graphs.registry import strategy_names


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:.3f}"


def summary_table(state: dict[str, Any]) -> Table:
    """Rounds, incumbent val score, candidates with their val scores and fate, and the test scores of
    the start and final pairs — each score beside the trivial-policy baseline (``state`` as
    ``run_meta`` returns it: ``RoundSummary`` history, ``EvalSummary`` test scores)."""
    table = Table(title=f"run {state['run_id']}: summary")
    for col in ("round", "incumbent", "incumbent val", "candidates (val, fate)", "trivial"):
        table.add_column(col)
    for h in state.get("history", []):
        cands = ", ".join(f"{(c.id or '-')[:8]} {_fmt(c.val)} {c.fate}" for c in h.candidates) or "none"
        table.add_row(str(h.round), h.incumbent[:12], _fmt(h.incumbent_val), cands, _fmt(h.trivial))
    test = state.get("test") or {}
    if test:
        start, final = test["start"], test["final"]
        table.add_row("test", "start pair (H0, W0)", _fmt(start.score), "", _fmt(start.trivial_baseline))
        table.add_row("test", "final pair", _fmt(final.score),
                      f"pass@k {_fmt(final.pass_at_k)} (start {_fmt(start.pass_at_k)})", _fmt(start.trivial_baseline))
    return table


def run_cmd(
    config: Optional[Path] = typer.Argument(
        None, help="TOML/YAML run config (default: the built-in defaults = configs/default.toml)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue run RUN_ID from its last completed node."),
    approve_gate: bool = typer.Option(
        False, "--approve-gate", help="Pause before each gate decision for a person to accept or reject."),
    answer: Optional[str] = typer.Option(None, "--answer", help="With --resume: answer a paused gate (yes/no)."),
    meta_model: Optional[str] = typer.Option(
        None, "--meta-model", help="'offline' (default) or a LiteLLM model for curator and editor."),
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"The meta-loop strategy: {strategy_names()}."),
    db: Optional[str] = typer.Option(None, "--db", help="Archive + checkpointer database (default from the config)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key: --set train.steps=4 (repeatable)."),
    executor: Optional[str] = typer.Option(None, "--executor", help="Where rollouts run: inprocess (default) or ray "
                                           "(workers of $RAY_ADDRESS, or a local Ray instance; needs coevo[ray])."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the HTML report at the end."),
) -> None:
    """Run VACE (or a baseline): RL stage -> refine the harness from its trajectories -> paired validation -> gate."""
    from coevo.meta.run import run_meta
    from coevo.report.progress import RichReporter

    with user_errors():
        overrides = key_values(set_, "train.steps=4")
        for key, value in (("meta.model", meta_model), ("strategy", strategy), ("db", db), ("executor", executor)):
            if value is not None:
                overrides[key] = value
        cfg = load_config(config, overrides)
        make_executor(cfg.executor).close()  # fail here, readably, when the executor cannot run (Ray missing)
        if resume and db is None and config is None:
            cfg = RunConfig(db=cfg.db)
    with RichReporter(console=console) as reporter:
        try:
            state = asyncio.run(run_meta(cfg, run_id=resume, resume=resume is not None,
                                         approve=approve_gate or cfg.gate.approve, reporter=reporter, answer=answer))
            while "__interrupt__" in state:
                question = state["__interrupt__"][0].value
                reporter.log(f"gate awaits approval: {question}")
                if not sys.stdin.isatty():
                    console.print(f"[yellow]paused for approval; answer with: coevo run --resume {state['run_id']} "
                                  f"--answer yes|no --db {cfg.db}[/yellow]")
                    return
                reply = "yes" if typer.confirm(f"accept candidate {question['candidate'][:12]} "
                                               f"(c={question['c']:.3f} vs b={question['b']:.3f})?") else "no"
                state = asyncio.run(run_meta(cfg, run_id=state["run_id"], resume=True, approve=True, reporter=reporter,
                                             answer=reply))
        except KeyboardInterrupt:
            console.print("[yellow]interrupted: completed nodes and rollouts are saved; "
                          "resume with --resume RUN_ID[/yellow]")
            raise typer.Exit(130) from None
    console.print(summary_table(state))
    if report:
        from coevo.report.html import write_report

        path = write_report(state["run_id"], cfg.db, Path(cfg.out_dir) / "reports" / state["run_id"])
        console.print(f"report: {path}")
    console.print(f"archive: {cfg.db}  run id: {state['run_id']}")
