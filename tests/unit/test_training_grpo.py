"""GRPO on harness rollouts with a tiny random Llama and a scripted policy (no download).

Pins: the loss mask covers policy tokens only (tool observations, hook injections and template
glue excluded), a rewritten context splits into rows that keep the advantage, the batch carries
Eq. 6 x Eq. 15 x Eq. 16 advantages, rescue replaces all-fail groups, a step changes the adapter, and
a rollout that raises is recorded and masked out of its group instead of the step's end.
"""

import asyncio
import itertools
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from training_kit import LookupEnv, lookup_policy, sampled, tiny_llama_checkpoint

from coevo.config.train import StageConfig
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import ModelCall, Trajectory
from coevo.records import Checkpoint
from coevo.training.grpo.advantages import group_advantages, task_token_weights, truncated_is_weight
from coevo.training.grpo.rollout import HarnessRollout, sibling_rescue
from coevo.training.grpo.samples import trajectory_rows
from coevo.training.grpo.stage import train_grpo

HOOK = {"nudge": {"event": "after_tool", "condition": "always", "action": "inject", "message": "HOOK-TEXT"}}


def text(ids):
    return "".join(chr(i) for i in ids)


@pytest.fixture
def spec():
    return HarnessSpec(parser={"mode": "python_call"}, hooks=HOOK)


@pytest.fixture
def env():
    return LookupEnv()


def fake_trainer(k=4, step=0):
    return SimpleNamespace(num_generations=k, state=SimpleNamespace(global_step=step), model=torch.nn.Linear(1, 1))


def test_loss_mask_excludes_tool_observations_and_hook_injections(spec, env):
    traj = asyncio.run(arun_rollout(spec, lookup_policy(right_every=1), env, env.tasks()[0]))
    (row,) = trajectory_rows(traj, advantage=0.5, task_index=0)
    completion = text(row.completion_ids)
    policy = text(i for i, m in zip(row.completion_ids, row.env_mask) if m)
    context = text(i for i, m in zip(row.completion_ids, row.env_mask) if not m)
    assert policy == '[lookup(key="a")]' + "Final answer: VALUE-a"
    assert "[lookup output]\nVALUE-a" in context and "HOOK-TEXT" in context
    assert "HOOK-TEXT" in completion and "HOOK-TEXT" not in policy
    assert "look up a" in text(row.prompt_ids)  # the task prompt is never a completion token


def test_rewritten_context_splits_into_rows_that_keep_the_advantage():
    first = ModelCall(input=[], output={}, prompt_token_ids=[1, 2], completion_token_ids=[3], logprobs=[-0.1])
    chained = ModelCall(input=[], output={}, prompt_token_ids=[1, 2, 3, 9], completion_token_ids=[4], logprobs=[-0.2])
    rewritten = ModelCall(input=[], output={}, prompt_token_ids=[1, 9, 9], completion_token_ids=[5, 6],
                          logprobs=[-0.3, -0.4])
    traj = Trajectory(task_id="t", calls=[first, chained, rewritten])
    rows = trajectory_rows(traj, advantage=-1.25, task_index=3)
    assert [(r.prompt_ids, r.completion_ids, r.env_mask) for r in rows] == [
        ([1, 2], [3, 9, 4], [1, 0, 1]), ([1, 9, 9], [5, 6], [1, 1])]
    assert all(r.advantage == -1.25 and r.task_index == 3 for r in rows)
    assert rows[1].logprobs == [-0.3, -0.4]


def test_rollout_func_returns_trl_rows_with_eq6_advantages(spec, env):
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: lookup_policy(right_every=2))
    ids = [t.id for t in env.tasks() for _ in range(4)]
    out = rollout(ids, fake_trainer())
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask"} <= out.keys()
    assert len(out["completion_ids"]) == len(out["env_mask"]) == 8 and out["num_tasks"] == 2
    rewards = [t.reward for t in rollout.trajectories]
    expected = group_advantages(rewards[:4]) + group_advantages(rewards[4:])
    assert out["advantages"] == pytest.approx(expected) and set(rewards) == {0.0, 1.0}
    assert out["metrics"]["effective_group_rate"] == 1.0 and out["metrics"]["reward"] == 0.5


def test_rollout_func_rejects_prompts_that_are_not_groups_of_k(spec, env):
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: lookup_policy())
    with pytest.raises(ValueError, match="repeated 4 times"):
        rollout(["lookup-a", "lookup-b"] * 2, fake_trainer())
    with pytest.raises(KeyError, match="unknown task id"):
        rollout(["nope"] * 4, fake_trainer())


