"""``train`` (W[t+1], T[t] = train(W[t], H[t], D_train)) and ``sample`` (T[t] with frozen weights)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from coevo.meta.context import MetaContext, services
from coevo.meta.state import MetaState


async def train(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The weight stage under the incumbent harness (VACE Alg. 1, line 2): GRPO or RSFT via the
    context's ``trainer``. Returns the new checkpoint id and the ids of the stage's trajectories."""
    ctx = services(runtime)
    if ctx.trainer is None:
        raise ValueError("this strategy trains weights but the run has no trainer; use strategy harness_only or static")
    spec = ctx.spec(state["incumbent"])
    checkpoint, trajectories = await ctx.trainer(state["checkpoint"], spec, ctx.tasks("train"), state.get("round", 0))
    trajectories = [t.model_copy(update={"split": "train", "harness_id": spec.id}) for t in trajectories]
    ctx.archive.add_trajectories(trajectories, None, ctx.run_id)
    mean = sum(t.reward for t in trajectories) / len(trajectories) if trajectories else 0.0
    ctx.reporter.log(f"train  round {state.get('round', 0)}: {state['checkpoint']} -> {checkpoint}  "
                     f"{len(trajectories)} rollouts, train reward {mean:.3f}")
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories]}


async def sample(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Trajectories T[t] for refinement when weights are frozen (harness_only): one evaluation of
    the incumbent on the train split."""
    ctx = services(runtime)
    result = await ctx.evaluate(state["incumbent"], state["checkpoint"], "train")
    ids = [i for o in result.per_task.values() for i in o.trajectory_ids]
    ctx.reporter.log(f"sample round {state.get('round', 0)}: {len(ids)} train rollouts, "
                     f"mean reward {result.mean_reward:.3f}")
    return {"train_trajectories": ids}
