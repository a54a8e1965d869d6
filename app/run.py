"""Running a meta-loop strategy durably: the checkpointed graph of a run, started or resumed.

``run_meta`` compiles the strategy's graph with a LangGraph checkpointer on the run's database
(``coevo.app.checkpointer``: SQLite in the archive's file, or Postgres in the archive's database),
so ``run_meta(..., resume=True)`` continues a crashed, killed, failed or paused run from its last
completed node. Evaluations are resumable by id, so finished rollouts are never redone and archive
rows never duplicated.

What belongs to the run is stored with it when it starts: its config with absolute paths (the
database, ``out_dir`` and so the adapters under it, a harness file, a local model directory), so a
resume from another working directory finds them, and its approval mode (``gate.approve``, the one
place the approval bit lives: the gate reads it from the run's config), so a resume keeps pausing
at the gate. A paused gate is answered by question id (the LangGraph interrupt id):
``Command(resume={id: answer})``; a resume without answers changes nothing and returns the pending
questions again.

The driver builds each thing once per run: the strategy's row (``get_strategy``), the env and the
executor (``preflight``, for a new run), the tracker check, the services (``make_context``) and the
compiled graph.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, StateSnapshot
from pydantic import ValidationError

from coevo.app.checkpointer import open_checkpointer
from coevo.app.heartbeat import Heartbeat
from coevo.app.services import engine_options, make_context
from coevo.app.stage_folders import leftovers, remove
from coevo.app.task_ids import StaleTaskIdsError, check_task_ids
from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.errors import CoevoError
from coevo.evaluation.executors import Executor
from coevo.masking import redact
from coevo.meta.context import MetaContext
from coevo.meta.state import state_models
from coevo.observe.progress import Reporter
from coevo.observe.tracking import open_tracker, require_tracker
from coevo.records import RunRecord
from coevo.storage import AmbiguousIdError, Archive, ArchiveError, ArchiveFullError
from coevo.storage.connection import exists, location
from coevo.storage.errors import disk_full
from coevo.strategies import STRATEGIES, Strategy, get_strategy

log = logging.getLogger(__name__)

ANSWERS = {"yes": "yes", "y": "yes", "accept": "yes", "no": "no", "n": "no", "reject": "no"}
"""What a person may answer a gate question with -> the answer the gate receives."""


class RunError(CoevoError, ValueError):
    """A run that cannot start or resume as asked (unknown run, bad model or env reference, an
    answer to no pending question); the message names the input and the fix."""


def new_run_id(config: RunConfig) -> str:
    """A fresh run id ``<strategy>-<8 hex>``."""
    return f"{config.strategy}-{uuid.uuid4().hex[:8]}"


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def approving(config: RunConfig) -> RunConfig:
    """``config`` with ``gate.approve`` on: the run pauses before each gate decision."""
    return config.model_copy(update={"gate": config.gate.model_copy(update={"approve": True})})


def anchored(config: RunConfig) -> RunConfig:
    """``config`` with every path made absolute against the current directory: ``db`` (a file, not a
    URL), ``out_dir`` (adapters and reports live under it), ``harness`` when it names a file, and the
    directories of a ``local:`` policy (base and adapter) when they exist."""
    update: dict[str, Any] = {"out_dir": _absolute(config.out_dir), "db": location(config.db)}
    if config.harness and Path(config.harness).expanduser().is_file():
        update["harness"] = _absolute(config.harness)
    if config.policy.startswith("local:"):
        from coevo.models.refs import split_local

        parts = split_local(config.policy.removeprefix("local:"))
        parts = tuple(_absolute(p) if p and Path(p).expanduser().exists() else p for p in parts)
        update["policy"] = "local:" + "+".join(p for p in parts if p)
    return config.model_copy(update=update)


def check_splits(config: RunConfig, strategy: Strategy, env: Env) -> dict[str, int]:
    """The number of tasks each split of ``env`` gives the run (``env.tasks(split, n_split)``), checked
    against what its stages and evaluations take: train at least ``train.tasks_per_step`` when the
    strategy trains weights (a step samples that many) and at least one otherwise, val at least one
    (validation and the gate), test at least one unless ``env.n_test`` is 0. Returns the sizes.
    Raises ``RunError`` naming every split's size, what it falls short of and the setting to change
    (an env with too few distinct tasks: a larger ``size`` in ``env.ref``)."""
    sizes = {split: len(env.tasks(split, getattr(config.env, f"n_{split}")))  # type: ignore[arg-type]
             for split in ("train", "val", "test")}
    needs = {"train": config.train.tasks_per_step if strategy.trains else 1, "val": 1,
             "test": 1 if config.env.n_test else 0}
    short = [split for split in sizes if sizes[split] < needs[split]]
    if short:
        whats = {"train": (f"train.tasks_per_step = {config.train.tasks_per_step} per weight step" if strategy.trains
                           else "at least 1 to train on"), "val": "at least 1 to validate and gate on",
                 "test": "at least 1 for the final test (env.n_test = 0: none)"}
        got = ", ".join(f"{split} {n}" for split, n in sizes.items())
        lacks = "; ".join(f"{split} needs {whats[split]}" for split in short)
        raise RunError(f"env {config.env.ref!r} gives {got} tasks (n_train={config.env.n_train}, "
                       f"n_val={config.env.n_val}, n_test={config.env.n_test} asked): {lacks}. An env with too few "
                       "distinct tasks (e.g. a game whose start is the same for every seed) needs a larger size "
                       "in env.ref (size=N) or more varied tasks"
                       + ("; or lower train.tasks_per_step" if "train" in short and strategy.trains else "")
                       + "; nothing was started")
    return sizes


def preflight(config: RunConfig, strategy: Strategy) -> tuple[Env, Executor | None]:
    """Check the references a run of ``strategy`` depends on before anything is stored: the env and
    the sizes of its splits (``check_splits``, before any model loads), the
    policy (a ``local:`` model is loaded here, once: the run's policies share its engine; a strategy
    with a weight stage needs one, since the trainer holds the weights), H0 and the executor. Returns
    the env and the executor (None: in process; the run's, built here once). Raises ``RunError``
    naming the reference and the fix, or ``HarnessError`` for a bad H0, including one whose prompt
    fits the context budget on none of the run's tasks (``coevo.harnesses.fit``: the smaller of H0's
    ``max_context_tokens`` and the policy's context, counted by its tokenizer when local; on some: a warning)."""
    from coevo.envs.registry import get_env
    from coevo.evaluation.executors import make_executor
    from coevo.harnesses.agent import start_harness
    from coevo.harnesses.fit import check_prompt_fits, meter_of
    from coevo.models.refs import ModelRefError, load_model
    from coevo.models.smollm2 import SmolLM2NotInstalledError

    try:
        env = get_env(config.env.ref, **config.env.settings())
    except (KeyError, ImportError, TypeError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise RunError(f"env {config.env.ref!r} cannot be built: {message}. Fix env.ref in the config "
                       f"(`coevo envs list` shows the suites); nothing was started") from None
    check_splits(config, strategy, env)  # before any model loads
    try:
        policy = load_model(config.policy, **engine_options(config))
    except (ModelRefError, SmolLM2NotInstalledError, OSError) as err:
        raise RunError(f"policy {config.policy!r} cannot be loaded: {err}. Fix it with --set policy=... "
                       f"or the config's policy key; nothing was started") from None
    if strategy.trains and not config.policy.startswith("local:"):
        frozen = ", ".join(s.name for s in STRATEGIES.values() if not s.trains)
        raise RunError(f"strategy {config.strategy!r} trains the policy's weights, but policy {config.policy!r} is "
                       "a server, whose weights the run cannot train: use a local: policy (local:smollm2-135m, "
                       f"local:/path/to/model; train.vllm then samples it on vLLM servers, README GPU recipe), or a "
                       f"strategy without a weight stage ({frozen}); nothing was started")
    h0 = start_harness(config.harness, env.name)
    sizes = {split: getattr(config.env, f"n_{split}") for split in ("train", "val", "test")}
    prompts = [t.prompt for split, n in sizes.items() if n for t in env.tasks(split, n)]
    # before any rollout, counted as the policy counts and against its own context where it is smaller
    fit = check_prompt_fits(h0, prompts, source=f"H0 ({config.harness or env.name})", meter=meter_of(policy))
    if not fit.fits:
        log.warning("H0: %s", fit.text())
    try:
        executor = None if config.executor == "inprocess" else make_executor(config.executor)
    except ValueError as err:  # e.g. Ray is not installed
        raise RunError(f"{err}; nothing was started") from None
    return env, executor


async def dry_run_agent(config: RunConfig, env: Env, executor: Executor | None = None) -> None:
    """When ``config.harness`` names a user's agent factory, run it once with a scripted model
    (``coevo.harnesses.agent_run.dry_run``) before anything is stored; a bad factory or a graph that
    raises is reported as ``AgentError`` (a ``HarnessError``) and ``executor`` is closed."""
    from coevo.harnesses.agent import is_agent_ref, start_harness
    from coevo.harnesses.agent_run import dry_run

    if not is_agent_ref(config.harness):
        return
    try:
        await dry_run(start_harness(config.harness, env.name), env)
    except BaseException:
        if executor is not None:
            executor.close()
        raise


async def _saved(graph: Any, run_id: str) -> StateSnapshot:
    return await graph.aget_state({"configurable": {"thread_id": run_id}})


@asynccontextmanager
async def _graph(db: str, strategy: Strategy) -> AsyncIterator[Any]:
    """The strategy's graph compiled with the checkpointer on the archive ``db`` (SQLite or PostgreSQL)."""
    builder = strategy.build()
    # the serialiser revives exactly the pydantic models of the graph's state and node inputs (LangGraph
    # warns on, and will block, others)
    serde = JsonPlusSerializer(allowed_msgpack_modules=state_models(builder.schemas))
    async with open_checkpointer(db, serde) as saver:
        yield builder.compile(checkpointer=saver, name=strategy.name)


async def run_snapshot(db: str, run_id: str, strategy: str) -> StateSnapshot:
    """The run's saved graph state: ``values``, ``next`` (the nodes still to run), ``interrupts``
    (pending gate questions, each with its ``id``) and ``tasks`` (a failed node's ``error``)."""
    async with _graph(db, get_strategy(strategy)) as graph:
        return await _saved(graph, run_id)


def resolve_answers(answers: Mapping[str, str], pending: tuple[Interrupt, ...], run_id: str) -> dict[str, str]:
    """``answers`` (question id or a unique prefix of one -> yes/no; the id ``""`` names the only
    pending question) as ``{full interrupt id: "yes"|"no"}``. Raises ``RunError`` for an answer
    that is not yes/no, an id that names no pending question, or answers to nothing pending."""
    asked = ", ".join(i.id[:8] for i in pending) or "none"
    if not pending:
        raise RunError(f"run {run_id} has no pending gate question, so there is nothing to answer: "
                       "resume it without --answer")
    resolved: dict[str, str] = {}
    for key, value in answers.items():
        answer = ANSWERS.get(str(value).strip().lower())
        if answer is None:
            raise RunError(f"answer {value!r} is neither yes nor no: write --answer ID=yes or --answer ID=no")
        matches = [i.id for i in pending if i.id.startswith(key)]
        if key == "" and len(pending) > 1:
            matches = []
        if len(matches) != 1:
            raise RunError(f"--answer {key + '=' if key else ''}{value}: names {len(matches)} of run {run_id}'s "
                           f"pending questions (ids {asked}); write --answer ID=yes|no with one of those ids")
        resolved[matches[0]] = answer
    return resolved


def find_run(archive: Archive, run_id: str | None, db: str) -> RunRecord:
    """The run whose id is ``run_id`` or starts with it (a unique prefix, as ``coevo archive list`` and
    every command accept). Raises ``RunError`` when none does, ``AmbiguousIdError`` (naming them)
    when several do."""
    try:
        full = archive.resolve_id("runs", run_id or "")
    except AmbiguousIdError:
        raise
    except ArchiveError:
        raise RunError(f"no run {run_id!r} in {redact(db)}: `coevo archive list runs --db {redact(db)}` shows the "
                       "runs it holds, or pass the --db the run printed") from None
    return archive.get(RunRecord, full)  # type: ignore[return-value]


def full_run_id(db: str, run_id: str) -> str:
    """The full id of the run ``run_id`` names (an id or a unique prefix) in the archive at ``db``;
    ``run_id`` itself when there is no archive there yet (``run_meta`` then says so). Raises as
    ``find_run``."""
    if not exists(db):
        return run_id
    with Archive(db) as archive:
        return find_run(archive, run_id, db).id


def _open_run(archive: Archive, config: RunConfig, run: RunRecord, approve: bool) -> RunConfig:
    """The config a resumed run continues with: the stored one (with the database it was found
    in), its approval mode switched on when asked now (and stored so)."""
    try:
        stored = RunConfig.model_validate(run.config)
    except ValidationError as err:
        raise RunError(f"run {run.id}'s stored config does not validate with this coevo ({err.error_count()} "
                       f"problem(s), first: {err.errors()[0]['msg']}); resume it with the coevo that started "
                       "it") from None
    if approve and not stored.gate.approve:
        stored = approving(stored)
        archive.update_run(run.id, config=stored.model_dump(mode="json"))
    return stored.model_copy(update={"db": config.db})


async def run_meta(config: RunConfig, run_id: str | None = None, resume: bool = False, approve: bool = False,
                   reporter: Reporter | None = None, context: MetaContext | None = None,
                   answers: Mapping[str, str] | None = None, archive: Archive | None = None) -> dict[str, Any]:
    """Run (or resume) one strategy to the end, or to a pending gate approval.

    Args: ``run_id`` (required with ``resume``: the id or a unique prefix of it); ``approve`` pauses
    before each gate decision (stored with the run as ``gate.approve``: a resume keeps it, whatever its
    own ``approve``);
    ``answers`` answers pending gate questions by id (see ``resolve_answers``); ``context``
    replaces the default services (tests; its ``run_id`` is set to the run's, and its config's
    ``gate.approve`` to the run's approval mode; a resume keeps the context's config otherwise).
    A new run without ``context`` stores ``anchored(config)`` after ``preflight``. The run's
    numbers go to the tracker ``config.report_to`` names (``coevo.observe.tracking``; files under
    ``<out_dir>/tracking/<run_id>``; with ``none``, the context's own tracker is kept).

    Returns the final state (domain objects as the ``coevo.meta.state`` models) with ``run_id``;
    with a pending approval, ``state["__interrupt__"]`` lists the questions (``Interrupt``: ``id``,
    ``value``). A resume without answers while questions are pending returns them and runs
    nothing. A run that raises is stored with status ``failed`` (``interrupted`` when cancelled)
    and the error stays in its saved graph state (``run_snapshot(...).tasks``); resuming continues it.
    A resume first removes the folders of the run's stages that never finished
    (``coevo.app.stage_folders``). A write refused for lack of space (archive or checkpointer) is
    raised as ``ArchiveFullError``
    naming the command that resumes the run.
    While it runs, the process beats for the run (``coevo.app.heartbeat``), so a killed run shows as dead.
    Raises ``RunError`` for an unknown run or a bad reference or answer, ``AmbiguousIdError`` for a
    prefix several runs share, ``StaleTaskIdsError`` for a resume whose stored task ids its env no
    longer gives (``coevo.app.task_ids``), ``MissingExtraError`` for
    a tracker whose package is missing (nothing changed).
    """
    env: Env | None = None
    executor: Executor | None = None
    if resume and archive is None and not exists(config.db):
        raise RunError(f"cannot resume run {run_id!r}: there is no database at {redact(config.db)}; pass the --db "
                       "the run printed (its archive: line)")
    if archive is None and exists(config.db):
        archive = Archive(config.db)  # an unreadable --db is reported before any model is loaded
    if not resume:
        require_tracker(config.report_to)  # a missing tracker package is reported before anything is stored
        strategy = get_strategy(config.strategy)
        config = approving(config) if approve else config
        if context is None:
            config = anchored(config)
            env, executor = preflight(config, strategy)  # before a new database is made: nothing left behind
            await dry_run_agent(config, env, executor)
    archive = archive or Archive(config.db)
    if resume:
        found = find_run(archive, run_id, config.db)
        run_id = found.id
        config = _open_run(archive, config, found, approve)
        strategy = get_strategy(config.strategy)
    run_id = run_id or new_run_id(config)
    if context is not None:
        gate = context.config.gate.model_copy(update={"approve": config.gate.approve})
        ctx = dataclasses.replace(context, run_id=run_id, config=context.config.model_copy(update={"gate": gate}))
    else:
        ctx = make_context(config, archive, run_id, reporter=reporter, env=env, executor=executor, strategy=strategy)
    if resume:  # ids stored by a coevo whose task ids did not name their env config would unseal its tasks
        try:
            check_task_ids(archive, run_id, ctx.env, config.env.ref)
        except StaleTaskIdsError:
            if context is None and ctx.executor is not None:
                ctx.executor.close()
            raise
        dead = leftovers(archive, run_id)  # the folders of stages the stopped run never finished: redone anew
        if dead:
            freed = remove(dead)
            log.info("run %s: removed %d folder(s) of unfinished stages (%.1f MB)", run_id, len(dead), freed / 1e6)
    async with _graph(config.db, strategy) as graph:
        payload: Any = {"run_id": run_id}
        if resume:
            saved = await _saved(graph, run_id)
            if saved.interrupts and not answers:
                return {**saved.values, "__interrupt__": list(saved.interrupts), "run_id": run_id}
            if answers:
                payload = Command(resume=resolve_answers(answers, saved.interrupts, run_id))
            elif saved.created_at is not None:  # continue from the last checkpoint; a run killed before its
                payload = None  # first one (its row and heartbeat written) starts again from its input
        if resume or archive.get(RunRecord, run_id) is not None:
            archive.update_run(run_id, status="running")
        else:
            archive.put(RunRecord(id=run_id, strategy=config.strategy, config=config.model_dump(mode="json")))
        opened = config.report_to != "none"
        if opened:
            ctx = dataclasses.replace(ctx, tracker=open_tracker(config.report_to, config.out_dir, run_id,
                                                                config.model_dump(mode="json")))
        try:
            # durability="sync": a checkpoint is on disk before the next node runs, so a crash loses at
            # most the running node and checkpointer writes never overlap the archive's (one SQLite file).
            with Heartbeat(archive, run_id):
                state = await graph.ainvoke(payload, {"configurable": {"thread_id": run_id}, "recursion_limit": 1000},
                                            context=ctx, durability="sync")
        except BaseException as err:
            status = "failed" if isinstance(err, Exception) else "interrupted"
            try:
                archive.update_run(run_id, status=status)
            except ArchiveError as unmarked:  # e.g. a full disk: its heartbeat still shows the run dead
                log.warning("run %s could not be marked %s: %s", run_id, status, unmarked)
            if disk_full(err):  # the archive's write or the checkpointer's: one paragraph saying how to go on
                full = err if isinstance(err, ArchiveFullError) else ArchiveFullError(redact(config.db),
                                                                                      "the graph's checkpoint")
                raise full.resumed_with(f"coevo run --resume {run_id} --db {redact(config.db)}") from err
            raise
        finally:
            if opened:
                ctx.tracker.close()
            if context is None and ctx.executor is not None:
                ctx.executor.close()  # the run's Ray workers (make_context started them for this run)
    status = "done" if "__interrupt__" not in state else "paused"
    archive.update_run(run_id, status=status)
    return {**state, "run_id": run_id}


async def read_state(db: str, run_id: str, strategy: str) -> dict[str, Any]:
    """The run's last checkpointed state (``run_snapshot(...).values``, read with LangGraph's public
    ``aget_state``; nothing runs) with ``run_id``: the dict ``run_meta`` returned when the run ended,
    empty but for ``run_id`` when the run never checkpointed. Raises ``ValueError`` for an unknown
    strategy."""
    return {**(await run_snapshot(db, run_id, strategy)).values, "run_id": run_id}
