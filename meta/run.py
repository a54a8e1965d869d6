"""Running a meta-loop strategy durably: services, the starting pair, and the checkpointed graph.

``run_meta`` compiles the strategy's graph with a LangGraph SQLite checkpointer on the run's
database (the archive lives in the same file), so ``run_meta(..., resume=True)`` continues a
crashed or interrupted run from its last completed node. Evaluations are resumable by id, so
finished rollouts are never redone and archive rows never duplicated.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Sequence

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.envs.registry import get_env
from coevo.graphs.baselines import builder_for
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.meta.context import MetaContext
from coevo.evaluation.engine import evaluate
from coevo.roles.offline import OfflineCurator, OfflineEditor
from coevo.report.progress import NullReporter, Reporter
from coevo.storage import Archive
from coevo.storage.tables import RunRecord


class PolicyCache:
    """``policy(checkpoint_id) -> BaseChatModel``: the configured ref, plus the checkpoint's adapter
    (``local:BASE+ADAPTER``) or the name it is served under (``config["model_ref"]``)."""

    def __init__(self, config: RunConfig, archive: Any) -> None:
        self.config, self.archive, self.models = config, archive, {}

    def __call__(self, checkpoint_id: str):
        if checkpoint_id not in self.models:
            from coevo.models.refs import load_model

            rec = self.archive.get_checkpoint(checkpoint_id)
            if rec is None:
                raise KeyError(f"checkpoint {checkpoint_id!r} is not in the archive")
            ref = rec.config.get("model_ref") or (f"{self.config.policy}+{rec.adapter_path}" if rec.adapter_path else self.config.policy)
            self.models[checkpoint_id] = load_model(ref)
        return self.models[checkpoint_id]


class StageTrainer:
    """The weight stage behind ``MetaContext.trainer``: GRPO (Harness-S §7) or RSFT (WHALE §3.1)
    from ``coevo.training`` on the run's train tasks, run in a worker thread."""

    def __init__(self, config: RunConfig, env: Env, archive: Any, run_id: str) -> None:
        self.config, self.env, self.archive, self.run_id = config, env, archive, run_id

    def _stage_config(self, round: int) -> dict[str, Any]:
        t = self.config.train
        # One row per micro-step with activation checkpointing: long prompts (few-shot turns with
        # function docs) otherwise hold batch x layers x seq^2 attention activations (OOM at 24 GiB).
        return {"steps": t.steps, "tasks_per_step": t.tasks_per_step, "num_generations": t.num_generations,
                "micro_batches": t.tasks_per_step * t.num_generations, "activation_checkpointing": True,
                "learning_rate": t.learning_rate, "lora_r": t.lora_r, "lora_alpha": t.lora_alpha,
                "seed": self.config.seed + 1000 * round, "output_dir": str(Path(self.config.out_dir) / "adapters")}

    def _train(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> tuple[str, list[Trajectory]]:
        from coevo.training.checkpoint import Checkpoint

        rec = self.archive.get_checkpoint(checkpoint_id)
        ckpt = Checkpoint(**{k: v for k, v in rec.model_dump().items() if k in Checkpoint.model_fields})
        t = self.config.train  # training samples at its own temperature and output budget
        spec = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"temperature": t.temperature}),
                                       "budget": spec.budget.model_copy(update={"max_output_tokens": t.max_new_tokens})})
        if self.config.train.algorithm == "rsft":
            from coevo.training.rsft import train_rsft

            common = self._stage_config(round)
            rsft = {"rounds": common.pop("steps"), "tasks_per_round": common.pop("tasks_per_step"),
                    "samples_per_task": common.pop("num_generations"), "threshold": self.config.train.rsft_threshold, **common}
            new, trajectories = train_rsft(ckpt, spec, self.env, tasks, rsft, archive=self.archive, run_id=self.run_id)
        else:
            from coevo.training.grpo import train_grpo

            new, trajectories = train_grpo(ckpt, spec, self.env, tasks, self._stage_config(round), archive=self.archive,
                                           run_id=self.run_id)
        return new.id, trajectories

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> tuple[str, list[Trajectory]]:
        return await asyncio.to_thread(self._train, checkpoint_id, spec, tasks, round)


