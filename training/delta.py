"""How far a weight stage moved the policy: the size of its LoRA change.

Per LoRA layer the adapter adds ``D = s B A`` to the base weight (``s = lora_alpha / r``, or
``/ sqrt(r)`` with rsLoRA; ``coevo.training.coevo_rsi.merge.load_adapter`` reads the factors). The size of a
checkpoint's change from the base model is ``sum over layers of ||D||_F`` (a Frobenius norm per
layer, summed over the adapted layers); a stage's own change is the same sum over ``D_new - D_old``
with ``D_old`` its parent's adapter (zero when the parent is the base model). A stage whose
groups never held a reward contrast has a zero loss and leaves ``B`` at zero: its change is 0.
"""

from __future__ import annotations

from typing import Any

from coevo.models.checkpoint import Checkpoint


def _deltas(checkpoint: Checkpoint) -> dict[str, Any]:
    from coevo.training.coevo_rsi.merge import load_adapter

    adapter = load_adapter(checkpoint)
    return {name: adapter.scaling * (b @ a) for name, (a, b) in adapter.layers.items()}


def delta_norm(checkpoint: Checkpoint, parent: Checkpoint | None = None) -> float:
    """``sum_layers ||D - D_parent||_F`` (float64, in the base weights' units): the size of
    ``checkpoint``'s LoRA change relative to ``parent`` (None or an adapter-less parent: relative to
    the base model). 0.0 for a checkpoint without an adapter and no parent adapter.

    Raises ``ValueError`` (from ``load_adapter``) for an adapter directory that is missing or not a
    plain LoRA adapter, and when the two adapters adapt different layers.
    """
    new = _deltas(checkpoint) if checkpoint.adapter_path else {}
    old = _deltas(parent) if parent is not None and parent.adapter_path else {}
    if new and old and set(new) != set(old):
        raise ValueError(f"delta_norm: {checkpoint.id} and {parent.id} adapt different layers; "  # type: ignore[union-attr]
                         "compare a stage only with the checkpoint it was trained from")
    names = set(new) | set(old)
    total = 0.0
    for name in names:
        d = new[name] - old[name] if name in new and name in old else new.get(name, old.get(name))
        total += float(d.norm())
    return total
