"""``AdapterEnv``: the shared skeleton of the environment adapters (Gymnasium, verifiers, OpenEnv;
docs/how-to/own-env.md).

An adapter wraps another framework's environment as a coevo ``Env``: it lists task items (a reset
seed, a dataset row), fixes each one's split by its position (``split_sizes``: train first, then
val, then test, so a larger ``size`` only appends), and scores a finished episode through the
framework's own reward. It has no gold answer to reveal, so the offline editor builds no
demonstration from its tasks (``coevo.roles.editor.demonstration_source``) and no task is sealed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from coevo.envs.base import REWARD_MODES, SPLITS, Episode, RewardMode, Score, Split, Task
from coevo.envs.baseline import constant_baseline
from coevo.envs.common import EnvRefError, check_split, dedupe, first_tasks, split_sizes, task_id


class AdapterEnv(ABC):
    """Base of the adapters: subclasses set ``name`` and implement ``_start`` (the prompt of a reset
    with a seed; or ``_items``, the task items in order, each ``(key, prompt, metadata)``), ``episode``
    and ``score``.

    ``size`` items are made; ``val_frac``/``test_frac`` of them go to val and test. Items whose
    ``_identity`` repeats an earlier one's are dropped (by default the prompt: two rows of the same
    text are one task; the Gymnasium adapter's also holds the env's state after its reset, so two
    reset seeds of a deterministic game are one task and those of a hidden-state game are not). A
    kept item whose prompt repeats an earlier one's gets an id that also names its key.
    ``reward``: ``correct`` (1 when the framework's success rule passes, else 0) or
    ``partial`` (the framework's reward scaled to [0, 1]) when ``partial_ok``; else ``ValueError``.
    """

    name = "adapter"
    partial_ok = False

    def __init__(self, size: int = 40, val_frac: float = 0.25, test_frac: float = 0.25,
                 reward: str = "correct") -> None:
        if reward not in REWARD_MODES or (reward == "partial" and not self.partial_ok):
            modes = "correct or partial" if self.partial_ok else "correct (this adapter has no partial credit)"
            raise EnvRefError(f"reward={reward!r} is not a reward mode of {self.name}; write reward={modes}")
        if size < 1:
            raise EnvRefError(f"size={size} must be >= 1")
        self.size, self.val_frac, self.test_frac = size, val_frac, test_frac
        self.reward_mode: RewardMode = reward  # type: ignore[assignment]
        self.config: dict[str, Any] = {"size": size, "val_frac": val_frac, "test_frac": test_frac, "reward": reward}
        self._splits: dict[Split, list[Task]] | None = None
        self._keys: dict[str, Any] = {}
        self._baselines: dict[tuple[str, int | None], dict[str, Any]] = {}

    def _items(self) -> list[tuple[Any, str, dict[str, Any]]]:
        """The ``size`` task items in order: ``(key, prompt, metadata)``; ``key`` is what ``episode``
        needs to start the item. The default: item ``i`` is a reset with seed ``seed * 100000 + i``
        (``reset_seeds``), its prompt and metadata from ``_start``."""
        return [(s, *self._start(s)) for s in self.reset_seeds()]

    def reset_seeds(self) -> list[int]:
        """The reset seed of each item: ``seed * 100000 + i`` for ``i < size`` (``seed``: the config's)."""
        return [int(self.config.get("seed", 0)) * 100_000 + i for i in range(self.size)]

    def _start(self, reset_seed: int) -> tuple[str, dict[str, Any]]:
        """The prompt and metadata of the item reset with ``reset_seed`` (adapters that reset by seed)."""
        raise NotImplementedError(f"{type(self).__name__} makes its items in _items")

    def _identity(self, item: tuple[Any, str, dict[str, Any]]) -> str:
        """What makes two items one task: their prompt (an adapter whose prompt may not reveal its hidden
        state, such as a reset seed's, adds that state)."""
        return item[1]

    def _sizes(self, items: list[tuple[Any, str, dict[str, Any]]]) -> dict[Split, int]:
        """How many of the deduplicated ``items`` (in order) each split takes: ``split_sizes`` of their
        number by default; an adapter whose items carry their own boundary (verifiers' eval rows) overrides it."""
        return split_sizes(len(items), self.val_frac, self.test_frac)

    def _ensure(self) -> dict[Split, list[Task]]:
        if self._splits is None:
            items = dedupe(self._items(), key=self._identity)
            sizes = self._sizes(items)
            bounds = {"train": (0, sizes["train"]), "val": (sizes["train"], sizes["train"] + sizes["val"]),
                      "test": (sizes["train"] + sizes["val"], len(items))}
            self._splits = {}
            prompts: set[str] = set()
            ids = []  # a prompt shared by two distinct items: the later one's id names its key too
            for key, prompt, _ in items:
                ids.append(task_id(self.name, prompt if prompt not in prompts else f"{prompt}\0{key!r}", self.config))
                prompts.add(prompt)
            for split in SPLITS:
                lo, hi = bounds[split]
                self._splits[split] = [Task(id=i, env=self.name, split=split, prompt=prompt, metadata=meta)
                                       for i, (_, prompt, meta) in zip(ids[lo:hi], items[lo:hi])]
                self._keys.update({t.id: key for t, (key, _, _) in zip(self._splits[split], items[lo:hi])})
        return self._splits

    def tasks(self, split: Split, n: int | None = None) -> list[Task]:
        """The first ``n`` tasks of ``split`` (all when None), deterministic for the config.
        Raises ``ValueError`` for an unknown split or a negative ``n``."""
        return first_tasks(self._ensure(), split, n)

    def key(self, task: Task) -> Any:
        """The item key of ``task``; ``KeyError`` when it is not one of this config's tasks."""
        self._ensure()
        if task.id not in self._keys:
            raise KeyError(f"task {task.id!r} does not belong to this {self.name} config {self.config}")
        return self._keys[task.id]

    def trivial_baseline(self, split: Split, n: int | None = None) -> dict[str, Any]:
        """The empty answer on fresh episodes where nothing was done (the score depends on the episode,
        not on a constant text answer): ``coevo.envs.baseline.constant_baseline``'s result."""
        key = (check_split(split), n)
        if key not in self._baselines:
            self._baselines[key] = constant_baseline(self, split, [], n)
        return self._baselines[key]

    def verdict(self, passed: bool, credit: float, detail: dict[str, Any]) -> Score:
        """The ``Score``: reward 1/0 on ``passed`` (``correct``) or ``credit`` clipped to [0, 1]
        (``partial``); ``detail["public"]`` gets the credit and the reward mode."""
        credit = min(max(float(credit), 0.0), 1.0)
        detail.setdefault("public", {}).update(credit=credit, reward_mode=self.reward_mode)
        return Score(reward=credit if self.reward_mode == "partial" else float(passed), passed=passed, detail=detail)

    @abstractmethod
    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode of ``task`` (see ``coevo.envs.base.Env``)."""

    @abstractmethod
    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """Score a finished rollout (see ``coevo.envs.base.Env``)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"
