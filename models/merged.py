"""Sampling with a LoRA adapter folded into the base weights (docs/design.md, Models).

A PEFT LoRA layer computes ``W x + s B (A x)`` (Hu et al. 2021, LoRA, Eq. 3): on a CPU, decoding is
bound by reading the weights, and the adapter path adds two small matmuls, a scale and an add per
target module (210 of them for SmolLM2-135M under ``all-linear``) to every decoding step, about a
fifth of a step's time. While the adapter's weights do not change (a GRPO step's rollouts: the
optimiser runs after them), the same layer can run as one matmul with ``W' = W + s B A``.

``MergedLora`` computes ``W'`` for every LoRA layer of the model's active adapter into buffers of
its own (allocated once, reused at every ``refresh``) and, inside ``swapped()``, points each base
layer's weight at its buffer and marks the layer merged (PEFT's forward then runs the base layer
alone); on exit every base weight is the very tensor it was before (no ``W + d - d`` rounding
drift, unlike PEFT's ``merge_adapter``/``unmerge_adapter``). Logits equal the unmerged ones up to
floating-point summation order, which flips a sampled token only when a draw lands on a category
boundary; while ``B = 0`` (a fresh adapter, a stage's first step) ``W' = W`` exactly.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch


class MergedLora:
    """The active LoRA adapter of ``model`` (a ``peft.PeftModel``) merged into copies of its base
    weights, swapped in for the duration of ``swapped()``.

    ``refresh()`` (re)computes the merged weights from the adapter's current ``A``, ``B`` and scale:
    call it after the adapter's weights change. ``supported`` is False when the model has no LoRA
    layer on its active adapter, or one that this cannot merge exactly (a LoRA variant such as DoRA, a
    LoRA bias, an adapter already merged by PEFT): ``swapped()`` is then a no-op and the model
    decodes unmerged. Not thread-safe: the caller holds the model (``LocalEngine`` holds its lock).
    Memory: one extra copy of every target weight (for SmolLM2-135M ``all-linear``, ~430 MB float32).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.adapter = _active(model)
        self.layers = _lora_layers(model, self.adapter)
        self.supported = bool(self.layers) and all(_plain(layer, self.adapter) for layer in self.layers)
        self._buffers: list[torch.Tensor] = []
        self.fresh = False

    def refresh(self) -> None:
        """Compute ``W + s B A`` for every layer into this object's buffers (no autograd)."""
        if not self.supported:
            return
        with torch.inference_mode(False), torch.no_grad():  # plain tensors, also when called inside inference mode
            for i, layer in enumerate(self.layers):
                weight = layer.get_base_layer().weight
                delta = layer.get_delta_weight(self.adapter).to(weight.dtype)
                if i < len(self._buffers):
                    torch.add(weight, delta, out=self._buffers[i])
                else:
                    self._buffers.append(torch.add(weight, delta).detach())
        self.fresh = True

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        """Run the block with the merged weights in place (``refresh`` first if never done); restores
        every base weight tensor and the layers' unmerged state on exit, also after an error."""
        if not self.supported or _active(self.model) != self.adapter:
            yield
            return
        if not self.fresh:
            self.refresh()
        originals = []
        try:
            for layer, buffer in zip(self.layers, self._buffers):
                base = layer.get_base_layer()
                originals.append(base.weight.data)
                base.weight.data = buffer
                layer.merged_adapters.append(self.adapter)
            yield
        finally:
            for layer, original in zip(self.layers, originals):
                layer.get_base_layer().weight.data = original
                if self.adapter in layer.merged_adapters:
                    layer.merged_adapters.remove(self.adapter)


def _active(model: Any) -> str | None:
    if getattr(model, "peft_config", None) is None:
        return None
    active = model.active_adapter
    return active if isinstance(active, str) else (active[0] if len(active) == 1 else None)


def _lora_layers(model: Any, adapter: str | None) -> list[Any]:
    if adapter is None:
        return []
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer) and adapter in m.lora_A]


def _plain(layer: Any, adapter: str) -> bool:
    """A vanilla LoRA layer on ``adapter`` (no variant such as DoRA, no LoRA bias), not merged, whose base
    layer has a 2-D weight (a linear layer; ``get_delta_weight`` transposes for ``fan_in_fan_out``)."""
    base = layer.get_base_layer()
    return (adapter not in getattr(layer, "lora_variant", {}) and not layer.lora_bias.get(adapter, False)
            and not layer.merged and isinstance(getattr(base, "weight", None), torch.Tensor)
            and base.weight.dim() == 2)