def test_rescue_replaces_an_all_fail_group_with_sibling_rollouts(spec, env):
    sibling = spec.model_copy(update={"prompt": spec.prompt.model_copy(update={"system": "HINT: answer it."})})
    policy = lookup_policy(right_every=2, hint="HINT")  # never right under H0, half right under the sibling
    rollout = HarnessRollout(spec, env, env.tasks()[:1], rescue=sibling_rescue([sibling], env),
                             policy_factory=lambda tr: policy)
    out = rollout(["lookup-a"] * 4, fake_trainer())
    initial, rescued = rollout.trajectories[:4], rollout.trajectories[4:]
    assert not any(t.passed for t in initial) and len(rescued) == 4
    assert {t.harness_id for t in rescued} == {sibling.id} and any(t.passed for t in rescued)
    assert out["advantages"] == pytest.approx(group_advantages([t.reward for t in rescued]))
    assert out["metrics"]["rescue_rate"] == 1.0 and out["metrics"]["reward"] == 0.0


def test_grpo_batch_carries_policy_mask_and_eq15_eq16_advantages(tmp_path, spec, env):
    from datasets import Dataset

    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.stage import grpo_args, lora_config
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    cfg = StageConfig(output_dir=str(tmp_path / "runs"))
    model, tok = load_policy(ckpt)
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: lookup_policy(right_every=2))
    trainer = HarnessGRPOTrainer(model=model, reward_funcs=[lambda prompts, **kw: [0.0] * len(prompts)],
                                 args=grpo_args(cfg, tmp_path / "out"), processing_class=tok,
                                 train_dataset=Dataset.from_list([{"prompt": t.id} for t in env.tasks()]),
                                 peft_config=lora_config(cfg), rollout_func=rollout, importance_correction=True)
    batch = trainer._generate_and_score_completions([{"prompt": t.id} for t in env.tasks() for _ in range(4)])
    mask = batch["completion_mask"] * batch["tool_mask"]
    for r, row in enumerate(batch["completion_ids"].tolist()):
        policy = text(i for i, m in zip(row, mask[r].tolist()) if m)
        assert policy.startswith('[lookup(key="') and "Final answer: " in policy and "HOOK" not in policy
    w = truncated_is_weight(batch["old_per_token_logps"], torch.full_like(batch["old_per_token_logps"], -0.5))
    per_task = task_token_weights([int(mask[:4].sum()), int(mask[4:].sum())])
    rewards = [t.reward for t in rollout.trajectories]
    eq6 = group_advantages(rewards[:4]) + group_advantages(rewards[4:])
    expected = torch.tensor([a * per_task[i // 4] for i, a in enumerate(eq6)]).unsqueeze(1) * w
    assert torch.allclose(batch["advantages"] * mask, expected * mask, atol=1e-6)
    assert int(batch["num_items_in_batch"]) == int(mask.sum())


def test_train_grpo_step_changes_the_adapter_and_records_metrics(tmp_path, spec, env):
    from safetensors.torch import load_file

    from coevo.storage.archive import Archive

    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    cfg = {"steps": 1, "learning_rate": 1e-2, "output_dir": str(tmp_path / "runs")}
    with Archive(tmp_path / "coevo.db") as archive:
        new, trajs = train_grpo(ckpt, spec, env, env.tasks(), cfg, archive=archive, run_id="r1",
                                policy_factory=lambda tr: lookup_policy(right_every=2))
        record = archive.get(Checkpoint, new.id)
    assert record.metrics["reward_mean"] == 0.5 and record.parents == ["ckpt-tiny"]
    assert record == new and record.run_id == "r1"  # the archive keeps the Checkpoint as trained
    weights = load_file(str(Path(new.adapter_path) / "adapter_model.safetensors"))
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(v.abs().max() > 0 for v in lora_b)  # PEFT initialises lora_B to zero
    assert new.parents == ["ckpt-tiny"] and new.base_model == ckpt.base_model
    assert len(trajs) == 8 and {t.checkpoint_id for t in trajs} == {"ckpt-tiny"}
    m = new.metrics
    assert m["steps"] == 1 and m["reward_mean"] == 0.5 and m["effective_group_rate"] == 1.0
    assert m["tokens"] > 0 and m["wall_time_s"] > 0 and m["loss"] is not None
    assert m["history"][0]["effective_token_share"] == 1.0 and m["sampled_tokens_per_s"] > 0
    assert 0.0 <= m["history"][0]["is_weight_mean"] <= 2.0  # a policy_factory sampler turns Eq. 16 on
    assert new.config["importance_correction"] is True


def test_train_grpo_rejects_too_few_tasks_and_greedy_decoding(tmp_path, spec, env):
    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    with pytest.raises(ValueError, match="tasks_per_step"):
        train_grpo(ckpt, spec, env, env.tasks()[:1], {"tasks_per_step": 2})
    with pytest.raises(ValueError, match="num_generations >= 2"):
        train_grpo(ckpt, spec, env, env.tasks(), {"num_generations": 1})
    greedy = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"temperature": 0.0})})
    with pytest.raises(ValueError, match="greedy"):
        train_grpo(ckpt, greedy, env, env.tasks(), {})


