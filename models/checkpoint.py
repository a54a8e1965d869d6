"""``Checkpoint``: policy weights as a base model plus an optional LoRA adapter (docs/design.md, Checkpoint).

A training stage returns a new ``Checkpoint`` and the archive stores it as it is (its
``policy_checkpoints`` table has one column per field); ``coevo.training.checkpoint.load_policy``
turns it into a transformers ``(model, tokenizer)`` pair. ``base_model`` is a local checkpoint
directory or ``smollm2-135m`` (the converted SmolLM2-135M-Instruct cache), resolved by
``coevo.models.refs.resolve_base``.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field, field_validator

from coevo.masking import redact_data
from coevo.timestamps import UTCTime, utcnow


def new_checkpoint_id(prefix: str = "ckpt") -> str:
    """A fresh id ``<prefix>-<12 hex>``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Checkpoint(BaseModel):
    """A policy checkpoint: ``base_model`` + optional ``adapter_path`` (a PEFT LoRA directory),
    ``parents`` (checkpoint ids it was trained or merged from), the training ``config`` and its
    ``metrics`` (loss, reward mean, effective-group rate, tokens, wall time, ...), the ``run_id``
    that made it (None outside a run) and its creation time (UTC-aware, ``coevo.timestamps``).

    How it is served: ``model_ref`` the model reference its policies load (``coevo.models.refs``; a
    vLLM-served adapter's ``litellm:hosted_vllm/<name>``; None: the run's policy ref, plus
    ``adapter_path``), ``vllm`` the roots of the vLLM servers it is published on (empty: none;
    ``coevo.training.vllm_sync.publish_checkpoint`` loads it there again after a server restart).
    """

    id: str = Field(default_factory=new_checkpoint_id)
    base_model: str
    adapter_path: str | None = None
    parents: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    created_at: UTCTime = Field(default_factory=utcnow)
    model_ref: str | None = None
    vllm: list[str] = Field(default_factory=list)

    @field_validator("base_model", "model_ref", "config")
    @classmethod
    def _no_secrets(cls, value: Any) -> Any:
        """A model reference or config with its secrets masked (``coevo.masking``: an inline API key
        of a server policy is never stored; a masked one is read from the provider's env var)."""
        return redact_data(value)