def meta_roles(config: RunConfig, env: Env) -> tuple[Any, Any]:
    """Curator and editor: offline rules (``meta.model = "offline"``) or LiteLLM roles."""
    if config.meta.model == "offline":
        return OfflineCurator(config.meta.min_failed_tasks), OfflineEditor(demo_answer=getattr(env, "demonstration_answer", None))
    from coevo.roles.llm import LLMCurator, LLMEditor

    return (LLMCurator(config.meta.model, config.meta.min_failed_tasks, temperature=config.meta.temperature),
            LLMEditor(config.meta.model, temperature=config.meta.temperature))


def make_context(config: RunConfig, archive: Any, run_id: str, reporter: Reporter | None = None,
                 approve: bool = False, env: Env | None = None) -> MetaContext:
    """The services of a run built from its config (the CLI's and Studio's default wiring)."""
    env = env or get_env(config.env.ref)
    curator, editor = meta_roles(config, env)
    trains = config.strategy in ("vace", "rl_only", "ungated")
    return MetaContext(config=config, env=env, archive=archive, policy=PolicyCache(config, archive),
                       trainer=StageTrainer(config, env, archive, run_id) if trains else None, curator=curator,
                       editor=editor, reporter=reporter or NullReporter(), evaluate=evaluate, approve=approve)


def new_run_id(config: RunConfig) -> str:
    """A fresh run id ``<strategy>-<8 hex>``."""
    return f"{config.strategy}-{uuid.uuid4().hex[:8]}"


async def run_meta(config: RunConfig, run_id: str | None = None, resume: bool = False, approve: bool = False,
                   reporter: Reporter | None = None, context: MetaContext | None = None, answer: str | None = None,
                   archive: Any = None) -> dict[str, Any]:
    """Run (or resume) one strategy to the end, or to a pending gate approval.

    Args: ``run_id`` (required with ``resume``); ``approve`` pauses before each gate decision;
    ``answer`` resumes a paused gate with ``"yes"``/``"no"``; ``context`` replaces the default
    services (tests). Returns the final state; with a pending approval, ``state["__interrupt__"]``
    holds the question. Raises ``ValueError`` when resuming an unknown run.
    """
    Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    archive = archive or Archive(config.db)
    if resume:
        run = archive.get_run(run_id or "")
        if run is None:
            raise ValueError(f"no run {run_id!r} in {config.db}; `coevo archive list` shows the runs")
        config = RunConfig.model_validate(run.config) if context is None else config
    run_id = run_id or new_run_id(config)
    ctx = context or make_context(config, archive, run_id, reporter, approve)
    if not resume:
        archive.add_run(RunRecord(id=run_id, strategy=config.strategy, config=config.model_dump(mode="json")))
    async with AsyncSqliteSaver.from_conn_string(config.db) as saver:
        graph = builder_for(config.strategy).compile(checkpointer=saver, name=config.strategy)
        thread = {"configurable": {"thread_id": run_id}, "recursion_limit": 1000}
        if answer is not None:
            payload: Any = Command(resume=answer)
        elif resume:
            payload = None
        else:
            payload = {"run_id": run_id}
        # durability="sync": a checkpoint is on disk before the next node runs, so a crash loses at most
        # the running node and checkpointer writes never overlap the archive's (one SQLite file).
        state = await graph.ainvoke(payload, thread, context=ctx, durability="sync")
    done = "__interrupt__" not in state
    run = archive.get_run(run_id)
    archive.add_run(run.model_copy(update={"status": "done" if done else "paused"}))
    return {**state, "run_id": run_id}
