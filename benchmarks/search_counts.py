"""What a finished run's harness search explored, read from its archive (issue 23, "Done when").

Per round: the distinct directions edited, the distinct applied candidates (children that exist),
the gate's accepted/rejected counts (VACE, PACE); the sibling pool, its members' directions, causes and
val scores, and how many test tasks Rank-1 routing sent to each harness (Harness-S); the harness accepted after each
search iteration against H0 (WHALE, FST, stagewise, PACE); the distinct bases the editors chose
(CoEvo-RSI). Prints JSON.

    python benchmarks/search_counts.py coevo_runs/testbed.db RUN_ID
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter, defaultdict


def counts(db: str, run_id: str) -> dict:
    """The counts of run ``run_id`` in archive ``db`` (see module doc)."""
    from coevo.app.run import read_state
    from coevo.records import BaseChoice, EditRecord, EvaluationRecord, GateDecision, PoolMember, RunRecord
    from coevo.storage import Archive

    archive = Archive(db)
    run = archive.get(RunRecord, run_id)
    if run is None:
        raise SystemExit(f"no run {run_id!r} in {db}")
    strategy = run.config.get("strategy", "vace")
    state = asyncio.run(read_state(db, run_id, strategy)) or {}
    h0 = state.get("start_harness", "")
    rounds: dict[int, dict] = defaultdict(lambda: {"directions": set(), "applied": set(), "operators": set()})
    for e in archive.list(EditRecord, run_id=run_id):
        r = rounds[e.round]
        r["directions"].add(e.direction)
        if e.child_id:
            r["applied"].add(e.child_id)
        if "by operator " in e.rationale:
            r["operators"].add(e.rationale.split("by operator ", 1)[1].split(" ", 1)[0])
    for d in archive.list(GateDecision, run_id=run_id):
        rounds[d.round].setdefault("gate", []).append(d.accepted)
    out: dict = {"run": run_id, "strategy": strategy, "status": run.status, "rounds": {}}
    for i, r in sorted(rounds.items()):
        gate = r.get("gate", [])
        out["rounds"][i] = {"directions": len(r["directions"]), "applied_candidates": len(r["applied"]),
                            "operators": sorted(r["operators"]), "accepted": sum(gate),
                            "rejected": len(gate) - sum(gate)}
    pool = archive.list(PoolMember, run_id=run_id)
    if pool:
        children = [m for m in pool if m.round >= 0]
        out["pool"] = {"members": len({m.harness_id for m in pool}), "children": len({m.harness_id for m in children}),
                       "distinct_directions": len({m.direction for m in children}),
                       "distinct_cause_sets": len({tuple(sorted(m.causes)) for m in children}),
                       "children_per_round": dict(sorted(Counter(m.round for m in children).items())),
                       "val_scores": sorted((round(m.val_score or 0.0, 3) for m in children), reverse=True),
                       "causes": sorted({c for m in children for c in m.causes})}
        rank1 = (state.get("test") or {}).get("rank1")
        if rank1 is not None:
            routed = Counter()
            for i in rank1.evaluation_id.split("+"):
                record = archive.get(EvaluationRecord, i)
                routed[record.harness_id] += len(record.task_ids)
            out["pool"]["rank1_routed_to"] = len(routed)
            out["pool"]["rank1_routed_to_h0"] = h0 in routed
            out["pool"]["rank1_routed_to_siblings"] = len(set(routed) - {h0})
            out["pool"]["rank1_tasks_per_harness"] = {("H0" if h == h0 else h[:12]): n for h, n in routed.most_common()}
    if state.get("search_iterations"):
        accepted = [s.accepted for s in state["search_iterations"]]
        out["search"] = {"iterations": len(accepted), "accepted_non_h0": sum(a != h0 for a in accepted),
                         "final": state.get("incumbent", "")[:12], "final_is_h0": state.get("incumbent") == h0}
    choices = archive.list(BaseChoice, run_id=run_id)
    if choices:
        per = defaultdict(set)
        for c in choices:
            per[c.round].add(c.base_id)
        out["bases"] = {r: len(b) for r, b in sorted(per.items())}
    return out


if __name__ == "__main__":
    print(json.dumps(counts(sys.argv[1], sys.argv[2]), indent=1, default=str))
