"""Online rejection-sampling fine-tuning (WHALE §3.1) on harness rollouts, LoRA via PEFT.

Each round (a ``StageConfig`` step): the current policy samples ``num_generations`` rollouts for
each of ``tasks_per_step`` tasks (drawn in turn, or from WHALE's ``PersistentSampler`` so that
each phase continues where the last stopped) under the fixed harness (``coevo.harnesses.runtime.arun_rollout``),
the verifier-accepted ones (those it passed, R = 1; with ``rsft_threshold`` set, a stated bar for
partial credit: reward > it) are kept, and the adapter takes minibatch
gradient steps on the token-normalised log-likelihood of their *policy* tokens only
(``Trajectory.segments`` masks: user prompts, tool results and harness injections excluded). The
next round samples from the updated weights ("synchronise the updated weights to the rollout
workers"). Each rollout samples with its own seed (``coevo.training.grpo.seeds``); a rollout that raised
or carries no sampled tokens is recorded and counted but neither a sample of the round's statistics
nor accepted (``coevo.training.grpo.masking``).

A small loop rather than TRL's ``SFTTrainer``: the data change every round and the optimiser
state must persist across rounds; the loss is exactly WHALE's masked, token-normalised NLL. It
persists across stages too: a stage saves its AdamW state beside its adapter (``OPTIMIZER``) and a
stage starting from that checkpoint resumes it (``resume_optimizer``), so WHALE's weight phases are
one online run cut by the harness phases, not a fresh optimiser per cycle; a checkpoint no RSFT stage
wrote (the base, a GRPO stage's, a merge) starts a fresh one, and so does a stage run with
``resume=False`` (CoEvo-RSI's adaptation, whose every round is an SFT run of its own).
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from coevo.aio import run_sync
from coevo.config.train import StageConfig
from coevo.envs.base import Env, Task
from coevo.models.adapters import stage_folder, writing_adapter
from coevo.models.base import batched
from coevo.models.checkpoint import Checkpoint, new_checkpoint_id
from coevo.models.trajectory import Trajectory
from coevo.training.checkpoint import load_policy, record_checkpoint
from coevo.training.grpo.masking import guarded, mask_counts, members
from coevo.training.grpo.rollout import RolloutFn, default_rollout_fn, sampling_mode
from coevo.training.grpo.samples import Row, trajectory_rows
from coevo.training.grpo.seeds import rollout_seed, without_fixed_seed
from coevo.training.memory import ModelShape, plan_sft_memory
from coevo.training.schedule import PersistentSampler, run_phase
from coevo.training.sft import sft_loss

OPTIMIZER = "rsft_optimizer.pt"
"""The file, beside a stage's ``adapter`` folder, holding its AdamW state at the end of the stage: two
float32 moments per trainable parameter (SmolLM2-135M with LoRA r = 8 on every linear layer: 2.44 M
parameters, 19.5 MB a stage, twice its adapter's size)."""


def accepted(trajectories: Sequence[Trajectory], threshold: float | None = None) -> list[Trajectory]:
    """The verifier-accepted trajectories (WHALE §3.1): those the verifier passed when ``threshold``
    is None (R = 1), else those with ``reward > threshold`` (a partial-credit bar the config states)."""
    if threshold is None:
        return [t for t in trajectories if t.passed]
    return [t for t in trajectories if t.reward > threshold]


def policy_tokens(rows: Sequence[Row]) -> int:
    """How many policy tokens (``env_mask`` ones) ``rows`` hold: what ``sft_loss`` normalises by."""
    return sum(sum(r.env_mask) for r in rows)


def train_rsft(
    checkpoint: Checkpoint, spec: Any, env: Env, tasks: Sequence[Task], config: StageConfig | dict | None = None,
    archive: Any = None, *, policy_factory: Callable[[Any, Any], Any] | None = None,
    rollout_fn: RolloutFn | None = None, run_id: str | None = None, progress: Callable[[dict], None] | None = None,
    executor: Any = None,
    sampler: PersistentSampler | None = None, position: int = 0, max_steps: int | None = None,
    stop: Callable[[list[float]], str | None] | None = None, stream: Sequence[Task] | None = None,
    rows_fn: Callable[[Trajectory, int], list[Row]] | None = None, resume: bool = True,
) -> tuple[Checkpoint, list[Trajectory]]:
    """Run one online RSFT stage from ``checkpoint`` under harness ``spec`` on ``tasks``.

    Args: ``config`` a ``StageConfig`` (or its dict; ``TrainConfig.stage`` builds it for a run):
    ``steps`` rounds of ``tasks_per_step`` tasks x ``num_generations`` samples, ``rsft_threshold``,
    ``epochs``, ``minibatch_size``; ``archive`` records the new checkpoint;
    ``policy_factory(model, tokenizer) -> chat model`` the sampler, built once (default:
    ``LocalChatModel`` over the live model; a server sampler samples whatever the server serves);
    ``rollout_fn`` replaces ``arun_rollout``; ``executor`` (``coevo.evaluation.executors``) samples
    the rounds of a server-backed or shippable sampler on its workers, the default live-weights
    sampler staying in this process (``coevo.evaluation.executors.sampling_on``);
    ``progress(round_stats)`` is called after each round. WHALE phases (§3.1, §4): ``sampler`` draws
    each round's tasks from the persistent shuffled stream at ``position`` (draws so far in the run)
    over ``stream`` (all the run's train tasks, default ``tasks``; those not in ``tasks`` are passed
    over), ``max_steps`` replaces ``steps`` (a phase length counted in epochs, ``epochs_to_steps``),
    and ``stop(rewards so far, one per round)`` returning a reason ends the phase early
    (``Patience.stop``). ``rows_fn(trajectory, max_len)`` the training rows of an accepted rollout
    (default: all its policy tokens, ``trajectory_rows``; EvoHarness-RL's harness SFT passes
    ``coevo.training.grpo.harness_cost.harness_sft_rows``: its BPE-using turns only).
    ``resume``: continue the AdamW state saved beside ``checkpoint`` (``resume_optimizer``; False: a
    fresh optimiser, as CoEvo-RSI's per-round SFT). Returns
    ``(new checkpoint, every rollout sampled)``; metrics hold ``loss``
    (mean over SFT steps), ``reward_mean`` (of the samples), ``kept_rate``, ``tokens`` (policy tokens
    trained on), ``wall_time_s``, a per-round ``history`` (with ``failed_rollouts`` and
    ``tokenless_rollouts``, the rollouts masked out of its samples), ``sampler_position`` (where the next phase
    starts), ``epochs`` (stream positions walked / stream size, or tasks drawn / tasks) and
    ``stop_reason`` ("": it ran its length) and ``memory`` (the plan of ``coevo.training.memory.plan_sft_memory``:
    ``micro_steps`` per minibatch, ``max_len``, ``estimate_gb``, ``budget_gb``). Rounds with nothing accepted make no
    update. Raises ``StageConfigError`` naming a bad config key, ``ValueError`` with no tasks and
    ``MemoryBudgetError`` (before any folder, sampler or rollout) when one row does not fit ``max_memory_gb``.
    """
    from peft import get_peft_model

    from coevo.training.grpo.stage import lora_config

    cfg = StageConfig.parse(config)
    if not tasks:
        raise ValueError("train_rsft needs at least one task")
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_policy(checkpoint, trainable=True)
    plan = plan_sft_memory(cfg, ModelShape.of(model))  # or MemoryBudgetError, before any folder or rollout
    cfg = cfg.model_copy(update={"max_len": plan.max_len})
    new_id = new_checkpoint_id()
    out_dir = stage_folder(cfg.output_dir, new_id, run_id)  # marked: an unfinished stage's folder can be found
    if not checkpoint.adapter_path:
        model = get_peft_model(model, lora_config(cfg))
    if torch.cuda.is_available():
        model = model.to("cuda")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
    resumed = resume and resume_optimizer(optimizer, checkpoint, cfg.learning_rate)
    policy = (policy_factory(model, tokenizer) if policy_factory
              else _local(model, tokenizer, cfg.max_batch, cfg.sampler_threads))
    if executor is not None:
        from coevo.evaluation.executors import sampling_on

        rollout_fn = sampling_on(executor, rollout_fn)
    run = guarded(rollout_fn or default_rollout_fn())  # a rollout that raises is masked, not a reward-0 sample
    spec = without_fixed_seed(spec)
    rng = random.Random(cfg.seed)
    trajectories: list[Trajectory] = []
    history: list[dict[str, Any]] = []
    try:
        def step(rnd: int, batch: list[Task]) -> float:
            ckpt_id = checkpoint.id if rnd == 0 else f"{checkpoint.id}+round{rnd}"

            async def one(x: int, task: Task, j: int) -> Trajectory:
                seed = rollout_seed(cfg.seed, rnd, "rsft", x, task.id, j)
                with batched(policy):  # a round's rollouts share the local engine's generate calls
                    return await run(spec, policy, env, task, seed=seed, checkpoint_id=ckpt_id)

            async def sample() -> list[Trajectory]:
                return list(await asyncio.gather(*(one(x, task, j) for x, task in enumerate(batch)
                                                   for j in range(cfg.num_generations))))

            with sampling_mode(model, policy, cfg.merge_sampler):
                sampled = run_sync(sample())
            trajectories.extend(sampled)
            valid = members(sampled)
            keep = accepted(valid, cfg.rsft_threshold)
            rows = [r for t in keep for r in (rows_fn(t, cfg.max_len) if rows_fn
                                              else trajectory_rows(t, 1.0, 0, cfg.max_len))]
            losses = sft_epochs(model, optimizer, rows, cfg, rng, plan.micro_batches or 1)
            # with every rollout masked the round has no sample: reward and kept rate 0.0 (the counts say why)
            stats = {"round": rnd + 1, "reward": statistics.fmean(t.reward for t in valid) if valid else 0.0,
                     "kept": len(keep), "kept_rate": len(keep) / len(valid) if valid else 0.0,
                     **{k: int(v) for k, v in mask_counts(sampled).items()},
                     "tokens": sum(r.policy_tokens for r in rows), "loss": statistics.fmean(losses) if losses else None,
                     "sft_steps": len(losses)}
            history.append(stats)
            if progress:
                progress(stats)
            return stats["reward"]

        ids = {t.id for t in tasks}
        phase = run_phase(step, stream or tasks, cfg.tasks_per_step, max_steps or cfg.steps, sampler, position, stop,
                          keep=lambda t: t.id in ids)
    finally:
        engine = getattr(policy, "engine", None)
        if engine is not None and policy_factory is None:
            engine.close()
    adapter_dir = out_dir / "adapter"
    with writing_adapter(adapter_dir, new_id) as partial:  # the adapter appears whole, or not at all
        model.save_pretrained(str(partial))
    save_optimizer(optimizer, out_dir)
    losses = [h["loss"] for h in history if h["loss"] is not None]
    new = Checkpoint(
        id=new_id, base_model=checkpoint.base_model, adapter_path=str(adapter_dir), parents=[checkpoint.id],
        config={"stage": "rsft", "harness_id": getattr(spec, "id", ""), **cfg.model_dump(mode="json")},
        metrics={"loss": statistics.fmean(losses) if losses else None,
                 "reward_mean": statistics.fmean(h["reward"] for h in history),
                 "kept_rate": statistics.fmean(h["kept_rate"] for h in history),
                 "tokens": sum(h["tokens"] for h in history), "steps": sum(h["sft_steps"] for h in history),
                 "wall_time_s": time.perf_counter() - started, "history": history, "stop_reason": phase.stop_reason,
                 "memory": {"micro_steps": plan.micro_batches, "max_len": plan.max_len,
                            "estimate_gb": round(plan.estimate_gb, 3), "budget_gb": round(plan.budget_gb, 3)},
                 "sampler_position": phase.position, "optimizer_resumed": resumed,
                 "optimizer_steps": optimizer_steps(optimizer),
                 "epochs": ((phase.position - position) / len(stream or tasks) if sampler is not None
                            else len(history) * cfg.tasks_per_step / len(tasks))},
        run_id=run_id,
    )
    record_checkpoint(archive, new)
    return new, trajectories


def resume_optimizer(optimizer: Any, checkpoint: Checkpoint, learning_rate: float) -> bool:
    """Load the AdamW state an RSFT stage saved beside ``checkpoint``'s adapter (``OPTIMIZER``) into
    ``optimizer`` (moments and step counts; the learning rate stays ``learning_rate``, this stage's).
    Returns whether it did: False, leaving ``optimizer`` fresh, when there is no such file or its
    state does not fit the parameters (another LoRA rank or target set)."""
    if not checkpoint.adapter_path:
        return False
    path = Path(checkpoint.adapter_path).parent / OPTIMIZER
    if not path.is_file():
        return False
    state = torch.load(path, map_location="cpu", weights_only=True)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved = state.get("state", {})
    if (len([i for g in state.get("param_groups", []) for i in g["params"]]) != len(params)
            or any(i in saved and saved[i]["exp_avg"].shape != p.shape for i, p in enumerate(params))):
        return False
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    return True


def save_optimizer(optimizer: Any, out_dir: Path) -> None:
    """Write ``optimizer``'s state to ``out_dir / OPTIMIZER`` whole or not at all (a temporary file
    renamed into place)."""
    partial = out_dir / f".{OPTIMIZER}.partial"
    torch.save(optimizer.state_dict(), partial)
    os.replace(partial, out_dir / OPTIMIZER)


def optimizer_steps(optimizer: Any) -> int:
    """AdamW's step count (the most of any parameter's): every update since the optimiser started,
    across the stages it was resumed through."""
    return max((int(s["step"]) for s in optimizer.state.values() if "step" in s), default=0)


def _local(model: Any, tokenizer: Any, max_batch: int, threads: int | None = None) -> Any:
    from coevo.models.local import LocalChatModel

    return LocalChatModel.from_model(model, tokenizer, name="rsft-policy", max_batch=max_batch, threads=threads)


def sft_epochs(model: Any, optimizer: Any, rows: list[Row], cfg: StageConfig, rng: random.Random,
               micro_steps: int = 1) -> list[float]:
    """``cfg.epochs`` shuffled passes of minibatch steps over ``rows``; returns each step's loss. Each
    minibatch of ``cfg.minibatch_size`` rows is scored in ``micro_steps`` gradient-accumulation micro-steps
    of ``ceil(minibatch_size / micro_steps)`` rows (``coevo.training.memory.plan_sft_memory``), each
    normalised by the whole minibatch's policy tokens: the loss and update are the unsplit step's up to
    float rounding. Raises ``ValueError`` when a minibatch holds no policy token."""
    losses: list[float] = []
    if not rows:
        return losses
    size = -(-cfg.minibatch_size // micro_steps)
    model.train()
    for _ in range(cfg.epochs):
        order = rows[:]
        rng.shuffle(order)
        for i in range(0, len(order), cfg.minibatch_size):
            batch = order[i:i + cfg.minibatch_size]
            tokens = policy_tokens(batch)
            if tokens == 0:
                raise ValueError("sft_loss: the minibatch has no policy tokens")
            optimizer.zero_grad()
            loss = 0.0
            for part in (batch[j:j + size] for j in range(0, len(batch), size)):
                if policy_tokens(part):
                    piece = sft_loss(model, part, tokens)
                    piece.backward()
                    loss += float(piece.detach())
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], cfg.max_grad_norm)
            optimizer.step()
            losses.append(loss)
    model.eval()
    return losses
