"""``coevo compare CONFIG --strategies vace,rl_only,... --seeds 3 [--budget N | --updates N]``: run strategies with
matched budgets, splits and seeds (``coevo.app.compare``; at N rollouts each with ``--budget``), print
the tables, write HTML + PNG."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from coevo.cli.common import RUN_DB_HELP, console, key_values, shown, user_errors
from coevo.config import ConfigError, load_config
from coevo.graphs.registry import get_strategy, strategy_names
from coevo.report.terminal import budget_table, compare_table, spend_table

DEFAULT_STRATEGIES = "vace,ungated,rl_only,harness_only,static"


def compare_cmd(
    config: Optional[Path] = typer.Argument(
        None, help="TOML/YAML run config shared by every run (default: the built-in defaults)."),
    strategies: str = typer.Option(DEFAULT_STRATEGIES, "--strategies", show_default=False,
                                   help=f"Comma-separated, from: {strategy_names()}. Default: "
                                   f"{', '.join(DEFAULT_STRATEGIES.split(','))}."),
    seeds: int = typer.Option(3, "--seeds", min=1, help="Seeds per strategy: config.seed, config.seed + 1, ..."),
    budget: Optional[int] = typer.Option(
        None, "--budget", min=0, help="N rollouts on train + val + search every strategy spends: each runs until the "
        "next phase would take it past N (that phase is cut before it starts), then its final test; the tables add "
        "the spend by phase, val at the budget and how each run ended. Default: the config's budget (0: none)."),
    updates: Optional[int] = typer.Option(
        None, "--updates", min=0, help="N weight updates (GRPO optimiser steps, RSFT rounds) every training strategy "
        "makes (Harness-S Table 9's equal-updates protocol): each runs until its next weight stage would take it "
        "past N. One protocol per comparison: not with --budget. Default: the config's updates (0: none)."),
    db: Optional[str] = typer.Option(None, "--db", envvar="COEVO_DB", help=RUN_DB_HELP),
    set_: list[str] = typer.Option([], "--set",
                                   help="Override a config key for every run: --set rounds=1 (repeatable)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out",
                                       help="Report folder (default: OUT_DIR/compare/COMPARISON_ID)."),
) -> None:
    """Run strategies on the same config, splits and seeds and compare their test scores.

    Finished runs are read back and stopped ones resumed. Prints and writes test scores with 95 %
    intervals, paired differences to the reference, gate counts, the weight stages'
    effective-group rate, each strategy's budget and its val score at the matched rollout budget,
    with a score-vs-rollouts plot. The protocol: with --budget N every strategy spends N rollouts (or
    says why it could not) and is compared there; with --updates N every training strategy makes N
    weight updates; with neither, each runs the configured rounds (VACE's stage and proposal caps).
    Planned baselines (sia, stagewise) run as many rounds as the reference (vace) ran in each seed.

    Example:

    `coevo compare configs/chain_sum.toml --strategies vace,rl_only --seeds 3`"""
    from coevo.app.compare import compare
    from coevo.observe.progress import RichReporter
    from coevo.report.caveats import separation_warnings
    from coevo.report.compare import write_compare_report

    with user_errors():
        overrides = key_values(set_, "train.steps=4")
        if db is not None:
            overrides["db"] = db
        cfg = load_config(config, overrides, flags={"db": "--db"})
        names = [s.strip() for s in strategies.split(",") if s.strip()]
        for name in names:
            try:
                get_strategy(name)
            except ValueError as err:
                raise ConfigError(f"--strategies {strategies}: {err}") from None
        with RichReporter(console=console) as reporter:
            try:
                comparison = asyncio.run(compare(cfg, names, seeds, reporter=reporter, budget=budget,
                                                     updates=updates))
            except KeyboardInterrupt:
                console.print("[yellow]interrupted: finished runs are kept and read back; run the same command "
                              "to continue[/yellow]")
                raise typer.Exit(130) from None
        for warning in separation_warnings(comparison):
            console.print(f"[yellow bold]warning:[/yellow bold] [yellow]{escape(warning)}[/yellow]", highlight=False)
        console.print(compare_table(comparison))
        console.print(budget_table(comparison))
        if comparison.budget:
            console.print(spend_table(comparison))
        for warning in comparison.warnings:
            console.print(f"[yellow]warning:[/yellow] {warning}")
        path = write_compare_report(comparison, out or Path(cfg.out_dir) / "compare" / comparison.id)
    console.print(f"report: {path}")
    console.print(f"archive: {shown(cfg.db)}  comparison: {comparison.id}")
