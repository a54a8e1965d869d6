"""Where rollouts run (docs/design.md, Scale): in the driver process, or on Ray workers.

An executor has ``arun_rollout``'s signature — ``await executor.rollout(spec, model, env, task,
seed=, checkpoint_id=, split=)`` returns a scored ``Trajectory`` — so it is what
``coevo.evaluation.engine.evaluate(executor=...)`` runs each rollout with, and what a training stage
takes as its ``rollout_fn`` (``HarnessRollout``, ``train_rsft``). The driver keeps everything else:
task lists, seeds, the concurrency bound, and the archive, which only the driver writes (workers
return trajectories; the engine stores them), so resumed evaluations skip finished tasks exactly as
in-process ones do.

``RayExecutor`` keeps a pool of Ray actors (``RolloutWorker``, one per CPU by default), each an
asyncio actor running up to ``per_worker`` rollouts at once: it builds the episode's env and tools
itself and calls the policy over the network (a server reference) or through its own local replica
(a ``local:`` reference: each worker loads the weights once). Models that ``load_model`` built are
rebuilt on the worker from their reference (``metadata["coevo_ref"]``); any other model, and the env,
are pickled once into Ray's object store and cached per worker. A rollout whose worker dies (the
process is killed, the node is lost) is retried on another worker, up to ``max_attempts``, and the
dead worker is replaced; the loss is logged (logger ``coevo.evaluation.executors``). An exception
raised by the rollout itself (the model's network error, a bug) propagates as in the driver.

Connect to a cluster with ``RAY_ADDRESS`` (or ``address=``); without one a local Ray instance is
started with ``num_cpus`` CPUs (default: all).

Training stages sample through ``sampling_on(executor)``: a server-backed sampler (vLLM through
``coevo.training.vllm_sync.VLLMStepSync``, any ``litellm:``/``router:`` model) samples its groups on
the executor's workers, while the trainer's live weights in the driver (the default sampler of GRPO
and RSFT) sample in the driver, as documented there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import weakref
from typing import Any, Awaitable, Callable, Protocol, Sequence

from coevo.envs.base import Env, Task
from coevo.harnesses.runtime import arun_rollout
from coevo.models.refs import REF_KEY, SETTINGS_KEY
from coevo.models.trajectory import Trajectory

log = logging.getLogger(__name__)
EXECUTORS = ("inprocess", "ray")


class ExecutorError(RuntimeError):
    """Rollouts cannot run on the executor: Ray missing, an object that cannot be shipped to the
    workers, or a rollout whose workers kept dying."""


class Executor(Protocol):
    """Runs one rollout (``arun_rollout``'s signature and result) somewhere; ``close`` frees workers."""

    async def rollout(self, spec: Any, model: Any, env: Env, task: Task, seed: int = 0, checkpoint_id: str = "",
                      split: str | None = None, experience: Sequence[str] = ()) -> Trajectory:
        """One scored rollout of ``spec`` with ``model`` on ``task``, a BPE harness starting from the
        lineage's ``experience`` lessons (see ``arun_rollout``)."""

    def close(self) -> None:
        """Release the executor's workers (no-op in process)."""


class InProcessExecutor:
    """Rollouts as coroutines in the driver's event loop (the default; ``evaluate`` without an executor)."""

    async def rollout(self, spec: Any, model: Any, env: Env, task: Task, seed: int = 0, checkpoint_id: str = "",
                      split: str | None = None, experience: Sequence[str] = ()) -> Trajectory:
        """``arun_rollout`` in this process."""
        return await arun_rollout(spec, model, env, task, seed=seed, checkpoint_id=checkpoint_id, split=split,
                                  experience=experience)

    def close(self) -> None:
        """Nothing to release."""


class RolloutWorker:
    """The Ray actor behind ``RayExecutor`` (wrapped with ``ray.remote`` when the pool starts): builds
    or unpickles each model and env once, then runs rollouts on its own event loop."""

    def __init__(self) -> None:
        self.cache: dict[str, Any] = {}

    def pid(self) -> int:
        """The worker's process id (tests kill it)."""
        return os.getpid()

    async def _get(self, source: tuple[str, str, Any]) -> Any:
        kind, key, payload = source
        if key not in self.cache:
            if kind == "ref":
                from coevo.models.refs import load_model

                self.cache[key] = load_model(payload[0], **payload[1])
            else:
                self.cache[key] = await payload[0]  # an ObjectRef inside a list: Ray does not resolve it for us
        return self.cache[key]

    async def rollout(self, spec: Any, model: tuple, env: tuple, task: Task, seed: int, checkpoint_id: str,
                      split: str | None, experience: Sequence[str] = ()) -> Trajectory:
        """``arun_rollout`` with the model and env named by their sources (see ``RayExecutor._source``);
        ``experience`` the BPE lineage's lessons, shipped with the rollout."""
        return await arun_rollout(spec, await self._get(model), await self._get(env), task, seed=seed,
                                  checkpoint_id=checkpoint_id, split=split, experience=tuple(experience))


class RayExecutor:
    """Rollouts on a pool of Ray workers (see the module docstring).

    Args: ``workers`` pool size (default: the cluster's CPUs / ``cpus_per_worker``); ``per_worker``
    rollouts in flight per worker (asyncio concurrency inside the actor); ``cpus_per_worker`` Ray CPUs
    each worker reserves; ``address`` a Ray cluster (default ``$RAY_ADDRESS``; none: a local instance
    with ``num_cpus`` CPUs); ``max_attempts`` tries per rollout when workers die.
    The pool starts on the first rollout. Counters: ``submitted`` rollouts sent to workers (retries
    included), ``replaced`` workers lost and replaced. Raises ``ExecutorError`` when Ray is not installed.
    """

    def __init__(self, workers: int | None = None, per_worker: int = 32, cpus_per_worker: float = 1.0,
                 address: str | None = None, num_cpus: int | None = None, max_attempts: int = 3) -> None:
        self.workers, self.per_worker, self.cpus_per_worker = workers, per_worker, cpus_per_worker
        self.address, self.num_cpus, self.max_attempts = address, num_cpus, max_attempts
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._objects: dict[int, tuple[Any, Any]] = {}
        self._owns_ray = False
        self.replaced = self.submitted = 0

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError as err:
            raise ExecutorError("the Ray executor needs Ray: pip install 'coevo[ray]' (or run with "
                                "--executor inprocess)") from err
        return ray

    def _start(self) -> None:
        ray = self._ray()
        if not ray.is_initialized():
            address = self.address or os.environ.get("RAY_ADDRESS")
            options = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
            ray.init(address=address, **options) if address else ray.init(num_cpus=self.num_cpus, **options)
            self._owns_ray = True
        cpus = ray.cluster_resources().get("CPU", 1.0)
        n = self.workers or max(1, int(cpus // self.cpus_per_worker))
        self._actors = [self._new_actor() for _ in range(n)]
        self._load = [0] * n

    def _new_actor(self) -> Any:
        ray = self._ray()
        cls = ray.remote(RolloutWorker).options(num_cpus=self.cpus_per_worker, max_concurrency=self.per_worker)
        return cls.remote()

    def worker_pids(self) -> list[int]:
        """The process ids of the pool's workers (starting the pool if needed)."""
        if not self._actors:
            self._start()
        return self._ray().get([a.pid.remote() for a in self._actors])

    def _source(self, obj: Any) -> tuple[str, str, Any]:
        """How a worker gets ``obj``: ``("ref", key, (ref, settings))`` for a model ``load_model``
        built (rebuilt on the worker), else ``("object", key, [ObjectRef])`` (pickled once)."""
        meta = getattr(obj, "metadata", None)
        if isinstance(meta, dict) and REF_KEY in meta:
            settings = meta.get(SETTINGS_KEY) or {}
            return "ref", json.dumps([meta[REF_KEY], settings], sort_keys=True, default=str), (meta[REF_KEY], settings)
        entry = self._objects.get(id(obj))
        if entry is None:
            try:
                entry = (obj, self._ray().put(obj))
            except Exception as err:
                why = [line for line in str(err).splitlines() if "cannot pickle" in line] or [str(err)[:200]]
                raise ExecutorError(f"{type(obj).__name__} cannot be shipped to Ray workers ({why[0].strip()}); build "
                                    "the policy with coevo.models.refs.load_model(ref) so each worker rebuilds it "
                                    "from its reference, or use --executor inprocess") from err
            self._objects[id(obj)] = entry
        return "object", entry[1].hex(), [entry[1]]

    async def rollout(self, spec: Any, model: Any, env: Env, task: Task, seed: int = 0, checkpoint_id: str = "",
                      split: str | None = None, experience: Sequence[str] = (), **kwargs: Any) -> Trajectory:
        """``arun_rollout`` on the least busy worker (``experience``, a BPE lineage's lessons, travels
        with it); retried on another when that worker dies.
        Raises what the rollout raised, or ``ExecutorError`` after ``max_attempts`` lost workers."""
        from ray.exceptions import RayActorError, RayTaskError

        if not self._actors:
            self._start()
        sources = self._source(model), self._source(env)
        last: BaseException | None = None
        for attempt in range(1, self.max_attempts + 1):
            i = min(range(len(self._actors)), key=self._load.__getitem__)
            actor = self._actors[i]
            self._load[i] += 1
            self.submitted += 1
            try:
                return await actor.rollout.remote(spec, *sources, task, seed, checkpoint_id, split,
                                                 tuple(experience))
            except RayTaskError as err:
                raise (err.cause or err) from None
            except RayActorError as err:
                last = err
                log.warning("Ray worker %d died during task %s (seed %d): %s; retrying it on another worker "
                            "(attempt %d/%d)", i, task.id, seed, type(err).__name__, attempt, self.max_attempts)
                if self._actors[i] is actor:
                    self._actors[i] = self._new_actor()
                    self.replaced += 1
            finally:
                self._load[i] -= 1
        raise ExecutorError(f"task {task.id} (seed {seed}) lost its Ray worker {self.max_attempts} times; last: {last}")

    def close(self) -> None:
        """Stop the workers (and the local Ray instance when this executor started it)."""
        if not self._actors and not self._owns_ray:
            return
        ray = self._ray()
        for actor in self._actors:
            ray.kill(actor)
        self._actors, self._load, self._objects = [], [], {}
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


_TOLD: "weakref.WeakSet[Any]" = weakref.WeakSet()
"""Executors whose training stages were told (logged) that live weights sample in the driver."""


def is_live_local(policy: Any) -> bool:
    """Whether ``policy`` is a model's live weights in this process: a ``LocalChatModel`` built
    from objects in memory (``from_model``: no model reference to rebuild it from), as the
    training stages' default samplers are."""
    local = sys.modules.get("coevo.models.local")  # not imported: no LocalChatModel can exist
    meta = getattr(policy, "metadata", None) or {}
    return local is not None and isinstance(policy, local.LocalChatModel) and REF_KEY not in meta


def sampling_on(executor: Executor | None,
                rollout_fn: Callable[..., Awaitable[Trajectory]] | None = None) -> Callable[..., Awaitable[Trajectory]]:
    """The ``rollout_fn`` of a training stage (``train_grpo``, ``train_rsft``, the Eq. 5 rescue) with
    ``rollout_fn``'s signature (``arun_rollout``'s): rollouts of a server-backed or otherwise
    shippable policy run on ``executor.rollout`` (Ray workers: they build the envs and call the
    server; the driver keeps the groups and writes the archive), while a policy holding the live
    trainer weights (``is_live_local``) samples in this process with ``rollout_fn`` (default
    ``arun_rollout``): those weights change every step and live in the driver's memory, so they are
    never shipped. That fallback is logged once per executor at INFO (logger
    ``coevo.evaluation.executors``). Without an executor: ``rollout_fn`` (or ``arun_rollout``).
    Errors are the executor's (``ExecutorError`` for a policy that cannot be shipped)."""
    here = rollout_fn or arun_rollout
    if executor is None:
        return here

    async def run(spec: Any, policy: Any, env: Env, task: Task, seed: int = 0, checkpoint_id: str = "",
                  **kwargs: Any) -> Trajectory:
        if not is_live_local(policy):
            return await executor.rollout(spec, policy, env, task, seed=seed, checkpoint_id=checkpoint_id, **kwargs)
        if executor not in _TOLD:
            _TOLD.add(executor)
            log.info("training rollouts sample the trainer's live weights in the driver, not on the %s executor "
                     "(serve the policy, e.g. vLLM with VLLMStepSync, to sample on workers)", type(executor).__name__)
        return await here(spec, policy, env, task, seed=seed, checkpoint_id=checkpoint_id, **kwargs)

    return run


def make_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name`` (``inprocess`` or ``ray``; ``options`` go to ``RayExecutor``).
    Raises ``ValueError`` naming the choices for another name, or the extra to install for ``ray``
    when Ray is missing."""
    if name == "inprocess":
        return InProcessExecutor()
    if name == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ValueError("executor 'ray' needs Ray, which is not installed: pip install 'coevo[ray]', or use "
                             "the in-process executor (--executor inprocess)")
        return RayExecutor(**options)
    raise ValueError(f"unknown executor {name!r}; choose one of {list(EXECUTORS)}")
