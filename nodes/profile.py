"""``profile``: policy-aware profile re-anchoring (Harness-S Eq. 11, Alg. 1 lines 1, 3 and 14).

With the policy of checkpoint s frozen, every pool member runs the val tasks with the same seeds and
limits as H0 (paired executions), and the profiler turns each sibling's outcomes against H0's into
P_i^(s). Only val evaluations are read: test outcomes never enter a profile. Profiles are archived
per checkpoint (``Profile``) and replace the state's ``profiles``.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext, services
from coevo.meta.state import EvalSummary, MetaState
from coevo.records import Trajectory


def pool_ids(state: MetaState) -> list[str]:
    """The pool's harness ids, each once, in the order they joined (H0 first)."""
    return list(dict.fromkeys([state["start_harness"], *(m.harness_id for m in state.get("pool", []))]))


async def profile(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Re-anchor the profiles at the current checkpoint (module doc). Returns ``profiles`` (harness
    id -> ``Profile``) and ``validation`` (each pool member's val evaluation at this checkpoint).
    A profiler reply that is ignored (malformed) is logged with its reason."""
    ctx = services(runtime)
    checkpoint, h0 = state["checkpoint"], state["start_harness"]
    evals = {h: EvalSummary.of(await ctx.evaluate(h, checkpoint, "val")) for h in pool_ids(state)}
    val_tasks = {t.id: t for t in ctx.tasks("val")}
    trajectories = {t.id: t for e in evals.values()
                    for t in ctx.archive.list(Trajectory, evaluation_id=e.evaluation_id)}
    profiles, records = {}, []
    for h, summary in evals.items():
        out = ctx.profiler.profile(summary, evals[h0], val_tasks, trajectories)
        ctx.store_calls(out.calls)
        if out.profile.reason:
            ctx.reporter.log(f"profile {h[:12]}: profiler reply ignored: {out.profile.reason[:200]}")
        profiles[h] = out.profile
        records.append(out.profile.model_copy(update={"id": f"{ctx.run_id}-{checkpoint}-{h[:16]}",
                                                      "round": state.get("round", 0)}))
    ctx.record(*records)
    ctx.reporter.log(f"profile at {checkpoint}: " + ", ".join(
        f"{h[:8]} val {p.val_success:.2f} (+{len(p.prefer)}/-{len(p.avoid)})" for h, p in profiles.items()))
    return {"profiles": profiles, "validation": evals}
