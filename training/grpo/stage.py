"""``train_grpo``: one GRPO stage on harness rollouts, LoRA via PEFT, on TRL's ``GRPOTrainer``.

VACE Algorithm 1 line ``W[t+1], T[t] = train(W[t], H[t], D_train)``. Rollouts run through coevo's
own harness graph (``HarnessRollout`` as TRL's ``rollout_func``), so training and evaluation run the
same harness code and the policy learns from exactly the tokens it sampled.

The objective is Harness-S §7, mapped onto ``GRPOConfig``:

==========================================  =================================================
Harness-S §7                                here
==========================================  =================================================
Eq. 6 advantages, population std, eps=1e-6  computed per group by the rollout (TRL's own
                                            ``scale_rewards`` uses Bessel's std + 1e-4, unused)
Eq. 5 rescue of groups without success      ``rescue`` hook of ``HarnessRollout`` (``needs_rescue``:
                                            no full credit and no reward contrast)
(DAPO §3.2 dynamic sampling)                ``resample``: groups without contrast replaced by
                                            other tasks' groups (not in Harness-S; off by default)
Eq. 7 clip, eta- = 0.20, eta+ = 0.28        ``epsilon=0.20``, ``epsilon_high=0.28``
no KL                                       ``beta=0.0`` (no reference model is loaded)
Eq. 15 token-mean per task, mean over tasks ``loss_type="dapo"`` + per-task advantage factor
                                            ``N / (|B| N_x)`` (exact; see ``trainer.py``)
Eq. 16 clip(pi_old / q, 0, 2)               folded into per-token advantages when
                                            ``importance_correction`` (auto: on when the sampler is
                                            not the trainer's own model, e.g. vLLM)
loss on policy tokens only                  ``env_mask`` from ``Trajectory.segments``
==========================================  =================================================

Rollouts that raised or carry no sampled tokens are masked out of their groups, and a group left
with fewer than two is dropped (``coevo.training.grpo.masking``); each rollout samples with its own
seed (``coevo.training.grpo.seeds``).

Differences: one generation batch per optimiser step (``num_iterations=1`` by default), so
``pi_old`` is the sampling policy and the ratio is 1 (up to float rounding when Eq. 16 scores
``pi_old`` in its own no-grad forward): Eq. 7's clip (``epsilon``,
``epsilon_high``) has no effect until ``num_iterations >= 2`` (TRL's several optimisation passes
per generation batch; the old log-probs are then computed before the first pass). Dropout is off
(``disable_dropout``), so ``lora_dropout`` has no effect here. ``max_len`` truncates very long
segments from the tail.

Speed without a change of objective: a step's rollouts share ``generate`` calls (each runs as a
client of the sampler's engine; the prompt prefix the rows share is prefilled once,
``coevo.models.decode``), and with ``pack_prefixes`` the whole batch is one micro-step whose
shared prompt tokens run through the forward and backward once (``coevo.training.grpo.packing``); with
``merge_sampler`` the live sampler decodes with the LoRA adapter merged into the base weights
(``coevo.models.merged``).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from coevo.compat import route_tensorboard
from coevo.config.train import StageConfig
from coevo.envs.base import Env, Task
from coevo.models.adapters import stage_folder, writing_adapter
from coevo.models.checkpoint import Checkpoint, new_checkpoint_id
from coevo.models.trajectory import Trajectory
from coevo.training.checkpoint import load_policy, record_checkpoint
from coevo.training.grpo.harness_cost import HARNESS_KEYS
from coevo.training.grpo.rollout import HarnessRollout, PolicyFactory, Rescue, RolloutFn
from coevo.training.memory import fitted

log = logging.getLogger(__name__)


def grpo_args(cfg: StageConfig, output_dir: Path, temperature: float = 1.0) -> Any:
    """The TRL ``GRPOConfig`` of a stage: one generation batch of ``tasks_per_step x num_generations``
    rows per optimiser step, in ``cfg.accumulation_steps`` micro-steps (CPU: ``use_cpu=True,
    bf16=False``; no checkpoints saved by the trainer; ``report_to`` and ``run_name`` passed through).
    ``temperature`` is the harness's sampling temperature: TRL divides the logits by it, so
    ``pi_theta``/``pi_old`` are the distributions the tokens were sampled from (a harness
    ``top_p < 1`` is not mirrored: the ratio uses the full softmax)."""
    import torch
    from trl import GRPOConfig

    use_cpu = cfg.use_cpu if cfg.use_cpu is not None else not torch.cuda.is_available()
    bf16 = not use_cpu and torch.cuda.is_bf16_supported()
    batch, micro = cfg.tasks_per_step * cfg.num_generations, cfg.accumulation_steps
    return GRPOConfig(
        output_dir=str(output_dir), max_steps=cfg.steps, seed=cfg.seed,
        per_device_train_batch_size=batch // micro, gradient_accumulation_steps=micro,
        steps_per_generation=micro, num_generations=cfg.num_generations,
        num_iterations=cfg.num_iterations, learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=0, max_grad_norm=cfg.max_grad_norm, beta=0.0, epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high, loss_type="dapo", temperature=temperature, scale_rewards="none",
        max_completion_length=cfg.max_len,
        use_cpu=use_cpu, bf16=bf16, activation_checkpointing=cfg.activation_checkpointing, disable_dropout=True,
        logging_steps=cfg.logging_steps, report_to=cfg.report_to, run_name=cfg.run_name, save_strategy="no",
        remove_unused_columns=False, dataloader_num_workers=0, log_completions=False,
    )


def quiet_console(trainer: Any) -> None:
    """Replace TRL's console output in ``trainer`` (a tqdm bar, and each step's metric dict written
    to stdout between the meta-loop's lines) by a bar on a terminal only and the metrics at DEBUG on
    the ``coevo.training.grpo.stage`` logger. The metrics stay in ``trainer.state.log_history`` (the
    checkpoint's ``stage_metrics``). Uses transformers' public callback hooks only."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback

    class DebugLog(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            log.debug("GRPO step %d: %s", state.global_step, logs)

    class QuietProgress(ProgressCallback):  # the bar, with the metrics on the logger instead of the bar
        on_log = DebugLog.on_log

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(QuietProgress() if sys.stderr.isatty() else DebugLog())


def lora_config(cfg: StageConfig) -> Any:
    """A PEFT ``LoraConfig`` for a causal LM from ``lora_r``/``lora_alpha``/``lora_dropout``/
    ``lora_target_modules``."""
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.lora_target_modules, task_type="CAUSAL_LM")


def _env_reward(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    """Placeholder reward function for TRL's constructor: rewards come from the env's verifier
    inside the rollout, and ``HarnessGRPOTrainer`` never calls this."""
    return [0.0] * len(prompts)


def stage_metrics(log_history: list[dict], rollouts: list[dict[str, float]], wall_s: float) -> dict[str, Any]:
    """Checkpoint metrics of a stage: means over steps of loss, reward (rollouts under the harness),
    effective-group rate, the rate of groups with any reward contrast and effective-token share;
    policy tokens, groups drawn by dynamic sampling, rollouts masked out of their groups (raised:
    ``failed_rollouts``; without sampled tokens: ``tokenless_rollouts``) and groups dropped below two
    rollouts summed; wall seconds; and ``history`` (one
    dict per step: step, loss, reward, pass_rate, effective_group_rate, nonzero_std_rate,
    effective_token_share, policy_tokens, rescue_rate (Harness-S rescue trigger rate), rescue_success,
    rescued_groups, resampled_groups, resampled_retained,
    failed_rollouts, tokenless_rollouts, dropped_groups (``coevo.training.grpo.masking``), the sampler's
    rollout_s, the harness-use numbers of ``coevo.training.grpo.harness_cost.harness_metrics``
    (task_reward, harness_cost, shaped_reward, action_rate, harness_reads, harness_writes,
    state_chars; also as means over steps),
    sampled_tokens, sampled_tokens_per_s, and the trainer's grad_norm, entropy and, with Eq. 16,
    is_weight_mean and sampler_logp_diff_mean; needs ``logging_steps=1``)."""
    logs = [h for h in log_history if "loss" in h]
    losses = [h["loss"] for h in logs]

    def mean(key: str) -> float:
        return statistics.fmean(r[key] for r in rollouts) if rollouts else 0.0

    keys = ("reward", "pass_rate", "effective_group_rate", "nonzero_std_rate", "effective_token_share",
            "policy_tokens", "rescue_rate", "rescue_success", "rescued_groups", "resampled_groups",
            "resampled_retained", "failed_rollouts", "tokenless_rollouts", "dropped_groups", "rollout_s",
            "sampled_tokens", "sampled_tokens_per_s", *HARNESS_KEYS)
    trainer_keys = ("loss", "grad_norm", "entropy", "is_weight_mean", "sampler_logp_diff_mean")
    history = [{"step": i + 1, **{k: r[k] for k in keys if k in r},
                **({k: logs[i][k] for k in trainer_keys if k in logs[i]} if i < len(logs) else {})}
               for i, r in enumerate(rollouts)]
    return {
        "loss": statistics.fmean(losses) if losses else None,
        "reward_mean": mean("reward"),
        "pass_rate": mean("pass_rate"),
        "effective_group_rate": mean("effective_group_rate"),
        "nonzero_std_rate": mean("nonzero_std_rate"),
        "effective_token_share": mean("effective_token_share"),
        "tokens": int(sum(r["policy_tokens"] for r in rollouts)),
        "rescue_rate": mean("rescue_rate"),
        "rescue_success": (sum(r.get("rescue_success", 0.0) * r.get("rescued_groups", 0.0) for r in rollouts)
                           / max(1.0, sum(r.get("rescued_groups", 0.0) for r in rollouts))),
        "resampled_groups": int(sum(r.get("resampled_groups", 0.0) for r in rollouts)),
        **{key: int(sum(r.get(key, 0.0) for r in rollouts))
           for key in ("failed_rollouts", "tokenless_rollouts", "dropped_groups")},
        "sampled_tokens_per_s": (sum(r.get("sampled_tokens", 0.0) for r in rollouts)
                                 / max(1e-9, sum(r.get("rollout_s", 0.0) for r in rollouts))),
        **{k: mean(k) for k in HARNESS_KEYS},
        "steps": len(rollouts),
        "wall_time_s": wall_s,
        "history": history,
    }


def train_grpo(
    checkpoint: Checkpoint, spec: Any, env: Env, tasks: Sequence[Task], config: StageConfig | dict | None = None,
    rescue: Rescue | None = None, archive: Any = None, *, policy_factory: PolicyFactory | None = None,
    rollout_fn: RolloutFn | None = None, callbacks: list | None = None, run_id: str | None = None,
    executor: Any = None, mixture: Sequence[Any] = (),
) -> tuple[Checkpoint, list[Trajectory]]:
    """Run one GRPO stage from ``checkpoint`` under harness ``spec`` on ``tasks`` (train split).

    Args: ``config`` a ``StageConfig`` (or its dict; ``TrainConfig.stage`` builds it for a run);
    ``rescue`` the Eq. 5 hook
    ``rescue(task, failed_group[, policy=]) -> group`` called for a group without success and without
    reward contrast (``coevo.training.grpo.advantages.needs_rescue``; binary rewards: all K rollouts fail)
    (``coevo.training.grpo.rollout.sibling_rescue`` builds the Harness-S one); ``archive`` a
    ``coevo.storage.Archive`` that records the new checkpoint; ``policy_factory(trainer)`` the
    sampler (default: the trainer's own current weights through ``LocalChatModel``; a vLLM-backed
    factory from ``coevo.training.vllm_sync``); ``rollout_fn`` replaces ``arun_rollout`` (tests);
    ``executor`` (``coevo.evaluation.executors``, e.g. a ``RayExecutor``) runs the groups of a
    server-backed sampler on its workers, while the default live-weights sampler stays in this
    process (``coevo.evaluation.executors.sampling_on``); ``mixture`` the harness of each group
    position, cycled to K (``HarnessRollout``; Harness-S's fixed mixed-harness control).

    Returns ``(new checkpoint, trajectories)``: the new checkpoint has the trained LoRA adapter under
    ``<output_dir>/<new id>/adapter``, ``parents=[checkpoint.id]``, the config and
    ``stage_metrics`` (and ``run_id``); the trajectories are every rollout made
    (``HarnessRollout.trajectories``). Raises ``StageConfigError`` naming a bad config key, and
    ``ValueError`` when ``num_generations < 2``, there are fewer tasks than ``tasks_per_step`` or the
    harness decodes greedily (``spec.decoding.temperature == 0``).
    """
    from datasets import Dataset

    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    cfg = StageConfig.parse(config)
    cfg.check_grpo()
    if getattr(getattr(spec, "decoding", None), "temperature", 1.0) == 0:
        raise ValueError("train_grpo needs sampled rollouts but spec.decoding.temperature is 0 (greedy): every group "
                         "would be K identical rollouts with zero advantage; set a temperature > 0 for training")
    if len(tasks) < cfg.tasks_per_step:
        raise ValueError(f"train_grpo got {len(tasks)} tasks but tasks_per_step={cfg.tasks_per_step}; "
                         "pass more tasks or lower tasks_per_step")
    new_id = new_checkpoint_id()
    out_dir = stage_folder(cfg.output_dir, new_id, run_id)  # marked: an unfinished stage's folder can be found
    model, tokenizer = load_policy(checkpoint, trainable=True)
    cfg = fitted(cfg, model)  # the micro-batch and sequence cap its memory budget allows, or MemoryBudgetError
    if executor is not None:
        from coevo.evaluation.executors import sampling_on

        rollout_fn = sampling_on(executor, rollout_fn)
    rollout = HarnessRollout(spec, env, tasks, rescue=rescue, policy_factory=policy_factory, rollout_fn=rollout_fn,
                             max_len=cfg.max_len, seed=cfg.seed, checkpoint_id=checkpoint.id,
                             max_concurrency=cfg.max_concurrency, resample=cfg.resample, mixture=mixture,
                             action_cost=cfg.action_cost or 0.0, merge_sampler=cfg.merge_sampler,
                             sampler_threads=cfg.sampler_threads)
    correction = cfg.importance_correction if cfg.importance_correction is not None else policy_factory is not None
    trainer = HarnessGRPOTrainer(
        model=model, reward_funcs=[_env_reward], args=grpo_args(cfg, out_dir, spec.decoding.temperature),
        train_dataset=Dataset.from_list([{"prompt": t.id} for t in tasks]), processing_class=tokenizer,
        peft_config=None if checkpoint.adapter_path else lora_config(cfg), rollout_func=rollout,
        callbacks=callbacks, importance_correction=correction, is_clip=cfg.is_clip, pack_prefixes=cfg.pack_prefixes,
    )
    quiet_console(trainer)
    route_tensorboard(trainer, cfg.logging_dir)
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        rollout.close()
    wall = time.perf_counter() - started
    adapter_dir = out_dir / "adapter"
    with writing_adapter(adapter_dir, new_id) as partial:  # the adapter appears whole, or not at all
        trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(partial))
    new = Checkpoint(
        id=new_id, base_model=checkpoint.base_model, adapter_path=str(adapter_dir), parents=[checkpoint.id],
        config={"stage": "grpo", "harness_id": getattr(spec, "id", ""), **cfg.model_dump(mode="json"),
                "importance_correction": correction},
        metrics=stage_metrics(trainer.state.log_history, rollout.history, wall), run_id=run_id,
    )
    record_checkpoint(archive, new)
    return new, rollout.trajectories
