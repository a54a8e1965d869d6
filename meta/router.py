"""``Router``: the Harness-S adaptive router as a service (Eq. 9, 10, 12) over the router graph
(``coevo.graphs.router``): rescue asks it for the top-K siblings without H0 (Eq. 10), Rank-r
inference for the whole pool's order including H0 (Eq. 12). Each ballot is handed to ``on_votes``
with the routing's purpose and checkpoint (the meta loop archives them)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Callable, Mapping, Sequence

from coevo.envs.base import Task
from coevo.nodes.vote import RouterContext
from coevo.records import Ballot, Profile
from coevo.roles.voter import Voter


class Router:
    """Routes tasks over the pool ``profiles`` (harness id -> its profile at ``checkpoint_id``; the
    pool is their keys, H0 = ``h0`` among them) with ``voters``; ``val_tasks`` the val tasks by id;
    ``ballot`` the ballot length; ``seed`` the shuffles' seed; ``on_votes(ballots)`` and
    ``on_calls(llm_calls)`` receive every ballot and voter LLM call (default: dropped)."""

    def __init__(self, voters: Sequence[Voter], profiles: Mapping[str, Profile], val_tasks: Mapping[str, Task],
                 h0: str, ballot: int = 4, seed: int = 0, checkpoint_id: str = "",
                 on_votes: Callable[[list[Ballot]], None] | None = None,
                 on_calls: Callable[[list[Any]], None] | None = None) -> None:
        if h0 not in profiles:
            raise ValueError(f"the router's pool must hold H0 ({h0[:12]}); it has {[h[:12] for h in profiles]}")
        self.profiles, self.h0, self.checkpoint_id = dict(profiles), h0, checkpoint_id
        self.on_votes = on_votes or (lambda records: None)
        self.context = RouterContext(voters=list(voters), profiles=self.profiles, val_tasks=dict(val_tasks),
                                     ballot=ballot, seed=seed, on_calls=on_calls or (lambda calls: None))

    @property
    def pool(self) -> list[str]:
        """The pool's harness ids (H0 included), in profile order."""
        return list(self.profiles)

    async def rank(self, task: Task, include_h0: bool = True, purpose: str = "rank") -> list[str]:
        """Every candidate (the pool, less H0 unless ``include_h0``) ordered by q(H|x), best first
        (Eq. 9; ties by val success, then id). Archives each voter's ballot with ``purpose``."""
        from coevo.graphs.router import graph

        candidates = [h for h in self.pool if include_h0 or h != self.h0]
        if not candidates:
            return []
        # a routing call is a run of its own, not a checkpointed subgraph of the meta-loop node that
        # asks (its ballots are archived below): run it outside the caller's runnable context
        call = graph.ainvoke({"task": task, "candidates": candidates, "purpose": purpose}, context=self.context)
        out = await asyncio.get_running_loop().create_task(call, context=contextvars.Context())
        self.on_votes([b.model_copy(update={"checkpoint_id": self.checkpoint_id, "purpose": purpose})
                       for b in out.get("ballots", [])])
        return out["ranking"]

    async def top_k(self, task: Task, k: int) -> list[str]:
        """S_K(x) = TopK over the pool less H0 of q(H|x) (Eq. 10): at most ``k`` distinct siblings."""
        return (await self.rank(task, include_h0=False, purpose="rescue"))[:k]
