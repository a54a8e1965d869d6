"""``HarnessGRPOTrainer``: TRL's ``GRPOTrainer`` with coevo's rollouts, advantages and loss weights.

TRL's generation step is replaced by ``generation_batch`` (through ``coevo.compat.GRPOBatchHook``,
which holds the private override and the two private helpers it needs); the loss (``_compute_loss``: the
clipped ratio with ``epsilon``/``epsilon_high``), optimiser, gradient accumulation, logging and
saving are TRL's. Why the override (TRL 1.16):

- TRL's ``rollout_func`` path requires one completion per prompt. A harness trajectory whose
  context was rewritten is several training sequences (``Trajectory.segments``), so the number
  of rows is only known after the rollouts. The override calls the same ``rollout_func``
  (``coevo.training.grpo.rollout.HarnessRollout``; its ``env_mask`` is TRL's per-token mask for
  interleaved multi-turn tokens) and builds the batch from however many rows it returns.
- TRL normalises rewards with the Bessel-corrected std and ``+1e-4``; Harness-S Eq. 6 uses the
  population std and ``max(std, 1e-6)``. The rollout computes Eq. 6 per group.
- Eq. 15 averages token losses per task, then over tasks. TRL's ``dapo`` aggregation is a
  token-mean over the whole generation batch; since the clipped objective is positively
  homogeneous in the advantage, scaling each task's advantages by ``c_x = N / (|B| N_x)``
  (``task_token_weights``) makes the ``dapo`` loss equal Eq. 15 exactly.
- Eq. 16's detached weight ``clip(pi_old / q, 0, 2)`` is also a non-negative per-token factor, so
  it is folded into the per-token advantages (shape ``(B, T)``, which ``_compute_loss`` accepts).
  TRL's own ``vllm_importance_sampling_*`` options (mode ``token_truncate``, ``clip_min=0``,
  ``clip_max=2``) implement the same weight but only for TRL's built-in vLLM generation, which
  coevo does not use (its vLLM rollouts go through the harness graph and LiteLLM).
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import pad

from coevo.compat import GRPOBatchHook
from coevo.training.grpo.advantages import task_token_weights, truncated_is_weight
from coevo.training.grpo.samples import Row


def _rows(out: dict[str, Any]) -> list[Row]:
    keys = ("prompt_ids", "completion_ids", "env_mask", "logprobs", "advantages", "task_index")
    return [Row(*vals) for vals in zip(*(out[k] for k in keys), strict=True)]


class HarnessGRPOTrainer(GRPOBatchHook, GRPOTrainer):
    """``GRPOTrainer`` whose batches come from a coevo ``rollout_func`` (see module docstring).

    Extra args: ``importance_correction`` apply Eq. 16 (set it when the sampler is another engine
    than the trainer, e.g. vLLM); ``is_clip`` the ``(low, high)`` clip of Eq. 16 (default (0, 2));
    ``pack_prefixes`` score each micro-batch with its rows' shared prompt tokens run once
    (``coevo.training.grpo.packing``: the same log-probs, loss and gradients).
    Use with ``loss_type="dapo"`` (``coevo.training.grpo.stage.grpo_args`` sets it).
    """

    def __init__(self, *args: Any, importance_correction: bool = False,
                 is_clip: tuple[float, float] = (0.0, 2.0), pack_prefixes: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if pack_prefixes:
            from coevo.training.grpo.packing import packed_logps

            self.packed_scorer = packed_logps
        if self.rollout_func is None:
            raise ValueError("HarnessGRPOTrainer needs rollout_func=HarnessRollout(...)")
        if self.loss_type != "dapo":
            raise ValueError(f"HarnessGRPOTrainer implements Eq. 15 on loss_type='dapo', got {self.loss_type!r}")
        self.importance_correction = importance_correction
        self.is_clip = is_clip

    def generation_batch(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """One generation batch for TRL's loss (keys: ``coevo.compat.GRPOBatchHook``) from the
        ``rollout_func``'s rows for ``inputs`` (the dataset rows, task ids repeated K times): rows
        padded (prompts left, completions right), ``tool_mask`` the policy-token mask, advantages
        Eq. 6 x Eq. 15 (x Eq. 16 with ``importance_correction``) per token ``(B, T)``. Filler rows
        without loss pad the batch to a multiple of ``steps_per_generation``. Raises
        ``RuntimeError`` when no rollout produced policy tokens."""
        device = self.accelerator.device
        out = self.rollout_func([x["prompt"] for x in inputs], self)
        rows = _rows(out)
        if not rows:
            m = out.get("metrics") or {}
            raise RuntimeError(
                "no rollout of this step produced policy tokens to train on ("
                f"{m.get('failed_rollouts', 0):.0f} raised, {m.get('tokenless_rollouts', 0):.0f} came without sampled "
                f"tokens, {m.get('dropped_groups', 0):.0f} groups dropped with fewer than 2 rollouts left): check the "
                "log's rollout errors, and that the chat model puts token ids in response_metadata[TOKENS_KEY] "
                "(coevo.models.base)")
        chunks = self.args.steps_per_generation
        while len(rows) % chunks:  # TRL splits the batch in equal chunks; fillers carry no loss
            rows.append(Row(rows[0].prompt_ids, rows[0].completion_ids, [0] * len(rows[0].env_mask),
                            rows[0].logprobs, 0.0, rows[0].task_index))

        pad_id = getattr(self.processing_class, "tokenizer", self.processing_class).pad_token_id

        def padded(seqs: list[list], value: float, side: str, dtype: torch.dtype) -> torch.Tensor:
            return pad([torch.tensor(s, dtype=dtype) for s in seqs], padding_value=value,
                       padding_side=side).to(device)

        prompt_ids = padded([r.prompt_ids for r in rows], pad_id, "left", torch.long)
        prompt_mask = padded([[1] * len(r.prompt_ids) for r in rows], 0, "left", torch.long)
        completion_ids = padded([r.completion_ids for r in rows], pad_id, "right", torch.long)
        completion_mask = padded([[1] * len(r.completion_ids) for r in rows], 0, "right", torch.long)
        tool_mask = padded([r.env_mask for r in rows], 0, "right", torch.long)
        sampling_logps = padded([r.logprobs for r in rows], 0.0, "right", torch.float32)
        loss_mask = completion_mask * tool_mask

        tokens_per_task = [0] * int(out["num_tasks"])
        for r in rows:
            tokens_per_task[r.task_index] += r.policy_tokens
        weights = task_token_weights(tokens_per_task)
        advantages = torch.tensor([r.advantage * weights[r.task_index] for r in rows], device=device)
        advantages = advantages.unsqueeze(1).expand_as(loss_mask).clone()

        old_logps = None
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self.args.gradient_accumulation_steps % generate_every != 0 or self.importance_correction:
            old_logps = self.policy_logps(torch.cat([prompt_ids, completion_ids], 1),
                                          torch.cat([prompt_mask, completion_mask], 1), completion_ids.size(1))
        metrics = dict(out.get("metrics") or {})
        if self.importance_correction:
            weight = truncated_is_weight(old_logps, sampling_logps, *self.is_clip)
            # a row whose sampler log-probs are all exactly 0.0 came without log-probs: no correction
            missing = ((sampling_logps != 0) & loss_mask.bool()).sum(1) == 0
            weight = torch.where(missing.unsqueeze(1), torch.ones_like(weight), weight)
            metrics["is_rows_without_logprobs"] = missing.float().sum().item()
            advantages = advantages * weight
            on = loss_mask.bool()
            metrics["is_weight_mean"] = weight[on].mean().item() if on.any() else 1.0
            metrics["sampler_logp_diff_mean"] = ((old_logps - sampling_logps)[on].abs().mean().item()
                                                 if on.any() else 0.0)

        for name, value in metrics.items():
            self.log_metric(name, value)
        self.log_metric("completions/mean_length", loss_mask.sum(1).float().mean().item())
        if self.model.training:
            self.state.num_input_tokens_seen += int(prompt_mask.sum() + completion_mask.sum())

        output = {
            "prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
            "completion_ids": completion_ids, "completion_mask": completion_mask,
            "tool_mask": tool_mask, "advantages": advantages,
            "num_items_in_batch": self.accelerator.gather(loss_mask.sum()).sum(),
            "sampling_per_token_logps": sampling_logps,
        }
        if old_logps is not None:
            output["old_per_token_logps"] = old_logps
        return output
