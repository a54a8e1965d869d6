"""The nodes only VACE's family uses: ``stage_effect`` (what the weight stage alone changed — val
of H[t] under W[t] and under W[t+1]), ``adopt`` (the ``ungated`` ablation's step in place of the gate)
and ``stagewise_rounds`` (the SIA-style baseline's router between its weight and harness stages)."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext
from coevo.meta.sealing import unseal
from coevo.meta.state import EvalSummary, MetaState
from coevo.observe.text import plain


async def stage_effect(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate the incumbent H[t] on the sealed val split under the checkpoint the stage started
    from (W[t]) and the one it made (W[t+1]): same tasks, same seeds (``MetaContext.evaluate``),
    so the difference is the weight stage's own effect with the harness held fixed. Both
    evaluations are resumable by id: ``validate`` reuses the W[t+1] one for its b, and round t's
    W[t] one is round t-1's validation of H[t], so in VACE only round 0 pays for an extra
    evaluation. Returns ``stage`` with ``before`` and ``after`` filled, and the W[t+1] evaluation as
    the round's ``validation`` of H[t] (what a round without ``validate``, rl_only's, reports)."""
    ctx = runtime.context
    stage = state["stage"]
    before, after = await asyncio.gather(ctx.evaluate(stage.harness_id, stage.checkpoint_before, "val"),
                                         ctx.evaluate(stage.harness_id, stage.checkpoint_after, "val"))
    ctx.log("stage", f"round {stage.round}: val of {stage.harness_id[:12]} {before.mean_reward:.3f} under "
                     f"{stage.checkpoint_before} -> {after.mean_reward:.3f} under {stage.checkpoint_after} "
                     f"(n={after.n_tasks}, trivial {plain(after.trivial_baseline)})")
    effect = stage.model_copy(update={"before": EvalSummary.of(before), "after": EvalSummary.of(after)})
    return {"stage": effect, "validation": {stage.harness_id: effect.after}}


def adopt(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """No gate (VACE's ungated ablation): H[t+1] = H'[t], the round's edit that applied (of the
    best-supported direction when ``meta.candidates`` > 1) with no check and no validation; the
    round then holds no validation. Returns the round's candidates as ``checked`` (for the round
    summary) and removes the edits not adopted from ``sealed``."""
    proposed = list(state.get("candidates", []))
    applied = [c for c in proposed if c.status != "rejected" and c.spec_id]
    chosen = applied[0].spec_id if applied else None
    if chosen:
        runtime.context.log("adopt", f"round {state.get('round', 0)}: {chosen[:12]} (ungated)")
    dropped = unseal([c.spec_id or "" for c in applied if c.spec_id != chosen], state)
    return {"checked": proposed, "sealed": dropped, **({"incumbent": chosen, "validation": {}} if chosen else {})}


def stagewise_rounds(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """The SIA-style baseline's two stages over one round counter (VACE Table 5: caps B_W, then B_H):
    ``"weights"`` while ``round < rounds`` (the weight stages), ``"harness"`` while
    ``round < 2 * rounds`` (the gated refinements under the final weights), else ``"done"``."""
    rounds, rnd = state.get("rounds", runtime.context.config.rounds), state.get("round", 0)
    return "weights" if rnd < rounds else "harness" if rnd < 2 * rounds else "done"
