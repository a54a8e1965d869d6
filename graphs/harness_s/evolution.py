"""Harness-S directional evolution (§3.2, Eq. 2-4, Table 8): the nodes around the shared ``edit``
and ``check``.

``sample_parents``: each parent H in P_g runs round g's fresh train tasks once with the frozen policy
(``round_tasks``: the g-th of G parts of a seeded shuffle of the train split, so no task is sampled in
two rounds; fresh seeds per round); ``curate_briefs``: the curator groups each parent's failures by root cause, related
causes are merged 2-3 at a time into candidate briefs (each cause keeps >= ``meta.min_failed_tasks``
distinct failed tasks), the round's proposal budget ``harness_s.proposals[g]`` is spread over the
parents, and every brief names the other candidates' causes so that edits seek different
mechanisms; ``fan_out_briefs`` sends ``meta.samples`` ``edit`` branches per brief with its parent as
the incumbent (every brief's first sample first, within the budget: the budget counts proposals,
Table 8), so the offline editor, seeded by run, round and direction, draws a different operator
for each sibling of one brief;
``select_parents``: the sibling pool grows by every valid child (Eq. 4) and at most B of them
become the next round's parents by joint validation coverage (Eq. 3).

A child is *valid* (executable and protocol-compliant) when its patch applied to a valid spec and
its smoke run did not raise the interface-mismatch rate (``check``'s static checks); the local check
is evidence for the one revision, not a validity test, so a child that ran its local check is valid
whether or not it beat its parent there (§3.2, App. F).
"""

from __future__ import annotations

import json
import random
from itertools import combinations, zip_longest
from math import comb
from typing import Iterable, Mapping

from langgraph.runtime import Runtime
from langgraph.types import Send

from coevo.config import RunConfig
from coevo.envs.base import Task
from coevo.graphs.harness_s.state import HarnessSState
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.context import MetaContext
from coevo.meta.pool import Brief, PoolMember
from coevo.meta.sealing import live
from coevo.meta.state import RESET, Candidate, Direction, EditRequest, EvalSummary
from coevo.nodes.loop import stage_tasks
from coevo.records import Trajectory
from coevo.roles.operators import assignments


def round_tasks(ctx: MetaContext, state: HarnessSState, g: int) -> list[Task]:
    """Evolution round g's fresh train tasks (§3.2: "we execute each parent H in P_g on fresh training
    tasks"): the g-th of G near-equal parts (G = the rounds of ``harness_s.proposals``) of the run's
    train split shuffled by the run's seed (a shuffle, not a stride or a cut, because suites list their
    tasks by category), so the rounds' task sets are disjoint, less those a live harness answers
    (``stage_tasks``). With one round: every train task. Raises ``ValueError`` (naming
    ``env.n_train`` and the fix) when round g has none left."""
    rounds = len(ctx.config.harness_s.proposals)
    live = {t.id for t in stage_tasks(ctx, state)}
    order = list(ctx.tasks("train"))
    random.Random(ctx.config.seed).shuffle(order)
    tasks = [t for t in order[g % rounds::rounds] if t.id in live]
    if not tasks:
        raise ValueError(f"evolution round {g} has no fresh train task: each of the {rounds} rounds of "
                         f"harness_s.proposals samples its parents on its own share of the env.n_train = "
                         f"{ctx.config.env.n_train} train tasks, and this round's share is empty or answered by a "
                         "demonstration; raise env.n_train or run fewer evolution rounds")
    return tasks


