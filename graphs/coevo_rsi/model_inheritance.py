"""CoEvo-RSI Model Inheritance, adaptation and promotion (docs/papers.md, §Model Inheritance and
Selection, steps 1-6; Figure 3, right):

- ``inherit``: for each offspring harness (the round's checked candidates, else the incumbent),
  the inheritor's proposals: one-hot selection of an archived checkpoint, or a TIES merge with
  coefficients alpha (``coevo.training.coevo_rsi.merge.merge_adapters``, which refuses adapters whose ranks,
  target modules or kind differ, or whose merge is undefined, before any file is written: the
  proposal is then ``refused`` with that reason). Every proposal is scored on validation (score
  and TIMR), beside the incumbent pair p_t.
- ``adapt``: the best proposal p̄_t is trained under its harness with the ``[train]`` algorithm
  (``rsft``: SFT on its accepted train rollouts; ``grpo``), giving p⁺_t, scored on validation. Each
  round's stage continues one persistent shuffled sampler over the train tasks (WHALE §3.1's, at
  ``sampler_position``), so successive rounds train on new tasks instead of restarting at task 0.
- ``promote``: p_t vs p̄_t vs p⁺_t with margin δ_prom (``decide_promotion``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from langgraph.runtime import Runtime

from coevo.graphs.coevo_rsi.state import CoevoRsiState
from coevo.meta.context import MetaContext
from coevo.meta.inheritance import ModelProposal, PairScore, Promotion
from coevo.meta.sealing import unseal
from coevo.meta.state import EvalSummary
from coevo.nodes.loop import run_stage
from coevo.records import Checkpoint
from coevo.training.kinds import configured
from coevo.training.schedule import PersistentSampler, WeightPhase


def _offspring(state: CoevoRsiState) -> list[tuple[str, str]]:
    """(offspring harness id, its base) of the round: the checked candidates, else (incumbent, incumbent)."""
    kids = [(c.spec_id, c.parent_id) for c in state.get("checked", []) if c.status == "checked" and c.spec_id]
    return list(dict.fromkeys(kids)) or [(state["incumbent"], state["incumbent"])]


def materialise(ctx: MetaContext, proposal: ModelProposal, merged: dict[tuple, str]) -> ModelProposal:
    """``proposal`` with its ``checkpoint_id``: the selected checkpoint, or the TIES merge of its
    sources with weights ``alpha`` (a one-hot alpha is the selection of that source: no new file;
    ``merged`` caches merges by (sources, alpha) within a round). A merge that ``merge_adapters``
    refuses (``ValueError``, raised before any file is written) makes the proposal ``refused`` with
    the reason; an unknown checkpoint too."""
    from coevo.training.coevo_rsi.merge import MergeConfig, merge_adapters

    kept = [(c, a) for c, a in zip(proposal.sources, proposal.alpha) if a > 0]
    if proposal.kind == "select" or len(kept) == 1:
        source = kept[0][0] if kept else proposal.sources[0]
        if ctx.archive.get(Checkpoint, source) is None:
            return proposal.model_copy(update={"status": "refused", "reason": f"checkpoint {source} is not archived"})
        one_hot = f"one-hot alpha: the selection of {source}" if proposal.kind == "merge" else proposal.reason
        return proposal.model_copy(update={"checkpoint_id": source, "reason": one_hot})
    key = (tuple(proposal.sources), tuple(round(a, 6) for a in proposal.alpha))
    if key not in merged:
        rsi = ctx.config.rsi
        records = [ctx.archive.get(Checkpoint, c) for c in proposal.sources]
        if missing := [c for c, r in zip(proposal.sources, records) if r is None]:
            reason = f"checkpoints {missing} are not archived"
            return proposal.model_copy(update={"status": "refused", "reason": reason})
        out = Path(ctx.config.out_dir).expanduser().resolve() / "merges"
        try:
            new = merge_adapters(records, MergeConfig(combination_type=rsi.combination_type, weights=proposal.alpha,
                                                      density=rsi.density, output_dir=str(out)),
                                 archive=ctx.archive, run_id=ctx.run_id)
        except ValueError as err:
            return proposal.model_copy(update={"status": "refused", "reason": str(err)})
        merged[key] = new.id
    return proposal.model_copy(update={"checkpoint_id": merged[key]})


async def inherit(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """Model inheritance for every offspring harness: propose, materialise (select or TIES merge),
    score each on val (same tasks and seeds as the incumbent pair). Stores every proposal
    (``MetaContext.record_proposals``); returns them in ``proposals``."""
    ctx = runtime.context
    rnd, summary = state.get("round", 0), state["archive_view"]
    proposals: list[ModelProposal] = []
    merged: dict[tuple, str] = {}
    for harness, base in _offspring(state):
        inheritance = ctx.inheritor.propose_models(harness, base, summary, f"{ctx.run_id}-r{rnd}-{harness[:8]}")
        ctx.store_calls(inheritance.calls)
        proposals += [materialise(ctx, p, merged) for p in inheritance.proposals]
    live = [p for p in proposals if p.status != "refused"]
    results = await asyncio.gather(*(ctx.evaluate(p.harness_id, p.checkpoint_id or "", "val") for p in live))
    scores = {p.id: r for p, r in zip(live, results)}
    proposals = [p.model_copy(update={"status": "scored", "val": scores[p.id].mean_reward, "timr": scores[p.id].timr,
                                      "evaluation_id": scores[p.id].evaluation_id}) if p.id in scores else p
                 for p in proposals]
    ctx.record_proposals(rnd, proposals)
    for p in proposals:
        what = p.sources[0] if p.kind == "select" else " + ".join(f"{a:.2f}·{c}" for c, a in zip(p.sources, p.alpha))
        ctx.log("inherit", f"round {rnd}: {p.harness_id[:12]} {p.kind} {what}: {p.status} "
                         + (f"val {p.val:.3f} TIMR {p.timr:.3f}" if p.val is not None else p.reason[:160]))
    return {"proposals": proposals}


def best_proposal(proposals: list[ModelProposal]) -> ModelProposal | None:
    """p̄_t: the scored proposal with the highest val score, then the lowest TIMR (first on a tie)."""
    scored = [p for p in proposals if p.status == "scored" and p.val is not None]
    return max(scored, key=lambda p: (p.val, -(p.timr or 0.0)), default=None)


async def adapt(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """p⁺_t: train p̄_t's checkpoint under its harness (``run_stage``: the ``[train]`` algorithm's
    ``train.steps`` on the train tasks no live harness answers, drawn from the run's persistent
    sampler at ``sampler_position``), then score the new pair on val. ``adapted`` is None when there
    is no scored proposal, ``rsi.adapt`` is off, or the run has no trainer; otherwise the update
    carries the sampler's new position."""
    ctx = runtime.context
    best = best_proposal(state.get("proposals", []))
    if best is None or not ctx.config.rsi.adapt or ctx.trainer is None:
        return {"adapted": None}
    position = state.get("sampler_position", 0)
    # each round's SFT is a run of its own (a fresh AdamW: the paper's cosine schedule restarts with its warm-up)
    phase = WeightPhase(sampler=PersistentSampler(ctx.config.seed), stream=ctx.tasks("train"), position=position,
                        max_steps=ctx.config.train.steps, resume_optimizer=False)
    checkpoint, trajectories, stage = await run_stage(ctx, state, ctx.spec(best.harness_id), best.checkpoint_id or "",
                                                      configured(ctx.config.train, phase=phase))
    record = ctx.archive.get(Checkpoint, checkpoint)
    metrics = record.metrics if record is not None else {}
    after_position = int(metrics.get("sampler_position", position + ctx.config.train.steps
                                     * ctx.config.train.tasks_per_step))
    before, after = await asyncio.gather(ctx.evaluate(best.harness_id, best.checkpoint_id or "", "val"),
                                         ctx.evaluate(best.harness_id, checkpoint, "val"))
    stage = stage.model_copy(update={"before": EvalSummary.of(before), "after": EvalSummary.of(after)})
    ctx.log("adapt", f"round {state.get('round', 0)}: {best.harness_id[:12]} {best.checkpoint_id} -> "
                     f"{checkpoint}: val {before.mean_reward:.3f} -> {after.mean_reward:.3f}, TIMR {after.timr:.3f}")
    return {"adapted": PairScore(harness_id=best.harness_id, checkpoint_id=checkpoint, val=after.mean_reward,
                                 timr=after.timr), "stage": stage, "train_trajectories": [t.id for t in trajectories],
            "sampler_position": after_position}


