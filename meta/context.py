"""What meta-loop nodes are given (not state): the run config and the services they call.

Nodes take ``runtime: Runtime[MetaContext]`` and reach the env, the archive, the policy, the
trainer and the meta roles only through it, so a test hands them fakes. Nothing here opens SQL:
``archive`` is ``coevo.storage.Archive``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from langchain_core.language_models import BaseChatModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.report.progress import NullReporter, Reporter
from coevo.meta.state import Candidate, Direction


class Trainer(Protocol):
    """The weight stage: train ``checkpoint_id`` under ``spec`` on ``tasks``; return the new
    checkpoint id and the stage's trajectories (the tokens the policy really generated)."""

    async def __call__(self, checkpoint_id: str, spec: HarnessSpec, tasks: Sequence[Task], round: int) -> tuple[str, list[Trajectory]]:
        ...


class Curator(Protocol):
    """Groups failed train trajectories by root cause into repair directions (Harness-S §3.2)."""

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> list[Direction]:
        ...


class Editor(Protocol):
    """Proposes a JSON-Patch edit of ``spec`` for a direction (and at most one revision)."""

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = ()) -> Candidate:
        ...

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Candidate:
        ...


@dataclass
class MetaContext:
    """Run-time services of a meta-loop run.

    ``policy(checkpoint_id)`` returns the chat model for that checkpoint; ``evaluate`` is
    ``coevo.evaluation.engine.evaluate`` (replaceable in tests); ``approve`` (``--approve-gate``)
    pauses before each gate decision with a LangGraph ``interrupt``.
    """

    config: RunConfig
    env: Env
    archive: Any
    policy: Callable[[str], BaseChatModel]
    trainer: Trainer | None
    curator: Curator
    editor: Editor
    reporter: Reporter = field(default_factory=NullReporter)
    evaluate: Callable[..., Any] | None = None
    approve: bool = False

    def tasks(self, split: str) -> list[Task]:
        """The run's tasks of ``split`` (sizes from ``config.env``)."""
        n = {"train": self.config.env.n_train, "val": self.config.env.n_val, "test": self.config.env.n_test}[split]
        return self.env.tasks(split, n)  # type: ignore[arg-type]


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
        from coevo.storage import Archive

        _DEFAULTS[key] = make_context(config, Archive(config.db), run_id="studio")
    return _DEFAULTS[key]
