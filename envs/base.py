"""The task-suite contract: ``Task``, ``Score``, ``Tool``, ``Episode`` and the ``Env`` protocol.

See docs/design.md (Core objects: Task and Env). A suite makes tasks by split, gives every rollout a
fresh ``Episode`` (its own tools and state), and scores a finished trajectory with an automatic
verifier. The verifier's answer lives inside the env and never appears in a ``Task``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from coevo.config.base import RewardMode

__all__ = ["REWARD_MODES", "SPLITS", "Env", "Episode", "RewardMode", "Score", "Split", "Task", "Tool"]

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
REWARD_MODES: tuple[RewardMode, ...] = ("correct", "partial")


class Task(BaseModel):
    """One task as the policy may see it.

    ``id`` is stable across runs (derived from content, not from a seed); ``prompt`` is the text
    shown to the agent; ``metadata`` holds non-secret facts (family, difficulty, category).
    The gold answer is never a field here: envs keep it privately, keyed by ``id``.
    """

    id: str
    env: str
    split: Split
    prompt: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class Score(BaseModel):
    """A verifier's verdict on one finished trajectory.

    ``reward`` is in [0, 1]: what training and the gate use, per the suite's reward mode
    (``correct``: 1 when ``passed`` else 0, the default; ``partial``: the checker's partial
    credit); ``passed`` is the binary success used by pass@k; ``detail`` holds the scoring
    diagnostics (e.g. expected vs got, the checker's error type; coevo's suites put the checker's
    ``credit`` and the ``reward_mode`` under ``detail["public"]``). For val/test tasks ``detail``
    must not be shown to meta roles.
    """

    reward: float = Field(ge=0.0, le=1.0)
    passed: bool
    detail: dict[str, Any] = Field(default_factory=dict)


@dataclass
class Tool:
    """An environment tool the agent can call during an episode.

    ``parameters`` is a JSON Schema object (OpenAI function-calling style); ``fn`` receives the
    parsed keyword arguments and returns the observation text. ``fn`` may raise: the harness graph
    turns an exception into an observation plus an ``on_tool_error`` hook event. ``blocking`` marks a
    tool that waits on something slow (a subprocess, a game engine): under ``ainvoke`` the harness
    runs it in a worker thread; fast pure-Python tools (the default) run on the event loop.

    ``accepts`` (optional) returns the JSON Schema of the arguments the tool accepts NOW, narrower than
    ``parameters`` (e.g. TextWorld's ``act`` with ``command`` as an ``enum`` of the currently admissible
    commands); a harness that decodes under a constraint (``Decoding.constrain``) asks it before every
    model call. It never reaches the prompt: ``parameters`` is what the model is shown.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    blocking: bool = False
    accepts: Callable[[], dict[str, Any]] | None = None

    def accepted(self) -> dict[str, Any]:
        """The arguments' JSON Schema now: ``accepts()`` when given, else ``parameters``."""
        return self.accepts() if self.accepts is not None else self.parameters

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class Episode:
    """A fresh episode of one task: its tools and any per-episode state.

    ``state`` is env-private (e.g. BFCL's stateful tool instances, a TextWorld game handle);
    ``close`` releases it. An episode is used by exactly one rollout.
    """

    task: Task
    tools: list[Tool] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    closer: Callable[[], None] | None = None

    def close(self) -> None:
        """Release the episode's resources; safe to call twice."""
        if self.closer is not None:
            closer, self.closer = self.closer, None
            closer()


@runtime_checkable
class Env(Protocol):
    """A task suite with an automatic verifier (docs/design.md, Task and Env).

    Implementations register under the entry-point group ``coevo.envs``. coevo's suites also
    carry ``reward_mode`` (``correct`` or ``partial``, see ``Score``); reports show it.
    """

    name: str

    def tasks(self, split: Split, n: int | None = None) -> list[Task]:
        """The first ``n`` tasks of ``split`` (all when ``n`` is None), deterministic for the config."""
        ...

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode for ``task`` (tools with fresh state)."""
        ...

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Score a finished rollout from its final answer and the episode's end state."""
        ...