def test_fill_prompt_ids_renders_missing_prompts_with_the_chat_template():
    from langchain_core.messages import HumanMessage, messages_to_dict
    from training_kit import char_tokenizer

    from coevo.training.grpo.rollout import fill_prompt_ids

    tok = char_tokenizer()
    tok.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    call = ModelCall(input=messages_to_dict([HumanMessage("hi")]), output={}, completion_token_ids=[65, 66],
                     logprobs=[-0.1, -0.2])
    kept = ModelCall(input=messages_to_dict([HumanMessage("x")]), output={}, prompt_token_ids=[1],
                     completion_token_ids=[2])
    traj = Trajectory(task_id="t", calls=[call, kept])
    fill_prompt_ids(traj, tok)
    assert text(traj.calls[0].prompt_token_ids) == "<user>hi<assistant>" and traj.calls[1].prompt_token_ids == [1]
    assert trajectory_rows(traj, 1.0, 0)[0].completion_ids == [65, 66]


def test_batch_pads_rows_to_equal_micro_batches_with_lossless_fillers(tmp_path, spec, env):
    from datasets import Dataset

    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.stage import grpo_args, lora_config
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    def three_rows(prompts, trainer):  # one trajectory split in two segments + one more: 3 rows
        return {"prompt_ids": [[5, 6], [5, 7], [9]], "completion_ids": [[7, 8], [8], [10, 11, 12]],
                "logprobs": [[-1.0, -1.0], [-1.0], [-1.0] * 3], "env_mask": [[1, 1], [1], [1, 0, 1]],
                "advantages": [1.0, 1.0, -1.0], "task_index": [0, 0, 1], "num_tasks": 2, "metrics": {}}

    cfg = StageConfig(micro_batches=2, output_dir=str(tmp_path))
    model, tok = load_policy(tiny_llama_checkpoint(tmp_path / "base"))
    trainer = HarnessGRPOTrainer(model=model, reward_funcs=[lambda prompts, **kw: [0.0] * len(prompts)],
                                 args=grpo_args(cfg, tmp_path / "out"), processing_class=tok,
                                 train_dataset=Dataset.from_list([{"prompt": t.id} for t in env.tasks()]),
                                 peft_config=lora_config(cfg), rollout_func=three_rows)
    batch = trainer._generate_and_score_completions([{"prompt": "lookup-a"}] * 8)
    mask = batch["completion_mask"] * batch["tool_mask"]
    assert batch["completion_ids"].shape[0] == 4 and mask[3].sum() == 0  # the filler carries no loss
    assert int(batch["num_items_in_batch"]) == 5
    # Eq. 15: task 0 has 3 policy tokens, task 1 has 2 -> factors 5/(2*3) and 5/(2*2)
    assert batch["advantages"][0, 0].item() == pytest.approx(5 / 6)
    assert batch["advantages"][2, 0].item() == pytest.approx(-5 / 4)


def raises_on_call(n: int, error: Exception) -> ScriptedChatModel:
    """``lookup_policy(right_every=1)`` (every rollout it finishes passes) whose ``n``-th model call,
    and only that one, raises ``error``."""
    reply, calls = lookup_policy(right_every=1).script[0], itertools.count(1)

    def flaky(messages):
        if next(calls) == n:
            raise error
        return reply(messages)

    return ScriptedChatModel(script=[flaky], with_tokens=True)


