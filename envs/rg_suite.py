"""The ``reasoning_gym`` suite: procedurally generated reasoning tasks (package ``reasoning-gym``)
answered in text, scored by each family's own ``score_answer`` on the answer the harness submits.
``reward=correct`` (the default) makes the reward 1 when ``score_answer`` gives full credit, else 0;
``reward=partial`` passes the family's partial credit on (e.g. chain_sum gives 0.8 to ``10000``
for gold ``1000``: the gold is a substring). The credit is in ``detail["public"]["credit"]`` either way.

Splits: for each family ONE dataset of ``size`` items is built from ``seed``, deduplicated by
question text (also across families), and cut by index ranges into train/val/test (see
``coevo.envs.common``). The default family is ``word_sorting``: families where a constant answer
wins (``coin_flip``, ``letter_counting``, ``gcd``: a constant scores well there) are allowed but never defaults, and
``trivial_baseline`` measures the effect for any config.

Reference: ``reasoning_gym:families=word_sorting+chain_sum,size=100,seed=0,tools=python+calculator``
(add ``reward=partial`` for partial credit).
Family options pass through as ``<family>.<option>=value`` (e.g. ``word_sorting.max_words=6``).
"""

from __future__ import annotations

import math
from typing import Any

from coevo.envs.base import Episode, Score, Split, Task
from coevo.envs.baseline import GENERIC_CONSTANTS, common_answers
from coevo.envs.calculator import calculator_tool
from coevo.envs.common import EnvRefError, as_list, cut_splits, dedupe, round_robin, task_id
from coevo.envs.sandbox import python_tool
from coevo.envs.suite import Suite

DEFAULT_FAMILIES = ("word_sorting",)
CONSTANT_PRONE = ("coin_flip", "letter_counting", "gcd")
TOOLS = ("python", "calculator")


