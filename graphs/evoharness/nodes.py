"""The nodes only EvoHarness-RL's family uses (arXiv:2608.05446,
its abstract): ``equip`` (give the incumbent its BPE state),
``harness_sft`` (supervised harness fine-tuning on BPE-using turns), ``train_bpe`` (the weight
stage with the lineage's experience in every rollout), and the harness evolution between stages:
``consolidate`` (the lessons successful rollouts saved, summarised into the lineage's store by the
run's summariser: duplicates and near duplicates merged, capped) and ``refine_progress`` (the
subgoals successful rollouts keep completing become the harness's progress schema).

A harness lineage is keyed by the run's start harness (``state["start_harness"]``): every BPE
harness the run derives from H0 shares its experience, also across runs from the same H0 (the store
``make_context`` builds keeps it in the archive). The store is the run context's
``MetaContext.experience``; nodes never reach it otherwise.
"""

from __future__ import annotations

from typing import Callable

from langgraph.runtime import Runtime

from coevo.harnesses.bpe import entry_key
from coevo.harnesses.bpe_evolution import refined_schema
from coevo.harnesses.spec import BPE, HarnessSpec, validate_spec
from coevo.meta.context import MetaContext
from coevo.meta.sealing import carried
from coevo.meta.state import MetaState
from coevo.models.trajectory import Trajectory
from coevo.nodes.loop import rescue_pool, run_stage
from coevo.roles.operators.base import expected_answer
from coevo.roles.summariser import OfflineSummariser
from coevo.training.evoharness.sft import HarnessSFT
from coevo.training.kinds import configured


def lineage(ctx: MetaContext, state: MetaState) -> str:
    """The experience key of the run's harness lineage: its start harness and the run's env config
    (``MetaContext.experience_lineage``)."""
    return ctx.experience_lineage(state["start_harness"])


def derive(ctx: MetaContext, spec: HarnessSpec, bpe: BPE, origin: str) -> HarnessSpec:
    """``spec`` with its BPE settings replaced by ``bpe``, validated and stored in the archive as its
    child (``origin``, this run); returns the child."""
    child = validate_spec({**spec.model_dump(mode="json"), "bpe": bpe.model_dump(mode="json"), "parents": [spec.id]},
                          f"{origin} harness")
    ctx.archive.add_harness(child, [spec.id], origin, ctx.run_id)
    return child


