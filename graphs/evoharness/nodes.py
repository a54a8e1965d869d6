"""The nodes only EvoHarness-RL's family uses (first abstract of
``shared/papers/harness_learning_abstracts.txt``): ``equip`` (give the incumbent its BPE state),
``harness_sft`` (supervised harness fine-tuning on BPE-using turns), ``train_bpe`` (the weight
stage with the lineage's experience in every rollout) and ``consolidate`` (experience consolidation
between stages: the lessons successful rollouts saved, merged into the lineage's store,
deduplicated and capped).

A harness lineage is keyed by the run's start harness (``state["start_harness"]``): every BPE
harness the run derives from H0 shares its experience, also across runs from the same H0 (the store
``make_context`` builds keeps it in the archive). The store is the run context's
``MetaContext.experience``; nodes never reach it otherwise.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.harnesses.spec import BPE, validate_spec
from coevo.meta.context import MetaContext
from coevo.meta.state import MetaState
from coevo.models.trajectory import Trajectory
from coevo.nodes.train import rescue_pool, run_stage


def lineage(state: MetaState) -> str:
    """The experience key of the run's harness lineage: its start harness id."""
    return state["start_harness"]


def equip(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """H_BPE: the incumbent with a default ``BPE`` component (``coevo.harnesses.spec.BPE``) when it
    has none, stored as its child (origin ``bpe``) and made the incumbent; a harness that already
    declares BPE settings is kept as it is (its own costs, caps and render policy)."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    if spec.bpe is not None:
        return {}
    child = validate_spec({**spec.model_dump(mode="json"), "bpe": BPE().model_dump(mode="json"),
                           "parents": [spec.id]}, "BPE harness")
    harness_id = ctx.archive.add_harness(child, [spec.id], "bpe", ctx.run_id)
    ctx.log("bpe", f"{spec.short_id} -> {child.short_id}: belief, progress and experience as harness actions "
                   f"(render {child.bpe.render})")
    return {"incumbent": harness_id}


async def harness_sft(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Supervised harness fine-tuning before RL: ``evoharness.sft_steps`` RSFT rounds under the BPE
    incumbent whose rows are the BPE-using turns of accepted rollouts only (``StageOptions.harness_sft``;
    rollouts start from the lineage's experience). Returns the new checkpoint; nothing when
    ``sft_steps`` is 0."""
    ctx = runtime.context
    steps = ctx.config.evoharness.sft_steps
    if not steps:
        return {}
    spec = ctx.spec(state["incumbent"])
    checkpoint, _, _ = await run_stage(ctx, state, spec, state["checkpoint"], harness_sft=steps,
                                       experience=ctx.experience.lessons(lineage(state)))
    return {"checkpoint": checkpoint}


async def train_bpe(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The weight stage under the BPE incumbent (``coevo.nodes.train.run_stage``): cost-aware GRPO
    when ``train.action_cost`` > 0 (``coevo.training.harness_cost``), every rollout starting from the
    lineage's experience lessons. Returns the new checkpoint, the stage's trajectory ids and its
    ``WeightStage`` numbers, as the shared ``train`` node does."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    lessons = ctx.experience.lessons(lineage(state))
    checkpoint, trajectories, stage = await run_stage(ctx, state, spec, state["checkpoint"],
                                                      rescue_pool(ctx, state, spec), experience=lessons)
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


def consolidate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Experience consolidation between stages: the lessons that this round's *successful* training
    rollouts saved with ``bpe_consolidate`` (``Trajectory.harness_state["consolidated"]``) are merged
    into the lineage's experience (``ExperienceStore.consolidate``: duplicates up to case and
    whitespace kept once, the newest ``bpe.max_experience`` kept). Logs and tracks the number offered
    and kept; changes no state."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    if spec.bpe is None:
        return {}
    rollouts = [t for i in state.get("train_trajectories", []) if (t := ctx.archive.get(Trajectory, i)) is not None]
    offered = [lesson for t in rollouts if t.passed for lesson in t.harness_state.get("consolidated", [])]
    rnd = state.get("round", 0)
    kept = ctx.experience.consolidate(lineage(state), offered, spec.bpe.max_experience, round=rnd)
    ctx.log("experience", f"round {rnd}: {len(offered)} lessons from {sum(t.passed for t in rollouts)} successful "
                          f"rollouts -> {len(kept)} kept (cap {spec.bpe.max_experience})")
    ctx.track({"experience/offered": float(len(offered)), "experience/kept": float(len(kept))}, rnd)
    return {}
