"""``train`` (W[t+1], T[t] = train(W[t], H[t], D_train)) and ``sample`` (T[t] with frozen weights)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.context import MetaContext
from coevo.meta.sealing import accepted_harnesses, sealed_tasks
from coevo.meta.state import MetaState, WeightStage
from coevo.models.trajectory import Trajectory
from coevo.observe.text import magnitude, percent
from coevo.training.kinds import StageKind, configured, training_spec


def stage_tasks(ctx: MetaContext, state: MetaState) -> list[Task]:
    """The run's train tasks less those a live harness answers (``sealed_tasks``; docs/design.md,
    Principles). Raises ``ValueError`` when none is left."""
    excluded = sealed_tasks(state)
    tasks = [t for t in ctx.tasks("train") if t.id not in excluded]
    if not tasks:
        raise ValueError(f"every one of the {ctx.config.env.n_train} train tasks went into a demonstration; raise "
                         "env.n_train so later weight stages and checks have tasks the harness does not answer")
    return tasks


def rescue_pool(ctx: MetaContext, state: MetaState, spec: HarnessSpec) -> list[HarnessSpec]:
    """The Eq. 5 rescue pool of a weight stage under ``spec``: the harnesses the run accepted
    before (``accepted_harnesses``; VACE's analogue of Harness-S's pool of checked siblings), newest
    first, other than ``spec`` itself — never a candidate the gate rejected."""
    return [ctx.spec(h) for h in reversed(accepted_harnesses(state)) if h != spec.id]


async def train(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The weight stage under the incumbent harness (VACE Alg. 1, line 2): GRPO or RSFT via the
    context's ``trainer`` on the train tasks no live harness answers (``stage_tasks``), with the
    harnesses accepted earlier as the Eq. 5 rescue pool (``rescue_pool``, used with
    ``train.rescue``). Returns the new
    checkpoint id, the ids of the stage's trajectories and the stage's training numbers
    (``WeightStage``; ``stage_effect`` adds its val effect)."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    pool = rescue_pool(ctx, state, spec) if ctx.config.train.rescue else []
    checkpoint, trajectories, stage = await run_stage(ctx, state, spec, state["checkpoint"],
                                                      configured(ctx.config.train, pool))
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


async def run_stage(ctx: MetaContext, state: MetaState, spec: HarnessSpec, before: str,
                    kind: StageKind | None = None) -> tuple[str, list[Trajectory], WeightStage]:
    """One weight stage from checkpoint ``before`` under ``spec`` on ``stage_tasks``, of the ``kind`` the
    family chose (``coevo.training.kinds``; None: ``configured``, the ``[train]`` algorithm's plain
    stage): the new checkpoint id, its trajectories (stored, split ``train``, under the harnesses
    themselves rather than their training variants) and its ``WeightStage`` numbers. Raises
    ``ValueError`` when the run has no trainer or no train task is left."""
    rnd = state.get("round", 0)
    tasks = stage_tasks(ctx, state)
    kind = kind if kind is not None else configured(ctx.config.train)
    checkpoint, trajectories = await ctx.train(before, spec, tasks, rnd, kind)  # accounted
    # rollouts ran the training variants (``training_spec``); they are stored under the harnesses themselves
    names = {training_spec(s, ctx.config.train).id: s.id for s in [spec, *kind.harnesses()]}
    trajectories = [t.model_copy(update={"split": "train", "harness_id": names.get(t.harness_id, spec.id)})
                    for t in trajectories]
    ctx.archive.add_trajectories(trajectories, None, ctx.run_id)
    record = ctx.checkpoint(checkpoint)  # the record ctx.train read
    m = record.metrics if record is not None else {}
    stage = WeightStage(round=rnd, harness_id=spec.id, checkpoint_before=before, checkpoint_after=checkpoint,
                        steps=m.get("steps"), train_reward=m.get("reward_mean"),
                        effective_group_rate=m.get("effective_group_rate"), contrast_rate=m.get("nonzero_std_rate"),
                        rescue_rate=m.get("rescue_rate"), rescue_success=m.get("rescue_success"),
                        resampled_groups=m.get("resampled_groups"), delta_norm=m.get("delta_norm"),
                        total_delta_norm=m.get("total_delta_norm"),
                        excluded_tasks=len(ctx.tasks("train")) - len(tasks))
    mean = sum(t.reward for t in trajectories) / len(trajectories) if trajectories else 0.0
    rescue = (f", rescue triggered {percent(stage.rescue_rate)} (rescued groups with a success "
              f"{percent(stage.rescue_success)})" if kind.pool() else "")
    ctx.log("train", f"round {rnd}: {before} -> {checkpoint}  {len(trajectories)} rollouts on {len(tasks)} "
                     f"tasks, mean reward {mean:.3f}, effective groups {percent(stage.effective_group_rate)} "
                     f"(with reward contrast {percent(stage.contrast_rate)}){rescue}, "
                     f"||dW|| {magnitude(stage.delta_norm, 4)}")
    return checkpoint, trajectories, stage


async def sample(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Trajectories T[t] for refinement when weights are frozen (harness_only): the incumbent on
    the train tasks no demonstration answers, sampled as the weight stage would
    (``training_spec``: ``train.temperature``, ``train.max_new_tokens``) with round-dependent
    seeds (``seed + 1000 * round``, like ``TrainConfig.stage``), so a later round refines from
    fresh evidence instead of re-proposing a rejected candidate from the same rollouts."""
    ctx = runtime.context
    rnd = state.get("round", 0)
    spec = training_spec(ctx.spec(state["incumbent"]), ctx.config.train)
    sampler = ctx.archive.add_harness(spec, [state["incumbent"]], "sampling", ctx.run_id)
    result = await ctx.evaluate(sampler, state["checkpoint"], "train", stage_tasks(ctx, state),
                                seed=ctx.config.seed + 1000 * rnd)
    ids = [i for o in result.per_task.values() for i in o.trajectory_ids]
    ctx.log("sample", f"round {rnd}: {len(ids)} train rollouts, mean reward {result.mean_reward:.3f}")
    return {"train_trajectories": ids}
