"""The Harness-S router (Eq. 9-10, 12) as a LangGraph graph and as a service::

    START -> vote x V (Send, one per voter, each with its own shuffled candidates) -> tally -> END

``fan_out_votes`` sends one ``vote`` per voter, each seeing the candidates in its own seeded
shuffled order; ``tally`` combines the ballots (``coevo.roles.voter.combine``). The state and
context are the router graph's, not the meta loop's. ``Router`` runs the graph for a task: rescue
asks it for the top-K siblings without H0 (Eq. 10), Rank-r inference for the whole pool's order
including H0 (Eq. 12). Each ballot is handed to ``on_votes`` as a ``Ballot`` (the meta loop
archives them)."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import operator
import random
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Mapping, Sequence

from langgraph.graph import END, START, StateGraph
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


def build() -> StateGraph:
    """The router's wiring (uncompiled): voters fan out with ``Send``, ``tally`` combines their ballots."""
    builder = StateGraph(RouterState, context_schema=RouterContext)
    builder.add_node("vote", vote)
    builder.add_node("tally", tally)
    builder.add_conditional_edges(START, fan_out_votes, ["vote"])
    builder.add_edge("vote", "tally")
    builder.add_edge("tally", END)
    return builder




def ballot_id(checkpoint_id: str, purpose: str, task_id: str, n: int, i: int, voter: str) -> str:
    """A ballot's id (32 hex): the ``i``-th ballot (voter ``voter``) of this router's ``n``-th routing of
    ``task_id`` for ``purpose`` at ``checkpoint_id``. The same routings in the same order give the same
    ids, so a stage that runs again after a kill (a fresh router) replaces its earlier attempt's ballots
    in the archive instead of adding to them."""
    key = "\0".join((checkpoint_id, purpose, task_id, str(n), str(i), voter))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class Router:
    """Routes tasks over the pool ``profiles`` (harness id -> its profile at ``checkpoint_id``; the
    pool is their keys, H0 = ``h0`` among them) with ``voters``; ``val_tasks`` the val tasks by id;
    ``ballot`` the ballot length; ``seed`` the shuffles' seed; ``on_votes(records)`` and
    ``on_calls(llm_calls)`` receive every ballot (its id from ``ballot_id``) and voter LLM call
    (default: dropped)."""

    def __init__(self, voters: Sequence[Voter], profiles: Mapping[str, Profile], val_tasks: Mapping[str, Task],
                 h0: str, ballot: int = 4, seed: int = 0, checkpoint_id: str = "",
                 on_votes: Callable[[list[Ballot]], None] | None = None,
                 on_calls: Callable[[list[Any]], None] | None = None) -> None:
        if h0 not in profiles:
            raise ValueError(f"the router's pool must hold H0 ({h0[:12]}); it has {[h[:12] for h in profiles]}")
        self.profiles, self.h0, self.checkpoint_id = dict(profiles), h0, checkpoint_id
        self.on_votes = on_votes or (lambda records: None)
        self._routed: dict[tuple[str, str], int] = {}  # (purpose, task id) -> routings so far
        self.context = RouterContext(voters=list(voters), profiles=self.profiles, val_tasks=dict(val_tasks),
                                     ballot=ballot, seed=seed, on_calls=on_calls or (lambda calls: None))

    @property
    def pool(self) -> list[str]:
        """The pool's harness ids (H0 included), in profile order."""
        return list(self.profiles)

    async def rank(self, task: Task, include_h0: bool = True, purpose: str = "rank") -> list[str]:
        """Every candidate (the pool, less H0 unless ``include_h0``) ordered by q(H|x), best first
        (Eq. 9; ties by val success, then id). Archives each voter's ballot with ``purpose``."""
        candidates = [h for h in self.pool if include_h0 or h != self.h0]
        if not candidates:
            return []
        # a routing call is a run of its own, not a checkpointed subgraph of the meta-loop node that
        # asks (its ballots are archived below): run it outside the caller's runnable context
        call = graph.ainvoke({"task": task, "candidates": candidates, "purpose": purpose}, context=self.context)
        out = await asyncio.get_running_loop().create_task(call, context=contextvars.Context())
        n = self._routed[(purpose, task.id)] = self._routed.get((purpose, task.id), -1) + 1
        self.on_votes([b.model_copy(update={"checkpoint_id": self.checkpoint_id, "purpose": purpose,
                                            "id": ballot_id(self.checkpoint_id, purpose, task.id, n, i, b.voter)})
                       for i, b in enumerate(out.get("ballots", []))])
        return out["ranking"]

    async def top_k(self, task: Task, k: int) -> list[str]:
        """S_K(x) = TopK over the pool less H0 of q(H|x) (Eq. 10): at most ``k`` distinct siblings."""
        return (await self.rank(task, include_h0=False, purpose="rescue"))[:k]


graph = build().compile(name="router")
