"""The weight stages of Harness-S's comparison variants ("Learning from Sibling Harnesses for
Generalizable Agent Training"; docs/papers.md, Table 1, Table 2 and App. 8 "Implementation of Comparison
Variants"); each differs from ``rescue_train`` (Alg. 1, Eq. 5 with the router's top-K) in one thing only:

- ``h0_rescue_train`` — "GRPO (H0 rescue)": an all-failure group under H0 is replaced by K fresh
  rollouts under H0 itself (same trigger and per-task allocation as Harness-S, no sibling).
- ``random_rescue_train`` — Table 2's "Random Harness": the rescue group's harnesses are pool
  members drawn at random (seeded per run, round and task) instead of the router's top-K.
- ``mixed_train`` — "GRPO Mixed Harness (DSH H0 + Top-4)": every group, from its first rollout,
  mixes H0 with a fixed set of selected siblings (half the group under H0, one rollout under each
  sibling: 4 + 4 at K = 8), "without waiting for an all-failure base group"; no rescue.
"""

from __future__ import annotations

import random

from langgraph.runtime import Runtime

from coevo.envs.base import Task
from coevo.graphs.harness_s.routing import pool_ids
from coevo.graphs.harness_s.state import HarnessSState
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.context import MetaContext
from coevo.nodes.loop import run_stage
from coevo.training.harness_s import Mixture, routed


def _update(checkpoint: str, trajectories: list, stage) -> dict:
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


async def h0_rescue_train(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """One GRPO stage under H0 whose all-failure groups are re-rolled under H0 itself (App. 8: "the
    rescue control replaces an all-failure group with fresh H0 rollouts using the same per-task
    allocation as Harness-S"): K fresh attempts with new seeds. Returns ``train``'s update."""
    ctx = runtime.context
    h0 = ctx.spec(state["incumbent"])

    async def itself(task: Task, k: int) -> list[str]:
        return [h0.id]

    return _update(*await run_stage(ctx, state, h0, state["checkpoint"], routed(ctx.config.train, [h0], itself)))


def random_pick(ids: list[str], seed: int, round: int, task_id: str, k: int) -> list[str]:
    """At most ``k`` distinct harness ids of ``ids`` drawn uniformly at random, the draw seeded by
    (``seed``, ``round``, ``task_id``) so a resumed stage draws the same (Table 2's Random Harness)."""
    drawn = list(ids)
    random.Random(f"{seed}:{round}:{task_id}").shuffle(drawn)
    return drawn[:k]


async def random_rescue_train(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """Harness-S's weight stage (Eq. 5) with the rescue group's siblings drawn at random from the
    pool, H0 excluded (``random_pick``: ``harness_s.rescue_k`` of them, 0: K), in place of the
    router's top-K (Table 2's "Random Harness"). Returns ``train``'s update."""
    ctx = runtime.context
    h0 = state["start_harness"]
    siblings = [ctx.spec(h) for h in pool_ids(state) if h != h0]
    ids, rnd = [s.id for s in siblings], state.get("round", 0)

    async def drawn(task: Task, k: int) -> list[str]:
        return random_pick(ids, ctx.config.seed, rnd, task.id, ctx.config.harness_s.rescue_k or k)

    return _update(*await run_stage(ctx, state, ctx.spec(state["incumbent"]), state["checkpoint"],
                                    routed(ctx.config.train, siblings, drawn)))


def mixture_members(state: HarnessSState, group: int) -> list[str]:
    """The fixed mixture's siblings: the ``group - group // 2`` pool members other than H0 with the
    highest val success in the current profiles (ties: earlier in the pool), selected once, at the
    first stage, and kept (``state["mixture"]``: "The same mixture is used across training tasks ...
    throughout training")."""
    if state.get("mixture") is not None:
        return list(state["mixture"])
    profiles, h0 = state.get("profiles", {}), state["start_harness"]
    order = [h for h in pool_ids(state) if h != h0]
    ranked = sorted(order, key=lambda h: (-(profiles[h].val_success if h in profiles else 0.0), order.index(h)))
    return ranked[: group - group // 2]


def mixture_positions(h0: HarnessSpec, siblings: list[HarnessSpec], group: int) -> list[HarnessSpec]:
    """A group's harness by position: ``group // 2`` under H0, then the siblings in turn (cycled)
    for the rest; all under H0 when there is no sibling."""
    if not siblings:
        return [h0] * group
    return [h0] * (group // 2) + [siblings[i % len(siblings)] for i in range(group - group // 2)]


async def mixed_train(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """One GRPO stage whose every group mixes H0 with the fixed selected siblings
    (``mixture_members``, ``mixture_positions``; App. 8 "Fixed mixed-harness GRPO"), with no
    rescue; evaluation stays under H0. Returns ``train``'s update and the ``mixture``."""
    ctx = runtime.context
    group = ctx.config.train.num_generations
    h0 = ctx.spec(state["incumbent"])
    chosen = mixture_members(state, group)
    positions = mixture_positions(h0, [ctx.spec(h) for h in chosen], group)
    if state.get("mixture") is None:
        ctx.log("train", f"mixture: {group // 2 if chosen else group} x H0 + "
                         f"{', '.join(h[:12] for h in chosen) or 'no sibling (the pool has none)'}")
    update = _update(*await run_stage(ctx, state, h0, state["checkpoint"], Mixture(positions=tuple(positions))))
    return {**update, "mixture": chosen}
