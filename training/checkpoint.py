"""``Checkpoint``: policy weights as a base model plus an optional LoRA adapter (DESIGN.md, Checkpoint).

A training stage returns a new ``Checkpoint`` (and records it in the archive when given one: the
archive stores ``Checkpoint`` itself, as ``coevo.storage.tables.CheckpointRecord``);
``load_policy`` turns a checkpoint into a transformers ``(model, tokenizer)`` pair for training or
evaluation. ``base_model`` is a local checkpoint directory or ``smollm2-135m`` (the converted
SmolLM2-135M-Instruct cache), resolved by ``coevo.models.refs.resolve_base``.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field, field_validator

from coevo.masking import redact_data
from coevo.models.adapters import check_adapter
from coevo.models.refs import resolve_base
from coevo.timestamps import UTCTime, utcnow


def new_checkpoint_id(prefix: str = "ckpt") -> str:
    """A fresh id ``<prefix>-<12 hex>``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Checkpoint(BaseModel):
    """A policy checkpoint: ``base_model`` + optional ``adapter_path`` (a PEFT LoRA directory),
    ``parents`` (checkpoint ids it was trained or merged from), the training ``config`` and its
    ``metrics`` (loss, reward mean, effective-group rate, tokens, wall time, ...), the ``run_id``
    that made it (None outside a run) and its creation time (UTC-aware, ``coevo.timestamps``).

    This is also the archive's checkpoint record: ``coevo.storage.tables`` derives the
    ``policy_checkpoints`` table from these fields, in this order.
    """

    id: str = Field(default_factory=new_checkpoint_id)
    base_model: str
    adapter_path: str | None = None
    parents: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    created_at: UTCTime = Field(default_factory=utcnow)

    @field_validator("base_model", "config")
    @classmethod
    def _no_secrets(cls, value: Any) -> Any:
        """A model reference or config with its secrets masked (``coevo.masking``: an inline API key
        of a server policy is never stored; a masked one is read from the provider's env var)."""
        return redact_data(value)


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
    """Store ``checkpoint`` through ``archive.add_checkpoint`` (``coevo.storage.Archive``), with
    ``run_id`` when given (else its own); a no-op when ``archive`` is None."""
    if archive is None:
        return
    archive.add_checkpoint(checkpoint if run_id is None else checkpoint.model_copy(update={"run_id": run_id}))