class ReasoningGymEnv(Suite):
    """reasoning-gym tasks with text answers.

    ``families``: dataset names (``reasoning_gym.factory.DATASETS``); ``size``: items generated per
    family before dedupe; ``seed``: the dataset seed; ``val_frac``/``test_frac``: split fractions;
    ``tools``: any of ``python``, ``calculator`` (default none); ``python_timeout_s``,
    ``python_memory_mb``: Python tool limits; ``reward``: ``correct`` or ``partial`` (module doc).
    Raises ``ValueError`` for an unknown family, tool, option or reward mode.
    """

    name = "reasoning_gym"

    def __init__(self, families: Any = DEFAULT_FAMILIES, size: int = 100, seed: int = 0, val_frac: float = 0.2,
                 test_frac: float = 0.2, tools: Any = (), python_timeout_s: float = 5.0, python_memory_mb: int = 512,
                 reward: str = "correct", **family_options: Any) -> None:
        super().__init__(reward)
        from reasoning_gym.factory import DATASETS

        fams = as_list(families)
        unknown = [f for f in fams if f not in DATASETS]
        if not fams or unknown:
            raise EnvRefError(f"unknown reasoning-gym families {unknown or fams}; known: {sorted(DATASETS)}")
        tool_names = as_list(tools)
        if bad := [t for t in tool_names if t not in TOOLS]:
            raise EnvRefError(f"unknown tools {bad}; choose from {list(TOOLS)}")
        if int(size) < 1:
            raise EnvRefError(f"size={size} must be >= 1")
        options: dict[str, dict[str, Any]] = {f: {} for f in fams}
        for key, value in family_options.items():
            fam, dot, opt = key.partition(".")
            if not dot or fam not in options:
                raise EnvRefError(f"unknown option {key!r}; family options are written <family>.<option> "
                                  f"with a family from {fams}")
            options[fam][opt] = value
        self.families, self.size, self.seed = fams, int(size), int(seed)
        self.val_frac, self.test_frac = float(val_frac), float(test_frac)
        self.tool_names, self.options = tool_names, options
        self.python_timeout_s, self.python_memory_mb = float(python_timeout_s), int(python_memory_mb)
        self.config = {"families": fams, "size": self.size, "seed": self.seed, "val_frac": self.val_frac,
                       "test_frac": self.test_frac, "tools": tool_names, "options": options, "reward": self.reward_mode}
        self._datasets: dict[str, Any] = {}
        self._entries: dict[str, tuple[str, dict[str, Any]]] = {}

    def _build(self) -> dict[Split, list[Task]]:
        import reasoning_gym

        seen: set[str] = set()
        per_split: dict[Split, list[list[Task]]] = {"train": [], "val": [], "test": []}
        for fam in self.families:
            ds = reasoning_gym.create_dataset(fam, size=self.size, seed=self.seed, **self.options[fam])
            self._datasets[fam] = ds
            entries = dedupe([ds[i] for i in range(len(ds))], key=lambda e: e["question"], seen=seen)
            for split, chunk in cut_splits(entries, self.val_frac, self.test_frac).items():
                tasks = []
                for entry in chunk:
                    tid = task_id(self.name, f"{fam}\n{entry['question']}", self.config)
                    meta = {"family": fam, "index": entry.get("metadata", {}).get("source_index")}
                    tasks.append(Task(id=tid, env=self.name, split=split, prompt=entry["question"], metadata=meta))
                    self._entries[tid] = (fam, entry)
                    self._gold[tid] = entry["answer"]
                per_split[split].append(tasks)
        return {s: round_robin(groups) for s, groups in per_split.items()}

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode: the configured tools (stateless; each Python call is its own process)."""
        self._known(task)
        tools = []
        if "python" in self.tool_names:
            tools.append(python_tool(self.python_timeout_s, self.python_memory_mb))
        if "calculator" in self.tool_names:
            tools.append(calculator_tool())
        return Episode(task=task, tools=tools)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """``score_entry`` on the task's item."""
        self._known(task)
        return self.score_entry(*self._entries[task.id], answer)

    def suite_score(self, task: Task, reply: str) -> Score | None:
        """reasoning-gym's own reading of a raw ``reply``: ``extract_answer`` (the last
        ``<answer>...</answer>`` span; no tag: no answer) scored by ``score_entry``."""
        from reasoning_gym.utils import extract_answer

        self._known(task)
        return self.score_entry(*self._entries[task.id], extract_answer(reply))

    def score_entry(self, fam: str, entry: dict[str, Any], answer: str | None) -> Score:
        """The family's ``score_answer`` on ``answer`` (unchanged) for a reasoning-gym item
        ``entry`` (``question``, ``answer``, ``metadata``): its credit clipped to [0, 1], ``passed``
        when the credit is 1, the reward per ``reward_mode``.

        A verifier that raises scores 0 with the exception in ``detail["error"]`` and
        ``detail["public"]["verifier_error"]`` (its type). Raises ``KeyError`` for a family this
        suite was not built with (after ``tasks``).
        """
        self._ensure()
        public: dict[str, Any] = {"family": fam, "verifier_error": None}
        detail: dict[str, Any] = {"expected": entry["answer"], "got": answer, "public": public}
        try:
            reward = float(self._datasets[fam].score_answer(answer, entry))
        except Exception as err:  # a malformed answer must not crash the run
            public["verifier_error"] = type(err).__name__
            detail["error"] = f"{type(err).__name__}: {err}"
            reward = 0.0
        if math.isnan(reward):
            reward = 0.0
        return self.verdict(reward, reward >= 1.0, detail)

    def constant_candidates(self, split: Split) -> list[str]:
        """The 5 most common gold answers of the TRAIN split (so no val/test answer is ever printed
        as a baseline) plus generic constants ("0", "1", "yes", ...)."""
        golds = [self._gold[t.id] for t in self._ensure()["train"]]
        return list(dict.fromkeys(common_answers(golds) + list(GENERIC_CONSTANTS)))
