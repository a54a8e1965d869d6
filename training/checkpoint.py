"""``Checkpoint``: policy weights as a base model plus an optional LoRA adapter (DESIGN.md, Checkpoint).

A training stage returns a new ``Checkpoint`` (and records it in the archive when given one);
``load_policy`` turns a checkpoint into a transformers ``(model, tokenizer)`` pair for training or
evaluation. ``base_model`` is a local directory, a Hugging Face id available offline, or the
alias ``smollm2-135m`` (the converted SmolLM2-135M-Instruct cache, ``coevo.models.smollm2``).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

SMOLLM2_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct"}


def new_checkpoint_id(prefix: str = "ckpt") -> str:
    """A fresh id ``<prefix>-<12 hex>``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Checkpoint(BaseModel):
    """A policy checkpoint: ``base_model`` + optional ``adapter_path`` (a PEFT LoRA directory),
    ``parents`` (checkpoint ids it was trained or merged from), the training ``config`` and its
    ``metrics`` (loss, reward mean, effective-group rate, tokens, wall time, ...)."""

    id: str = Field(default_factory=new_checkpoint_id)
    base_model: str
    adapter_path: str | None = None
    parents: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)


def resolve_base(base_model: str) -> str:
    """The path (or offline hub id) that transformers loads for ``base_model``.

    The SmolLM2 aliases resolve to the converted cache (converting the GGUF on first use).
    """
    if base_model.lower() in SMOLLM2_ALIASES:
        from coevo.models.smollm2 import ensure_smollm2

        return str(ensure_smollm2())
    return base_model


def load_policy(checkpoint: Checkpoint, trainable: bool = False, dtype: Any = None) -> tuple[Any, Any]:
    """Load ``checkpoint`` as ``(model, tokenizer)`` on CPU (float32 unless ``dtype`` is given).

    With an ``adapter_path`` the model is a ``peft.PeftModel`` (``is_trainable=trainable``);
    without one it is the plain base model. Raises ``FileNotFoundError`` naming the field when
    the adapter directory is missing.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = resolve_base(checkpoint.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype or torch.float32)
    if checkpoint.adapter_path:
        if not Path(checkpoint.adapter_path, "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"checkpoint {checkpoint.id}: adapter_path {checkpoint.adapter_path!r} holds no "
                "adapter_config.json; point it at a PEFT adapter directory or set it to None"
            )
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, checkpoint.adapter_path, is_trainable=trainable)
    return model, tokenizer


def record_checkpoint(archive: Any, checkpoint: Checkpoint, run_id: str | None = None) -> None:
    """Store ``checkpoint`` through ``archive.add_checkpoint`` (``coevo.storage.Archive``);
    a no-op when ``archive`` is None."""
    if archive is None:
        return
    from coevo.storage.tables import CheckpointRecord

    fields = checkpoint.model_dump()
    archive.add_checkpoint(CheckpointRecord(**fields, run_id=run_id))
