"""``coevo eval``: evaluate a harness with a model on an env split, print a table, store everything."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from pathlib import Path
from typing import Iterator

import typer
from rich.markup import escape
from rich.table import Table

from coevo.app.heartbeat import Heartbeat
from coevo.cli.common import DB_HELP, DEFAULT_DB, console, key_values, log_folder, shown, user_errors
from coevo.envs.registry import get_env
from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import EXECUTORS, make_executor
from coevo.evaluation.results import EvalResult, Metric, outcome_estimate
from coevo.harnesses import HarnessSpec, load_harness
from coevo.harnesses.agent import is_agent_ref, start_harness
from coevo.harnesses.fit import check_prompt_fits, meter_of
from coevo.masking import redact
from coevo.models.refs import engine_settings, load_model
from coevo.observe.log import framework_noise_to
from coevo.observe.progress import RichReporter
from coevo.records import Checkpoint, HarnessRecord, RunRecord
from coevo.storage import Archive, ArchiveError, ArchiveFullError
from coevo.storage.connection import is_url

_HEX = re.compile(r"^[0-9a-f]{6,64}$")
REWARD_TEXT = {"correct": "correct (1/0)", "partial": "partial credit"}
PROGRESS_EVERY_S = 10.0
"""In a pipe or a log file, an evaluation's progress line at most every this many seconds as rollouts finish."""


@contextlib.contextmanager
def new_archive_removed_on_error(db: str) -> Iterator[None]:
    """Run the block; when it raises and ``db`` is a SQLite file the block created (with the folders
    made for it), remove the file, its ``-wal``/``-shm``/``-journal`` companions and those folders, so
    a command refused before it stored anything (a bad env, model or harness) leaves no empty archive
    behind. A URL, ``:memory:`` or an archive that existed before is never touched."""
    path = None if is_url(db) or db == ":memory:" else Path(db).expanduser().absolute()
    if path is None or path.exists():
        yield
        return
    folders = [p for p in path.parents if not p.exists()]
    try:
        yield
    except BaseException:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        for folder in folders:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def resolve_harness(source: str, archive: Archive, env_name: str = "") -> HarnessSpec:
    """A spec from a file, JSON text or shipped base name, (a prefix of) a harness id in the archive, or
    a user's agent factory ``package.module:make_agent`` around the base harness of ``env_name``."""
    if is_agent_ref(source):
        return start_harness(source, env_name)
    if _HEX.match(source):
        try:
            return load_harness(archive.get(HarnessRecord, archive.resolve_id("harnesses", source)).spec)  # type: ignore[union-attr]
        except ArchiveError:
            pass
    return load_harness(source)


def result_table(result: EvalResult) -> Table:
    """The evaluation's numbers as a rich table: each score (pass@k, avg@k, mean credit) with its 95 %
    interval over the n tasks (``outcome_estimate``: Wilson for 0/1 values, else bootstrap), the
    trivial-policy baseline beside the mean credit, and below it, for a harness that transforms
    replies before scoring, what it does and the suite's own score of the raw replies."""
    table = Table(title=f"{result.env}/{result.split}: harness {result.harness_id[:12]} × "
                        f"{result.checkpoint_id or '-'}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95 % interval (n tasks)", justify="right")
    table.add_column("trivial baseline", justify="right")
    baseline = "-" if result.trivial_baseline is None else f"{result.trivial_baseline:.3f}"

    def interval(metric: Metric) -> str:
        est = outcome_estimate(result.per_task, metric)
        return f"[{est.low:.3f}, {est.high:.3f}] n={est.n} ({est.method})"

    rows = [
        ("tasks × k", f"{result.n_tasks} × {result.k}", "", ""),
        (f"pass@{result.k}", f"{result.pass_at_k:.3f}", interval("pass_at_k"), ""),
        (f"avg@{result.k}", f"{result.avg_at_k:.3f}", interval("avg_at_k"), ""),
        ("reward", REWARD_TEXT.get(result.reward_mode, "as the env defines it"), "", ""),
        ("mean credit", f"{result.mean_reward:.3f}", interval("reward"), baseline),
        *([("  suite's own, raw replies", "-" if result.suite_reward is None else f"{result.suite_reward:.3f}",
            f"harness: {'; '.join(result.reply_transforms)}", "")] if result.reply_transforms else []),
        ("TIMR", f"{result.timr:.4f} ({result.interface_violations}/{result.model_turns} turns)", "", ""),
        ("tokens in / out", f"{result.input_tokens:,} / {result.output_tokens:,}", "", ""),
        ("cost (USD)", f"{result.cost_usd:.4f}", "", ""),
        ("latency / rollout (s)", f"{result.latency_s:.2f}", "", ""),
        ("wall (s)", f"{result.wall_s:.1f}", "", ""),
    ]
    for row in rows:
        table.add_row(*row)
    table.caption = f"evaluation {result.evaluation_id}" + (f", {result.resumed_tasks} tasks resumed"
                                                            if result.resumed_tasks else "")
    return table