async def sample_parents(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """Train trajectories of every parent of evolution round g (``state["parents"]``, default [H0])
    under the frozen checkpoint: one rollout per task of the round's fresh share (``round_tasks``),
    base seed ``seed + 1000 * g``. Returns ``train_trajectories`` (all parents) and, per parent, its
    trajectory ids in provisional ``briefs`` (one per parent, no causes yet)."""
    ctx = runtime.context
    g = state.get("evolution_round", 0)
    parents = state.get("parents") or [state["start_harness"]]
    tasks = round_tasks(ctx, state, g)
    briefs, ids = [], []
    for parent in parents:
        result = await ctx.evaluate(parent, state["checkpoint"], "train", tasks, k=1, seed=ctx.config.seed + 1000 * g)
        mine = [i for o in result.per_task.values() for i in o.trajectory_ids]
        ids += mine
        briefs.append(Brief(id=f"sample-{parent[:12]}", parent=parent, direction="", causes=[], trajectories=mine))
        ctx.log("evolve", f"round {g}: parent {parent[:12]} solves {result.pass_at_k:.0%} of "
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


def proposal_budget(config: RunConfig, g: int) -> int:
    """Evolution round ``g``'s proposal budget ``harness_s.proposals[g]`` (the last entry for later
    rounds): the most candidates the round edits (Table 8)."""
    proposals = config.harness_s.proposals
    return proposals[min(g, len(proposals) - 1)]


def curate_briefs(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """The round's briefs (Eq. 2): each parent's failures curated into directions, merged into
    related groups (``related_groups``), the proposal budget ``harness_s.proposals[g]`` taken
    round-robin over the parents (best-supported groups first). Returns ``directions`` (the merged
    ones, which ``check`` reads), ``briefs`` and an empty ``candidates`` list."""
    ctx = runtime.context
    g = state.get("evolution_round", 0)
    hs = ctx.config.harness_s
    budget = proposal_budget(ctx.config, g)
    train = {t.id: t for t in ctx.tasks("train")}
    per_parent: list[list[tuple[str, list[Direction], list[str]]]] = []
    for sample in state.get("briefs", []):
        trajectories = ctx.archive.get_many(Trajectory, sample.trajectories)
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
    ctx.log("curate", f"evolution round {g}: {len(briefs)} brief(s) within a budget of {budget}: "
                     + "; ".join(causes))
    return {"directions": directions, "briefs": briefs, "candidates": RESET}


def fan_out_briefs(state: HarnessSState, runtime: Runtime[MetaContext]) -> list[Send] | str:
    """``meta.samples`` ``edit`` branches per brief (``coevo.roles.operators.assignments``: every
    brief's first sample first), at most the round's proposal budget ``harness_s.proposals[g]`` in
    all (Table 8: proposal counts are budgets), each with its brief's parent as the incumbent and
    that parent's train trajectories as the demonstration sources; straight to ``check`` without
    briefs."""
    directions = {d.id: d for d in state.get("directions", [])}
    briefs = {b.direction: b for b in state.get("briefs", []) if b.direction in directions}
    g = state.get("evolution_round", 0)
    config = runtime.context.config
    branches = assignments([directions[d] for d in briefs], config.meta.samples)[:proposal_budget(config, g)]
    if not branches:
        return "check"
    return [Send("edit", EditRequest(direction=d, incumbent=briefs[d.id].parent, round=g,
                                     train_trajectories=briefs[d.id].trajectories, sample=s))
            for d, s in branches]


def coverage_parents(solved: Mapping[str, set[str]], budget: int, exact_limit: int = 20_000) -> list[str]:
    """P_{g+1} in argmax_{P ⊆ C, 1 <= |P| <= B} |∪_{H in P} V(H)| (Harness-S Eq. 3).

    ``solved``: child id -> V(H), the val task ids it solves (insertion order breaks ties: the
    first maximising subset in ``combinations`` order wins, and smaller subsets beat larger ones at
    equal coverage). ``budget``: B >= 1. Exact search over every subset of size <= B while their
    number is <= ``exact_limit``; above it greedy max-coverage, which is within a factor (1 - 1/e)
    of the optimum (Nemhauser, Wolsey & Fisher 1978). Returns [] when ``solved`` is empty; raises
    ``ValueError`` for ``budget < 1``.
    """
    if budget < 1:
        raise ValueError(f"parent budget B must be >= 1, got {budget}")
    ids = list(solved)
    if not ids:
        return []
    b = min(budget, len(ids))
    if sum(comb(len(ids), r) for r in range(1, b + 1)) <= exact_limit:
        best: tuple[str, ...] = (ids[0],)
        best_cover = -1
        for r in range(1, b + 1):
            for subset in combinations(ids, r):
                cover = len(set().union(*(solved[h] for h in subset)))
                if cover > best_cover:
                    best, best_cover = subset, cover
        return list(best)
    chosen: list[str] = []
    covered: set[str] = set()
    while len(chosen) < b:
        gain, pick = max((len(solved[h] - covered), -i, h) for i, h in enumerate(ids) if h not in chosen)[0::2]
        if gain == 0 and chosen:
            break
        chosen.append(pick)
        covered |= solved[pick]
    return chosen


def carried_tasks(spec: HarnessSpec, tasks: Iterable[Task]) -> list[str]:
    """The ids of ``tasks`` whose prompt text occurs in ``spec`` (a demonstration carries it, with its
    answer). A pool member can be a child whose revision failed, so its candidate no longer names
    its demonstrations; the spec itself does (docs/design.md, Principles: such tasks leave later weight
    stages and checks)."""
    text = spec.model_dump_json()
    return [t.id for t in tasks if len(t.prompt) >= 8 and json.dumps(t.prompt, ensure_ascii=False)[1:-1] in text]


def is_valid(cand: Candidate) -> bool:
    """Whether ``cand``'s child is executable and protocol-compliant (module doc): it has a spec and
    either passed ``check`` or failed only its local check."""
    return bool(cand.spec_id) and (cand.status == "checked" or cand.checks.local_candidate is not None)


async def select_parents(state: HarnessSState, runtime: Runtime[MetaContext]) -> dict:
    """Validate every valid child of round g under the frozen checkpoint (``config.eval.k`` rollouts
    per val task, the run's seed: paired with each other), add them to the pool with their lineage
    and direction (Eq. 4; stored with ``MetaContext.record_pool``), and choose the next parents by Eq. 3
    (``harness_s.parents`` slots). Without a valid child the parents stay. On the first round the
    pool starts with H0 (``round`` -1). Every new member is sealed with the train tasks its spec
    answers (``MetaContext.demonstrated``, and ``carried_tasks``): pool harnesses stay live, rescue
    runs under them."""
    ctx = runtime.context
    g, hs = state.get("evolution_round", 0), ctx.config.harness_s
    briefs = {b.direction: b for b in state.get("briefs", [])}
    valid = [c for c in state.get("checked", []) if is_valid(c)]
    known = {m.harness_id for m in state.get("pool", [])}
    added: list[PoolMember] = []
    if not state.get("pool"):
        h0 = await ctx.evaluate(state["start_harness"], state["checkpoint"], "val")
        added.append(member(state["start_harness"], EvalSummary.of(h0)))
    validation: dict[str, EvalSummary] = {}
    for cand in valid:
        if cand.spec_id in validation or cand.spec_id in known:
            continue
        summary = EvalSummary.of(await ctx.evaluate(cand.spec_id or "", state["checkpoint"], "val"))
        validation[summary.harness_id] = summary
        brief = briefs.get(cand.direction)
        added.append(member(summary.harness_id, summary, parent=cand.parent_id, round=g, direction=cand.direction,
                            causes=brief.causes if brief else []))
    solved = {m.harness_id: set(m.solved) for m in added if m.round == g}
    parents = coverage_parents(solved, hs.parents, hs.exact_limit) or state.get("parents") or [state["start_harness"]]
    for m in added:
        m.selected = m.harness_id in parents and m.round == g
    added = ctx.record_pool(added)
    cover = len(set().union(*(solved.get(p, set()) for p in parents)))
    ctx.log("select", f"evolution round {g}: {len(valid)} valid child(ren), pool {len(known) + len(added)}; "
                     f"parents {[p[:12] for p in parents]} cover {cover} val task(s) (Eq. 3)")
    train = ctx.tasks("train")
    sealed = {m.harness_id: live([*ctx.demonstrated(spec), *carried_tasks(spec, train)])
              for m in added if m.round == g for spec in [ctx.spec(m.harness_id)]}
    return {"pool": added, "parents": parents, "validation": validation, "evolution_round": g + 1,
            "sealed": sealed}


def member(harness_id: str, summary: EvalSummary, **lineage) -> PoolMember:
    """The pool member of ``harness_id`` with its val score and V(H) from ``summary``."""
    solved = sorted(t for t, o in summary.per_task.items() if any(o.passed))
    return PoolMember(harness_id=harness_id, val_score=summary.score, solved=solved, **lineage)


def more_evolution(state: HarnessSState, runtime: Runtime[MetaContext]) -> str:
    """``"continue"`` while evolution rounds remain (``len(harness_s.proposals)``), else ``"done"``."""
    return "continue" if state.get("evolution_round", 0) < len(runtime.context.config.harness_s.proposals) else "done"
