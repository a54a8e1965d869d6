"""``validate``: b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t]) — same val tasks, same seeds."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.harnesses.spec import load_harness
from coevo.meta.context import MetaContext, services
from coevo.meta.state import MetaState


def summarise(result) -> dict:
    """The numbers the gate and the report need from an ``EvalResult``."""
    return {"score": result.mean_reward, "pass_at_k": result.pass_at_k, "avg_at_k": result.avg_at_k, "timr": result.timr,
            "evaluation_id": result.evaluation_id, "trivial_baseline": result.trivial_baseline,
            "per_task": {tid: o.rewards for tid, o in result.per_task.items()},
            "per_task_passed": {tid: o.passed for tid, o in result.per_task.items()}}


async def validate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Paired evaluation of the incumbent and every checked candidate on the sealed val split under
    the current checkpoint (VACE Alg. 1, line 4). Evaluations are resumable by id, so a resumed
    run reuses finished rollouts."""
    ctx = services(runtime)
    ids = [state["incumbent"]] + [c["spec_id"] for c in state.get("checked", []) if c["status"] == "checked"]
    tasks = ctx.tasks("val")
    model = ctx.policy(state["checkpoint"])

    async def one(harness_id: str):
        spec = load_harness(ctx.archive.get_harness(harness_id).spec)
        return await ctx.evaluate(spec, state["checkpoint"], ctx.env, "val", k=ctx.config.eval.k, seeds=ctx.config.seed,
                                  model=model, archive=ctx.archive, concurrency=ctx.config.eval.concurrency,
                                  progress=ctx.reporter, run_id=state["run_id"], tasks=tasks)

    results = await asyncio.gather(*(one(i) for i in dict.fromkeys(ids)))
    validation = {i: summarise(r) for i, r in zip(dict.fromkeys(ids), results)}
    ctx.reporter.log(f"validate round {state.get('round', 0)}: " + ", ".join(
        f"{i[:12]}={v['score']:.3f}" for i, v in validation.items()) + f" (trivial {results[0].trivial_baseline})")
    return {"validation": validation}
