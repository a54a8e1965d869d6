"""``Suite``: the shared skeleton of coevo's built-in envs (lazy split building, task lookup,
trivial baselines, answer display for the CLI). A third-party env only needs the ``Env`` protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from coevo.envs.base import (
    REWARD_MODES,
    SPLITS,
    Episode,
    RewardMode,
    Score,
    Split,
    Task,
)
from coevo.envs.baseline import GENERIC_CONSTANTS, constant_baseline
from coevo.envs.common import EnvRefError, check_split, first_tasks


class Suite(ABC):
    """Base class: subclasses set ``name`` and implement ``_build`` (all splits at once, filling
    ``self._gold``), ``episode`` and ``score``.

    ``config`` is the suite's normalised configuration (shown by ``coevo envs show``);
    ``reward_mode`` what ``Score.reward`` is: ``correct`` (1 when passed, else 0; the default) or
    ``partial`` (the checker's partial credit). Raises ``ValueError`` for another reward mode.
    """

    name = "suite"

    def __init__(self, reward: str = "correct") -> None:
        if reward not in REWARD_MODES:
            raise EnvRefError(f"reward={reward!r} is not a reward mode; write reward=correct (1 when the checker "
                              "passes the answer, else 0; the default) or reward=partial (the checker's partial "
                              "credit)")
        self.reward_mode: RewardMode = reward  # type: ignore[assignment]
        self.config: dict[str, Any] = {}
        self._splits: dict[Split, list[Task]] | None = None
        self._by_id: dict[str, Task] = {}
        self._gold: dict[str, Any] = {}
        self._baselines: dict[tuple[str, int | None], dict[str, Any]] = {}

    @abstractmethod
    def _build(self) -> dict[Split, list[Task]]:
        """Build every split's tasks (and fill ``_gold``) once."""

    def _ensure(self) -> dict[Split, list[Task]]:
        if self._splits is None:
            self._splits = self._build()
            self._by_id = {t.id: t for s in SPLITS for t in self._splits[s]}
        return self._splits

    def tasks(self, split: Split, n: int | None = None) -> list[Task]:
        """The first ``n`` tasks of ``split`` (all when ``None``), deterministic for the config.

        Raises ``ValueError`` for an unknown split or a negative ``n``.
        """
        return first_tasks(self._ensure(), split, n)

    def _known(self, task: Task) -> Any:
        self._ensure()
        if task.id not in self._gold:
            raise KeyError(f"task {task.id!r} does not belong to this {self.name} config {self.config}")
        return self._gold[task.id]

    def reveal(self, task: Task) -> str:
        """The gold answer as text, for people only (``coevo envs show --reveal``); never give it to
        a policy or a meta role."""
        return str(self._known(task))

    def constant_candidates(self, split: Split) -> list[str]:
        """Constant answers tried by ``trivial_baseline`` (beside the empty answer)."""
        return list(GENERIC_CONSTANTS)

    def trivial_baseline(self, split: Split, n: int | None = None) -> dict[str, Any]:
        """Best single constant answer and the empty answer on ``split`` (first ``n`` tasks):
        ``{"n", "empty", "best_constant": (answer, mean reward), "constants"}``. Computed once per
        (split, n) and remembered."""
        key = (check_split(split), n)
        if key not in self._baselines:
            self._baselines[key] = constant_baseline(self, split, self.constant_candidates(split), n)
        return self._baselines[key]

    def verdict(self, credit: float, passed: bool, detail: dict[str, Any]) -> Score:
        """The ``Score`` of a checker's ``credit`` (clipped to [0, 1]) and pass/fail per
        ``reward_mode``; ``detail["public"]`` gets ``credit`` and ``reward_mode``."""
        credit = min(max(float(credit), 0.0), 1.0)
        detail.setdefault("public", {}).update(credit=credit, reward_mode=self.reward_mode)
        reward = credit if self.reward_mode == "partial" else float(passed)
        return Score(reward=reward, passed=passed, detail=detail)

    @abstractmethod
    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode of ``task`` (see ``coevo.envs.base.Env``)."""

    @abstractmethod
    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Score a finished rollout (see ``coevo.envs.base.Env``)."""

    def suite_score(self, task: Task, reply: str) -> Score | None:
        """What the suite's own evaluation gives a model's raw final ``reply`` (no harness parsing or
        transformation), for stating parity beside coevo's score; None when the suite cannot score
        a reply on its own (the default; e.g. a multi-turn task needs its episode)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"
