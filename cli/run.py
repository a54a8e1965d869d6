"""``coevo run [CONFIG]``: run a meta-loop strategy (VACE by default) end to end, durably."""

from __future__ import annotations

import asyncio
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from coevo.cli.common import RUN_DB_HELP, console, key_values, log_folder, print_failure, shown, user_errors
from coevo.config import ConfigError, RunConfig, load_config
from coevo.errors import CoevoError
from coevo.graphs.registry import strategy_names
from coevo.masking import redact
from coevo.report.terminal import summary_table

if TYPE_CHECKING:
    from coevo.storage import Archive

DEFAULT_JOB = Path(__file__).resolve().parents[1] / "configs" / "default.toml"
"""The default job ``coevo run`` runs without a config (shipped as package data): VACE on the showcase suite.
Keys it leaves out take ``RunConfig``'s defaults, as in any config. With ``--env``, ``--harness`` or an
``env.*`` override and no config, the run starts from ``RunConfig``'s defaults instead: the showcase job's
sizes and training settings are tuned to that suite."""

FLAGS = {"meta.model": "--meta-model", "harness": "--harness", "env.ref": "--env", "strategy": "--strategy",
         "db": "--db", "executor": "--executor", "report_to": "--report-to"}
"""The config key each ``coevo run`` flag sets (a bad value's error names the flag)."""


def _answers(pairs: list[str]) -> dict[str, str]:
    """``--answer`` values (``ID=yes``, or a bare ``yes`` for the only pending question) by question id."""
    return dict(pair.rsplit("=", 1) if "=" in pair else ("", pair) for pair in pairs)


def _show_questions(state: dict[str, Any]) -> None:
    for pending in state["__interrupt__"]:
        q = pending.value
        verdict = "accept" if q["gate_says"] else "reject"
        console.print(f"[yellow]gate question {pending.id[:8]}[/yellow]: round {q['round']}, candidate "
                      f"{q['candidate'][:12]} (c={q['c']:.3f}) vs incumbent {q['incumbent'][:12]} (b={q['b']:.3f}); "
                      f"the gate alone would {verdict}: {q['reason']}", highlight=False, soft_wrap=True)


async def _drive(cfg: RunConfig, run_id: str, archive: Archive | None, approve: bool, answers: dict[str, str],
                 reporter: Any, keep: ExitStack) -> tuple[dict[str, Any] | None, Archive]:
    """Run (``archive`` None) or resume run ``run_id`` in ``archive`` to the end (the final state) or to
    a pause nobody here can answer (None), with the archive it ran on: opened once, for the run and
    the summary after it (``keep`` closes it); a gate question answered at the terminal goes on with
    the same services and graph (``Run.advance``)."""
    from coevo.app.run import prepare_start, resume_run, start_run

    if archive is not None:
        door = resume_run(cfg, run_id, archive, approve, reporter)
    else:
        start = await prepare_start(cfg, approve)  # before a new database is made: nothing left behind
        archive = keep.enter_context(start.open_archive())
        door = start_run(start, archive, run_id, reporter)
    async with door as run:
        state = await run.advance(answers or None)
        while "__interrupt__" in state:
            _show_questions(state)
            pending = state["__interrupt__"]
            if not sys.stdin.isatty():
                answer = " ".join(f"--answer {p.id[:8]}=yes|no" for p in pending)
                console.print(f"[yellow]paused for approval (the run keeps --approve-gate); answer with: "
                              f"coevo run --resume {run_id} --db {shown(cfg.db)} {answer}[/yellow]",
                              highlight=False, soft_wrap=True)
                return None, archive
            replies = {p.id: "yes" if typer.confirm(f"accept candidate {p.value['candidate'][:12]}?") else "no"
                       for p in pending}
            state = await run.advance(replies)
    return state, archive


