"""``next_round`` / ``more_rounds`` (the loop over t) and ``final_test`` (test of the start and final pairs)."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.harnesses.spec import load_harness
from coevo.meta.context import MetaContext, services
from coevo.meta.state import MetaState
from coevo.nodes.validate import summarise


def next_round(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Close round t: append its summary to ``history`` and advance ``round``."""
    rnd = state.get("round", 0)
    val = state.get("validation", {})
    summary = {"round": rnd, "incumbent": state["incumbent"], "checkpoint": state["checkpoint"],
               "incumbent_val": val.get(state["incumbent"], {}).get("score"),
               "trivial": next((v.get("trivial_baseline") for v in val.values()), None),
               "candidates": [{"id": c.get("spec_id"), "status": c["status"], "reason": c.get("reason", ""),
                               "val": val.get(c.get("spec_id") or "", {}).get("score")} for c in state.get("checked", [])],
               "decisions": [{"candidate": d["candidate_id"], "b": d["b"], "c": d["c"], "accepted": d["accepted"]}
                             for d in state.get("decisions", []) if d["round"] == rnd]}
    return {"history": [summary], "round": rnd + 1}


def more_rounds(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """``"continue"`` while ``round < config.rounds``, else ``"done"``."""
    return "continue" if state.get("round", 0) < services(runtime).config.rounds else "done"


async def final_test(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate the start pair (H0, W0) and the final pair (H[T], W[T]) on the test split."""
    ctx = services(runtime)
    if not ctx.config.env.n_test:
        return {"test": {}}
    tasks = ctx.tasks("test")

    async def one(harness_id: str, checkpoint: str):
        spec = load_harness(ctx.archive.get_harness(harness_id).spec)
        return await ctx.evaluate(spec, checkpoint, ctx.env, "test", k=ctx.config.eval.k, seeds=ctx.config.seed,
                                  model=ctx.policy(checkpoint), archive=ctx.archive, concurrency=ctx.config.eval.concurrency,
                                  progress=ctx.reporter, run_id=state["run_id"], tasks=tasks)

    start, final = await asyncio.gather(one(state["start_harness"], state["start_checkpoint"]),
                                        one(state["incumbent"], state["checkpoint"]))
    test = {"start": summarise(start), "final": summarise(final)}
    ctx.reporter.log(f"test   start {start.mean_reward:.3f} -> final {final.mean_reward:.3f} (trivial {start.trivial_baseline})")
    return {"test": test}
