"""The size of a weight stage's change: sum over LoRA layers of ||s B A||_F, relative to the base
model or to the stage's parent adapter."""

import pytest
from training_kit import random_adapter, tiny_llama_checkpoint

from coevo.training.checkpoint import load_policy
from coevo.training.delta import delta_norm


def merged_weight_change(base, adapter):
    """sum over weight matrices of ||W_merged - W_base||_F, computed by PEFT's own merge."""
    before = {k: v.clone() for k, v in load_policy(base)[0].state_dict().items()}
    merged = load_policy(adapter)[0].merge_and_unload().state_dict()
    return sum(float((merged[k] - w).norm()) for k, w in before.items() if k in merged)


def test_delta_norm_is_the_merged_weights_change_from_the_base(tmp_path):
    base = tiny_llama_checkpoint(tmp_path / "base")
    adapter = random_adapter(base, tmp_path / "a", seed=1)
    assert delta_norm(adapter) == pytest.approx(merged_weight_change(base, adapter), rel=1e-4)
    assert delta_norm(adapter) > 0 and delta_norm(base) == 0.0
    assert delta_norm(adapter, parent=base) == delta_norm(adapter)


def test_delta_norm_from_a_parent_adapter_is_the_stages_own_change(tmp_path):
    base = tiny_llama_checkpoint(tmp_path / "base")
    a, b = random_adapter(base, tmp_path / "a", seed=1), random_adapter(base, tmp_path / "b", seed=2)
    assert delta_norm(a, parent=a) == 0.0
    assert delta_norm(b, parent=a) == pytest.approx(delta_norm(a, parent=b))
    assert 0 < delta_norm(b, parent=a) <= delta_norm(a) + delta_norm(b) + 1e-9  # triangle inequality per layer
    assert delta_norm(base, parent=a) == pytest.approx(delta_norm(a))
    narrow = random_adapter(base, tmp_path / "c", seed=3, target_modules=["q_proj"])
    with pytest.raises(ValueError, match="different layers"):
        delta_norm(narrow, parent=a)


def test_a_stages_change_is_the_materialised_difference_of_the_two_products(tmp_path):
    """The Gram-matrix form (``coevo.training.delta``) against ``||s B A - t D C||_F`` computed from the m x n
    products themselves, per layer and summed; ``delta_norms`` reads both numbers at once."""
    from coevo.training.coevo_rsi.merge import load_adapter
    from coevo.training.delta import delta_norms

    base = tiny_llama_checkpoint(tmp_path / "base")
    a, b = random_adapter(base, tmp_path / "a", seed=1), random_adapter(base, tmp_path / "b", seed=2)
    pa, pb = load_adapter(a), load_adapter(b)
    direct = sum(float((pb.scaling * (bb @ ab) - pa.scaling * (ba @ aa)).norm())
                 for (ab, bb), (aa, ba) in ((pb.layers[n], pa.layers[n]) for n in pb.layers))
    assert delta_norm(b, parent=a) == pytest.approx(direct, rel=1e-12)
    assert delta_norms(b, a) == (delta_norm(b, parent=a), delta_norm(b))