def decide_promotion(rnd: int, incumbent: PairScore, best: PairScore | None, adapted: PairScore | None,
                     margin: float) -> Promotion:
    """Step 6, ≻_prom with margin δ_prom = ``margin``: the challenger is the better of ``best`` (p̄_t)
    and ``adapted`` (p⁺_t) by val score (then lower TIMR; p⁺ on a tie); it replaces ``incumbent``
    (p_t) only if its val score exceeds p_t's by MORE than ``margin`` (a win by ``margin`` or less,
    or a tie, keeps p_t). Scores are mean rewards in [0, 1]."""
    challengers = [p for p in (adapted, best) if p is not None and p.val is not None]
    base = dict(round=rnd, incumbent=incumbent, best=best, adapted=adapted, margin=margin)
    kept = dict(harness_id=incumbent.harness_id, checkpoint_id=incumbent.checkpoint_id)
    if not challengers or incumbent.val is None:
        return Promotion(**base, **kept, reason="no scored challenger: the incumbent pair is kept")
    top = max(challengers, key=lambda p: (p.val, -(p.timr or 0.0)))
    gain = top.val - incumbent.val  # type: ignore[operator]
    which = "adapted proposal p⁺" if top is adapted else "best proposal p̄"
    # compared as the gate compares: c > b + margin (a float difference would let b + margin through)
    same = (top.harness_id, top.checkpoint_id) == (incumbent.harness_id, incumbent.checkpoint_id)
    if top.val > incumbent.val + margin and not same:  # type: ignore[operator]
        return Promotion(**base, harness_id=top.harness_id, checkpoint_id=top.checkpoint_id, accepted=True,
                         reason=f"{which} {top.val:.4f} beats the incumbent's {incumbent.val:.4f} by {gain:+.4f} > "
                                f"δ_prom={margin}")
    return Promotion(**base, **kept,
                     reason=f"{which} {top.val:.4f} vs the incumbent's {incumbent.val:.4f}: {gain:+.4f} is not more "
                            f"than δ_prom={margin}; the incumbent pair is kept")


