"""The ``showcase`` suite: price look-ups generated from a seed, where SmolLM2-135M starts off the floor
and both levers have measured room (README "The showcase suite"; ``benchmarks/showcase_suite.py``).

A task lists ``items`` fruits with a two-digit price each and asks for one of them::

    Prices: plum 63, apple 50, mango 10, lemon 37, fig 88. What does the mango cost?

The answer is the asked item's price (``10``), checked exactly (1/0). The base harness
(``harnesses/base/showcase.json``) shows four answered look-ups as demonstrations. Under it the small
policy answers in the right format but often copies the wrong price (the last one listed, or one from a
demonstration): the offline curator reads those failures as ``value:operand``, a harness edit can show
the model how to find the price (``demo_quote_evidence``: each demonstration first quotes the asked
item with its price), and a weight stage can reward picking the asked item's price.

Splits: ``size`` distinct prompts are drawn from ``seed`` and cut by index into train, val and test
(``val_frac``, ``test_frac``), so no prompt is in two splits. The trivial baselines are the best
constant answer (``Suite.trivial_baseline``; prices are spread over 10-99) and, reported beside it by
``benchmarks/showcase_suite.py``, the positional policies (always the first or the last price: 1/items).

Reference: ``showcase:size=1500,seed=0,items=5``.
"""

from __future__ import annotations

import random
from typing import Any

from coevo.envs.base import Episode, Score, Split, Task
from coevo.envs.baseline import common_answers
from coevo.envs.common import EnvRefError, cut_splits, task_id
from coevo.envs.suite import Suite

ITEMS = ("apple", "pear", "fig", "kiwi", "plum", "lime", "mango", "peach", "grape", "melon", "lemon", "cherry",
         "olive", "date", "guava", "berry")
"""The item names a task draws from."""


def lookup_task(rng: random.Random, items: int) -> tuple[str, str, int]:
    """One look-up drawn from ``rng``: (prompt, answer, position of the asked item, 0-based)."""
    names = rng.sample(ITEMS, items)
    prices = [rng.randint(10, 99) for _ in names]
    asked = rng.randrange(items)
    listed = ", ".join(f"{name} {price}" for name, price in zip(names, prices, strict=True))
    return f"Prices: {listed}. What does the {names[asked]} cost?", str(prices[asked]), asked


class ShowcaseEnv(Suite):
    """Price look-ups (module doc). ``size``: distinct tasks drawn (all splits); ``seed``: the generator's
    seed; ``items``: prices listed per task (2-16); ``val_frac``/``test_frac``: split fractions;
    ``reward``: ``correct`` (1/0, the default) or ``partial`` (the same 1/0: the check is exact).
    Raises ``ValueError`` for a size below 3 or an item count outside 2-16."""

    name = "showcase"

    def __init__(self, size: int = 1500, seed: int = 0, items: int = 5, val_frac: float = 0.2,
                 test_frac: float = 0.2, reward: str = "correct") -> None:
        super().__init__(reward)
        if int(size) < 3:
            raise EnvRefError(f"showcase size={size}: write size=3 or more (one task per split at least)")
        if not 2 <= int(items) <= len(ITEMS):
            raise EnvRefError(f"showcase items={items}: write items=2 to {len(ITEMS)} (prices listed per task)")
        self.size, self.seed, self.items = int(size), int(seed), int(items)
        self.val_frac, self.test_frac = float(val_frac), float(test_frac)
        self.config = {"size": self.size, "seed": self.seed, "items": self.items, "val_frac": self.val_frac,
                       "test_frac": self.test_frac, "reward": self.reward_mode}
        self._position: dict[str, int] = {}

    def _build(self) -> dict[Split, list[Task]]:
        rng = random.Random(self.seed)
        drawn: dict[str, tuple[str, int]] = {}
        for _ in range(self.size * 100):  # ~16^5 distinct prompts at 5 items: duplicates are rare
            if len(drawn) == self.size:
                break
            prompt, answer, asked = lookup_task(rng, self.items)
            drawn.setdefault(prompt, (answer, asked))
        out: dict[Split, list[Task]] = {}
        for split, prompts in cut_splits(list(drawn), self.val_frac, self.test_frac).items():
            out[split] = []
            for prompt in prompts:
                answer, asked = drawn[prompt]
                task = Task(id=task_id(self.name, prompt, self.config), env=self.name, split=split, prompt=prompt,
                            metadata={"family": "lookup"})
                self._gold[task.id], self._position[task.id] = answer, asked  # both private: they give the answer
                out[split].append(task)
        return out

    def episode(self, task: Task, seed: int = 0) -> Episode:
        """A fresh episode: no tools (the prices are in the prompt)."""
        self._known(task)
        return Episode(task=task)

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        """1 when the stripped answer is the asked price exactly, else 0; the expected and submitted
        answers go to ``detail`` (train diagnostics only reach a meta role)."""
        gold = self._known(task)
        passed = answer is not None and answer.strip() == gold
        return self.verdict(float(passed), passed, {"expected": gold, "got": answer})

    def suite_score(self, task: Task, reply: str) -> Score | None:
        """The suite's own reading of a raw reply: the whole reply must be the price."""
        return self.score(task, reply, Episode(task=task))

    def constant_candidates(self, split: Split) -> list[str]:
        """The 5 most common gold answers of the TRAIN split and "0"/"1" (no val/test answer is printed)."""
        golds = [self._gold[t.id] for t in self._ensure()["train"]]
        return list(dict.fromkeys([*common_answers(golds), "0", "1"]))

    def positional_baseline(self, split: Split, n: int | None = None) -> dict[str, Any]:
        """The pass rates of the policies that always answer the first or the last listed price on the first
        ``n`` tasks of ``split``: ``{"first": rate, "last": rate, "n": tasks}`` (about 1/items each)."""
        tasks = self.tasks(split, n)
        first = sum(self._position[t.id] == 0 for t in tasks)
        last = sum(self._position[t.id] == self.items - 1 for t in tasks)
        return {"first": first / max(1, len(tasks)), "last": last / max(1, len(tasks)), "n": len(tasks)}
