"""Merging LoRA adapters with PEFT ``add_weighted_adapter`` into a checkpoint with its parents."""

from pathlib import Path

import pytest
import torch

from coevo.training.checkpoint import Checkpoint, load_policy
from coevo.training.merge import merge_adapters
from training_kit import tiny_llama_checkpoint


def random_adapter(base: Checkpoint, directory: Path, seed: int) -> Checkpoint:
    from peft import LoraConfig, get_peft_model

    model, _ = load_policy(base)
    torch.manual_seed(seed)
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    peft.save_pretrained(str(directory))
    return Checkpoint(id=f"ckpt-{seed}", base_model=base.base_model, adapter_path=str(directory))


@pytest.fixture
def parents(tmp_path):
    base = tiny_llama_checkpoint(tmp_path / "base")
    return base, [random_adapter(base, tmp_path / f"a{i}", seed=i + 1) for i in range(2)]


def logits(ckpt: Checkpoint) -> torch.Tensor:
    model, _ = load_policy(ckpt)
    with torch.no_grad():
        return model(input_ids=torch.tensor([[5, 17, 42, 99, 3]])).logits


def test_ties_merge_records_parents_and_differs_from_each_parent(tmp_path, parents):
    base, (a, b) = parents
    merged = merge_adapters([a, b], {"combination_type": "ties", "density": 0.5, "output_dir": str(tmp_path / "m")})
    assert merged.parents == ["ckpt-1", "ckpt-2"] and merged.base_model == base.base_model
    assert merged.config["combination_type"] == "ties" and merged.config["weights"] == [0.5, 0.5]
    out = logits(merged)
    assert torch.isfinite(out).all()
    assert not torch.allclose(out, logits(a), atol=1e-4) and not torch.allclose(out, logits(b), atol=1e-4)
    assert not torch.allclose(out, logits(base), atol=1e-4)


def test_linear_merge_with_weights_one_zero_reproduces_the_first_parent(tmp_path, parents):
    _, (a, b) = parents
    merged = merge_adapters([a, b], {"combination_type": "linear", "weights": [1.0, 0.0],
                                     "output_dir": str(tmp_path / "m")})
    assert torch.allclose(logits(merged), logits(a), atol=1e-5)


def test_dare_ties_merge_runs(tmp_path, parents):
    _, (a, b) = parents
    merged = merge_adapters([a, b], {"combination_type": "dare_ties", "density": 0.7, "output_dir": str(tmp_path)})
    assert (Path(merged.adapter_path) / "adapter_config.json").is_file()


def test_merge_rejects_bad_inputs(tmp_path, parents):
    base, (a, b) = parents
    with pytest.raises(ValueError, match="at least two"):
        merge_adapters([a])
    with pytest.raises(ValueError, match="no adapter_path"):
        merge_adapters([a, base])
    with pytest.raises(ValueError, match="different base models"):
        merge_adapters([a, b.model_copy(update={"base_model": "other"})])
    with pytest.raises(ValueError, match="2 weights for 3"):
        merge_adapters([a, b, a], {"weights": [0.5, 0.5]})
    with pytest.raises(ValueError, match="combination_type"):
        merge_adapters([a, b], {"combination_type": "average"})


def test_merged_checkpoint_is_recorded_in_the_archive(tmp_path, parents):
    from coevo.storage.archive import Archive

    _, (a, b) = parents
    with Archive(tmp_path / "coevo.db") as archive:
        merged = merge_adapters([a, b], {"output_dir": str(tmp_path / "m")}, archive=archive, run_id="run-1")
        record = archive.get_checkpoint(merged.id)
    assert record is not None and record.parents == ["ckpt-1", "ckpt-2"] and record.run_id == "run-1"
    assert record.adapter_path == merged.adapter_path and record.config["combination_type"] == "ties"
