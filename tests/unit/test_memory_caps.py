"""A weight stage's memory budget (train.max_memory_gb): the plan keeps a configuration that fits, splits
the step into more micro-steps and then lowers max_len when it does not, and refuses in one paragraph
before training when one row does not fit; a GRPO stage, an RSFT stage and EvoHarness-RL's harness SFT
stage on the tiny Llama train with what the plan derived, or refuse without recording a checkpoint."""

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


def test_an_sft_step_split_into_micro_steps_makes_the_unsplit_update(tmp_path):
    """RSFT's minibatch in 2 or 4 micro-steps, each normalised by the whole minibatch's policy tokens: the
    same losses and LoRA weights as the minibatch at once (up to float rounding). Plain SGD, so the weights
    compare the gradients: AdamW divides each coordinate by its own running scale, and a coordinate whose
    gradient is 0 in one summation order and 1e-10 in another then moves by ~1e-4 (it failed CI that way)."""
    import random

    import torch
    from peft import get_peft_model

    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.samples import Row
    from coevo.training.grpo.stage import lora_config
    from coevo.training.rsft import sft_epochs

    base = tiny_llama_checkpoint(tmp_path / "base")
    cfg = StageConfig(minibatch_size=4, epochs=2, learning_rate=1e-2)
    rows = [Row([5, 6], [7, 8, 9], [1, 0, 1], [0.0] * 3, 1.0, 0), Row([5], [10, 11, 12, 13], [1, 1, 1, 1], [0.0] * 4,
            1.0, 0), Row([9, 9, 9], [20], [1], [0.0], 1.0, 0), Row([4], [30, 31], [0, 1], [0.0] * 2, 1.0, 0),
            Row([6], [40, 41, 42], [1, 1, 0], [0.0] * 3, 1.0, 0)]  # 5 rows: a minibatch of 4 and one of 1

    def trained(micro_steps: int) -> tuple[list[float], list[torch.Tensor]]:
        torch.manual_seed(0)
        model = get_peft_model(load_policy(base, trainable=True)[0], lora_config(cfg))
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
        losses = sft_epochs(model, optimizer, rows, cfg, random.Random(0), micro_steps)
        return losses, [p.detach().clone() for p in model.parameters() if p.requires_grad]

    whole, *splits = (trained(m) for m in (1, 2, 4))
    for losses, weights in splits:
        assert losses == pytest.approx(whole[0], rel=1e-5) and len(losses) == 4
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(weights, whole[1]))
    assert any(float(w.abs().max()) > 0 for w in whole[1][1::2])  # lora_B moved: the steps trained


def test_an_rsft_stage_trains_with_the_planned_micro_steps_or_refuses_before_any_rollout(tmp_path):
    """WHALE's RSFT stage plans from train.max_memory_gb as GRPO does: the tiny Llama's SFT step of 4 rows of
    4096 tokens (~0.59 GB estimated, no activation checkpointing) runs in 4 micro-steps under 0.53 GB, with
    max_len halved under 0.52 GB; under 0.3 GB it is refused before its folder, its sampler or any rollout."""
    from coevo.training.checkpoint import load_policy
    from coevo.training.memory import plan_sft_memory
    from coevo.training.rsft import train_rsft

    tiny = ModelShape.of(load_policy(tiny_llama_checkpoint(tmp_path / "shape"))[0])
    assert plan_sft_memory(StageConfig(max_memory_gb=64), tiny).micro_batches == 1
    cut = plan_sft_memory(StageConfig(max_memory_gb=0.52), tiny)
    assert cut.changed == ("minibatch micro-steps 1 -> 4", "max_len 4096 -> 2048")
    env, spec = LookupEnv(), HarnessSpec(parser={"mode": "python_call"})
    base = tiny_llama_checkpoint(tmp_path / "base")
    sampled = []

    def policy(model, tok):
        sampled.append(1)
        return lookup_policy(right_every=2)

    with Archive(tmp_path / "a.db") as archive:
        new, _ = train_rsft(base, spec, env, env.tasks(), {"steps": 1, "max_memory_gb": 0.53,
                                                           "output_dir": str(tmp_path / "runs")},
                            archive=archive, run_id="r", policy_factory=policy)
        memory = new.metrics["memory"]
        assert (memory["micro_steps"], memory["max_len"], memory["budget_gb"]) == (4, 4096, 0.53)
        assert new.metrics["steps"] >= 1 and new.config["max_len"] == 4096
        with pytest.raises(MemoryBudgetError, match=r"the RSFT stage needs about 0\.\d\d GB even at one row of 256 "
                                                    r"tokens.*train\.max_memory_gb = 0\.3;.*nothing was trained"):
            train_rsft(base, spec, env, env.tasks(), {"steps": 1, "max_memory_gb": 0.3,
                                                      "output_dir": str(tmp_path / "refused")},
                       archive=archive, run_id="r", policy_factory=policy)
        assert [c.id for c in archive.list(Checkpoint)] == [new.id] and len(sampled) == 1
    assert not (tmp_path / "refused").exists()  # not even an unfinished stage's folder


