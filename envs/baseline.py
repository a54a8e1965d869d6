"""Trivial-policy baselines: the best single constant answer and the empty answer: every
score is reported beside what a trivial policy gets (docs/design.md, Principles).

A gain that is really reward hacking shows up against these: on reasoning-gym 0.1.25 ``coin_flip``
gives full credit to "0" on ~90% of items, ``letter_counting`` 45% to "1". Each suite scores the
candidates through its own verifier, on fresh episodes where nothing was done.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from coevo.envs.base import Env, Split

GENERIC_CONSTANTS: tuple[str, ...] = ("0", "1", "2", "-1", "yes", "no", "true", "false", "True", "False", "None", "[]")


def common_answers(golds: Iterable[str], k: int = 5) -> list[str]:
    """The ``k`` most common gold answers (as strings), most common first."""
    return [a for a, _ in Counter(str(g) for g in golds).most_common(k)]


def constant_baseline(env: Env, split: Split, candidates: Iterable[str], n: int | None = None) -> dict[str, Any]:
    """Mean reward of each constant answer over the first ``n`` tasks of ``split``.

    Returns ``{"n": tasks, "empty": mean reward of "", "best_constant": (answer, mean reward),
    "constants": {answer: mean reward}}``; ties go to the earlier candidate.
    """
    tasks = env.tasks(split, n)
    cands = list(dict.fromkeys(["", *candidates]))
    means: dict[str, float] = {}
    for c in cands:
        total = 0.0
        for task in tasks:
            episode = env.episode(task, 0)
            try:
                total += env.score(task, c, episode).reward
            finally:
                episode.close()
        means[c] = total / len(tasks) if tasks else 0.0
    best = max((c for c in cands if c != ""), key=lambda c: means[c], default="")
    return {"n": len(tasks), "empty": means[""], "best_constant": (best, means.get(best, 0.0)), "constants": means}
