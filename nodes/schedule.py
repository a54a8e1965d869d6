"""``next_round`` / ``more_rounds`` (the loop over t) and ``final_test`` (test of the start and final
pairs; under a rollout cap also the final pair's val score, ``val_at_budget``)."""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext
from coevo.meta.state import Candidate, CandidateOutcome, EvalSummary, MetaState, RoundSummary
from coevo.observe.text import plain
from coevo.records import GateDecision


def _fate(cand: Candidate, decision: GateDecision | None, incumbent: str) -> str:
    if cand.status == "rejected":
        return "rejected (check)"
    if decision is not None:
        return "accepted" if decision.accepted else "rejected (gate)"
    return "adopted" if cand.spec_id == incumbent else "not adopted"


def next_round(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Close round t: append its ``RoundSummary`` (incumbent, checkpoint, val scores, each
    candidate's fate, the round's weight stage) to ``history`` and advance ``round``."""
    rnd, incumbent = state.get("round", 0), state["incumbent"]
    val = state.get("validation", {})
    decisions = {d.candidate_id: d for d in state.get("decisions", []) if d.round == rnd}
    candidates = [CandidateOutcome(id=c.spec_id, status=c.status, reason=c.reason,
                                   val=val[c.spec_id].score if c.spec_id in val else None,
                                   fate=_fate(c, decisions.get(c.spec_id or ""), incumbent))
                  for c in state.get("checked", [])]
    stage = state.get("stage")
    stage = stage if stage is not None and stage.round == rnd else None
    summary = RoundSummary(round=rnd, incumbent=incumbent, checkpoint=state["checkpoint"],
                           incumbent_val=val[incumbent].score if incumbent in val else None,
                           trivial=next((v.trivial_baseline for v in val.values()), None), candidates=candidates,
                           weights=stage)
    return {"history": [summary], "round": rnd + 1}


def more_rounds(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """``"continue"`` while ``round < state["rounds"]`` (``setup`` wrote ``config.rounds``; a plan
    node may replace it), else ``"done"``."""
    rounds = state.get("rounds", runtime.context.config.rounds)
    return "continue" if state.get("round", 0) < rounds else "done"


async def val_at_budget(state: MetaState, ctx: MetaContext) -> dict:
    """Under a rollout cap (``config.budget``): ``final_val``, the final pair (H[T], W[T]) on the val
    split, measured at the budget — every strategy's val score at equal spend, the WHALE family's
    included, whose loop never validates (``coevo compare --budget``). Reused, not rerun, when the run
    validated that pair; a final-test phase, so outside the cap. Without a cap: nothing."""
    if not ctx.config.budget:
        return {}
    return {"final_val": EvalSummary.of(await ctx.evaluate(state["incumbent"], state["checkpoint"], "val"))}


async def final_test(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate the start pair (H0, W0) and the final pair (H[T], W[T]) on the test split (and, under
    a rollout cap, the final pair on val: ``val_at_budget``): one after the other on a ``local:`` policy
    (each checkpoint has its own engine, and two decoding at once on a few cores are slower than two in
    turn), together on a served one."""
    ctx = runtime.context
    measured = await val_at_budget(state, ctx)
    if not ctx.config.env.n_test:
        return {"test": {}, **measured}
    pairs = ((state["start_harness"], state["start_checkpoint"]), (state["incumbent"], state["checkpoint"]))
    if ctx.config.policy.startswith("local:"):  # two local engines at once share the cores and thrash: in turn
        start, final = [await ctx.evaluate(h, w, "test") for h, w in pairs]
    else:
        start, final = await asyncio.gather(*(ctx.evaluate(h, w, "test") for h, w in pairs))
    ctx.log("test", f"start {start.mean_reward:.3f} -> final {final.mean_reward:.3f} "
                     f"(trivial {plain(start.trivial_baseline)})")
    return {"test": {"start": EvalSummary.of(start), "final": EvalSummary.of(final)}, **measured}
