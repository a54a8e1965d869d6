"""Loading a local transformers checkpoint for the local backend (docs/design.md, Models).

``load_pretrained`` reads a directory saved with ``save_pretrained`` (e.g. the converted
SmolLM2 cache, ``coevo.models.smollm2``) onto a device; ``default_device`` picks CUDA when a GPU
is visible; ``base_model`` is the transformers model under a loaded policy's PEFT wrapper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def base_model(model: Any) -> Any:
    """The transformers model ``model`` wraps: a PEFT model's ``get_base_model()`` (its config, its
    forward's signature), else ``model`` itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def default_device() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_pretrained(path: str | Path, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from a local transformers checkpoint directory.

    ``device`` defaults to ``default_device()``; ``dtype`` (``torch.dtype`` or its name, e.g.
    ``"bfloat16"``) defaults to the checkpoint's dtype (``"auto"``). Raises
    ``FileNotFoundError`` when ``path`` is not a directory with a ``config.json``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model path {str(path)!r} is not a transformers checkpoint (no config.json): pass a "
            "directory saved with save_pretrained, or 'smollm2-135m' for the default policy"
        )
    if isinstance(dtype, str):
        dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype or "auto")
    model.to(device or default_device())
    model.eval()
    return model, tokenizer
