"""Router voters (Harness-S Eq. 9, App. 8): each returns a ranked ballot of at most ``ballot``
harness ids for one task, from the task, the current profiles, validation success rates and the
outcomes on similar validation tasks.

``RuleVoter`` is the paper's offline Rule Router (success on similar validation tasks, then overall
validation success, then id); ``CategoryVoter`` (gain over H0 in the task's category) and
``ProfileVoter`` (prefer/avoid entries naming the task's category) are rule voters with other
criteria, so the offline router has several voters as Eq. 9 intends. ``LLMVoter`` asks an
LLM (JSON schema, one repair); a reply that never validates is an empty ballot with its reason
(ignored by the tally, never a crash).
``combine`` is Eq. 9: q(H|x) = Σ_v ω(rank_v(H|x)), ω = 1, 3/4, 1/2, 1/4 for a ballot of 4 (ω(r) =
1 - (r - 1)/ballot, 0 when unlisted), ties broken by validation success, then by id.
An offline voter ranks only the candidates its criteria tell apart: its ballot stops before the first
tie, and a voter whose best candidates tie (no evidence: e.g. every profile at 0 val success) abstains
with that reason, so an id order never outweighs a voter that has evidence.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping, Sequence

from pydantic import BaseModel

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.meta.pool import Ballot, Profile
from coevo.meta.roles import Voter
from coevo.records import LLMCallRecord
from coevo.roles.diagnosis import task_category
from coevo.roles.llm import JsonRole, narrowed


def weight(rank: int, ballot: int) -> float:
    """ω(rank) of Eq. 9 for 1-based ``rank`` on a ballot of length ``ballot``: 1 - (rank-1)/ballot
    (1, 3/4, 1/2, 1/4 for 4), 0 for an unlisted candidate (rank 0 or > ballot)."""
    return 1.0 - (rank - 1) / ballot if 1 <= rank <= ballot else 0.0


def combine(ballots: Sequence[Ballot], candidates: Sequence[str], val_success: Mapping[str, float],
            ballot: int = 4) -> list[str]:
    """Eq. 9: ``candidates`` ordered by q(H|x) = Σ over ballots of ω(rank), best first; ties by
    validation success (higher first), then by id. Ballot entries that are not candidates and
    repeated entries are skipped (an entry counts at its first position)."""
    q = dict.fromkeys(candidates, 0.0)
    for b in ballots:
        seen: list[str] = []
        for h in b.ranking:
            if h in q and h not in seen:
                seen.append(h)
                q[h] += weight(len(seen), ballot)
    return sorted(candidates, key=lambda h: (-q[h], -val_success.get(h, 0.0), h))


def ranked(voter: str, task: Task, candidates: Sequence[str], key: Callable[[str], tuple], ballot: int) -> Ballot:
    """An offline voter's ballot: ``candidates`` sorted by ``key`` (criteria first, the id last), cut
    before the first group of candidates that tie on every criterion but the id, then to ``ballot``
    entries, so the id never decides a rank (the cut ones are unlisted: ω = 0). When the best
    candidates already tie, the ballot is an abstention: an empty ranking with its reason."""
    keys = {h: key(h) for h in candidates}
    order = sorted(candidates, key=keys.__getitem__)
    criteria = [keys[h][:-1] for h in order]
    cut = next((i for i, c in enumerate(criteria) if criteria.count(c) > 1), len(order))  # the first tie
    if cut == 0:
        return Ballot(voter=voter, task_id=task.id,
                      reason=f"abstains: its criteria tie for the best {criteria.count(criteria[0])} of "
                             f"{len(candidates)} candidates (no evidence between them)")
    return Ballot(voter=voter, task_id=task.id, ranking=order[:cut][:ballot])


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def similar(task: Task, val_tasks: Mapping[str, Task], m: int = 5) -> list[str]:
    """The ``m`` val task ids most similar to ``task`` (Jaccard overlap of their words; ties by id)."""
    words = _words(task.prompt)

    def overlap(t: Task) -> float:
        other = _words(t.prompt)
        return len(words & other) / len(words | other) if words | other else 0.0

    return sorted(val_tasks, key=lambda i: (-overlap(val_tasks[i]), i))[:m]


class RuleVoter:
    """The offline Rule Router (Harness-S App. 8): rank by success on the ``m`` most similar val
    tasks, then by overall val success, then by id."""

    name = "rule"

    def __init__(self, m: int = 5) -> None:
        self.m = m

    def vote(self, task: Task, candidates: Sequence[str], profiles: Mapping[str, Profile],
             val_tasks: Mapping[str, Task], ballot: int) -> tuple[Ballot, list[LLMCallRecord]]:
        """The ballot of ``task`` (see class doc); no LLM calls."""
        near = similar(task, val_tasks, self.m)

        def key(h: str) -> tuple[float, float, str]:
            p = profiles.get(h)
            local = [p.per_task[t] for t in near if p and t in p.per_task]
            return (-(sum(local) / len(local) if local else 0.0), -(p.val_success if p else 0.0), h)

        return ranked(self.name, task, candidates, key, ballot), []


class CategoryVoter:
    """An offline voter with another criterion (Harness-S App. 8's per-category profiles): rank by
    the sibling's gain over H0 on the val tasks of the task's category (``Profile.categories``:
    sibling passes - H0 passes, over n), then by overall val success, then by id."""

    name = "category"

    def vote(self, task: Task, candidates: Sequence[str], profiles: Mapping[str, Profile],
             val_tasks: Mapping[str, Task], ballot: int) -> tuple[Ballot, list[LLMCallRecord]]:
        """The ballot of ``task`` (see class doc); no LLM calls."""
        category = task_category(task)

        def key(h: str) -> tuple[float, float, str]:
            p = profiles.get(h)
            n, a, b = (p.categories.get(category) if p else None) or [0, 0, 0]
            return (-((a - b) / n if n else 0.0), -(p.val_success if p else 0.0), h)

        return ranked(self.name, task, candidates, key, ballot), []


class ProfileVoter:
    """An offline voter that reads the profile entries (Harness-S Eq. 8): a sibling with a prefer
    entry whose condition names the task's category ranks first, one with an avoid entry for it
    last; then fewer avoid entries overall, then val success, then id."""

    name = "profile"

    def vote(self, task: Task, candidates: Sequence[str], profiles: Mapping[str, Profile],
             val_tasks: Mapping[str, Task], ballot: int) -> tuple[Ballot, list[LLMCallRecord]]:
        """The ballot of ``task`` (see class doc); no LLM calls."""
        category = task_category(task)

        def key(h: str) -> tuple[int, int, float, str]:
            p = profiles.get(h)
            if p is None:
                return (0, 0, 0.0, h)
            here = (sum(category in e.when for e in p.prefer) - sum(category in e.when for e in p.avoid))
            return (-here, len(p.avoid), -p.val_success, h)

        return ranked(self.name, task, candidates, key, ballot), []


class BallotReply(BaseModel):
    """An LLM voter's reply: candidate ids, best first."""

    ranking: list[str]


class LLMVoter(JsonRole):
    """A voter as an LLM (see module doc). The reply must list distinct candidate ids, at
    most ``ballot`` of them; otherwise it is repaired once, then ignored with its reason."""

    role = "voter"

    def __init__(self, model: str, name: str = "llm", **kw: Any) -> None:
        super().__init__(model, **kw)
        self.name = name

    def vote(self, task: Task, candidates: Sequence[str], profiles: Mapping[str, Profile],
             val_tasks: Mapping[str, Task], ballot: int) -> tuple[Ballot, list[LLMCallRecord]]:
        """The ballot of ``task`` (see class doc)."""
        near = similar(task, val_tasks)
        shown = [{"id": h, "val_success": round(profiles[h].val_success, 3) if h in profiles else None,
                  "prefer": [e.model_dump() for e in profiles[h].prefer] if h in profiles else [],
                  "avoid": [e.model_dump() for e in profiles[h].avoid] if h in profiles else [],
                  "similar_val_outcomes": {t: profiles[h].per_task.get(t) for t in near} if h in profiles else {}}
                 for h in candidates]

        def check(reply: BallotReply) -> None:
            unknown = [h for h in reply.ranking if h not in candidates]
            if unknown or len(set(reply.ranking)) != len(reply.ranking) or len(reply.ranking) > ballot:
                raise ValueError(f"ranking must list at most {ballot} distinct candidate ids; "
                                 f"unknown: {unknown[:3]}")

        system = (f"You route a task to the agent harness most likely to solve it. Rank at most {ballot} candidate "
                  "ids, best first, using their profiles, validation success and outcomes on similar tasks.")
        user = json.dumps({"task": task.prompt[:800], "candidates": shown}, indent=1)
        fmt = narrowed(BallotReply, ranking={"items": {"enum": list(candidates)}, "maxItems": ballot})
        reply = self.ask(system, user, BallotReply, check, fmt if candidates else None)
        if reply.value is None:
            return Ballot(voter=self.name, task_id=task.id, reason=reply.reason, kind="llm"), reply.calls
        return Ballot(voter=self.name, task_id=task.id, ranking=reply.value.ranking, kind="llm"), reply.calls


def voters_for(config: RunConfig, env: Env) -> list[Voter]:
    """The run's voters: the offline rule voters with different criteria (``RuleVoter``,
    ``CategoryVoter``, ``ProfileVoter``) when ``meta.model == "offline"``, else ``harness_s.voters``
    LLM voters (V in Eq. 9)."""
    if config.meta.model == "offline":
        return [RuleVoter(), CategoryVoter(), ProfileVoter()]
    return [LLMVoter(config.meta.model, name=f"llm{v}", temperature=config.meta.temperature)
            for v in range(config.harness_s.voters)]