def run_cmd(
    config: Optional[Path] = typer.Argument(
        None, help="TOML/YAML run config (default: the default job, configs/default.toml: VACE on the showcase "
        "suite)."),
    resume: Optional[str] = typer.Option(
        None, "--resume", help="Continue run RUN_ID (or a unique prefix of it; stopped, failed or paused) from its "
        "last completed node."),
    approve_gate: bool = typer.Option(
        False, "--approve-gate", help="Pause before each gate decision for a person to accept or reject; stored "
        "with the run, so every resume keeps pausing."),
    answer: list[str] = typer.Option(
        [], "--answer", help="With --resume: answer a paused gate question, ID=yes or ID=no (ID: the question id "
        "printed, or a unique prefix); a bare yes|no answers the only pending question. Repeatable. Without it, "
        "--resume shows the pending questions again."),
    meta_model: Optional[str] = typer.Option(
        None, "--meta-model", help="'offline' (default) or a model reference for the meta roles (local:smollm2-135m, "
                                  "litellm:openai/gpt-4o-mini, or a bare LiteLLM string)."),
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"The meta-loop strategy: {strategy_names()}."),
    harness: Optional[str] = typer.Option(
        None, "--harness", help="H0: a spec file, a shipped base harness name, or your LangGraph agent's factory "
        "package.module:make_agent (coevo evolves its declared params and trains the model it is handed)."),
    env: Optional[str] = typer.Option(
        None, "--env", help="The task suite (env.ref): reasoning_gym:..., bfcl:..., gym:ID, ... (`coevo envs list`)."),
    db: Optional[str] = typer.Option(None, "--db", envvar="COEVO_DB", help=RUN_DB_HELP),
    set_: list[str] = typer.Option([], "--set", help="Override a config key: --set train.steps=4 (repeatable)."),
    executor: Optional[str] = typer.Option(None, "--executor", help="Where rollouts run: inprocess (default) or ray "
                                           "(workers of $RAY_ADDRESS, or a local Ray instance; needs coevo[ray])."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the HTML report at the end."),
    report_to: Optional[str] = typer.Option(
        None, "--report-to", help="Experiment tracker, offline (files under OUT_DIR/tracking/RUN_ID): tensorboard, "
        "mlflow, wandb or none (default: the config's report_to, none). The loop's numbers per round and TRL's "
        "weight-stage steps; needs coevo[tracking] (wandb: pip install wandb)."),
) -> None:
    """Run a meta-loop strategy (VACE by default) and print its summary.

    Each round: a weight stage, a harness refinement from its trajectories, paired validation of
    incumbent and candidate under the new weights, and the gate. Without CONFIG it runs
    configs/default.toml; --resume RUN_ID continues a stopped or failed run.

    Example:

    `coevo run configs/default.toml --set rounds=2`"""
    from coevo.app.run import existing_archive, find_run, new_run_id
    from coevo.observe.log import framework_noise_to
    from coevo.observe.progress import RichReporter

    with ExitStack() as keep:  # the run's archive: opened once, for the run and its summary, then closed
        archive: Archive | None = None
        with user_errors():
            if answer and not resume:
                raise ConfigError("--answer answers a paused run's gate question: add --resume RUN_ID (printed "
                                  "with the pause)")
            if resume and (set_ or strategy or meta_model or executor or report_to or harness or env):
                raise ConfigError(f"--resume continues run {resume} with the config it was started with, so "
                                  "--set, --strategy and --meta-model do not apply (nor --executor, --report-to): drop "
                                  "them, or start a new run")
            overrides = key_values(set_, "train.steps=4")
            for key, value in (("meta.model", meta_model), ("strategy", strategy), ("harness", harness),
                               ("env.ref", env), ("db", db), ("executor", executor), ("report_to", report_to)):
                if value is not None:
                    overrides[key] = value
            own = resume or env or harness or any(key.startswith("env.") for key in overrides)
            cfg = load_config(config or (None if own else DEFAULT_JOB), overrides, flags=FLAGS)
            if resume and db is None and config is None:
                cfg = RunConfig(db=cfg.db)
            if resume:  # a unique prefix names the run
                archive = keep.enter_context(existing_archive(cfg.db, resume))
                run_id = find_run(archive, resume, cfg.db).id
            else:
                run_id = new_run_id(cfg)
        log_file = log_folder(cfg.db) / f"{run_id}.log"
        with framework_noise_to(log_file), RichReporter(console=console) as reporter:
            try:
                state, archive = asyncio.run(_drive(cfg, run_id, archive, approve_gate, _answers(answer), reporter,
                                                    keep))
            except CoevoError as err:  # a user's mistake, e.g. coevo[postgres] missing: one paragraph
                with user_errors():
                    raise err from None
            except KeyboardInterrupt:
                console.print(f"[yellow]interrupted: completed nodes and rollouts are saved; continue with: "
                              f"coevo run --resume {run_id} --db {shown(cfg.db)}[/yellow]", highlight=False,
                              soft_wrap=True)
                raise typer.Exit(130) from None
            except Exception as err:
                print_failure(err)
                console.print(f"[red]run {run_id} failed[/red] ({type(err).__name__}: {escape(redact(str(err)))}); "
                              f"it is stored as failed. Once the cause is fixed, continue it with: coevo run --resume "
                              f"{run_id} --db {shown(cfg.db)}",
                              highlight=False, soft_wrap=True)
                raise typer.Exit(1) from None
        if state is None:
            return
        if log_file.is_file():
            console.print(f"log file (every line, and the frameworks' messages): {log_file}", markup=False,
                          highlight=False, soft_wrap=True)
        console.print(summary_table(state, archive))
        from coevo.report.phases import phases_tables

        for table in phases_tables(state):
            console.print(table)
        if report:
            from coevo.report.html import write_report

            path = write_report(state["run_id"], archive, Path(cfg.out_dir) / "reports" / state["run_id"], state)
            console.print(f"report: {path}", markup=False)
        if cfg.report_to != "none":
            from coevo.observe.tracking import tracking_folder

            folder = tracking_folder(cfg.out_dir, state["run_id"])
            console.print(f"{cfg.report_to}: {folder}", markup=False, highlight=False, soft_wrap=True)
        _final_pair(state, archive, cfg.db)
        console.print(f"archive: {shown(cfg.db)}  run id: {state['run_id']}", markup=False)


def _final_pair(state: dict[str, Any], archive: Archive, db: str) -> None:
    """Print the pair the run ended on (harness, checkpoint, adapter path; read from the run's
    ``archive`` at ``db``) and the command that exports it."""
    from coevo.app.export import export_command, final_pair_ids, routed
    from coevo.records import Checkpoint

    pair = final_pair_ids(state)
    if pair is None:
        return
    checkpoint = archive.get(Checkpoint, pair[1])
    adapter = checkpoint.adapter_path if checkpoint is not None and checkpoint.adapter_path else "none: base weights"
    how = " with the Harness-S pool and its Rank-1 router" if routed(state) else ""
    command = escape(export_command(state["run_id"], shown(db)))
    console.print(f"final pair: harness {pair[0][:12]}{how} x checkpoint {escape(pair[1])} (adapter "
                  f"{escape(adapter)}); export it as an agent folder: {command}", highlight=False, soft_wrap=True)
