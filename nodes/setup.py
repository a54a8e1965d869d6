"""``setup``: fix the starting pair (H0, W0) and the run's tasks in the archive; start round 0."""

from __future__ import annotations

import hashlib

from langgraph.runtime import Runtime

from coevo.config import RunConfig
from coevo.meta.context import MetaContext
from coevo.meta.state import MetaState
from coevo.models.checkpoint import Checkpoint


def base_checkpoint(config: RunConfig) -> Checkpoint:
    """W0: the configured policy without an adapter (id derived from the policy ref), evaluated
    through the vLLM servers that serve it when ``train.vllm`` names them (``served_ref``)."""
    ref = config.policy
    if config.train.vllm:
        from coevo.training.vllm_sync import served_ref

        ref = served_ref(config.train.vllm, config.train.vllm_model)
    key = config.policy if ref == config.policy else f"{config.policy}@{ref}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    base = config.policy.split(":", 1)[1] if config.policy.startswith("local:") else config.policy
    return Checkpoint(id=f"base-{digest}", base_model=base, model_ref=ref)


def setup(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Store H0 (``ctx.start()``: ``config.harness`` or the env's base harness, built once) and W0
    unless the input names them (``incumbent``, ``checkpoint``), and the run's train/val/test tasks
    (and a searching strategy's search split); record the context's run id and the rounds to run
    (``config.rounds``) in the state. Idempotent."""
    ctx = runtime.context
    run_id = ctx.run_id
    incumbent = state.get("incumbent")
    if not incumbent:
        incumbent = ctx.archive.add_harness(ctx.start(), [], "base", run_id)  # H0 as the driver built it
    checkpoint = state.get("checkpoint")
    if not checkpoint:
        checkpoint = ctx.record_base_checkpoint(base_checkpoint(ctx.config))
    for split in ("train", "val", "test"):
        if getattr(ctx.config.env, f"n_{split}"):
            ctx.archive.put(*ctx.tasks(split))
    if ctx.searches and ctx.config.search.tasks:
        ctx.archive.put(*ctx.search_tasks())  # refuses a train split too short for the search split
    ctx.log("setup", f"run {run_id}: H0={incumbent[:12]} W0={checkpoint} env={ctx.env.name} "
                     f"train/val/test={ctx.config.env.n_train}/{ctx.config.env.n_val}/{ctx.config.env.n_test}")
    return {"run_id": run_id, "round": 0, "incumbent": incumbent, "checkpoint": checkpoint,
            "start_harness": incumbent, "start_checkpoint": checkpoint, "rounds": ctx.config.rounds}
