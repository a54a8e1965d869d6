"""Merging LoRA adapters into a checkpoint with its parents: what each combination type computes
(copies of one adapter reproduce it, ``linear`` is exact task arithmetic) and what is refused."""

import random
from pathlib import Path

import pytest
import torch
from training_kit import random_adapter, tiny_llama_checkpoint

from coevo.models.checkpoint import Checkpoint
from coevo.training.checkpoint import load_policy
from coevo.training.coevo_rsi.merge import merge_adapters

TYPES = ["linear", "cat", "svd", "ties", "dare_ties", "ties_svd", "dare_ties_svd"]
PRUNING = {"ties", "dare_ties", "ties_svd", "dare_ties_svd"}


def exact(kind: str, **cfg) -> dict:
    """A merge config of ``kind`` that prunes nothing (density 1 for the ties/dare types)."""
    return {"combination_type": kind, **({"density": 1.0} if kind in PRUNING else {}), **cfg}


def max_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    return float((x - y).abs().max())


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
    with pytest.raises(ValueError, match="at least one"):
        merge_adapters([])
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
        record = archive.get(Checkpoint, merged.id)
    assert record is not None and record.parents == ["ckpt-1", "ckpt-2"] and record.run_id == "run-1"
    assert record.adapter_path == merged.adapter_path and record.config["combination_type"] == "ties"


def task_arithmetic_logits(base: Checkpoint, weighted: list[tuple[Checkpoint, float]]) -> torch.Tensor:
    """Logits of ``base + sum_t w_t (merged weights of adapter t - base weights)``, computed through
    PEFT's own ``merge_and_unload`` (an oracle independent of coevo's merge)."""
    model, _ = load_policy(base)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for ckpt, w in weighted:
        merged = load_policy(ckpt)[0].merge_and_unload().state_dict()
        for k in state:
            state[k] += w * (merged[k] - model.state_dict()[k])
    model.load_state_dict(state)
    with torch.no_grad():
        return model(input_ids=torch.tensor([[5, 17, 42, 99, 3]])).logits


def weight_vectors(seed: int = 0) -> list[list[float]]:
    """Weights summing to 1 over 2-3 copies: equal, skewed, one-hot, and seeded random draws."""
    rng = random.Random(seed)
    draws = [[rng.random() + 1e-3 for _ in range(rng.choice((2, 3)))] for _ in range(3)]
    return [[0.5, 0.5], [0.9, 0.1], [1.0, 0.0], [1 / 3] * 3] + [[x / sum(d) for x in d] for d in draws]


@pytest.mark.parametrize("kind", TYPES)
def test_merging_copies_of_one_adapter_with_weights_summing_to_one_reproduces_it(tmp_path, parents, kind):
    _, (a, _) = parents
    want = logits(a)
    for i, weights in enumerate(weight_vectors()):
        merged = merge_adapters([a] * len(weights), exact(kind, weights=weights, output_dir=str(tmp_path / str(i))))
        assert max_diff(logits(merged), want) <= 1e-4, (kind, weights)


@pytest.mark.parametrize("kind", TYPES)
def test_a_single_adapter_at_weight_one_is_itself(tmp_path, parents, kind):
    _, (a, _) = parents
    merged = merge_adapters([a], exact(kind, weights=[1.0], output_dir=str(tmp_path)))
    assert merged.parents == ["ckpt-1"] and merged.config["weights"] == [1.0]
    assert max_diff(logits(merged), logits(a)) <= 1e-5


def test_two_equal_weight_copies_under_linear_give_the_adapter_not_twice_its_delta(tmp_path, parents):
    base, (a, _) = parents
    merged = merge_adapters([a, a], {"combination_type": "linear", "output_dir": str(tmp_path)})
    want, twice = logits(a), task_arithmetic_logits(base, [(a, 2.0)])
    assert max_diff(logits(merged), want) <= 1e-5 and max_diff(twice, want) > 1e-2  # PEFT's linear gave `twice`


@pytest.mark.parametrize("weights", [[0.5, 0.5], [0.8, 0.2], [1.5, 0.25]])
def test_linear_merge_of_distinct_adapters_is_exact_task_arithmetic(tmp_path, parents, weights):
    base, (a, b) = parents
    merged = merge_adapters([a, b], {"combination_type": "linear", "weights": weights, "output_dir": str(tmp_path)})
    assert merged.config["rank"] == 8
    assert max_diff(logits(merged), task_arithmetic_logits(base, list(zip([a, b], weights)))) <= 1e-4


