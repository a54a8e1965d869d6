"""Evaluate a harness on a checkpoint: k rollouts per task, persisted, aggregated (docs/design.md, the
``validate`` step of VACE Algorithm 1).

Rollout j of every task uses seed ``seeds[j]`` (``base_seed + j``), so two harnesses evaluated
with the same seeds on the same tasks give paired outcomes — what the validation gate compares
(``coevo.evaluation.results.paired_tasks``). Rollouts run concurrently under an ``asyncio.Semaphore``; the k
trajectories of a task are written to the archive as soon as the task is done, in one transaction
with any other tasks finished meanwhile (group commit), so an evaluation killed half way keeps
every finished task and no partial one. Ids are
deterministic (evaluation id from its inputs, trajectory id from evaluation, task and seed): run
the same evaluation again and it resumes, reusing finished tasks instead of duplicating them.

Metrics: pass@k (a task counts when any of its k rollouts passed), avg@k (mean pass rate over the
k rollouts, averaged over tasks), mean partial credit (mean reward), TIMR (CoEvo-RSI: interface
violations per model turn, summed over rollouts), tokens, cost (USD), latency (s); for a harness
that transforms replies before scoring, the suite's own score of the raw replies
(``coevo.evaluation.parity``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import inspect
import json
import threading
import time
from typing import Any, Iterator, Sequence

from langchain_core.language_models import BaseChatModel

from coevo.envs.base import Env, Task
from coevo.evaluation.executors import Executor
from coevo.evaluation.parity import reply_transforms, suite_reward
from coevo.evaluation.results import EvalResult, TaskOutcome
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec
from coevo.models.base import batched
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.observe.progress import NullReporter, Reporter
from coevo.records import EvaluationRecord, HarnessRecord
from coevo.storage import Archive


def _seeds(seeds: int | Sequence[int] | None, k: int) -> list[int]:
    if k < 1:
        raise ValueError(f"k={k}: the number of rollouts per task must be at least 1")
    if seeds is None:
        return list(range(k))
    if isinstance(seeds, int):
        return [seeds + j for j in range(k)]
    seeds = [int(s) for s in seeds]
    if len(seeds) != k:
        raise ValueError(f"seeds has {len(seeds)} entries but k={k}: pass one seed per rollout, or a base seed")
    return seeds


def _checkpoint_id(checkpoint: str | Checkpoint | None) -> str:
    if checkpoint is None:
        return ""
    return checkpoint if isinstance(checkpoint, str) else str(getattr(checkpoint, "id"))


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def evaluation_id(run_id: str | None, harness_id: str, checkpoint_id: str, env: str, split: str,
                  seeds: Sequence[int], task_ids: Sequence[str], temperature: float | None = None,
                  experience: Sequence[str] = ()) -> str:
    """The deterministic id of an evaluation (32 hex chars): same inputs, same id, so it resumes.
    ``temperature`` (an evaluation decoded at another temperature than the harness's) and
    ``experience`` (a BPE harness's starting lessons) join the inputs only when set, so the ids of
    other evaluations do not change."""
    parts = [run_id, harness_id, checkpoint_id, env, split, list(seeds), list(task_ids)]
    extra = ([] if temperature is None else [float(temperature)]) + ([list(experience)] if experience else [])
    return _digest("evaluation", *parts, *extra)


def trajectory_id(evaluation_id: str, task_id: str, seed: int) -> str:
    """The deterministic id of rollout ``seed`` of ``task_id`` in an evaluation (32 hex chars)."""
    return _digest("trajectory", evaluation_id, task_id, seed)


def _trivial(env: Env, split: str, n_tasks: int | None) -> tuple[float | None, dict[str, Any]]:
    """The env's trivial-policy score on ``split``: a number, or ``constant_baseline``'s dict."""
    fn = getattr(env, "trivial_baseline", None)
    if not callable(fn):
        return None, {}
    params = inspect.signature(fn).parameters
    value = fn(split, n=n_tasks) if "n" in params else fn(split)
    if isinstance(value, (int, float)):
        return float(value), {}
    if isinstance(value, dict):
        best = value.get("best_constant")
        scores = [float(value.get("empty", 0.0))] + ([float(best[1])] if best else [])
        return max(scores), value
    raise TypeError(f"{type(env).__name__}.trivial_baseline returned {type(value).__name__}: return a float "
                    "or a dict like coevo.envs.baseline.constant_baseline's")


_freeze_lock = threading.Lock()
_freezers = 0  # evaluations running inside a ``_frozen_heap`` that froze the heap


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Keep the objects alive when the rollouts start out of the cyclic GC's full passes while they run.

    A young-generation collection (``gc.collect(1)``, well under 1 ms) first frees the young
    garbage, then ``gc.freeze()`` moves every tracked object to the permanent generation, and
    ``gc.unfreeze()`` (when the last concurrent evaluation ends) moves them back to the oldest
    generation. Old garbage that existed at the start is freed at the first full pass after the
    evaluation instead of during it. Why: a full (generation-2) pass scans the whole heap, mostly
    the imported libraries (LangChain, LangGraph, pydantic, torch) and a loaded model: ~120 ms on
    the 2-core dev box, during which every in-flight rollout stalls; at 32 concurrent rollouts of a
    50 ms model one such pause cost 3–5 points of throughput (``docs/benchmarks/engine.md``, row (a)).
    Left alone when the process already froze its heap itself (``gc.get_freeze_count() > 0``);
    a ``gc.freeze()`` made by other code during an evaluation is undone with it.
    """
    global _freezers
    with _freeze_lock:
        if _freezers == 0 and gc.get_freeze_count() == 0:
            gc.collect(1)
            gc.freeze()
            _freezers = 1
        elif _freezers > 0:
            _freezers += 1
    try:
        yield
    finally:
        with _freeze_lock:
            if _freezers > 0:
                _freezers -= 1
                if _freezers == 0:
                    gc.unfreeze()


def _first(exc: BaseException) -> BaseException:
    """The first leaf exception of a (nested) exception group, so callers see the model's error."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _aggregate(outcomes: dict[str, TaskOutcome], trajs: list[Trajectory]) -> dict[str, Any]:
    n_tasks = len(outcomes)
    turns = sum(t.model_turns for t in trajs)
    violations = sum(t.interface_violations for t in trajs)
    reasons: dict[str, int] = {}
    for t in trajs:
        reasons[t.stop_reason] = reasons.get(t.stop_reason, 0) + 1
    return {
        "n_tasks": n_tasks,
        "n_rollouts": len(trajs),
        "pass_at_k": sum(any(o.passed) for o in outcomes.values()) / n_tasks if n_tasks else 0.0,
        "avg_at_k": sum(o.pass_rate for o in outcomes.values()) / n_tasks if n_tasks else 0.0,
        "mean_reward": sum(t.reward for t in trajs) / len(trajs) if trajs else 0.0,
        "timr": sum(t.violation_turns for t in trajs) / turns if turns else 0.0,
        "interface_violations": violations,
        "model_turns": turns,
        "input_tokens": sum(t.input_tokens for t in trajs),
        "output_tokens": sum(t.output_tokens for t in trajs),
        "cost_usd": sum(t.cost_usd for t in trajs),
        "latency_s": sum(t.latency_s for t in trajs) / len(trajs) if trajs else 0.0,
        "stop_reasons": reasons,
        "unanswered": sum(t.model_turns == 0 and t.stop_reason.startswith("budget:") for t in trajs),
    }


async def _evaluate(spec: HarnessSpec, checkpoint: str | Checkpoint, env: Env, split: str, k: int,
                    seeds: int | Sequence[int] | None, n_tasks: int | None,
                    model: BaseChatModel | None, archive: Archive | None, semaphore: asyncio.Semaphore,
                    progress: Reporter, run_id: str | None, tasks: Sequence[Task] | None,
                    label: str | None, resume: bool, executor: Executor | None,
                    temperature: float | None = None, experience: Sequence[str] = (),
                    shared: bool = False) -> EvalResult:
    if model is None:
        raise ValueError("evaluate needs model=: a BaseChatModel (build one with coevo.models.refs.load_model)")
    started = time.perf_counter()
    seed_list = _seeds(seeds, k)
    ckpt = _checkpoint_id(checkpoint)
    task_list = list(tasks) if tasks is not None else env.tasks(split, n_tasks)  # type: ignore[arg-type]
    if not task_list:
        raise ValueError(f"env {env.name!r} has no {split!r} tasks (n={n_tasks}): check the split and --n")
    if len({t.id for t in task_list}) != len(task_list):
        raise ValueError(f"env {env.name!r} returned duplicate task ids on {split!r}: task ids must be unique")
    harness_id = spec.id
    eval_id = evaluation_id(None if shared else run_id, harness_id, ckpt, env.name, split, seed_list,
                            [t.id for t in task_list], temperature, experience)
    decoded = spec if temperature is None else spec.model_copy(
        update={"decoding": spec.decoding.model_copy(update={"temperature": temperature})})
    trivial, trivial_detail = _trivial(env, split, n_tasks)
    record = EvaluationRecord(id=eval_id, run_id=run_id, harness_id=spec.id, checkpoint_id=ckpt, env=env.name,
                              split=split, seeds=seed_list, k=k, task_ids=[t.id for t in task_list])

    done_trajs: dict[str, list[Trajectory]] = {}
    if archive is not None:
        if archive.get(HarnessRecord, harness_id) is None:
            await asyncio.to_thread(archive.add_harness, spec, None, "evaluated", run_id)
        await asyncio.to_thread(archive.put, *task_list)
        previous = archive.get(EvaluationRecord, eval_id)
        if previous is not None and resume:
            for traj in await asyncio.to_thread(archive.list, Trajectory, evaluation_id=eval_id):
                done_trajs.setdefault(traj.task_id, []).append(traj)
            done_trajs = {tid: ts for tid, ts in done_trajs.items() if {t.seed for t in ts} == set(seed_list)}
        if previous is not None:
            record.created_at = previous.created_at
            if shared:  # a shared evaluation stays listed under the run that ran it
                record.run_id = previous.run_id
        await asyncio.to_thread(archive.put, record)
    resumed = len(done_trajs)

    handle = progress.start(label or f"eval {harness_id[:12]} on {env.name}/{split}", len(task_list))
    reward_sum = sum(t.reward for ts in done_trajs.values() for t in ts)
    rollouts_done = sum(len(ts) for ts in done_trajs.values())
    progress.update(handle, len(done_trajs), reward_sum / rollouts_done if rollouts_done else None)

    run = arun_rollout if executor is None else executor.rollout
    lessons = {"experience": tuple(experience)} if experience else {}  # only a BPE harness's evaluation has them

    async def rollout(task: Task, seed: int) -> Trajectory:
        async with semaphore:
            with batched(model):  # a local engine decodes the rollouts in flight together
                traj = await run(decoded, model, env, task, seed=seed, checkpoint_id=ckpt, split=split, **lessons)
        return traj.model_copy(update={"id": trajectory_id(eval_id, task.id, seed), "split": split,
                                       "checkpoint_id": ckpt, "harness_id": harness_id})

    pending: list[Trajectory] = []
    write_lock = asyncio.Lock()
    writes: set[asyncio.Task[None]] = set()  # the shielded group commits, awaited (and their errors read) at the end

    async def flush() -> None:
        """Group commit: write every finished task queued so far in one transaction (one writer
        at a time, in a worker thread). A task's rollouts are queued together, so a transaction
        holds whole tasks only."""
        async with write_lock:
            if pending:
                batch = pending[:]
                pending.clear()
                await asyncio.to_thread(archive.add_trajectories, batch, eval_id, run_id)  # type: ignore[union-attr]

    async def run_task(task: Task) -> None:
        nonlocal reward_sum, rollouts_done
        trajs = list(await asyncio.gather(*(rollout(task, s) for s in seed_list)))
        if archive is not None:
            pending.extend(trajs)
            # shielded: a cancelled evaluation still finishes (and below, waits for) this write
            write = asyncio.ensure_future(flush())
            writes.add(write)
            write.add_done_callback(lambda w: w.cancelled() or w.exception() or writes.discard(w))  # keep failures
            await asyncio.shield(write)
        done_trajs[task.id] = trajs
        reward_sum += sum(t.reward for t in trajs)
        rollouts_done += len(trajs)
        progress.update(handle, len(done_trajs), reward_sum / rollouts_done)

    try:
        async with asyncio.TaskGroup() as group:
            for task in task_list:
                if task.id not in done_trajs:
                    group.create_task(run_task(task))
    except BaseException as exc:
        if archive is not None:
            # the writes of tasks cancelled while they waited for the lock: each is awaited here, so a
            # write that failed too (a full disk fails them all) is read, not left for asyncio to print
            # as "Task exception was never retrieved" beside the error raised below
            await asyncio.gather(*writes, return_exceptions=True)
            await asyncio.shield(flush())
            archive.put(record.model_copy(update={"status": "interrupted"}))
        raise _first(exc) from None
    finally:
        progress.stop(handle)

    outcomes: dict[str, TaskOutcome] = {}
    ordered: list[Trajectory] = []
    for task in task_list:
        by_seed = {t.seed: t for t in done_trajs[task.id]}
        trajs = [by_seed[s] for s in seed_list]
        ordered += trajs
        outcomes[task.id] = TaskOutcome(task_id=task.id, seeds=seed_list, rewards=[t.reward for t in trajs],
                                        passed=[t.passed for t in trajs], trajectory_ids=[t.id for t in trajs])
    transforms = reply_transforms(spec)
    raw = (await asyncio.to_thread(suite_reward, env, {t.id: t for t in task_list}, ordered)) if transforms else None
    result = EvalResult(
        evaluation_id=eval_id, harness_id=harness_id, checkpoint_id=ckpt, env=env.name, split=split, k=k,
        seeds=seed_list, temperature=temperature, wall_s=time.perf_counter() - started, trivial_baseline=trivial,
        trivial_detail=trivial_detail, resumed_tasks=resumed, reward_mode=getattr(env, "reward_mode", ""),
        reply_transforms=transforms, suite_reward=raw, per_task=outcomes, **_aggregate(outcomes, ordered),
    )
    if archive is not None:
        aggregates = result.model_dump(mode="json")
        await asyncio.to_thread(archive.put,
                                record.model_copy(update={"status": "done", "aggregates": aggregates}))
    return result


async def evaluate(spec: HarnessSpec, checkpoint: str | Checkpoint, env: Env, split: str, k: int = 1,
                   seeds: int | Sequence[int] | None = None, n_tasks: int | None = None,
                   model: BaseChatModel | None = None, archive: Archive | None = None, concurrency: int = 8,
                   progress: Reporter | None = None, run_id: str | None = None,
                   tasks: Sequence[Task] | None = None, resume: bool = True,
                   executor: Executor | None = None, temperature: float | None = None,
                   experience: Sequence[str] = (), shared: bool = False) -> EvalResult:
    """Run ``k`` rollouts of harness ``spec`` on each task of ``env``'s ``split`` and aggregate.

    Args:
        spec: the harness. checkpoint: the checkpoint id (or the ``Checkpoint``)
            recorded with every trajectory; ``model`` must be the policy it names.
        env, split: the suite and ``train``/``val``/``test``; ``n_tasks`` the first n tasks
            (all when None) unless ``tasks`` gives the task list explicitly.
        k: rollouts per task. seeds: a base seed (rollout j uses ``seed + j``), an explicit list of
            k seeds, or None (``0..k-1``).
        model: the ``BaseChatModel`` (build it from a model ref with ``coevo.models.refs.load_model``).
        archive: when given, the harness, tasks, every trajectory (one transaction per task) and
            the aggregates are stored. The evaluation id is a digest of (run_id, harness,
            checkpoint, env, split, seeds, tasks): run again with the same inputs, an interrupted
            (or finished) evaluation reuses its stored tasks when ``resume`` (the default), or
            re-runs and overwrites them when not.
        concurrency: maximum rollouts in flight. progress: a ``Reporter`` (default: silent).
        executor: where each rollout runs (``coevo.evaluation.executors``; default: this process).
            Results and the archive are the same either way: only this process writes it.
        temperature: decode every rollout at this temperature instead of the harness's own
            (``spec.decoding.temperature``; a sampled evaluation for pass@k / mean@k). Trajectories
            and the evaluation stay under ``spec``'s id; the temperature is stored with the result.
        experience: a BPE harness lineage's lessons every rollout starts with (EvoHarness-RL,
            ``coevo.harnesses.bpe``), on the executor's workers too; part of the evaluation id when set.
        shared: identify the evaluation without ``run_id`` (the same pair, tasks and seeds in another
            run of this archive reads it back instead of decoding it again); its record and trajectories
            are still written under the ``run_id`` that first ran them. Only for an evaluation that
            selects nothing in the run (``eval.share_test``: the test split).

    Returns: ``EvalResult``. Raises ``ValueError`` on bad arguments; whatever a rollout raises
    (e.g. the model's network error) propagates after in-flight rollouts are cancelled, leaving
    the evaluation row with ``status="interrupted"``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: must be at least 1")
    with _frozen_heap():
        return await _evaluate(spec, checkpoint, env, split, k, seeds, n_tasks, model, archive,
                               asyncio.Semaphore(concurrency), progress or NullReporter(), run_id, tasks, None, resume,
                               executor, temperature, experience, shared)