def equip(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """H_BPE: the incumbent with a default ``BPE`` component (``coevo.harnesses.spec.BPE``) when it
    has none, stored as its child (origin ``bpe``) and made the incumbent; a harness that already
    declares BPE settings is kept as it is (its own costs, caps and render policy)."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    if spec.bpe is not None:
        return {}
    child = derive(ctx, spec, BPE(), "bpe")
    ctx.log("bpe", f"{spec.short_id} -> {child.short_id}: belief, progress and experience as harness actions "
                   f"(render {child.bpe.render})")
    return {"incumbent": child.id}


async def harness_sft(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Supervised harness fine-tuning before RL: ``evoharness.sft_steps`` RSFT rounds under the BPE
    incumbent whose rows are the BPE-using turns of accepted rollouts only (the stage kind
    ``coevo.training.evoharness.sft.HarnessSFT``; rollouts start from the lineage's experience).
    Returns the new checkpoint; nothing when ``sft_steps`` is 0."""
    ctx = runtime.context
    steps = ctx.config.evoharness.sft_steps
    if not steps:
        return {}
    spec = ctx.spec(state["incumbent"])
    kind = HarnessSFT(rounds=steps, experience=tuple(ctx.experience.lessons(lineage(ctx, state))))
    checkpoint, _, _ = await run_stage(ctx, state, spec, state["checkpoint"], kind)
    return {"checkpoint": checkpoint}


async def train_bpe(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The weight stage under the BPE incumbent (``coevo.nodes.loop.run_stage``): cost-aware GRPO
    when ``train.action_cost`` > 0 (``coevo.training.grpo.harness_cost``), every rollout starting from the
    lineage's experience lessons. Returns the new checkpoint, the stage's trajectory ids and its
    ``WeightStage`` numbers, as the shared ``train`` node does."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    lessons = ctx.experience.lessons(lineage(ctx, state))
    kind = configured(ctx.config.train, rescue_pool(ctx, state, spec), experience=lessons)
    checkpoint, trajectories, stage = await run_stage(ctx, state, spec, state["checkpoint"], kind)
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


def played(ctx: MetaContext, state: MetaState) -> tuple[list[Trajectory], Callable[[str], bool]]:
    """This round's training rollouts (``state["train_trajectories"]``, read from the archive): the
    successful ones, and whether a text holds a gold answer — of any train task of the run
    (``MetaContext.train_answers``, the env's ``reveal``) or of a task the round played as its score
    states it (``expected`` or ``gold``, ``coevo.roles.operators.base.expected_answer``) — matched as
    every edit's text is sealed (``coevo.meta.sealing.carried``: any case, spacing or punctuation, a
    command list's commands in order). No lesson or schema entry may hold one: shown on that train task
    when it is trained on again, its answer would reach it."""
    rollouts = ctx.archive.get_many(Trajectory, state.get("train_trajectories", []))
    stated = {f"{t.task_id} (as scored)": gold for t in rollouts
              if (gold := expected_answer(None, t.score_detail or {})) is not None}
    answers = {**ctx.train_answers(), **stated}
    return [t for t in rollouts if t.passed], lambda text: bool(carried([text], answers))


def consolidate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Experience consolidation between stages: the lessons that this round's *successful* training
    rollouts saved with ``bpe_consolidate`` (``Trajectory.harness_state["consolidated"]``) and the
    lineage's lessons are summarised by the run's summariser (``MetaContext.summariser``, offline when
    unset: exact and near duplicates merged, the newest ``bpe.max_experience`` kept; or the LLM role,
    whose rejected reply is logged and replaced by the offline summary) and stored as the lineage's
    next experience (``ExperienceStore.consolidate``). A lesson holding a gold answer of any train task
    (``played``: sealed as every edit is), held before, offered or in the summary, is left out and
    counted in the log. Stores the role's LLM calls; logs and tracks the lessons offered, merged and kept; changes no
    state."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    if spec.bpe is None:
        return {}
    passed, holds_gold = played(ctx, state)
    offered = [lesson for t in passed for lesson in t.harness_state.get("consolidated", [])]
    held = ctx.experience.lessons(lineage(ctx, state))
    existing, new = ([x for x in lessons if not holds_gold(x)] for lessons in (held, offered))
    rnd = state.get("round", 0)
    summary = (ctx.summariser or OfflineSummariser()).summarise(existing, new, spec.bpe)
    ctx.store_calls(summary.calls)
    if summary.reason:
        ctx.log("experience", f"round {rnd}: {summary.reason}")
    clean = [x for x in summary.lessons if not holds_gold(x)]  # an LLM summary may have joined words into one
    if dropped := len(held) - len(existing) + len(offered) - len(new) + len(summary.lessons) - len(clean):
        ctx.log("experience", f"round {rnd}: {dropped} lessons left out: they hold a gold answer of a train task")
    kept = ctx.experience.consolidate(lineage(ctx, state), offered, spec.bpe.max_experience, round=rnd, kept=clean)
    ctx.log("experience", f"round {rnd}: {len(offered)} lessons from {len(passed)} successful rollouts, "
                          f"{summary.merged} merged ({summary.source}) -> {len(kept)} kept "
                          f"(cap {spec.bpe.max_experience})")
    ctx.track({"experience/offered": float(len(offered)), "experience/merged": float(summary.merged),
               "experience/kept": float(len(kept))}, rnd)
    return {}


def refine_progress(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Progress schema refinement between stages (EvoHarness-RL's harness evolution; coevo's rule,
    the abstract gives none): the subgoals done (``Trajectory.harness_state["progress"]["done"]``) in
    successful training rollouts of at least 2 of this round's tasks (a GRPO group's rollouts of one
    task count once), none holding a gold answer of any train task (``played``: sealed as every edit is), most
    frequent first, at most ``bpe.max_progress`` and cut to ``bpe.max_chars`` (a rescue sibling may
    allow longer entries) (``coevo.harnesses.bpe_evolution.refined_schema``), become the incumbent's
    ``bpe.progress_schema``: the pending subgoals every later episode starts with. When they differ
    from the current schema (as sets, up to case and whitespace) the child harness is stored (origin
    ``progress_schema``, parent the incumbent) and made the incumbent, and logged. Nothing without a
    successful rollout, without a subgoal done in two tasks (too little evidence to drop a schema),
    or without a change."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    if spec.bpe is None:
        return {}
    passed, holds_gold = played(ctx, state)
    done = [[s for s in (t.harness_state.get("progress") or {}).get("done", []) if not holds_gold(s)]
            for t in passed]
    schema = refined_schema(done, spec.bpe.max_progress, tasks=[t.task_id for t in passed],
                            max_chars=spec.bpe.max_chars)
    now = spec.bpe.progress_schema
    if not schema or {entry_key(s) for s in schema} == {entry_key(s) for s in now}:
        return {}
    child = derive(ctx, spec, spec.bpe.model_copy(update={"progress_schema": schema}), "progress_schema")
    ctx.log("bpe", f"round {state.get('round', 0)}: progress schema {now} -> {schema} from {len(passed)} successful "
                   f"rollouts ({spec.short_id} -> {child.short_id})")
    return {"incumbent": child.id}
