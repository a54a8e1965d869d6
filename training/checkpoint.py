"""Loading and recording a ``Checkpoint`` (``coevo.models.checkpoint``; docs/design.md, Checkpoint).

A training stage returns a new ``Checkpoint`` and records it in the archive when given one
(``record_checkpoint``); ``load_policy`` turns a checkpoint into a transformers ``(model, tokenizer)``
pair for training or evaluation. ``base_model`` is a local checkpoint directory or ``smollm2-135m``
(the converted SmolLM2-135M-Instruct cache), resolved by ``coevo.models.refs.resolve_base``.
"""

from __future__ import annotations

from typing import Any

from coevo.models.adapters import check_adapter
from coevo.models.checkpoint import Checkpoint
from coevo.models.refs import resolve_base


def load_policy(checkpoint: Checkpoint, trainable: bool = False, dtype: Any = None) -> tuple[Any, Any]:
    """Load ``checkpoint`` as ``(model, tokenizer)`` on CPU (float32 unless ``dtype`` is given).

    With an ``adapter_path`` the model is a ``peft.PeftModel`` (``is_trainable=trainable``);
    without one it is the plain base model. Raises ``coevo.models.refs.ModelRefError`` when
    ``base_model`` is neither ``smollm2-135m`` nor a checkpoint directory, and
    ``coevo.models.adapters.CheckpointError`` naming the checkpoint and the file when the adapter
    folder is missing or damaged (``MissingAdapterError``, a ``FileNotFoundError``, when missing).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = resolve_base(checkpoint.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype or torch.float32)
    if checkpoint.adapter_path:
        check_adapter(checkpoint.adapter_path, checkpoint.id)  # names a missing or damaged file
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, checkpoint.adapter_path, is_trainable=trainable)
    return model, tokenizer


def record_checkpoint(archive: Any, checkpoint: Checkpoint, run_id: str | None = None) -> None:
    """Store ``checkpoint`` through ``archive.put`` (``coevo.storage.Archive``), with
    ``run_id`` when given (else its own); a no-op when ``archive`` is None."""
    if archive is None:
        return
    archive.put(checkpoint if run_id is None else checkpoint.model_copy(update={"run_id": run_id}))
