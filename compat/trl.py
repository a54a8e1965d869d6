"""TRL: ``GRPOTrainer`` batches built from coevo's rollouts (``coevo.compat`` lists each reach and its
reason)."""

from __future__ import annotations

from typing import Any


class GRPOBatchHook:
    """A mixin for ``trl.GRPOTrainer`` (first base: ``class T(GRPOBatchHook, GRPOTrainer)``) whose
    generation batch is built by the subclass's ``generation_batch(inputs) -> dict`` instead of
    TRL's own generation; TRL keeps the loss, optimiser, accumulation, logging and saving.

    Why: TRL's public ``rollout_func`` must return one completion per prompt, and a harness
    trajectory is several training rows (``coevo.training.grpo.trainer``). The override point is
    ``_generate_and_score_completions`` (private; ``_prepare_inputs`` calls it once per generation
    batch and splits what it returns into micro-batches): its output keys are what ``_compute_loss``
    reads (``prompt_ids``/``prompt_mask``, ``completion_ids``/``completion_mask``, ``tool_mask``,
    ``advantages`` of shape ``(B,)`` or ``(B, T)``, ``num_items_in_batch``, optionally
    ``old_per_token_logps`` and ``sampling_per_token_logps``). ``policy_logps`` and ``log_metric``
    reach TRL's per-token log-probs and metric store, so the batch is scored and logged exactly as
    TRL's own. TRL's scoring (``_get_per_token_logps_and_entropies``, private, called by its loss)
    may be served by a ``packed_scorer`` instead. Equivalence tests: ``test_compat_training.py``
    (loss and gradients equal TRL's own ``rollout_func`` batch for the same tokens and advantages;
    the packed scorer's log-probs, entropies, loss and gradients equal TRL's row-by-row ones).
    """

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        return self.generation_batch(inputs)  # type: ignore[attr-defined]

    packed_scorer: Any = None
    """``None``, or ``scorer(model, input_ids, attention_mask, completion_length, compute_entropy) ->
    (logps, entropies | None)`` that TRL's scoring calls (``_get_per_token_logps_and_entropies``) go
    to instead of TRL's row-by-row forward (``coevo.training.grpo.packing.packed_logps``)."""

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **multimodal: Any) -> Any:
        # every log-prob TRL's loss and its old-policy scoring use comes through here; text-only
        # batches go to the packed scorer when there is one (equivalence: test_compat_training.py)
        trainer: Any = self
        if (self.packed_scorer is None or compute_aux_loss
                or any(value is not None for value in multimodal.values())):
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal)
        with trainer.accelerator.autocast():
            logps, entropies = self.packed_scorer(model, input_ids, attention_mask, logits_to_keep, compute_entropy)
        return logps, entropies, None

    def policy_logps(self, input_ids: Any, attention_mask: Any, completion_length: int) -> Any:
        """Per-token log-probs ``(B, completion_length)`` of the last ``completion_length`` tokens of
        ``input_ids`` ``(B, T)`` under the trainer's current model, computed as TRL's loss computes
        them (temperature-scaled, in micro-batches of ``per_device_train_batch_size``), without grad."""
        import torch

        trainer: Any = self
        with torch.no_grad():
            logps, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, input_ids, attention_mask, completion_length,
                batch_size=trainer.args.per_device_train_batch_size)
        return logps

    def log_metric(self, name: str, value: float) -> None:
        """Add ``value`` to metric ``name`` of the current mode (train/eval): TRL logs each metric's
        mean over the values added since its last log (``trainer.state.log_history``)."""
        trainer: Any = self
        trainer._metrics["train" if trainer.model.training else "eval"][name].append(float(value))