def test_a_rollout_that_raises_is_recorded_and_masked_out_of_its_group_statistics_and_loss(spec, env, caplog):
    policy = raises_on_call(3, RuntimeError("policy server hung up"))  # one at a time: rollout 1 of task a
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: policy, max_concurrency=1)
    with caplog.at_level(logging.WARNING, logger="coevo.training"):
        out = rollout([t.id for t in env.tasks() for _ in range(4)], fake_trainer())
    trajs = rollout.trajectories
    assert [t.task_id for t in trajs] == ["lookup-a"] * 4 + ["lookup-b"] * 4 and out["num_tasks"] == 2
    failed = trajs[1]
    assert failed.stop_reason == "error:RuntimeError" and failed.reward == 0.0 and failed.calls == []
    assert "policy server hung up" in failed.score_detail["error"] and [t.passed for t in trajs].count(False) == 1
    assert len(out["completion_ids"]) == 7 and out["task_index"] == [0, 0, 0, 1, 1, 1, 1]  # no row for it
    # its three siblings all passed: no contrast left, so none of them gains from the failure (was +0.577 each)
    assert out["advantages"] == [0.0] * 7
    m = out["metrics"]
    assert m["failed_rollouts"] == 1.0 and m["reward"] == 1.0 and m["effective_group_rate"] == 0.0
    assert m["dropped_groups"] == 0.0 and m["nonzero_std_rate"] == 0.0
    assert "lookup-a" in caplog.text and "policy server hung up" in caplog.text and "masked" in caplog.text


def test_an_env_that_raises_fails_only_its_own_group(spec):
    class BrokenEnv(LookupEnv):
        def episode(self, task, seed=0):
            if task.metadata["key"] == "b":
                raise OSError("sandbox unavailable")
            return super().episode(task, seed)

    env = BrokenEnv()
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: lookup_policy(right_every=1))
    out = rollout([t.id for t in env.tasks() for _ in range(4)], fake_trainer())
    assert [t.stop_reason for t in rollout.trajectories[4:]] == ["error:OSError"] * 4
    assert out["task_index"] == [0] * 4 and out["advantages"] == [0.0] * 4 and out["num_tasks"] == 1
    assert out["metrics"]["failed_rollouts"] == 4.0 and out["metrics"]["effective_group_rate"] == 0.0
    assert out["metrics"]["dropped_groups"] == 1.0  # nothing left of b's group: dropped, counted


def test_failed_sibling_rollouts_during_rescue_keep_the_rescue_group_whole(spec, env):
    sibling = spec.model_copy(update={"prompt": spec.prompt.model_copy(update={"system": "HINT: answer it."})})
    hinted = lookup_policy(right_every=1, hint="HINT")  # never right under H0, always under the sibling
    calls = itertools.count(1)

    def flaky(messages):  # the 9th call is the first of the rescue's sibling rollouts
        if next(calls) == 9:
            raise RuntimeError("boom")
        return hinted.script[0](messages)

    rollout = HarnessRollout(spec, env, env.tasks()[:1], rescue=sibling_rescue([sibling], env), max_concurrency=1,
                             policy_factory=lambda tr: ScriptedChatModel(script=[flaky], with_tokens=True))
    out = rollout(["lookup-a"] * 4, fake_trainer())
    rescued = rollout.trajectories[4:]
    assert len(rescued) == 4 and sum(t.passed for t in rescued) == 3 and sum(t.calls == [] for t in rescued) == 1
    assert out["metrics"]["failed_rollouts"] == 1.0 and out["metrics"]["rescue_rate"] == 1.0


def test_train_grpo_step_goes_on_past_a_failed_rollout_and_counts_it(tmp_path, spec, env):
    ckpt = tiny_llama_checkpoint(tmp_path / "base")
    cfg = {"steps": 1, "learning_rate": 1e-2, "output_dir": str(tmp_path / "runs")}
    new, trajs = train_grpo(ckpt, spec, env, env.tasks(), cfg,
                            policy_factory=lambda tr: raises_on_call(2, ValueError("bad reply")))
    assert len(trajs) == 8 and [t.stop_reason for t in trajs].count("error:ValueError") == 1
    assert new.metrics["history"][0]["failed_rollouts"] == 1.0 and new.metrics["steps"] == 1
    assert new.metrics["failed_rollouts"] == 1 and new.metrics["dropped_groups"] == 0
    # the raised rollout is no reward-0 sample: the other seven all passed
    assert new.metrics["reward_mean"] == 1.0 and Path(new.adapter_path, "adapter_model.safetensors").is_file()


