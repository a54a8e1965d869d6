"""transformers: the TensorBoard callback's folder (``coevo.compat`` lists each reach and its reason)."""

from __future__ import annotations

from typing import Any


def route_tensorboard(trainer: Any, logging_dir: str | None) -> None:
    """Point the ``TensorBoardCallback`` that ``report_to="tensorboard"`` added to ``trainer`` at
    ``logging_dir`` (nothing without that callback or a directory). Why: transformers 5 dropped
    ``TrainingArguments.logging_dir``; its callback reads its own ``logging_dir`` attribute when
    training begins (set from ``$TENSORBOARD_LOGGING_DIR`` at construction, which would be a
    process-wide side channel for a per-stage folder)."""
    if logging_dir is None:
        return
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback):
            callback.logging_dir = logging_dir
