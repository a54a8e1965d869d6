"""``validate``: b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t]) — same val tasks, same seeds."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext
from coevo.meta.state import EvalSummary, MetaState
from coevo.observe.text import plain


async def validate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Paired evaluation of the incumbent and every checked candidate on the sealed val split under
    the current checkpoint (VACE Alg. 1, line 4). Evaluations are resumable by id, so a resumed
    run reuses finished rollouts."""
    ctx = runtime.context
    ids = list(dict.fromkeys([state["incumbent"]] + [c.spec_id for c in state.get("checked", [])
                                                      if c.status == "checked" and c.spec_id]))
    results = await asyncio.gather(*(ctx.evaluate(i, state["checkpoint"], "val") for i in ids))
    validation = {i: EvalSummary.of(r) for i, r in zip(ids, results)}
    ctx.log("validate", f"round {state.get('round', 0)}: " + ", ".join(
        f"{i[:12]}={v.score:.3f}" for i, v in validation.items()) + f" (trivial {plain(results[0].trivial_baseline)})")
    return {"validation": validation}