def test_rsft_sampling_goes_on_past_a_failed_rollout_and_counts_it(tmp_path, spec, env):
    from coevo.training.rsft import train_rsft

    cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "minibatch_size": 4, "output_dir": str(tmp_path)}
    new, trajs = train_rsft(tiny_llama_checkpoint(tmp_path / "base"), spec, env, env.tasks(), cfg,
                            policy_factory=lambda model, tok: raises_on_call(2, ValueError("bad reply")))
    assert len(trajs) == 8 and sum(t.passed for t in trajs) == 7
    assert new.metrics["history"][0]["failed_rollouts"] == 1 and new.metrics["history"][0]["kept"] == 7
    assert new.metrics["kept_rate"] == 1.0 and new.metrics["reward_mean"] == 1.0  # over the 7 that ran, not 8


def scripted_rollout(passes):
    """A rollout function: the ``n``-th rollout (0-based) of task ``lookup-<key>`` passes iff
    ``passes(key, n)``; records what ran (task id, seed)."""
    ran = []

    async def rollout(spec, policy, env, task, seed=0, checkpoint_id=""):
        n = sum(tid == task.id for tid, _ in ran)
        ran.append((task.id, seed))
        return sampled(task, spec, seed, passes(task.metadata["key"], n), checkpoint_id)

    rollout.ran = ran
    return rollout


def test_dynamic_sampling_replaces_a_group_without_contrast_by_another_tasks_group(spec):
    env = LookupEnv(keys=("a", "b", "c", "d"))
    run = scripted_rollout(lambda key, n: key == "c" and n % 2 == 0)  # only c has a reward contrast
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=run, resample=3)
    out = rollout(["lookup-a"] * 4, fake_trainer())
    drawn = [tid for tid, _ in run.ran[4:]]
    assert "lookup-a" not in drawn and drawn[-4:] == ["lookup-c"] * 4  # draws stop once the group has contrast
    assert len(drawn) <= 12 and len(rollout.trajectories) == len(run.ran)
    m = out["metrics"]
    assert out["num_tasks"] == 1 and m["nonzero_std_rate"] == 1.0
    assert m["effective_group_rate"] == 1.0 and m["resampled_retained"] == 1.0
    assert m["resampled_groups"] == len(drawn) / 4
    assert m["reward"] == pytest.approx(2 / len(run.ran))  # every rollout under the harness, drawn ones included


def test_dynamic_sampling_is_bounded_and_keeps_the_group_when_no_draw_has_contrast(spec):
    env = LookupEnv(keys=("a", "b", "c"))
    run = scripted_rollout(lambda key, n: False)
    rollout = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=run, resample=5)
    out = rollout(["lookup-a"] * 4, fake_trainer())
    assert sorted({tid for tid, _ in run.ran[4:]}) == ["lookup-b", "lookup-c"]  # each reserve task drawn once
    assert out["metrics"]["resampled_groups"] == 2.0 and out["metrics"]["resampled_retained"] == 0.0
    assert out["metrics"]["effective_group_rate"] == 0.0 and out["metrics"]["nonzero_std_rate"] == 0.0
    off = HarnessRollout(spec, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=scripted_rollout(
        lambda key, n: False))
    assert off(["lookup-a"] * 4, fake_trainer())["metrics"]["resampled_groups"] == 0.0


def test_a_step_s_rollouts_share_one_generate_call_on_the_live_weights(tmp_path):
    """The default sampler is the trainer's own PEFT model (``LivePolicy``): a step's K x tasks
    rollouts run as the engine's clients and go out as one generate call (their shared prompt
    prefix prefilled once), and the step then trains on what was sampled."""
    from training_kit import NamingEnv, tiny_chat_checkpoint

    from coevo.training.grpo.rollout import LivePolicy

    ckpt = tiny_chat_checkpoint(tmp_path / "base")
    env = NamingEnv()
    spec = HarnessSpec(budget={"max_output_tokens": 6}, decoding={"temperature": 1.0})
    sampler = LivePolicy()
    new, trajs = train_grpo(ckpt, spec, env, env.tasks(), {"steps": 1, "resample": 0, "output_dir": str(tmp_path)},
                            policy_factory=sampler)
    assert sampler.policy.engine.batch_sizes == [8] and len(trajs) == 8
    assert all(t.calls and t.calls[0].completion_token_ids for t in trajs)
    assert new.metrics["steps"] == 1 and new.metrics["tokens"] > 0 and new.metrics["loss"] is not None
