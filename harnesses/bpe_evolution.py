"""EvoHarness-RL's harness evolution, offline (arXiv:2608.05446, its
abstract: "progress updates and experience consolidation
refine the harness into a compact, task-adaptive state substrate"). The abstract gives no
algorithm; the two below are coevo's choice, pure functions the evoharness_rl nodes call:

- ``summarise_lessons``: experience summarisation at consolidation. Lessons equal up to case and
  whitespace are kept once (``coevo.harnesses.bpe.merge_lessons``); then *near* duplicates, whose
  word sets overlap by Jaccard >= ``NEAR_DUPLICATE``, merge into the newer one; then the newest
  ``cap`` are kept.
- ``refined_schema``: the progress schema, the subgoals done in at least ``min_support``
  successful rollouts (or tasks), most frequent first (``BPE.progress_schema``).
- ``mentions``: whether an entry holds a gold answer, which no lesson or schema entry may carry
  (a train task's answer would reach that task when it is trained on again).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

from coevo.harnesses.bpe import entry_key, merge_lessons

NEAR_DUPLICATE = 0.6
"""Two lessons whose word sets have Jaccard similarity >= this are one lesson said twice (e.g.
"open the drawer before taking the key" / "open the drawer before you take the key": 5/8 = 0.625).
coevo's choice: low enough to fold rewordings, high enough that lessons sharing only a few common
words ("the", "key") stay apart."""


def words(text: str) -> frozenset[str]:
    """The word set of ``text`` after the lessons' normalisation (case folded, whitespace collapsed):
    its ``\\w+`` runs."""
    return frozenset(re.findall(r"\w+", entry_key(text)))


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts, |A ∩ B| / |A ∪ B| over ``words`` (0.0 when both
    have no words)."""
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def summarise_lessons(existing: Sequence[str], new: Sequence[str], cap: int,
                      threshold: float = NEAR_DUPLICATE) -> tuple[list[str], int]:
    """Offline experience summarisation (module doc): ``existing`` then ``new`` lessons, exact
    duplicates kept once (``merge_lessons``), then each lesson, oldest first, replaces the kept
    lesson most similar to it when their ``jaccard`` >= ``threshold``. The *newer* wording is kept,
    at the newer position, as ``merge_lessons`` keeps an exact duplicate: a later lesson comes from a
    policy trained longer and the cap keeps the newest anyway. Then the newest ``cap`` are kept.
    Returns (the kept lessons oldest first, how many input lessons were merged into another: exact
    and near duplicates). Raises ``ValueError`` when ``cap < 1`` or ``threshold`` is not in (0, 1]."""
    if cap < 1 or not 0.0 < threshold <= 1.0:
        raise ValueError(f"summarise_lessons: cap must be >= 1 and threshold in (0, 1], got {cap}, {threshold}")
    given = [lesson for lesson in [*existing, *new] if entry_key(lesson)]
    kept: list[str] = []
    for lesson in merge_lessons([], given, max(len(given), 1)):
        scores = [jaccard(lesson, k) for k in kept]
        if scores and max(scores) >= threshold:
            kept.pop(scores.index(max(scores)))
        kept.append(lesson)
    return kept[-cap:], len(given) - len(kept)


def grounded(lesson: str, sources: Sequence[str], share: float = 0.5) -> bool:
    """Whether ``lesson`` is made of its ``sources``' words: at least ``share`` of its ``words``
    occur in theirs (an LLM summary may reword and join lessons, not invent them)."""
    mine, theirs = words(lesson), frozenset[str]().union(*map(words, sources))
    return bool(mine) and len(mine & theirs) >= share * len(mine)


def refined_schema(done: Sequence[Sequence[str]], cap: int, min_support: int = 2,
                   tasks: Sequence[str] | None = None, max_chars: int | None = None) -> list[str]:
    """The refined progress schema: from the ``done`` subgoals of each successful rollout (one list
    per rollout; a subgoal counted once per rollout, up to case and whitespace), those done in at
    least ``min_support`` rollouts, most rollouts first (ties: first seen first), each in its first
    seen wording (whitespace collapsed, cut to ``max_chars`` when given), at most ``cap``. Empty when
    none is frequent enough. With ``tasks`` (each rollout's task id) support counts distinct tasks
    instead: a GRPO group plays one task many times, and a subgoal only one task's rollouts complete
    (its walkthrough step, its answer) is no schema for every task. Raises ``ValueError`` when
    ``tasks`` and ``done`` differ in length."""
    if tasks is not None and len(tasks) != len(done):
        raise ValueError(f"refined_schema: {len(tasks)} task ids for {len(done)} rollouts")
    support: Counter[str] = Counter()
    wording: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for i, subgoals in enumerate(done):
        keys = {}
        for s in subgoals:
            text = " ".join(s.split())[:max_chars].strip()
            if key := entry_key(text):
                keys.setdefault(key, text)
        for key, text in keys.items():
            wording.setdefault(key, text)
            unit = (tasks[i] if tasks is not None else str(i), key)
            support[key] += unit not in seen
            seen.add(unit)
    first = {key: i for i, key in enumerate(wording)}
    frequent = sorted((k for k, n in support.items() if n >= min_support), key=lambda k: (-support[k], first[k]))
    return [wording[k] for k in frequent[:cap]]


def mentions(text: str, answers: Iterable[str]) -> bool:
    """Whether ``text`` holds any of ``answers`` (gold answers) whole: compared as BPE entries are
    (``entry_key``: case folded, whitespace collapsed), not inside a longer word ("42" is in "say 42.",
    not in "step 420"); blank answers never match."""
    key = entry_key(text)
    return any(re.search(rf"(?<!\w){re.escape(a)}(?!\w)", key) for a in map(entry_key, answers) if a)
