"""The node only Harness-R1 uses: ``train_engineer``, one engineer stage between the target's weight
stage and the refinement whose edits the engineer then proposes."""

from __future__ import annotations

import asyncio
import random
import statistics
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from coevo.config.train import StageConfig
from coevo.graphs.harness_r1.state import EngineerStage, HarnessR1State
from coevo.meta.budget import engineer_budget
from coevo.meta.context import MetaContext
from coevo.meta.sealing import carried, sealed_tasks
from coevo.records import Checkpoint, RunRecord, Trajectory
from coevo.roles.engineer import EngineerEditor
from coevo.training.harness_r1.edit_env import EditEnv, EditEpisode, evaluation_rerun
from coevo.training.harness_r1.engineer import (
    engineer_checkpoint,
    engineer_reference,
    grpo_rollouts,
    train_engineer_grpo,
    train_engineer_sft,
)
from coevo.training.harness_r1.engineer_data import EngineerExample, accepted_examples

FRESH_SEED = 10_000_000
"""Rerun seeds start here (+ 1000 x round + episode): apart from the seeds the failures were sampled with."""


def failure_episodes(ctx: MetaContext, state: HarnessR1State, rnd: int) -> list[EditEpisode]:
    """Up to ``harness_r1.episodes`` episodes of ``harness_r1.batch`` failed train tasks each: the
    round's train trajectories T[t] of the incumbent that failed, on tasks no live harness answers
    (``sealed_tasks``), one trajectory per task, in an order seeded by run seed and round."""
    cfg = ctx.config.harness_r1
    train = {t.id: t for t in ctx.tasks("train")}
    excluded = sealed_tasks(state)
    found = ctx.archive.get_many(Trajectory, state.get("train_trajectories", []))
    failed = list({t.task_id: t for t in found if t.split == "train" and not t.passed
                   and t.task_id in train and t.task_id not in excluded}.values())
    random.Random(f"{ctx.config.seed}-{rnd}").shuffle(failed)
    spec = ctx.spec(state["incumbent"])
    batches = [failed[i:i + cfg.batch] for i in range(0, len(failed), cfg.batch)][:cfg.episodes]
    return [EditEpisode.of_failures(f"{ctx.run_id}-r{rnd}-ep{i}", spec, b, train, FRESH_SEED + 1000 * rnd + i)
            for i, b in enumerate(batches)]


def engineer_stage(ctx: MetaContext, rnd: int) -> StageConfig:
    """The engineer's stage settings: ``[train]``'s LoRA and optimiser settings, ``harness_r1.steps``
    steps of ``episodes_per_step`` x ``group`` patches, no dynamic sampling, ``sft_epochs`` SFT
    passes, adapters under ``<out_dir>/engineer``."""
    cfg = ctx.config.harness_r1
    base = ctx.config.train.stage(rnd, ctx.config.seed, Path(ctx.config.out_dir) / "engineer")
    return base.model_copy(update={"steps": max(1, cfg.steps), "tasks_per_step": cfg.episodes_per_step,
                                   "num_generations": cfg.group, "resample": 0, "micro_batches": None,
                                   "epochs": max(1, cfg.sft_epochs), "minibatch_size": 1})


def stage_summary(rnd: int, outcomes: list[Any], history: list[dict[str, Any]],
                  examples: int | None) -> EngineerStage:
    """One engineer stage in numbers (``EngineerStage``) from its patches' ``outcomes`` and the GRPO
    steps' ``history``; ``examples`` the SFT examples (None: no cold start this round)."""
    valid = [o.reward for o in outcomes if o.valid]
    return EngineerStage(round=rnd, sft_examples=examples, rewards=[h.get("reward") for h in history],
                         patches=len(outcomes), valid=len(valid),
                         valid_reward=statistics.fmean(valid) if valid else None)


async def engineer_grpo(ctx: MetaContext, state: HarnessR1State, ckpt: Checkpoint, episodes: list[EditEpisode],
                        stage: StageConfig) -> tuple[Checkpoint, list[Any]]:
    """GRPO on the engineer ``ckpt`` over ``episodes`` (``train_engineer_grpo``), each patch rewarded by
    reruns of the frozen target W[t+1] (``EditEnv`` over ``evaluation_rerun``); what it spent — the
    reruns' rollouts and the engineer's replies — is accounted in the current phase
    (``engineer_budget``), also when the stage raises part-way (the reruns already made, keyed by
    ``<engineer>:failed``; the error is re-raised). Returns the new checkpoint and the patches'
    ``EditOutcome`` s."""
    cfg = ctx.config.harness_r1
    reruns: list[Any] = []
    rerun = evaluation_rerun(ctx.policy(state["checkpoint"]), ctx.env, state["checkpoint"], ctx.evaluator,
                             ctx.config.eval.concurrency, results=reruns)
    try:
        new, replies, rollout = await asyncio.to_thread(
            train_engineer_grpo, ckpt, episodes, EditEnv(rerun, cfg.penalty), stage, cfg.temperature,
            cfg.max_tokens, cfg.max_ops, ctx.archive, ctx.run_id)
    except BaseException:
        if reruns:  # a stage that fails part-way has still spent its reruns (its replies are not known)
            ctx.account(engineer_budget(ctx.run_id, f"{ckpt.id}:failed", reruns, []))
        raise
    ctx.account(engineer_budget(ctx.run_id, new.id, reruns, replies))
    return new, [o for _, _, o in rollout.outcomes]


