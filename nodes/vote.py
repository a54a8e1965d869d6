"""The router's nodes (Harness-S Eq. 9-10, 12): ``fan_out_votes`` sends one ``vote`` per voter
(LangGraph ``Send``), each seeing the candidates in its own seeded shuffled order; ``tally``
combines the ballots (``coevo.roles.voter.combine``). The state and context are the router graph's
(``coevo.graphs.router``), not the meta loop's."""

from __future__ import annotations

import operator
import random
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Mapping, Sequence

from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from coevo.envs.base import Task
from coevo.meta.pool import Ballot, Profile
from coevo.roles.voter import Voter, combine


@dataclass
class RouterContext:
    """What the router's nodes are given: the ``voters`` (V in Eq. 9), the current ``profiles`` by
    harness id, the val tasks by id (for "similar tasks"), the ballot length, the seed of the
    per-call shuffles, and ``on_calls(calls)`` receiving the voters' LLM calls (for the archive)."""

    voters: Sequence[Voter]
    profiles: Mapping[str, Profile]
    val_tasks: Mapping[str, Task]
    ballot: int = 4
    seed: int = 0
    on_calls: Callable[[list[Any]], None] = field(default=lambda calls: None)


class RouterState(TypedDict, total=False):
    """One routing call: the ``task`` and ``candidates`` (replaced, input), the voters' ``ballots``
    (accumulated with ``operator.add``: the fan-in of the ``vote`` branches) and the ``ranking``
    (replaced by ``tally``: every candidate, best first)."""

    task: Task
    candidates: list[str]
    purpose: str
    ballots: Annotated[list[Ballot], operator.add]
    ranking: list[str]


class VoteRequest(TypedDict):
    """A ``Send`` payload: the task, the voter's index and the candidates in its shuffled order."""

    task: Task
    voter: int
    candidates: list[str]


def shuffled(candidates: Sequence[str], seed: int, task_id: str, voter: int, purpose: str = "") -> list[str]:
    """``candidates`` in the order voter ``voter`` sees them for ``task_id``: a shuffle seeded by
    (seed, task, voter, purpose), so each call gets its own order and a rerun the same one."""
    order = list(candidates)
    random.Random(f"{seed}/{task_id}/{voter}/{purpose}").shuffle(order)
    return order


def fan_out_votes(state: RouterState, runtime: Runtime[RouterContext]) -> list[Send]:
    """One ``vote`` branch per voter, each with its own shuffled candidate order."""
    ctx, task = runtime.context, state["task"]
    return [Send("vote", VoteRequest(task=task, voter=v, candidates=shuffled(state["candidates"], ctx.seed, task.id,
                                                                              v, state.get("purpose", ""))))
            for v in range(len(ctx.voters))]


def vote(request: VoteRequest, runtime: Runtime[RouterContext]) -> dict:
    """Voter ``request["voter"]``'s ballot; its LLM calls go to ``on_calls``."""
    ctx = runtime.context
    ballot, calls = ctx.voters[request["voter"]].vote(request["task"], request["candidates"], ctx.profiles,
                                                      ctx.val_tasks, ctx.ballot)
    ctx.on_calls(calls)
    return {"ballots": [ballot]}


def tally(state: RouterState, runtime: Runtime[RouterContext]) -> dict:
    """q(H|x) over the ballots (Eq. 9); ties by validation success, then id. Empty ballots (ignored
    replies) add nothing."""
    ctx = runtime.context
    success = {h: p.val_success for h, p in ctx.profiles.items()}
    return {"ranking": combine(state.get("ballots", []), state["candidates"], success, ctx.ballot)}