def test_an_evoharness_sft_stage_is_refused_by_its_budget_before_the_teacher_plays(tmp_path, monkeypatch):
    """EvoHarness-RL's harness SFT (the stage that peaked at 23.1 GB of 24 on TextWorld) plans from the same
    train.max_memory_gb: under a budget its one row cannot fit it is refused with the one paragraph, before
    the teacher's first rollout, and the archive holds only the checkpoint it started from. The run's stage
    trainer hands the freed memory back after the refused stage and after the one that trained."""
    import asyncio
    import traceback

    from coevo.training import memory

    released = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: released.append(1) or True)

    from training_kit import tiny_chat_checkpoint

    from coevo.config import load_config
    from coevo.envs.base import Task
    from coevo.training.evoharness.sft import HarnessSFT
    from coevo.training.stage import StageTrainer

    played = []

    class Revealed(LookupEnv):
        def reveal(self, task: Task) -> str:
            played.append(task.id)
            return f"VALUE-{task.metadata['key']}"

    config = load_config(None, {"out_dir": str(tmp_path), "train.max_memory_gb": 0.3, "train.steps": 1,
                                "train.tasks_per_step": 1, "train.num_generations": 2})
    env, spec = Revealed(), HarnessSpec(parser={"mode": "json"}, bpe={})
    with Archive(tmp_path / "a.db") as archive:
        archive.put(tiny_chat_checkpoint(tmp_path / "base"))
        refusal = r"the RSFT stage needs about .* \(train\.max_memory_gb = 0\.3;"
        with pytest.raises(MemoryBudgetError, match=refusal) as refused:
            asyncio.run(StageTrainer(config, env, archive, "r1")("ckpt-tiny", spec, env.tasks(), 0, HarnessSFT()))
        assert [c.id for c in archive.list(Checkpoint)] == ["ckpt-tiny"] and not played and released == [1]
        frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(refused.value.__traceback__)]
        # below the stage trainer and its releasing wrapper (coevo.training.memory.releasing): the stage's own frames
        below = [frame for frame, _ in traceback.walk_tb(refused.value.__traceback__)][frames.index("released") + 1:]
        assert below and not any(frame.f_locals for frame in below)  # the failed stage's locals were let go
        roomy = config.model_copy(update={"train": config.train.model_copy(update={"max_memory_gb": 64.0})})
        new_id, _ = asyncio.run(StageTrainer(roomy, env, archive, "r1")("ckpt-tiny", spec, env.tasks(), 0,
                                                                        HarnessSFT()))
        assert played and archive.get(Checkpoint, new_id).metrics["memory"]["micro_steps"] == 1  # the teacher played
        assert released == [1, 1]


def test_memory_a_stage_freed_goes_back_to_the_operating_system():
    """glibc keeps freed heap chunks resident; ``release_freed_memory`` (run after every weight stage) returns
    their pages: 200 MB freed in 4 KiB chunks between survivors (under glibc's mmap threshold, so on the
    heap, where a plain ``free`` leaves them resident) leaves the resident set after the call."""
    import ctypes

    from coevo.training.memory import release_freed_memory

    if not hasattr(ctypes.CDLL(None), "malloc_trim"):
        assert release_freed_memory() is False  # macOS, musl: nothing to call, no error
        return

    def rss_mb() -> float:
        with open("/proc/self/status") as status:
            return int(status.read().split("VmRSS:")[1].split()[0]) / 1024

    blocks = [bytearray(4096) for _ in range(50_000)]  # zero-filled: every page resident
    survivors = blocks[::64]  # one live chunk in 64 keeps the freed runs inside the heap, not at its top
    del blocks
    held = rss_mb()
    assert release_freed_memory() is True
    assert held - rss_mb() > 100, f"resident {held:.0f} MB before the release, {rss_mb():.0f} MB after"
    assert len(survivors) == 782
