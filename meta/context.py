"""What meta-loop nodes are given (not state): the run config and the services they call.

Nodes take ``runtime: Runtime[MetaContext]`` and reach the env, the archive, the policy, the
trainer and the meta roles only through it, so a test hands them fakes. Nothing here opens SQL:
``archive`` is ``coevo.storage.Archive``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence

from langchain_core.language_models import BaseChatModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import Executor
from coevo.evaluation.results import EvalResult
from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.models.trajectory import Trajectory
from coevo.report.progress import NullReporter, Reporter
from coevo.roles.curator import Curator
from coevo.roles.editor import Editor
from coevo.storage import Archive, LLMCallRecord

Split = Literal["train", "val", "test"]


class Trainer(Protocol):
    """The weight stage: train ``checkpoint_id`` under ``spec`` on ``tasks``; return the new
    checkpoint id and the stage's trajectories (the tokens the policy really generated)."""

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task],
                       round: int, siblings: Sequence[HarnessSpec] = (), **route: Any) -> tuple[str, list[Trajectory]]:
        """Train ``checkpoint_id`` in ``round`` (``siblings``: the Eq. 5 rescue pool, passed only
        when non-empty; ``route=``: Harness-S's per-task router choice among them, passed only by
        harness_s); returns (new checkpoint id, the stage's trajectories)."""


@dataclass
class MetaContext:
    """Run-time services of a meta-loop run.

    ``policy(checkpoint_id)`` returns the chat model for that checkpoint; ``trainer`` is None for
    strategies with frozen weights; ``curator``/``editor`` are None for strategies that do not
    refine (``graphs.registry`` says which roles a strategy needs); Harness-S's ``profiler``
    (``coevo.roles.profiler``) and ``voter`` (the router's voters, ``coevo.roles.voter``) likewise; ``evaluator`` is
    ``coevo.evaluation.engine.evaluate`` (replaceable in tests); ``executor`` where its rollouts run
    (``coevo.evaluation.executors``; None: in this process); ``approve`` (``--approve-gate``)
    pauses before each gate decision with a LangGraph ``interrupt``; ``run_id`` names the run
    whose evaluations, edits and LLM calls are stored.
    """

    config: RunConfig
    env: Env
    archive: Archive
    policy: Callable[[str], BaseChatModel]
    trainer: Trainer | None = None
    curator: Curator | None = None
    editor: Editor | None = None
    profiler: Any = None
    voter: Sequence[Any] = ()
    reporter: Reporter = field(default_factory=NullReporter)
    evaluator: Callable[..., Any] = evaluate
    executor: Executor | None = None
    approve: bool = False
    run_id: str = "studio"

    def tasks(self, split: Split, ids: Sequence[str] | None = None) -> list[Task]:
        """The run's tasks of ``split`` (sizes from ``config.env``), in the env's order; only those in
        ``ids`` when given."""
        n = {"train": self.config.env.n_train, "val": self.config.env.n_val, "test": self.config.env.n_test}[split]
        tasks = self.env.tasks(split, n)  # type: ignore[arg-type]
        return tasks if ids is None else [t for t in tasks if t.id in set(ids)]

    def spec(self, harness_id: str) -> HarnessSpec:
        """The ``HarnessSpec`` stored under ``harness_id``. Raises ``KeyError`` when the archive lacks it."""
        record = self.archive.get_harness(harness_id)
        if record is None:
            raise KeyError(f"harness {harness_id} is not in the archive; the run's database is incomplete")
        return load_harness(record.spec)

    async def evaluate(self, harness_id: str, checkpoint: str, split: Split, tasks: Sequence[Task] | None = None,
                       k: int | None = None, seed: int | None = None) -> EvalResult:
        """Evaluate harness ``harness_id`` × ``checkpoint`` on ``tasks`` (default: the run's ``split``
        tasks) with the run's settings: ``k`` rollouts per task (default ``config.eval.k``), base seed
        ``seed`` (default ``config.seed``, so two harnesses are paired), the checkpoint's policy,
        ``eval.concurrency``, the reporter, stored in the archive under ``run_id`` (resumable by id),
        on the ``executor``."""
        placed = {} if self.executor is None else {"executor": self.executor}
        return await self.evaluator(self.spec(harness_id), checkpoint, self.env, split, k=k or self.config.eval.k,
                                    seeds=self.config.seed if seed is None else seed, model=self.policy(checkpoint),
                                    archive=self.archive,
                                    concurrency=self.config.eval.concurrency, progress=self.reporter,
                                    run_id=self.run_id, tasks=self.tasks(split) if tasks is None else list(tasks),
                                    **placed)

    def store_calls(self, calls: Sequence[LLMCallRecord]) -> None:
        """Store meta-role LLM calls (what a role returned) in the archive under the run's id."""
        if calls:
            self.archive.add_llm_calls([c.model_copy(update={"run_id": self.run_id}) for c in calls])


_DEFAULTS: dict[str, MetaContext] = {}


def services(runtime: Any) -> MetaContext:
    """The run's ``MetaContext``: the one the caller passed, or — when a graph runs without one
    (LangGraph Studio, ``langgraph dev``) — default services built once from ``RunConfig`` defaults
    (or from a dict context holding ``RunConfig`` keys)."""
    ctx = getattr(runtime, "context", None)
    if isinstance(ctx, MetaContext):
        return ctx
    config = RunConfig.model_validate(ctx or {})
    key = config.model_dump_json()
    if key not in _DEFAULTS:
        from coevo.meta.services import make_context

        _DEFAULTS[key] = make_context(config, Archive(config.db), run_id="studio")
    return _DEFAULTS[key]
