"""Harness-S directional evolution, the steps before ``edit``/``check`` (§3.2, Eq. 2, Table 8).

``sample_parents``: each parent H in P_g runs the train tasks once with the frozen policy (fresh
seeds per round); ``curate_briefs``: the curator groups each parent's failures by root cause, related
causes are merged 2-3 at a time into candidate briefs (each cause keeps >= ``meta.min_failed_tasks``
distinct failed tasks), the round's proposal budget ``harness_s.proposals[g]`` is spread over the
parents, and every brief names the other candidates' causes so that edits seek different
mechanisms; ``fan_out_briefs`` sends one ``edit`` per brief with its parent as the incumbent.
"""

from __future__ import annotations

from itertools import zip_longest

from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.meta.context import MetaContext, services
from coevo.meta.pool import Brief
from coevo.meta.state import RESET, Direction, EditRequest, MetaState
from coevo.nodes.train import stage_tasks
from coevo.records import Trajectory


async def sample_parents(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Train trajectories of every parent of evolution round g (``state["parents"]``, default [H0])
    under the frozen checkpoint: one rollout per train task no demonstration answers, base seed
    ``seed + 1000 * g``. Returns ``train_trajectories`` (all parents) and, per parent, its trajectory
    ids in provisional ``briefs`` (one per parent, no causes yet)."""
    ctx = services(runtime)
    g = state.get("evolution_round", 0)
    parents = state.get("parents") or [state["start_harness"]]
    tasks = stage_tasks(ctx, state)
    briefs, ids = [], []
    for parent in parents:
        result = await ctx.evaluate(parent, state["checkpoint"], "train", tasks, k=1, seed=ctx.config.seed + 1000 * g)
        mine = [i for o in result.per_task.values() for i in o.trajectory_ids]
        ids += mine
        briefs.append(Brief(id=f"sample-{parent[:12]}", parent=parent, direction="", causes=[], trajectories=mine))
        ctx.reporter.log(f"evolve round {g}: parent {parent[:12]} solves {result.pass_at_k:.0%} of "
                         f"{len(tasks)} train tasks")
    return {"train_trajectories": ids, "briefs": briefs}


def related_groups(directions: list[Direction], size: int) -> list[list[Direction]]:
    """Related causes, at most ``size`` per group (Table 8: 2-3 per candidate): causes sharing their
    family (the text before the first ``:``, e.g. ``no_answer``) go together, best supported first;
    a family's leftover single cause joins the next family's group only when no group of its own
    can be formed. Input order (largest support first) is kept within a family.

    >>> [len(g) for g in related_groups([Direction(id=str(i), cause=c, description="", task_ids=["a", "b"])
    ...  for i, c in enumerate(["x:1", "x:2", "x:3", "x:4", "y"])], 3)]
    [3, 1, 1]
    """
    families: dict[str, list[Direction]] = {}
    for d in directions:
        families.setdefault(d.cause.split(":", 1)[0], []).append(d)
    return [ds[i:i + size] for ds in families.values() for i in range(0, len(ds), size)]


def merge(group: list[Direction], id: str, others: list[str]) -> Direction:
    """One candidate's direction from related causes ``group``: the union of their failed tasks and
    evidence, and a description naming the other candidates' causes (``others``), so the editor
    seeks a different mechanism (Harness-S App. F)."""
    tasks = sorted({t for d in group for t in d.task_ids})
    text = "; ".join(f"{d.cause} ({len(d.task_ids)} failed tasks): {d.description}" for d in group)
    if others:
        text += (" | Other candidates this round target: " + "; ".join(others)
                 + ". Seek a different mechanism, trigger or recovery than theirs.")
    return Direction(id=id, cause=" + ".join(d.cause for d in group), description=text, task_ids=tasks,
                     evidence=[e for d in group for e in d.evidence])


def curate_briefs(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The round's briefs (Eq. 2): each parent's failures curated into directions, merged into
    related groups (``related_groups``), the proposal budget ``harness_s.proposals[g]`` taken
    round-robin over the parents (best-supported groups first). Returns ``directions`` (the merged
    ones, which ``check`` reads), ``briefs`` and an empty ``candidates`` list."""
    ctx = services(runtime)
    g = state.get("evolution_round", 0)
    hs = ctx.config.harness_s
    budget = hs.proposals[min(g, len(hs.proposals) - 1)]
    train = {t.id: t for t in ctx.tasks("train")}
    per_parent: list[list[tuple[str, list[Direction], list[str]]]] = []
    for sample in state.get("briefs", []):
        trajectories = [t for i in sample.trajectories for t in ctx.archive.list(Trajectory, id=i)]
        curation = ctx.curator.curate([t for t in trajectories if t.split == "train"], ctx.spec(sample.parent), train)
        ctx.store_calls(curation.calls)
        groups = related_groups(curation.directions, hs.causes_per_candidate)
        per_parent.append([(sample.parent, grp, sample.trajectories) for grp in groups])
    chosen = [x for row in zip_longest(*per_parent) for x in row if x is not None][:budget]
    causes = [" + ".join(d.cause for d in grp) for _, grp, _ in chosen]
    directions, briefs = [], []
    for i, (parent, grp, trajs) in enumerate(chosen):
        d = merge(grp, f"g{g}-{parent[:8]}-b{i}", [c for j, c in enumerate(causes) if j != i])
        directions.append(d)
        briefs.append(Brief(id=d.id, parent=parent, direction=d.id, causes=[x.cause for x in grp], trajectories=trajs))
    ctx.reporter.log(f"curate evolution round {g}: {len(briefs)} brief(s) within a budget of {budget}: "
                     + "; ".join(causes))
    return {"directions": directions, "briefs": briefs, "candidates": RESET}


def fan_out_briefs(state: MetaState, runtime: Runtime[MetaContext]) -> list[Send] | str:
    """One ``edit`` per brief, its parent as the incumbent and its parent's train trajectories as
    the demonstration sources; straight to ``check`` without briefs."""
    directions = {d.id: d for d in state.get("directions", [])}
    briefs = [b for b in state.get("briefs", []) if b.direction in directions]
    if not briefs:
        return "check"
    g = state.get("evolution_round", 0)
    return [Send("edit", EditRequest(direction=directions[b.direction], incumbent=b.parent, round=g,
                                     train_trajectories=b.trajectories)) for b in briefs]
