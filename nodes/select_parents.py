"""``select_parents``: the sibling pool grows by every valid child (Harness-S Eq. 4) and at most B
of them become the next round's parents by joint validation coverage (Eq. 3).

A child is *valid* (executable and protocol-compliant) when its patch applied to a valid spec and
its smoke run did not raise the interface-mismatch rate (``check``'s static checks); the local check
is evidence for the one revision, not a validity test, so a child that ran its local check is valid
whether or not it beat its parent there (§3.2, App. F).
"""

from __future__ import annotations

import json
from itertools import combinations
from math import comb
from typing import Iterable, Mapping

from langgraph.runtime import Runtime

from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.context import MetaContext, services
from coevo.meta.pool import PoolMember
from coevo.meta.state import Candidate, EvalSummary, MetaState


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
    its demonstrations; the spec itself does (DESIGN.md, Principles: such tasks leave later weight
    stages and checks)."""
    text = spec.model_dump_json()
    return [t.id for t in tasks if len(t.prompt) >= 8 and json.dumps(t.prompt, ensure_ascii=False)[1:-1] in text]


def is_valid(cand: Candidate) -> bool:
    """Whether ``cand``'s child is executable and protocol-compliant (module doc): it has a spec and
    either passed ``check`` or failed only its local check."""
    return bool(cand.spec_id) and (cand.status == "checked" or cand.checks.local_candidate is not None)


async def select_parents(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Validate every valid child of round g under the frozen checkpoint (``config.eval.k`` rollouts
    per val task, the run's seed: paired with each other), add them to the pool with their lineage
    and direction (Eq. 4; archived as ``PoolMember``), and choose the next parents by Eq. 3
    (``harness_s.parents`` slots). Without a valid child the parents stay. On the first round the
    pool starts with H0 (``round`` -1). Train tasks a new member's spec carries (``carried_tasks``)
    join ``demo_tasks``."""
    ctx = services(runtime)
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
    added = [m.model_copy(update={"id": f"{ctx.run_id}-{m.harness_id[:16]}", "run_id": ctx.run_id}) for m in added]
    ctx.record(*added)
    cover = len(set().union(*(solved.get(p, set()) for p in parents)))
    ctx.reporter.log(f"select evolution round {g}: {len(valid)} valid child(ren), pool {len(known) + len(added)}; "
                     f"parents {[p[:12] for p in parents]} cover {cover} val task(s) (Eq. 3)")
    train = ctx.tasks("train")
    carried = [t for m in added if m.round == g for t in carried_tasks(ctx.spec(m.harness_id), train)]
    return {"pool": added, "parents": parents, "validation": validation, "evolution_round": g + 1,
            "demo_tasks": carried}


def member(harness_id: str, summary: EvalSummary, **lineage) -> PoolMember:
    """The pool member of ``harness_id`` with its val score and V(H) from ``summary``."""
    solved = sorted(t for t, o in summary.per_task.items() if any(o.passed))
    return PoolMember(harness_id=harness_id, val_score=summary.score, solved=solved, **lineage)


def more_evolution(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """``"continue"`` while evolution rounds remain (``len(harness_s.proposals)``), else ``"done"``."""
    return "continue" if state.get("evolution_round", 0) < len(services(runtime).config.harness_s.proposals) else "done"
