"""Merge archived LoRA adapters into a new checkpoint (CoEvo-RSI model inheritance).

PEFT's ``add_weighted_adapter`` does the arithmetic. ``ties`` / ``dare_ties`` / ``linear`` act on
the LoRA factors A and B separately (PEFT's own caveat: an approximation of merging the full
deltas ``B A``, and all adapters need the same rank); the ``*_svd`` variants merge the full deltas
and project back to rank ``svd_rank`` by SVD, which is closer to TIES on task vectors at the cost
of an SVD per layer. The merged checkpoint records its parents and the merge config; like any
candidate, it must be validated before it is used (DESIGN.md, Training).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, model_validator

from coevo.training.checkpoint import Checkpoint, new_checkpoint_id, record_checkpoint, resolve_base

Combination = Literal["ties", "dare_ties", "linear", "ties_svd", "dare_ties_svd", "svd", "cat"]


class MergeConfig(BaseModel):
    """``combination_type`` (PEFT name), ``weights`` (one per adapter; default equal ``1/n``),
    ``density`` (fraction of entries kept by ties/dare pruning), ``majority_sign_method`` (TIES sign
    election), ``svd_rank`` (rank of the ``*_svd`` output; default the largest input rank)."""

    combination_type: Combination = "ties"
    weights: list[float] | None = None
    density: float = Field(default=0.5, gt=0.0, le=1.0)
    majority_sign_method: Literal["total", "frequency"] = "total"
    svd_rank: int | None = None
    output_dir: str = "runs/training"

    @model_validator(mode="after")
    def _weights_positive(self) -> "MergeConfig":
        if self.weights is not None and any(w < 0 for w in self.weights):
            raise ValueError(f"merge weights must be >= 0, got {self.weights}")
        return self


def merge_adapters(checkpoints: Sequence[Checkpoint], config: MergeConfig | dict | None = None,
                   archive: Any = None, run_id: str | None = None) -> Checkpoint:
    """Merge the adapters of ``checkpoints`` (same base model) into one new checkpoint.

    Returns a ``Checkpoint`` with ``adapter_path`` = ``<output_dir>/<new id>/adapter``,
    ``parents`` = the input ids in order, ``config`` = the merge config, ``metrics`` = {}.
    Raises ``ValueError`` for fewer than two checkpoints, differing base models, a checkpoint
    without an adapter, or a ``weights`` list of the wrong length.
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = config if isinstance(config, MergeConfig) else MergeConfig.model_validate(config or {})
    if len(checkpoints) < 2:
        raise ValueError(f"merge_adapters needs at least two checkpoints, got {len(checkpoints)}")
    bases = {c.base_model for c in checkpoints}
    if len(bases) != 1:
        raise ValueError(f"merge_adapters: checkpoints have different base models {sorted(bases)}; merge only "
                         "adapters trained on the same base")
    if missing := [c.id for c in checkpoints if not c.adapter_path]:
        raise ValueError(f"merge_adapters: checkpoints {missing} have no adapter_path (nothing to merge)")
    weights = cfg.weights or [1.0 / len(checkpoints)] * len(checkpoints)
    if len(weights) != len(checkpoints):
        raise ValueError(f"merge_adapters: {len(weights)} weights for {len(checkpoints)} checkpoints")

    base = AutoModelForCausalLM.from_pretrained(resolve_base(checkpoints[0].base_model))
    names = [f"parent{i}" for i in range(len(checkpoints))]
    model = PeftModel.from_pretrained(base, checkpoints[0].adapter_path, adapter_name=names[0])
    for name, ckpt in zip(names[1:], checkpoints[1:]):
        model.load_adapter(ckpt.adapter_path, adapter_name=name)
    kwargs: dict[str, Any] = {"majority_sign_method": cfg.majority_sign_method}
    if "ties" in cfg.combination_type or "dare" in cfg.combination_type:
        kwargs["density"] = cfg.density
    if cfg.combination_type.endswith("svd") and cfg.svd_rank is not None:
        kwargs["svd_rank"] = cfg.svd_rank
    model.add_weighted_adapter(names, weights, adapter_name="merged", combination_type=cfg.combination_type, **kwargs)
    for name in names:
        model.delete_adapter(name)

    new_id = new_checkpoint_id()
    out = Path(cfg.output_dir) / new_id
    model.save_pretrained(str(out), selected_adapters=["merged"])
    adapter_dir = out / "adapter"
    (out / "merged").rename(adapter_dir)  # PEFT saves a non-default adapter in a sub-folder named after it
    new = Checkpoint(id=new_id, base_model=checkpoints[0].base_model, adapter_path=str(adapter_dir),
                     parents=[c.id for c in checkpoints],
                     config={"stage": "merge", **cfg.model_dump(), "weights": weights})
    record_checkpoint(archive, new, run_id)
    return new
