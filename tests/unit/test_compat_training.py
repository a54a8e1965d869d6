"""``coevo.compat``'s reaches under TRL and transformers behave like the public path they replace,
on the tiny random Llama (no download).

``GRPOBatchHook`` (TRL's private ``_generate_and_score_completions`` answered by coevo's own batch):
for the same sampled tokens and the same advantages, the loss and every gradient equal those of
TRL's own batch built from a public ``rollout_func``. ``policy_logps`` are the per-token log-probs of
the sampling distribution (temperature-scaled softmax of the model's logits); ``log_metric`` values
reach ``log_history`` as TRL's own metrics do; ``route_tensorboard`` sends the TensorBoard events of
a stage to its folder.
"""

from __future__ import annotations

import logging

import pytest
import torch
from training_kit import tiny_llama_checkpoint

from coevo.training.advantages import group_advantages
from coevo.training.config import StageConfig

# two tasks x K=4 rollouts; every completion has 3 policy tokens (env_mask [1, 1, 0, 1]), so each task
# has 12 and Eq. 15's per-task factor N / (|B| N_x) is 1; rewards in {0, 2} with two of each per group
# have population std 1, so Eq. 6's advantage equals TRL's ``scale_rewards="none"`` advantage r - mean
PROMPTS = [[5, 6, 7]] * 4 + [[8, 9]] * 4
FIRST = [65, 66, 65, 66, 65, 66, 66, 65]  # 65 ('A') earns 2, 66 ('B') earns 0
COMPLETIONS = [[t, 40 + i, 10, 3] for i, t in enumerate(FIRST)]
ENV_MASK = [[1, 1, 0, 1]] * 8
REWARDS = [2.0 if t == 65 else 0.0 for t in FIRST]


def tokens_rollout(prompts, trainer):  # TRL's public rollout_func: one completion per prompt
    return {"prompt_ids": PROMPTS, "completion_ids": COMPLETIONS, "logprobs": [[-1.0] * 4] * 8, "env_mask": ENV_MASK}


def coevo_rollout(prompts, trainer):  # the same tokens as coevo rows, with Eq. 6 advantages per group
    adv = group_advantages(REWARDS[:4]) + group_advantages(REWARDS[4:])
    return {**tokens_rollout(prompts, trainer), "advantages": adv, "task_index": [0] * 4 + [1] * 4,
            "num_tasks": 2, "metrics": {}}


def first_token_reward(prompts, completions, completion_ids, **kwargs):
    return [2.0 if ids[0] == 65 else 0.0 for ids in completion_ids]


def trainer(cls, tmp_path, rollout, **kwargs):
    from datasets import Dataset

    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo import grpo_args, lora_config

    cfg = StageConfig(micro_batches=1, output_dir=str(tmp_path))
    model, tok = load_policy(tiny_llama_checkpoint(tmp_path / "base"))
    out = cls(model=model, reward_funcs=[first_token_reward], args=grpo_args(cfg, tmp_path / "out", 0.7),
              processing_class=tok, train_dataset=Dataset.from_list([{"prompt": "p0"}, {"prompt": "p1"}]),
              peft_config=lora_config(cfg), rollout_func=rollout, **kwargs)
    out.model.train()
    out.current_gradient_accumulation_steps = 1  # set by the training loop
    return out


def loss_and_grads(t, batch):
    t.model.zero_grad()
    loss = t.compute_loss(t.model, batch)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in t.model.named_parameters() if p.grad is not None}


def test_grpo_batch_hook_gives_the_loss_and_gradients_of_trls_own_batch(tmp_path):
    from trl import GRPOTrainer

    from coevo.training.trainer import HarnessGRPOTrainer

    inputs = [{"prompt": "p0"}] * 4 + [{"prompt": "p1"}] * 4
    theirs = trainer(GRPOTrainer, tmp_path / "trl", tokens_rollout)
    ours = trainer(HarnessGRPOTrainer, tmp_path / "coevo", coevo_rollout)
    ours.model.load_state_dict(theirs.model.state_dict())  # the same LoRA initialisation
    a, b = theirs._generate_and_score_completions(inputs), ours._generate_and_score_completions(inputs)
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "num_items_in_batch"):
        assert torch.equal(a[key], b[key]), key
    mask = a["completion_mask"] * a["tool_mask"]
    assert torch.equal(mask, b["completion_mask"] * b["tool_mask"]) and int(mask.sum()) == 24
    assert torch.allclose(a["advantages"].unsqueeze(1) * mask, b["advantages"] * mask)
    assert a["advantages"].abs().sum() > 0
    loss_a, grads_a = loss_and_grads(theirs, a)
    loss_b, grads_b = loss_and_grads(ours, b)
    assert torch.allclose(loss_a, loss_b, atol=1e-6) and grads_a.keys() == grads_b.keys() and grads_a
    assert all(torch.allclose(grads_a[n], grads_b[n], atol=1e-6) for n in grads_a)
    assert any(g.abs().max() > 0 for g in grads_a.values())


def test_policy_logps_are_the_sampling_distribution_s_log_probs(tmp_path):
    from coevo.training.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    ids = torch.tensor([p + c for p, c in zip(PROMPTS[:1], COMPLETIONS[:1])] * 2)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded row scores its completion all the same
    logps = t.policy_logps(ids, mask, 4)
    with torch.no_grad():
        logits = t.model(input_ids=ids[:1]).logits[:, -5:-1].float() / 0.7
    by_hand = torch.log_softmax(logits, -1).gather(-1, ids[:1, -4:, None])[..., 0]
    assert logps.shape == (2, 4) and not logps.requires_grad
    assert torch.allclose(logps[0], by_hand[0], atol=1e-5)


def test_log_metric_values_reach_log_history_as_trls_own_metrics(tmp_path):
    from coevo.training.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    t.log_metric("rescue_rate", 1.0)
    t.log_metric("rescue_rate", 0.0)
    t.log({"loss": 0.5})
    assert t.state.log_history[-1]["rescue_rate"] == 0.5 and t.state.log_history[-1]["loss"] == 0.5


def test_route_tensorboard_sends_a_stage_s_events_to_its_folder(tmp_path):
    pytest.importorskip("tensorboardX")
    from transformers.integrations import TensorBoardCallback

    from coevo.compat import route_tensorboard
    from coevo.training.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    callback = TensorBoardCallback()
    t.add_callback(callback)
    route_tensorboard(t, str(tmp_path / "tb"))
    callback.on_train_begin(t.args, t.state, t.control)
    callback.on_log(t.args, t.state, t.control, logs={"loss": 0.25})
    callback.on_train_end(t.args, t.state, t.control)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_quiet_console_prints_nothing_and_logs_the_metrics_at_debug(tmp_path, capsys, caplog):
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from coevo.training.grpo import quiet_console
    from coevo.training.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    quiet_console(t)  # stderr is not a terminal under pytest: no bar
    kinds = [type(c) for c in t.callback_handler.callbacks]
    assert ProgressCallback not in kinds and PrinterCallback not in kinds
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG, logger="coevo.training.grpo"):
        t.log({"loss": 0.125})
    assert "0.125" in caplog.text and capsys.readouterr() == ("", "")