def eval_cmd(
    env: str = typer.Option(..., "--env", help="Env reference, e.g. showcase, or a suite with its keys: "
                             "reasoning_gym:families=... (coevo envs list)."),
    harness: str = typer.Option(..., "--harness",
                                help="Harness file, JSON, shipped base name, archive id (prefix), or your LangGraph "
                                "agent's factory package.module:make_agent."),
    model: str = typer.Option(..., "--model",
                              help="Model reference, e.g. local:smollm2-135m or litellm:openai/gpt-4o-mini."),
    split: str = typer.Option("val", "--split", help="train, val or test."),
    k: int = typer.Option(1, "--k", min=1, help="Rollouts per task (pass@k, avg@k)."),
    temperature: float = typer.Option(None, "--temperature", min=0.0,
                                      help="Decode at this temperature instead of the harness's own (a sampled "
                                      "evaluation: pass@k and mean@k with k > 1)."),
    n: int = typer.Option(None, "--n", min=1, help="Evaluate the first N tasks of the split (default: all)."),
    seed: int = typer.Option(0, "--seed", help="Base seed: rollout j of each task uses seed + j."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Rollouts in flight at once."),
    checkpoint: str = typer.Option(None, "--checkpoint",
                                   help="Checkpoint id to record (default: the model reference)."),
    run_id: str = typer.Option(None, "--run-id", help="Resume the evaluation run RUN_ID (or a unique prefix; coevo "
                               "eval prints it when it starts): finished tasks are kept. An unknown id is refused "
                               "unless --create."),
    create: bool = typer.Option(False, "--create", help="With --run-id: start a new run under that id when no run "
                                "has it."),
    db: str = typer.Option(DEFAULT_DB, "--db", envvar="COEVO_DB", help=DB_HELP),
    reward: str = typer.Option(None, "--reward", help="correct (1/0 on the checker's pass; the default) or "
                               "partial (the checker's partial credit); also settable in --env as reward=..."),
    set_: list[str] = typer.Option([], "--set", help="A model setting, e.g. --set api_base=URL "
                                   "(repeatable; any load_model keyword: timeout_s, max_retries, cooldown_s, ...)."),
    executor: str = typer.Option("inprocess", "--executor", help=f"Where rollouts run: {' or '.join(EXECUTORS)} "
                                 "(Ray workers of $RAY_ADDRESS, or a local Ray instance; needs coevo[ray])."),
) -> None:
    """Evaluate a harness with a model on an env split and store every trajectory.

    Prints pass@k, avg@k, the reward mode and the mean reward (credit), TIMR, tokens, cost and
    latency, each score with its 95 % interval and beside the trivial baseline.

    Example:

    `coevo eval --env showcase --harness showcase --model local:smollm2-135m --n 20`"""
    with user_errors(), new_archive_removed_on_error(db):
        archive = Archive(db)
        resumed = _resumed_run(archive, run_id, create, db) if run_id else None
        suite = get_env(env) if reward is None else get_env(env, reward=reward)
        spec = resolve_harness(harness, archive, suite.name)
        settings = key_values(set_, "api_base=http://localhost:8000/v1")
        ckpt = checkpoint or redact(model)  # the model reference names the checkpoint, never with its key
        config = {"env": env, "harness": spec.id, "model": model, "split": split, "k": k, "n": n, "seed": seed,
                  "concurrency": concurrency, "checkpoint": ckpt, "reward": getattr(suite, "reward_mode", ""),
                  "model_settings": settings, "executor": executor, "temperature": temperature}
        run = RunRecord(id=resumed.id if resumed else run_id or new_eval_run_id(), strategy="eval", config=config)
        if resumed is not None:
            _same_evaluation(resumed, run)
            run.created_at = resumed.created_at
        policy = load_model(model, **{**engine_settings(model, concurrency), **settings})
        fit = check_prompt_fits(spec, [t.prompt for t in suite.tasks(split, n)], source=f"harness {spec.id[:12]}",
                                meter=meter_of(policy))
        runner = make_executor(executor)
        if archive.get(Checkpoint, ckpt) is None:
            archive.put(Checkpoint(id=ckpt, base_model=model))
        if archive.get(HarnessRecord, spec.id) is None:
            archive.add_harness(spec, origin="cli")
        archive.put(run)
    if not fit.fits:
        console.print(f"[yellow bold]warning:[/yellow bold] [yellow]{escape(fit.text())}[/yellow]", highlight=False)
    console.print(f"run {run.id}: {'resuming' if resumed else 'evaluating'} harness {spec.id[:12]} x {escape(ckpt)} "
                  f"on {escape(suite.name)}/{split}; if it stops, rerun the same command with --run-id {run.id}",
                  highlight=False, soft_wrap=True)
    with user_errors():
        try:
            with Heartbeat(archive, run.id), framework_noise_to(log_folder(db) / f"eval-{run.id}.log"), \
                    RichReporter(console=console, transient=True, every_s=PROGRESS_EVERY_S) as reporter:
                result = asyncio.run(evaluate(spec, ckpt, suite, split, k=k, seeds=seed, n_tasks=n, model=policy,
                                              archive=archive, concurrency=concurrency, progress=reporter,
                                              run_id=run.id, executor=runner, temperature=temperature))
        except BaseException as err:
            stopped = not isinstance(err, Exception)
            try:
                archive.update_run(run.id, status="interrupted" if stopped else "failed")
            except ArchiveError:  # e.g. a full disk: the run's heartbeat still shows it dead
                pass
            console.print(f"[yellow]{'interrupted' if stopped else 'failed'}: finished tasks are kept; resume with "
                          f"--run-id {run.id} --db {shown(db)}[/yellow]", highlight=False)
            if isinstance(err, KeyboardInterrupt):
                raise typer.Exit(130) from None
            if isinstance(err, ArchiveFullError):
                raise err.resumed_with(f"the same coevo eval command with --run-id {run.id}") from None
            raise
        finally:
            runner.close()
        archive.update_run(run.id, status="done")
    console.print(result_table(result))
    note = result.budget_note()
    if note:
        console.print(f"[yellow bold]warning:[/yellow bold] [yellow]{escape(note)}[/yellow]", highlight=False)
    console.print(f"run {run.id} stored in {shown(db)}", markup=False)


def new_eval_run_id() -> str:
    """A fresh ``coevo eval`` run id: ``eval-<8 hex>``."""
    return f"eval-{uuid.uuid4().hex[:8]}"


def _resumed_run(archive: Archive, run_id: str, create: bool, db: str) -> RunRecord | None:
    """The ``coevo eval`` run ``--run-id`` names (an id or a unique prefix), or None with ``--create``
    when no run has that id. Raises ``RunError`` for an unknown id without ``--create`` (it would
    silently start over) and for a run that is not an evaluation; ``AmbiguousIdError`` for a prefix
    several runs share."""
    from coevo.app.run import RunError, find_run

    try:
        run = find_run(archive, run_id, db)
    except RunError:
        if create:
            return None
        raise RunError(f"--run-id {run_id}: no run has this id or starts with it in {redact(db)}, so there is "
                       "nothing to resume (coevo eval prints its run id when it starts; `coevo archive list runs` "
                       "lists them). To start a new evaluation under this id, add --create") from None
    if run.strategy != "eval":
        raise RunError(f"--run-id {run_id}: run {run.id} is a {run.strategy} run, not an evaluation; resume it "
                       f"with coevo run --resume {run.id}")
    return run


RESUME_KEYS = ("env", "harness", "model", "split", "k", "n", "seed", "checkpoint", "reward")
"""What an evaluation resumed with ``--run-id`` must ask for as it did (else it would be another evaluation)."""


def _same_evaluation(stored: RunRecord, asked: RunRecord) -> None:
    """Raise ``RunError`` naming every option in which ``asked`` differs from the ``stored`` run."""
    from coevo.app.run import RunError

    changed = [f"{key} {stored.config.get(key)!r} -> {asked.config.get(key)!r}" for key in RESUME_KEYS
               if stored.config.get(key) != asked.config.get(key)]
    if changed:
        raise RunError(f"--run-id {stored.id} continues the evaluation it started, but this command asks for another "
                       f"one ({'; '.join(changed)}): give the same options as that run, or drop --run-id to start "
                       "a new run")