def cold_start(ctx: MetaContext) -> list[EngineerExample]:
    """The engineer's cold-start SFT examples: the accepted edits (``accepted_examples``) of the runs
    ``harness_r1.cold_start_from`` names, else of every run in the archive whose env config is this
    run's (``RunRecord.config["env"]``), without any example whose evidence is one of this run's val or
    test tasks or whose prompt or reply carries one of their gold answers (``coevo.meta.sealing.carried``;
    the answers from the env's ``reveal``, read for this check only). Each one left out is logged."""
    named = ctx.config.harness_r1.cold_start_from
    env = ctx.config.env.model_dump(mode="json")
    runs = named or [r.id for r in ctx.archive.list(RunRecord) if (r.config or {}).get("env") == env]
    held = [t for split in ("val", "test") for t in ctx.tasks(split)]  # type: ignore[arg-type]
    reveal = getattr(ctx.env, "reveal", None)
    answers = {t.id: str(reveal(t)) for t in held} if callable(reveal) else {}
    held_ids = {t.id for t in held}
    out = []
    for example in accepted_examples(ctx.archive, runs=runs):
        leaked = (held_ids & set(example.tasks)) or set(carried([example.user, example.reply], answers))
        if leaked:
            ctx.log("engineer", f"cold start: edit {example.edit_id} left out: it shows or answers this run's "
                                f"val/test task(s) {sorted(leaked)[:3]}")
        else:
            out.append(example)
    return out


async def train_engineer(state: HarnessR1State, runtime: Runtime[MetaContext]) -> dict:
    """One engineer stage (Harness-R1): on the first, cold-start SFT on the accepted edits of this env
    config's runs, sealed against this run's val and test (``cold_start``; ``harness_r1.sft_epochs``
    passes; none: skipped); then ``harness_r1.steps`` GRPO steps on
    episodes of the incumbent's failed train tasks (``failure_episodes``), rewarded by reruns of the
    frozen target W[t+1] (``EditEnv``); the context's editor then edits with the new adapter. With
    nothing to train (no accepted edit, ``steps`` 0 or too few failures) the engineer stays as it is.
    Returns ``engineer`` (the checkpoint id, once trained) and the stage's summary. The reruns are
    the run's rollouts (phase ``train_engineer``; ``engineer_grpo``): under a rollout cap the stage
    first reserves its most reruns (``grpo_rollouts``) and, when they would not fit, neither trains
    nor reruns anything (``BudgetExhausted``: the run ends here, then its final test). A context whose
    editor is not an ``EngineerEditor`` (a pinned editor, e.g. an equal-spend comparison's offline
    one) skips the stage with a logged reason: nothing would use what it trains."""
    ctx = runtime.context
    cfg, rnd = ctx.config.harness_r1, state.get("round", 0)
    engineer = ctx.editor
    if not isinstance(engineer, EngineerEditor):
        ctx.log("engineer", f"round {rnd}: the editor is a {type(engineer).__name__}, not the harness engineer "
                            "(coevo.roles.engineer.engineer_for): engineer stage skipped")
        return {"engineer_stages": [stage_summary(rnd, [], [], None)]}
    current = state.get("engineer")
    ckpt = ctx.archive.get(Checkpoint, current) if current else None
    stage = engineer_stage(ctx, rnd)
    data = cold_start(ctx) if not current and cfg.sft_epochs else []
    examples = len(data) if not current and cfg.sft_epochs else None
    episodes = failure_episodes(ctx, state, rnd)
    grpo = bool(cfg.steps) and len(episodes) >= cfg.episodes_per_step
    if ckpt is None and (data or grpo):
        ckpt = engineer_checkpoint(cfg.engineer)
    outcomes: list[Any] = []
    history: list[dict[str, Any]] = []
    async with ctx.reserved(grpo_rollouts(stage, episodes) if grpo else 0, f"round {rnd}'s engineer stage"):
        if data:
            ckpt = await asyncio.to_thread(train_engineer_sft, ckpt, data, stage, ctx.archive, ctx.run_id)
        if grpo:
            ckpt, outcomes = await engineer_grpo(ctx, state, ckpt, episodes, stage)
            history = ckpt.metrics.get("history", [])
    if ckpt is not None:  # every round: a resumed run's editor gets the trained adapter back too
        engineer.use(engineer_reference(ckpt))
    summary = stage_summary(rnd, outcomes, history, examples)
    sft = examples if examples is not None else "no"
    ctx.log("engineer", f"round {rnd}: {ckpt.id if ckpt else cfg.engineer} ({sft} SFT examples; "
                        f"{len(episodes)} episodes, {summary.valid}/{summary.patches} valid patches, "
                        f"GRPO reward per step {summary.rewards})")
    return {**({"engineer": ckpt.id} if ckpt else {}), "engineer_stages": [summary]}
