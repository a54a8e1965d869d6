"""A weight stage's memory budget (train.max_memory_gb): the plan keeps a configuration that fits, splits
the step into more micro-steps and then lowers max_len when it does not, and refuses in one paragraph
before training when one row does not fit; a GRPO stage on the tiny Llama trains with what the plan
derived, or refuses without recording a checkpoint."""

from __future__ import annotations

import pytest
from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

from coevo.config.train import StageConfig
from coevo.harnesses.spec import HarnessSpec
from coevo.records import Checkpoint
from coevo.storage import Archive
from coevo.training.grpo.stage import train_grpo
from coevo.training.memory import DEFAULT_SHARE, MemoryBudgetError, ModelShape, device_memory_gb, plan_memory

TINY = ModelShape(params=30_000, dtype_bytes=4, hidden=32, intermediate=64, layers=2, vocab=128)
SMOLLM2 = ModelShape(params=134_515_008, dtype_bytes=4, hidden=576, intermediate=1536, layers=30, vocab=49_152)


def test_a_configuration_that_fits_is_kept_and_one_that_does_not_is_split_then_cut():
    kept = plan_memory(StageConfig(max_memory_gb=64), TINY)
    assert (kept.micro_batches, kept.max_len, kept.changed) == (None, 4096, ())
    split = plan_memory(StageConfig(max_memory_gb=0.51), TINY)
    assert (split.micro_batches, split.max_len) == (8, 4096) and split.estimate_gb <= 0.51
    cut = plan_memory(StageConfig(max_memory_gb=0.505), TINY)
    assert (cut.micro_batches, cut.max_len) == (8, 2048)
    assert cut.changed == ("micro_batches 1 -> 8", "max_len 4096 -> 2048")
    # SmolLM2-135M: 8 rows of 4096 tokens at once is ~14 GB of logits; 8 GB splits the step
    smol = plan_memory(StageConfig(max_memory_gb=8), SMOLLM2)
    assert smol.micro_batches in (2, 4, 8) and smol.estimate_gb <= 8


def test_the_default_budget_is_well_under_the_device():
    plan = plan_memory(StageConfig(), TINY)
    assert plan.budget_gb == pytest.approx(DEFAULT_SHARE * device_memory_gb()) and DEFAULT_SHARE <= 0.75
    assert (plan.micro_batches, plan.max_len) == (None, 4096)


def test_a_stage_that_cannot_fit_one_row_is_refused_naming_the_budget_and_the_fix():
    with pytest.raises(MemoryBudgetError, match=r"needs about 0\.\d\d GB even at one row of 256 tokens per "
                                                r"micro-step, but its budget is 0\.30 GB \(train\.max_memory_gb = "
                                                r"0\.3;.*raise train\.max_memory_gb"):
        plan_memory(StageConfig(max_memory_gb=0.3), TINY)


def test_a_grpo_stage_trains_with_the_planned_micro_batch_or_refuses_before_any_step(tmp_path):
    env, spec = LookupEnv(), HarnessSpec(parser={"mode": "python_call"})
    base = tiny_llama_checkpoint(tmp_path / "base")
    with Archive(tmp_path / "a.db") as archive:
        new, _ = train_grpo(base, spec, env, env.tasks(), {"steps": 1, "max_memory_gb": 0.51,
                                                           "output_dir": str(tmp_path / "runs")},
                            archive=archive, run_id="r", policy_factory=lambda tr: lookup_policy())
        assert new.config["micro_batches"] == 8 and new.config["max_len"] == 4096
        with pytest.raises(MemoryBudgetError, match="train.max_memory_gb = 0.3"):
            train_grpo(base, spec, env, env.tasks(), {"steps": 1, "max_memory_gb": 0.3,
                                                      "output_dir": str(tmp_path / "runs")},
                       archive=archive, run_id="r", policy_factory=lambda tr: lookup_policy())
        assert [c.id for c in archive.list(Checkpoint)] == [new.id]  # the refused stage recorded nothing


def test_the_default_budget_never_reshapes_a_stage_it_only_refuses(caplog):
    import logging

    caplog.set_level(logging.DEBUG, "coevo.training.memory")
    from coevo.config import load_config

    stage = load_config("configs/default.toml").train.stage(0, 0, "/tmp/x")
    big = ModelShape(params=134_515_008, dtype_bytes=4, hidden=576, intermediate=1536, layers=30, vocab=10**6)
    plan = plan_memory(stage, big)  # its worst case is far over any machine: logged, not applied
    assert (plan.micro_batches, plan.max_len) == (stage.micro_batches, stage.max_len) and not plan.changed
    assert "set train.max_memory_gb to have it" in caplog.text
