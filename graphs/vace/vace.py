"""VACE (Algorithm 1 of "Validation-Gated Alternating CoEvolution"; docs/papers.md) as a LangGraph graph::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)      # train
        val(W[t], H[t]), val(W[t+1], H[t])             # stage_effect: the stage's own effect
        H'[t]        = refine(H[t], T[t])                # curate -> edit (one per direction) -> check
        b, c         = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
        H[t+1]       = H'[t] if gate(b, c) else H[t]     # gate
"""

from __future__ import annotations

import asyncio

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext
from coevo.meta.state import EvalSummary, MetaState
from coevo.nodes.loop import add_rounds, gate, meta_graph, train, validate
from coevo.nodes.refine import add_refinement
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


def build() -> StateGraph:
    """VACE's wiring of the shared nodes (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", train)
    builder.add_node("stage_effect", stage_effect)
    builder.add_node("validate", validate)
    builder.add_node("gate", gate)
    # W[t+1], T[t] = train(W[t], H[t], D_train)
    builder.add_edge("setup", "train")
    # the weight stage's own effect: val of H[t] under W[t] and W[t+1] (b below reuses the latter)
    builder.add_edge("train", "stage_effect")
    # H'[t] = refine(H[t], T[t])
    refined = add_refinement(builder, after="stage_effect")
    # b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
    builder.add_edge(refined, "validate")
    # H[t+1] = H'[t] if gate(b, c) else H[t]
    builder.add_edge("validate", "gate")
    # for t in rounds
    add_rounds(builder, first="train", last="gate")
    return builder


graph = build().compile(name="vace")
