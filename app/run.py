"""Running a meta-loop strategy durably: the checkpointed graph of a run, started or resumed.

A run is driven through one of two doors, each an async context manager yielding a ``Run``:
``start_run`` for a new run (after ``prepare_start``'s checks, ``coevo.app.preflight``: nothing is
stored until they pass) and ``resume_run`` for a crashed, killed, failed or paused one, which continues
from its last completed node. ``run_meta`` is the one-call form of either. The graph is the
strategy's, given a LangGraph checkpointer on the run's database (``coevo.app.checkpointer``: SQLite
in the archive's file, or Postgres in the archive's database). Evaluations are resumable by id, so
finished rollouts are never redone and archive rows never duplicated.

A run builds each thing once: the archive is opened once (by the caller, or by the door, which then
closes it), the strategy's graph is the one its module compiled at import, given the checkpointer
(``coevo.compat.with_checkpointer``) rather than compiled again, the env, executor and H0 are built
by ``preflight`` and handed to the services (``make_context``), and the tracker is opened once.
``Run.advance`` drives the run to its end or to a pending gate question, and again with the answers
(the CLI asks at the terminal) on the same services and graph.

What belongs to the run is stored with it when it starts: its config with absolute paths (the
database, ``out_dir`` and so the adapters under it, a harness file, a local model directory), so a
resume from another working directory finds them, and its approval mode (``gate.approve``, the one
place the approval bit lives: the gate reads it from the run's config), so a resume keeps pausing
at the gate. A paused gate is answered by question id (the LangGraph interrupt id):
``Command(resume={id: answer})``; a resume without answers changes nothing and returns the pending
questions again.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, StateSnapshot
from pydantic import ValidationError

from coevo.app.checkpointer import open_checkpointer
from coevo.app.heartbeat import Claim, Heartbeat, keep, take
from coevo.app.preflight import Prepared, RunError, anchored, approving, check_splits, dry_run_agent, preflight
from coevo.app.services import make_context
from coevo.app.stage_folders import leftovers, remove
from coevo.app.task_ids import check_task_ids
from coevo.compat import state_schemas, with_checkpointer
from coevo.config import RunConfig
from coevo.masking import redact
from coevo.meta.context import MetaContext
from coevo.meta.state import state_models
from coevo.observe.progress import Reporter
from coevo.observe.tracking import Tracker, open_tracker, require_tracker
from coevo.records import RunRecord
from coevo.storage import AmbiguousIdError, Archive, ArchiveError, ArchiveFullError
from coevo.storage.connection import exists
from coevo.storage.errors import disk_full
from coevo.strategies import Strategy, get_strategy

__all__ = ["ANSWERS", "Run", "RunError", "Start", "anchored", "check_splits", "existing_archive", "find_run",
           "new_run_id", "prepare_start", "preflight", "read_state", "resolve_answers", "resume_run", "run_meta",
           "run_snapshot", "start_run"]

log = logging.getLogger(__name__)

ANSWERS = {"yes": "yes", "y": "yes", "accept": "yes", "no": "no", "n": "no", "reject": "no"}
"""What a person may answer a gate question with -> the answer the gate receives."""


def new_run_id(config: RunConfig) -> str:
    """A fresh run id ``<strategy>-<8 hex>``."""
    return f"{config.strategy}-{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def _graph(db: str, strategy: Strategy) -> AsyncIterator[Any]:
    """The strategy's graph (its module's, compiled once at import) with the checkpointer on the
    archive ``db`` (SQLite or PostgreSQL)."""
    graph = strategy.graph()
    # the serialiser revives exactly the pydantic models of the graph's state and node inputs (LangGraph
    # warns on, and will block, others)
    serde = JsonPlusSerializer(allowed_msgpack_modules=state_models(state_schemas(graph)))
    async with open_checkpointer(db, serde) as saver:
        yield with_checkpointer(graph, saver)


async def run_snapshot(db: str, run_id: str, strategy: str) -> StateSnapshot:
    """The run's saved graph state: ``values``, ``next`` (the nodes still to run), ``interrupts``
    (pending gate questions, each with its ``id``) and ``tasks`` (a failed node's ``error``)."""
    async with _graph(db, get_strategy(strategy)) as graph:
        return await graph.aget_state({"configurable": {"thread_id": run_id}})


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


def existing_archive(db: str, run_id: str | None) -> Archive:
    """The archive at ``db`` that holds run ``run_id``, to resume it (opened; the caller closes it).
    Raises ``RunError`` when there is no database there, ``ArchiveError`` when it cannot be opened."""
    if not exists(db):
        raise RunError(f"cannot resume run {run_id!r}: there is no database at {redact(db)}; pass the --db "
                       "the run printed (its archive: line)")
    return Archive(db)


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


@dataclass
class Start:
    """A new run checked by ``prepare_start``, nothing stored yet: its config (anchored, with its
    approval mode), its strategy's row, what ``preflight`` built (None when the caller brings its own
    services) and its database when it already existed (opened first, so an unreadable one is reported
    before any model loads; ``open_archive`` makes a new one only after the checks)."""

    config: RunConfig
    strategy: Strategy
    prepared: Prepared | None = None
    archive: Archive | None = None

    def open_archive(self) -> Archive:
        """The run's archive, opened once: the one found during the checks, else made now. The caller
        closes it (``with start.open_archive() as archive``). A database that cannot be made releases
        what preflight built and raises ``ArchiveError``."""
        if self.archive is None:
            try:
                self.archive = Archive(self.config.db)
            except BaseException:
                self.release()
                raise
        return self.archive

    def release(self) -> None:
        """Close the executor preflight started (its Ray workers), once; nothing without one."""
        if self.prepared is not None and self.prepared.executor is not None:
            self.prepared.executor.close()
            self.prepared = self.prepared._replace(executor=None)


async def prepare_start(config: RunConfig, approve: bool = False, services: bool = True,
                        archive: Archive | None = None) -> Start:
    """A new run's checks before anything is stored, each thing built once: an existing database opened
    (unless the caller passes its ``archive``), the tracker's package (``require_tracker``), the
    strategy's row, ``approve`` set as ``gate.approve``; with ``services`` (the driver builds them, not
    the caller) the config anchored (``anchored``), ``preflight`` and a user's agent factory run once
    (``dry_run_agent``). Raises as those do (``RunError``, ``HarnessError``, ``ArchiveError``,
    ``MissingExtraError``), having closed what it opened."""
    start = Start(config=approving(config) if approve else config, strategy=get_strategy(config.strategy))
    if archive is None and exists(config.db):
        start.archive = Archive(config.db)  # an unreadable --db is reported before any model is loaded
    try:
        require_tracker(config.report_to)  # a missing tracker package is reported before anything is stored
        if services:
            start.config = anchored(start.config)
            start.prepared = preflight(start.config, start.strategy)  # before a new database: nothing left behind
            await dry_run_agent(start.config, start.prepared.env, start.prepared.h0)
    except BaseException:
        start.release()
        if start.archive is not None:
            start.archive.close()
        raise
    start.archive = archive or start.archive
    return start


@dataclass
class Run:
    """A run opened by ``start_run`` or ``resume_run``: its config, id, strategy row, archive, services
    and checkpointed graph, each built once; ``resumed``: whether its graph has a saved state to
    continue from; ``stored``: whether a new start found the run's row (stored by a process that stopped before
    the run's first checkpoint) and claimed it."""

    config: RunConfig
    run_id: str
    strategy: Strategy
    archive: Archive
    ctx: MetaContext
    graph: Any
    resumed: bool
    stored: bool = False
    tracker: Tracker | None = None

    async def advance(self, answers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Run to the end, or to a pending gate question; call again with ``answers`` (see
        ``resolve_answers``) to go on. Returns the state (domain objects as the ``coevo.meta.state``
        models) with ``run_id``; with a pending question, ``state["__interrupt__"]`` lists them
        (``Interrupt``: ``id``, ``value``); a resumed run with pending questions and no answers returns
        them and runs nothing. The run's status is stored (``running``, then ``done``, ``paused``,
        ``failed`` or ``interrupted`` when cancelled; the error stays in its saved graph state). A write
        refused for lack of space is raised as ``ArchiveFullError`` naming the command that resumes the run. A new
        run is stored with ``take``: ``RunError``, nothing changed, when another process stored or claimed it after
        this one's start found none (two ``coevo compare`` starting one seed's run at once)."""
        archive, run_id, config = self.archive, self.run_id, self.config
        thread: dict[str, Any] = {"configurable": {"thread_id": run_id}}
        payload: Any = {"run_id": run_id}
        if self.resumed:
            saved = await self.graph.aget_state(thread)  # read once: what to continue from
            if saved.interrupts and not answers:  # still paused (a resume's claim marked it running)
                archive.update_run(run_id, status="paused")
                return {**saved.values, "__interrupt__": list(saved.interrupts), "run_id": run_id}
            if answers:
                payload = Command(resume=resolve_answers(answers, saved.interrupts, run_id))
            elif saved.created_at is not None:  # continue from the last checkpoint; a run killed before its
                payload = None  # first one (its row and heartbeat written) starts again from its input
        if self.resumed or self.stored:  # claimed, or paused here: still this process's (coevo.app.heartbeat)
            keep(archive, run_id)
        else:  # its row and heartbeat, only if no other process stored them meanwhile (coevo.app.heartbeat.take)
            take(archive, run_id, RunRecord(id=run_id, strategy=config.strategy, config=config.model_dump(mode="json")))
        self.resumed = True  # a second call continues what this one stored
        if self.tracker is None and config.report_to != "none":
            self.tracker = self.ctx.tracker = open_tracker(config.report_to, config.out_dir, run_id,
                                                           config.model_dump(mode="json"))
        try:
            # durability="sync": a checkpoint is on disk before the next node runs, so a crash loses at
            # most the running node and checkpointer writes never overlap the archive's (one SQLite file).
            with Heartbeat(archive, run_id):
                state = await self.graph.ainvoke(payload, {**thread, "recursion_limit": 1000}, context=self.ctx,
                                                 durability="sync")
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
        archive.update_run(run_id, status="done" if "__interrupt__" not in state else "paused")
        return {**state, "run_id": run_id}


def _services(stack: AsyncExitStack, config: RunConfig, archive: Archive, run_id: str, strategy: Strategy,
              reporter: Reporter | None, context: MetaContext | None, prepared: Prepared | None) -> MetaContext:
    """The run's services: a copy of ``context`` (its ``run_id`` the run's, its config's ``gate.approve``
    the run's approval mode) or ``make_context``'s from what preflight built (the executor it starts
    itself, for a resume, is closed when ``stack`` closes)."""
    if context is not None:
        gate = context.config.gate.model_copy(update={"approve": config.gate.approve})
        return dataclasses.replace(context, run_id=run_id, config=context.config.model_copy(update={"gate": gate}))
    built = {} if prepared is None else prepared._asdict()
    ctx = make_context(config, archive, run_id, reporter=reporter, strategy=strategy, **built)
    if prepared is None and ctx.executor is not None:
        stack.callback(ctx.executor.close)  # the run's Ray workers (make_context started them for this run)
    return ctx


@asynccontextmanager
async def _driven(stack: AsyncExitStack, config: RunConfig, run_id: str, strategy: Strategy, archive: Archive,
                  ctx: MetaContext, resumed: bool, stored: bool = False) -> AsyncIterator[Run]:
    graph = await stack.enter_async_context(_graph(config.db, strategy))
    run = Run(config, run_id, strategy, archive, ctx, graph, resumed, stored)
    try:
        yield run
    finally:
        if run.tracker is not None:
            run.tracker.close()


@asynccontextmanager
async def start_run(start: Start, archive: Archive, run_id: str | None = None, reporter: Reporter | None = None,
                    context: MetaContext | None = None) -> AsyncIterator[Run]:
    """``async with start_run(start, archive) as run: state = await run.advance()``: the new run ``start``
    (``prepare_start``) opened on ``archive`` (the caller's, left open) under ``run_id`` (default
    ``new_run_id``), with ``context`` replacing the default services (tests). On leaving, the tracker,
    checkpointer and executor are closed. A ``run_id`` already stored (a run stopped before its first
    checkpoint, started again) is claimed as a resume claims it: ``RunError``, nothing changed, while
    another process runs it; one another process stores meanwhile is refused by ``Run.advance``."""
    config = start.config
    run_id = run_id or new_run_id(config)
    async with AsyncExitStack() as stack:
        stack.callback(start.release)
        # a row stored by a process that stopped (or still runs) before the run's first checkpoint
        with Claim(archive, found := archive.get(RunRecord, run_id)) as claimed:
            ctx = _services(stack, config, archive, run_id, start.strategy, reporter, context, start.prepared)
            async with _driven(stack, config, run_id, start.strategy, archive, ctx, resumed=False,
                               stored=found is not None) as run:
                claimed.hand_over()
                yield run


@asynccontextmanager
async def resume_run(config: RunConfig, run_id: str | None, archive: Archive, approve: bool = False,
                     reporter: Reporter | None = None, context: MetaContext | None = None) -> AsyncIterator[Run]:
    """``async with resume_run(config, run_id, archive) as run: state = await run.advance(answers)``: the
    stored run ``run_id`` (an id or a unique prefix of it) in ``archive`` (the caller's, left open),
    continued with the config it was started with (``config`` gives only the database), its approval
    mode switched on with ``approve`` (and stored so). Before the graph runs, the folders of the run's
    stages that never finished are removed (``coevo.app.stage_folders``). Raises ``RunError`` for an
    unknown run or one another process is running now (its heartbeat alive: ``coevo.app.heartbeat``; two
    processes would write one run), ``AmbiguousIdError`` for a prefix several runs share, ``StaleTaskIdsError``
    when its stored task ids are ones its env no longer gives (``coevo.app.task_ids``), nothing changed."""
    found = find_run(archive, run_id, config.db)
    with Claim(archive, found) as claimed:
        config = _open_run(archive, config, found, approve)
        strategy = get_strategy(config.strategy)
        async with AsyncExitStack() as stack:
            ctx = _services(stack, config, archive, found.id, strategy, reporter, context, None)
            # ids stored by a coevo whose task ids did not name their env config would unseal its tasks
            check_task_ids(archive, found.id, ctx.env, config.env.ref)
            dead = leftovers(archive, found.id)  # the folders of stages the stopped run never finished: redone anew
            if dead:
                freed = remove(dead)
                log.info("run %s: removed %d folder(s) of unfinished stages (%.1f MB)", found.id, len(dead),
                         freed / 1e6)
            async with _driven(stack, config, found.id, strategy, archive, ctx, resumed=True) as run:
                claimed.hand_over()
                yield run


async def run_meta(config: RunConfig, run_id: str | None = None, resume: bool = False, approve: bool = False,
                   reporter: Reporter | None = None, context: MetaContext | None = None,
                   answers: Mapping[str, str] | None = None, archive: Archive | None = None) -> dict[str, Any]:
    """Run (or resume) one strategy to the end, or to a pending gate approval: ``start_run`` or
    ``resume_run`` and one ``Run.advance``, on ``archive`` (else the database ``config.db`` names,
    opened once here and closed).

    Args: ``run_id`` (required with ``resume``: the id or a unique prefix of it); ``approve`` pauses
    before each gate decision (stored with the run as ``gate.approve``: a resume keeps it, whatever its
    own ``approve``); ``answers`` answers pending gate questions by id (see ``resolve_answers``);
    ``context`` replaces the default services (tests; its ``run_id`` is set to the run's, and its
    config's ``gate.approve`` to the run's approval mode; a resume keeps the context's config
    otherwise). A new run without ``context`` stores ``anchored(config)`` after ``preflight``. The
    run's numbers go to the tracker ``config.report_to`` names (``coevo.observe.tracking``; files under
    ``<out_dir>/tracking/<run_id>``; with ``none``, the context's own tracker is kept). While it runs,
    the process beats for the run (``coevo.app.heartbeat``), so a killed run shows as dead.

    Returns what ``Run.advance`` returns. Raises ``RunError`` for an unknown run or a bad reference or
    answer, ``AmbiguousIdError`` for a prefix several runs share, ``StaleTaskIdsError`` (see
    ``resume_run``), ``MissingExtraError`` for a tracker whose package is missing (nothing changed),
    ``ArchiveFullError`` (see ``Run.advance``).
    """
    async with AsyncExitStack() as stack:
        if resume:
            if archive is None:
                archive = stack.enter_context(existing_archive(config.db, run_id))
            run = await stack.enter_async_context(resume_run(config, run_id, archive, approve, reporter, context))
        else:
            start = await prepare_start(config, approve, services=context is None, archive=archive)
            if archive is None:
                archive = stack.enter_context(start.open_archive())
            run = await stack.enter_async_context(start_run(start, archive, run_id, reporter, context))
        return await run.advance(answers)


async def read_state(db: str, run_id: str, strategy: str) -> dict[str, Any]:
    """The run's last checkpointed state (``run_snapshot(...).values``, read with LangGraph's public
    ``aget_state``; nothing runs) with ``run_id``: the dict ``run_meta`` returned when the run ended,
    empty but for ``run_id`` when the run never checkpointed. Raises ``ValueError`` for an unknown
    strategy."""
    return {**(await run_snapshot(db, run_id, strategy)).values, "run_id": run_id}
