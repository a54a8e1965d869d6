"""Merge archived LoRA adapters into a new checkpoint (CoEvo-RSI, Model Inheritance, Steps 1-3).

Notation, per LoRA layer: adapter ``t`` has factors ``A_t`` (r_t x in), ``B_t`` (out x r_t) and
scaling ``s_t`` (``lora_alpha / r``, or ``/ sqrt(r)`` with rsLoRA), so its weight delta is
``D_t = s_t B_t A_t``; ``a`` are the merge weights (``>= 0``, not all zero) and ``lam = sum(a)``.
The merged adapter stores factors ``A'``, ``B'`` with scaling 1 (``lora_alpha = r``), so its
delta is ``B' A'``. What each ``combination_type`` computes, and what coevo guarantees:

- ``linear`` (alias ``cat``): ``sum_t a_t D_t``, task arithmetic, exact for any adapters. Built as
  PEFT's ``cat``: ``A'`` stacks the ``a_t s_t A_t``, ``B'`` puts the ``B_t`` side by side; rank
  ``sum_t r_t`` over the adapters with ``a_t > 0``.
- ``svd``: the best rank-k approximation (Eckart-Young) of ``sum_t a_t D_t``, ``B' = U sqrt(S)``,
  ``A' = sqrt(S) V^T``; exact iff ``rank(sum_t a_t D_t) <= k`` (copies of one adapter: yes).
- ``ties``: TIES on each factor (rank r; all ranks equal): ``A' = sum_t (a_t / sqrt(lam)) m_t
  trim(sqrt(s_t) A_t)``, ``B'`` likewise, ``m_t`` = the entry's sign agrees with the elected sign.
  Exact (``lam D``) for one adapter or copies of one at density 1; with a shared ``A`` it is TIES
  on the ``B`` factors (``B' A' = sum_t a_t m_t B_t A``); otherwise PEFT's factor-wise
  approximation, with cross terms ``B_i A_j``.
- ``dare_ties``: ``ties`` with DARE's seeded random drop and ``1 / density`` rescale (Yu et al.
  2024) in place of the magnitude trim; same guarantees at density 1.
- ``ties_svd`` / ``dare_ties_svd``: TIES on the deltas themselves, ``sum_t a_t m_t trim(D_t)``,
  then its best rank-k approximation; exact iff that result has rank ``<= k`` (copies at density 1).

TIES follows CoEvo-RSI's Steps 1-3 (trim each task vector to its top ``density`` fraction by
magnitude, TIES-Merging, Yadav et al. 2023, §3; elect each entry's sign; sum the agreeing entries
weighted by ``a``). The sign is elected by the ``a``-weighted mass (``total``: ``sgn(sum a_t x_t)``;
``frequency``: ``sgn(sum a_t sgn(x_t))``), which is TIES-Merging's election when the weights are
equal; a weight-0 adapter has no say and contributes nothing. k is ``svd_rank`` (default the
largest input rank); the ``*svd`` types report the largest relative Frobenius residual of the
truncation as ``metrics["svd_rel_error"]`` (0 when exact).

Tested guarantee, every type: merging copies of one adapter with weights summing to 1 (density 1)
reproduces it, and a single adapter at weight 1.0 is itself. For distinct adapters ``ties`` /
``dare_ties`` keep PEFT's factor-wise approximation (cross terms ``B_i A_j``); ``linear`` is
exact task arithmetic and ``svd`` its best rank-k approximation.

Why not PEFT's ``add_weighted_adapter`` (0.21): its ``linear`` and ``ties`` act on A and B
separately with weight ``sqrt(a_t s_t)`` each, so ``linear`` of two equal-weight copies of X gives
``(sum_t sqrt(a_t))^2 D = 2 D``, and its TIES divides by the number of agreeing adapters after
weighting (``D / n`` for n copies with weights summing to 1), letting weight-0 adapters dilute it.

Refused before any file is written (``ValueError`` naming the checkpoint and the fix): adapters of
another kind than plain LoRA on Linear layers (DoRA, LoRA biases, ``modules_to_save``, per-module
``rank_pattern`` / ``alpha_pattern``, weight-altering inits such as PiSSA/LoftQ, any PEFT option
coevo does not model), adapters whose target modules or layer shapes differ, and ``ties`` /
``dare_ties`` over adapters whose ranks differ. The merged checkpoint records its parents and the
merge config; like any candidate, it must be validated before it is used (docs/design.md, Training).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, model_validator

from coevo.models.adapters import CheckpointError, check_adapter, stage_folder, writing_adapter
from coevo.models.checkpoint import Checkpoint, new_checkpoint_id
from coevo.training.checkpoint import record_checkpoint

Combination = Literal["ties", "dare_ties", "linear", "ties_svd", "dare_ties_svd", "svd", "cat"]
PRUNING = {"ties", "dare_ties", "ties_svd", "dare_ties_svd"}
SVD = {"svd", "ties_svd", "dare_ties_svd"}
FACTORWISE = {"ties", "dare_ties"}
DEFAULT_DENSITY = 0.5
# LoraConfig fields that do not change what a loaded adapter computes, or that merge_adapters handles
# (scalings are folded into the factors, targets are compared on the saved layers); any other field
# must keep PEFT's default.
HANDLED_FIELDS = {"r", "lora_alpha", "use_rslora", "target_modules", "exclude_modules", "layers_to_transform",
                  "layers_pattern", "base_model_name_or_path", "revision", "auto_mapping", "peft_version",
                  "inference_mode", "lora_dropout", "init_lora_weights", "task_type", "fan_in_fan_out"}
PURE_INITS = (True, False, "gaussian", "orthogonal")
FACTOR_KEY = re.compile(r"^(?P<layer>.+)\.lora_(?P<factor>[AB])\.weight$")


class MergeConfig(BaseModel):
    """``combination_type`` (see the module docstring), ``weights`` (one per adapter, ``>= 0``, not all
    zero; default equal ``1/n``), ``density`` (fraction of entries kept by the ties/dare pruning;
    default 0.5 for those types, only they accept it), ``majority_sign_method`` (TIES sign election),
    ``svd_rank`` (rank of the ``*svd`` output; default the largest input rank; only they accept it),
    ``seed`` (DARE's random drop)."""

    combination_type: Combination = "ties"
    weights: list[float] | None = None
    density: float | None = Field(default=None, gt=0.0, le=1.0)
    majority_sign_method: Literal["total", "frequency"] = "total"
    svd_rank: int | None = Field(default=None, ge=1)
    seed: int = 0
    output_dir: str = "runs/training"

    @model_validator(mode="after")
    def _defined(self) -> "MergeConfig":
        if self.weights is not None and any(w < 0 for w in self.weights):
            raise ValueError(f"merge weights must be >= 0, got {self.weights}")
        if self.weights is not None and not any(self.weights):
            raise ValueError(f"merge weights {self.weights} are all zero: that is the base model, not a merge; "
                             "give at least one adapter a positive weight")
        if self.density is not None and self.density < 1 and self.combination_type not in PRUNING:
            raise ValueError(f"density={self.density} prunes only in {sorted(PRUNING)} merges, not "
                             f"{self.combination_type!r}; drop density or pick a ties type")
        if self.svd_rank is not None and self.combination_type not in SVD:
            raise ValueError(f"svd_rank applies to {sorted(SVD)} merges, not {self.combination_type!r}; "
                             "drop svd_rank or pick an svd type")
        return self


@dataclass
class Adapter:
    """A loaded LoRA adapter: its checkpoint id, PEFT config, per-layer scaling and float64 factors
    ``layers[name] = (A (r x in), B (out x r))``."""

    id: str
    config: Any
    scaling: float
    layers: dict[str, tuple[Any, Any]]
    dtype: Any

    @property
    def rank(self) -> int:
        """The LoRA rank r (every layer has the same; ``rank_pattern`` is refused)."""
        return self.config.r


def load_adapter(ckpt: Checkpoint) -> Adapter:
    """Read ``ckpt``'s adapter directory (``adapter_config.json`` + ``adapter_model.safetensors``)
    without loading the base model. Raises ``ValueError`` for a missing adapter or a kind of adapter
    ``merge_adapters`` cannot merge exactly (see the module docstring)."""
    import torch
    from peft import LoraConfig
    from safetensors.torch import load_file

    if not ckpt.adapter_path:
        raise ValueError(f"merge_adapters: checkpoint {ckpt.id} has no adapter_path (nothing to merge)")
    path = Path(ckpt.adapter_path)
    weights_file = path / "adapter_model.safetensors"
    check_adapter(path, ckpt.id)  # CheckpointError (a ValueError) naming the damaged file
    if not weights_file.is_file():
        raise CheckpointError(f"merge_adapters: checkpoint {ckpt.id}: {path} holds no adapter_model.safetensors; "
                              "point adapter_path at a PEFT adapter saved with safetensors")
    raw = json.loads((path / "adapter_config.json").read_text())
    if raw.get("peft_type") != "LORA":
        raise ValueError(f"merge_adapters: checkpoint {ckpt.id} is a {raw.get('peft_type')} adapter; only LoRA "
                         "adapters can be merged")
    config = LoraConfig.from_pretrained(str(path))
    defaults = LoraConfig().to_dict()
    if odd := sorted(k for k, v in config.to_dict().items() if k not in HANDLED_FIELDS and v != defaults.get(k)):
        raise ValueError(f"merge_adapters: checkpoint {ckpt.id} sets {', '.join(odd)} (a LoRA variant whose merge "
                         "coevo does not compute exactly, e.g. DoRA, biases, modules_to_save, per-module ranks or "
                         "alphas); merge only plain LoRA adapters, or select this checkpoint instead of merging it")
    if config.init_lora_weights not in PURE_INITS:
        raise ValueError(f"merge_adapters: checkpoint {ckpt.id} was initialised with "
                         f"init_lora_weights={config.init_lora_weights!r}, which alters the base weights; only "
                         "adapters over the unchanged base model can be merged")
    factors: dict[str, dict[str, Any]] = {}
    for key, tensor in load_file(str(weights_file)).items():
        match = FACTOR_KEY.match(key)
        if match is None or tensor.dim() != 2:
            raise ValueError(f"merge_adapters: checkpoint {ckpt.id} holds {key} {tuple(tensor.shape)}, which is not "
                             "a Linear LoRA factor; only LoRA on Linear layers can be merged")
        factors.setdefault(match["layer"], {})[match["factor"]] = tensor
    dtype = next(iter(factors.values()))["A"].dtype if factors else torch.float32
    layers = {}
    for name, pair in factors.items():
        if set(pair) != {"A", "B"} or pair["A"].shape[0] != config.r or pair["B"].shape[1] != config.r:
            raise ValueError(f"merge_adapters: checkpoint {ckpt.id}: layer {name} lacks a factor or does not have "
                             f"rank r={config.r}; the adapter file is damaged or uses per-layer ranks")
        layers[name] = (pair["A"].double(), pair["B"].double())
    scaling = config.lora_alpha / (math.sqrt(config.r) if config.use_rslora else config.r)
    return Adapter(ckpt.id, config, scaling, layers, dtype)


def check_compatible(adapters: Sequence[Adapter], combination_type: str) -> None:
    """Raise ``ValueError`` unless ``adapters`` adapt the same layers with the same shapes and
    orientation, and (for the factor-wise ``ties``/``dare_ties``) the same rank."""
    first = adapters[0]
    for other in adapters[1:]:
        if set(other.layers) != set(first.layers):
            diff = sorted(set(other.layers) ^ set(first.layers))
            raise ValueError(f"merge_adapters: {first.id} and {other.id} target different modules ({len(diff)} "
                             f"differ, e.g. {diff[0]}); merge only adapters trained with the same target modules")
        for name, (a, b) in first.layers.items():
            if (a.shape[1], b.shape[0]) != (other.layers[name][0].shape[1], other.layers[name][1].shape[0]):
                raise ValueError(f"merge_adapters: {first.id} and {other.id} adapt {name} with different shapes; "
                                 "merge only adapters of the same base model")
        if other.config.fan_in_fan_out != first.config.fan_in_fan_out:
            raise ValueError(f"merge_adapters: {first.id} and {other.id} differ in fan_in_fan_out; their factors "
                             "are not in the same orientation")
        if combination_type in FACTORWISE and other.rank != first.rank:
            raise ValueError(f"merge_adapters: {combination_type!r} merges the LoRA factors entry by entry, so the "
                             f"ranks must match, but {first.id} has r={first.rank} and {other.id} r={other.rank}; use "
                             "'linear' or 'ties_svd' (which merge the full deltas), or adapters of one rank")


def _trim(x: Any, cfg: MergeConfig, density: float, generator: Any) -> Any:
    """Step 1: TIES keeps the top ``density`` fraction by magnitude; DARE drops at random and rescales."""
    import torch

    if density >= 1:
        return x
    if cfg.combination_type.startswith("dare"):
        return x * (torch.rand(x.shape, generator=generator, dtype=x.dtype) < density) / density
    from peft.utils.merge_utils import magnitude_based_pruning

    return magnitude_based_pruning(x, density)


def _ties_sum(xs: list[Any], weights: list[float], method: str) -> Any:
    """Steps 2-3: ``sum_t a_t 1[sgn x_t = gamma] x_t`` with ``gamma`` the sign of the
    ``a``-weighted mass (``total``) or ``a``-weighted sign count (``frequency``)."""
    import torch

    x = torch.stack(xs)
    w = torch.tensor(weights, dtype=x.dtype).view(-1, *[1] * (x.dim() - 1))
    mass = (w * (x if method == "total" else torch.sign(x))).sum(0)
    elected = torch.where(mass >= 0, 1.0, -1.0).to(x.dtype)
    return (w * (torch.sign(x) == elected) * x).sum(0)


def _low_rank(delta: Any, rank: int) -> tuple[Any, Any, float]:
    """Best rank-``rank`` factors ``(A', B')`` of ``delta`` (zero-padded to ``rank``) and the
    relative Frobenius residual of the truncation."""
    import torch

    u, s, vh = torch.linalg.svd(delta, full_matrices=False)
    k = min(rank, s.numel())
    root = s[:k].sqrt()
    a, b = torch.zeros(rank, delta.shape[1], dtype=delta.dtype), torch.zeros(delta.shape[0], rank, dtype=delta.dtype)
    a[:k], b[:, :k] = root[:, None] * vh[:k], u[:, :k] * root
    total = float(s.square().sum())
    return a, b, math.sqrt(float(s[k:].square().sum()) / total) if total > 0 else 0.0


def merge_layers(adapters: Sequence[Adapter], weights: Sequence[float], cfg: MergeConfig
                 ) -> tuple[dict[str, tuple[Any, Any]], int, float]:
    """The merged factors ``{layer: (A', B')}`` (scaling 1), their rank and the largest svd residual
    (0.0 for the non-svd types), as the module docstring states. Weight-0 adapters are left out."""
    import torch

    kept = [(ad, w) for ad, w in zip(adapters, weights) if w > 0]
    lam = sum(w for _, w in kept)
    kind = cfg.combination_type
    density = cfg.density if cfg.density is not None else (DEFAULT_DENSITY if kind in PRUNING else 1.0)
    if kind in ("linear", "cat"):
        rank = sum(ad.rank for ad, _ in kept)
    else:
        rank = (cfg.svd_rank or max(ad.rank for ad in adapters)) if kind in SVD else adapters[0].rank
    generator = torch.Generator().manual_seed(cfg.seed)
    merged, residual = {}, 0.0
    for name in adapters[0].layers:
        factors = [(ad.layers[name], ad.scaling, w) for ad, w in kept]
        if kind in ("linear", "cat"):
            merged[name] = (torch.cat([w * s * a for (a, _), s, w in factors]),
                            torch.cat([b for (_, b), _, _ in factors], 1))
        elif kind in FACTORWISE:
            trimmed = [[_trim(math.sqrt(s) * f, cfg, density, generator) for f in pair] for pair, s, _ in factors]
            scaled = [w / math.sqrt(lam) for _, _, w in factors]
            merged[name] = tuple(_ties_sum([t[i] for t in trimmed], scaled, cfg.majority_sign_method) for i in (0, 1))
        else:
            deltas = [s * b @ a for (a, b), s, _ in factors]
            ws = [w for _, _, w in factors]
            delta = (sum(w * d for w, d in zip(ws, deltas)) if kind == "svd" else
                     _ties_sum([_trim(d, cfg, density, generator) for d in deltas], ws, cfg.majority_sign_method))
            a, b, err = _low_rank(delta, rank)
            merged[name], residual = (a, b), max(residual, err)
    return merged, rank, residual


def merge_adapters(checkpoints: Sequence[Checkpoint], config: MergeConfig | dict | None = None,
                   archive: Any = None, run_id: str | None = None) -> Checkpoint:
    """Merge the LoRA adapters of ``checkpoints`` (one or more, same base model) into a new checkpoint,
    computing the merged delta of ``config.combination_type`` as the module docstring states.

    Returns a ``Checkpoint`` with ``adapter_path`` = ``<output_dir>/<new id>/adapter`` (scaling 1,
    rank per the module docstring), ``parents`` = the input ids in order, ``config`` = the merge config with the
    effective ``weights``, ``density`` and ``rank``, ``metrics`` = ``{"svd_rel_error": ...}`` for the
    svd types, else ``{}``. Raises ``ValueError`` (before any file is written) for no checkpoints,
    differing base models, a checkpoint without an adapter, a ``weights`` list of the wrong length,
    and adapters or combinations refused by ``load_adapter`` / ``check_compatible``.
    """
    from safetensors.torch import save_file

    cfg = config if isinstance(config, MergeConfig) else MergeConfig.model_validate(config or {})
    if not checkpoints:
        raise ValueError("merge_adapters needs at least one checkpoint, got none")
    bases = {c.base_model for c in checkpoints}
    if len(bases) != 1:
        raise ValueError(f"merge_adapters: checkpoints have different base models {sorted(bases)}; merge only "
                         "adapters trained on the same base")
    if missing := [c.id for c in checkpoints if not c.adapter_path]:
        raise ValueError(f"merge_adapters: checkpoints {missing} have no adapter_path (nothing to merge)")
    weights = cfg.weights or [1.0 / len(checkpoints)] * len(checkpoints)
    if len(weights) != len(checkpoints):
        raise ValueError(f"merge_adapters: {len(weights)} weights for {len(checkpoints)} checkpoints")
    adapters = [load_adapter(c) for c in checkpoints]
    check_compatible(adapters, cfg.combination_type)
    layers, rank, residual = merge_layers(adapters, weights, cfg)

    new_id = new_checkpoint_id()
    adapter_dir = stage_folder(cfg.output_dir, new_id, run_id) / "adapter"
    dtype = adapters[0].dtype
    tensors = {f"{name}.lora_{f}.weight": t.to(dtype).contiguous()
               for name, (a, b) in layers.items() for f, t in (("A", a), ("B", b))}
    with writing_adapter(adapter_dir, new_id) as partial:  # the merged adapter appears whole, or not at all
        save_file(tensors, str(partial / "adapter_model.safetensors"), metadata={"format": "pt"})
        replace(adapters[0].config, r=rank, lora_alpha=rank, use_rslora=False,
                inference_mode=True).save_pretrained(str(partial))
    density = (cfg.density or DEFAULT_DENSITY) if cfg.combination_type in PRUNING else None
    new = Checkpoint(id=new_id, base_model=checkpoints[0].base_model, adapter_path=str(adapter_dir),
                     parents=[c.id for c in checkpoints],
                     config={"stage": "merge", **cfg.model_dump(), "weights": weights, "density": density,
                             "rank": rank},
                     metrics={"svd_rel_error": residual} if cfg.combination_type in SVD else {})
    record_checkpoint(archive, new, run_id)
    return new