def test_linear_merge_of_adapters_with_different_ranks_is_exact(tmp_path, parents):
    base, (a, _) = parents
    c = random_adapter(base, tmp_path / "r8", seed=3, r=8, lora_alpha=4)
    merged = merge_adapters([a, c], {"combination_type": "linear", "weights": [0.3, 0.7],
                                     "output_dir": str(tmp_path / "m")})
    assert merged.config["rank"] == 12
    assert max_diff(logits(merged), task_arithmetic_logits(base, [(a, 0.3), (c, 0.7)])) <= 1e-4


def test_svd_merge_reports_its_truncation_residual(tmp_path, parents):
    base, (a, b) = parents
    copies = merge_adapters([a, a], {"combination_type": "svd", "output_dir": str(tmp_path / "c")})
    distinct = merge_adapters([a, b], {"combination_type": "svd", "output_dir": str(tmp_path / "d")})
    assert copies.metrics["svd_rel_error"] < 1e-6 and distinct.metrics["svd_rel_error"] > 0.1
    full = merge_adapters([a, b], {"combination_type": "svd", "svd_rank": 8, "output_dir": str(tmp_path / "f")})
    assert full.metrics["svd_rel_error"] < 1e-6
    assert max_diff(logits(full), task_arithmetic_logits(base, [(a, 0.5), (b, 0.5)])) <= 1e-4


def test_a_zero_weight_adapter_neither_dilutes_nor_votes_in_a_ties_merge(tmp_path, parents):
    _, (a, b) = parents
    merged = merge_adapters([a, b], exact("ties", weights=[1.0, 0.0], output_dir=str(tmp_path)))
    assert max_diff(logits(merged), logits(a)) <= 1e-5


def test_ties_with_density_below_one_prunes_and_dare_is_reproducible(tmp_path, parents):
    _, (a, b) = parents
    trimmed = merge_adapters([a], {"combination_type": "ties", "density": 0.5, "weights": [1.0],
                                   "output_dir": str(tmp_path / "t")})
    assert trimmed.config["density"] == 0.5 and max_diff(logits(trimmed), logits(a)) > 1e-3
    dare = [merge_adapters([a, b], {"combination_type": "dare_ties", "density": 0.7, "seed": 5,
                                    "output_dir": str(tmp_path / f"d{i}")}) for i in range(2)]
    assert max_diff(logits(dare[0]), logits(dare[1])) == 0.0


def test_rslora_adapter_merges_with_its_own_scaling(tmp_path, parents):
    base, _ = parents
    rs = random_adapter(base, tmp_path / "rs", seed=4, use_rslora=True)
    for kind in ("linear", "ties", "svd"):
        merged = merge_adapters([rs, rs], exact(kind, output_dir=str(tmp_path / kind)))
        assert max_diff(logits(merged), logits(rs)) <= 1e-4, kind


def assert_refused(out: Path, checkpoints: list, config: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        merge_adapters(checkpoints, {**config, "output_dir": str(out)})
    assert not out.exists()  # refused before any file is written


def test_ties_refuses_adapters_with_different_ranks_before_writing(tmp_path, parents):
    base, (a, _) = parents
    c = random_adapter(base, tmp_path / "r8", seed=3, r=8)
    assert_refused(tmp_path / "m", [a, c], {"combination_type": "ties"}, "ranks must match.*r=4.*r=8")
    assert_refused(tmp_path / "m", [a, c], {"combination_type": "dare_ties"}, "ranks must match")


def test_merge_refuses_adapters_with_different_target_modules_before_writing(tmp_path, parents):
    base, (a, _) = parents
    attn = random_adapter(base, tmp_path / "attn", seed=5, target_modules=["q_proj", "v_proj"])
    for kind in TYPES:
        assert_refused(tmp_path / "m", [a, attn], {"combination_type": kind}, "target different modules")


def test_merge_refuses_lora_variants_it_cannot_merge_exactly(tmp_path, parents):
    base, (a, _) = parents
    dora = random_adapter(base, tmp_path / "dora", seed=6, use_dora=True)
    assert_refused(tmp_path / "m", [a, dora], {"combination_type": "linear"}, "sets use_dora")
    biased = random_adapter(base, tmp_path / "bias", seed=7, bias="lora_only")
    assert_refused(tmp_path / "m", [biased], {"combination_type": "linear"}, "sets bias")


def test_merge_refuses_settings_whose_result_is_undefined(tmp_path, parents):
    _, (a, b) = parents
    assert_refused(tmp_path / "m", [a, b], {"combination_type": "linear", "density": 0.5}, "density=0.5 prunes only")
    assert_refused(tmp_path / "m", [a, b], {"combination_type": "ties", "svd_rank": 2}, "svd_rank applies to")
    assert_refused(tmp_path / "m", [a, b], {"weights": [0.0, 0.0]}, "all zero")