async def promote(state: CoevoRsiState, runtime: Runtime[MetaContext]) -> dict:
    """Promotion of round t: the incumbent pair p_t scored on val (same tasks and seeds as the
    proposals), ``decide_promotion`` against p̄_t and p⁺_t with ``rsi.promotion_margin``; the kept pair
    becomes (``incumbent``, ``checkpoint``). Stores the decision (``MetaContext.record_promotion``);
    the round's offspring harnesses not kept leave ``sealed`` (an editor that later picks one as its
    base makes a child that is sealed afresh)."""
    ctx = runtime.context
    rnd = state.get("round", 0)
    result = await ctx.evaluate(state["incumbent"], state["checkpoint"], "val")
    incumbent = PairScore(harness_id=state["incumbent"], checkpoint_id=state["checkpoint"], val=result.mean_reward,
                          timr=result.timr)
    top = best_proposal(state.get("proposals", []))
    best = PairScore(harness_id=top.harness_id, checkpoint_id=top.checkpoint_id or "", val=top.val,
                     timr=top.timr) if top else None
    decision = decide_promotion(rnd, incumbent, best, state.get("adapted"), ctx.config.rsi.promotion_margin)
    kept = decision.promoted
    ctx.record_promotion(decision)
    ctx.log("promote", f"round {rnd}: {'PROMOTED' if decision.accepted else 'kept'} "
                     f"({kept.harness_id[:12]}, {kept.checkpoint_id}): {decision.reason}")
    final = result if not decision.accepted else await ctx.evaluate(kept.harness_id, kept.checkpoint_id, "val")
    offspring = [h for h, _ in _offspring(state) if h != kept.harness_id]
    return {"promotion": decision, "incumbent": kept.harness_id, "checkpoint": kept.checkpoint_id,
            "validation": {kept.harness_id: EvalSummary.of(final)},
            "sealed": unseal(offspring, {**state, "incumbent": kept.harness_id})}
