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

from coevo.config.train import StageConfig
from coevo.training.grpo.advantages import group_advantages

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
    from coevo.training.grpo.stage import grpo_args, lora_config

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

    from coevo.training.grpo.trainer import HarnessGRPOTrainer

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
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

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
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    t.log_metric("rescue_rate", 1.0)
    t.log_metric("rescue_rate", 0.0)
    t.log({"loss": 0.5})
    assert t.state.log_history[-1]["rescue_rate"] == 0.5 and t.state.log_history[-1]["loss"] == 0.5


def test_route_tensorboard_sends_a_stage_s_events_to_its_folder(tmp_path):
    pytest.importorskip("tensorboardX")
    from transformers.integrations import TensorBoardCallback

    from coevo.compat import route_tensorboard
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

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

    from coevo.training.grpo.stage import quiet_console
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    quiet_console(t)  # stderr is not a terminal under pytest: no bar
    kinds = [type(c) for c in t.callback_handler.callbacks]
    assert ProgressCallback not in kinds and PrinterCallback not in kinds
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG, logger="coevo.training.grpo.stage"):
        t.log({"loss": 0.125})
    assert "0.125" in caplog.text and capsys.readouterr() == ("", "")


# --- the packed scorer: TRL's _get_per_token_logps_and_entropies served by coevo.training.grpo.packing ---------


def shared_prompt_batch():
    """Two tasks x 3 rows: one system-like prefix, a prompt per task, completions of different lengths."""
    head = [ord(c) for c in "You are careful. Answer: "]
    prompts = [head + [ord(c) for c in "2+3="]] * 3 + [head + [ord(c) for c in "19-4="]] * 3
    completions = [[53, 3], [53, 32, 53, 3], [52], [49, 53, 3], [49, 53], [57, 57, 57, 3]]
    return prompts, completions


def padded_batch(prompts, completions):
    from trl.trainer.utils import pad

    p = pad([torch.tensor(x) for x in prompts], padding_value=0, padding_side="left")
    pm = pad([torch.ones(len(x), dtype=torch.long) for x in prompts], padding_value=0, padding_side="left")
    c = pad([torch.tensor(x) for x in completions], padding_value=0, padding_side="right")
    cm = pad([torch.ones(len(x), dtype=torch.long) for x in completions], padding_value=0, padding_side="right")
    return torch.cat([p, c], 1), torch.cat([pm, cm], 1), c.size(1), cm


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_scores_equal_trls_row_by_row_scores_and_gradients(tmp_path, attention):
    from coevo.training.grpo.packing import pack, packed_logps
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    t = trainer(HarnessGRPOTrainer, tmp_path, coevo_rollout)
    t.model.get_base_model().config._attn_implementation = attention
    with torch.no_grad():  # LoRA B starts at 0: give the adapter a real effect
        for name, p in t.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    ids, mask, width, completion_mask = padded_batch(*shared_prompt_batch())
    packed = pack(ids, mask, width)
    assert packed.ids.size(1) < int(mask.sum())  # the shared prompt tokens are in it once
    weights = torch.randn(completion_mask.shape) * completion_mask

    def scored(scorer):
        t.model.zero_grad()
        logps, entropies = scorer()
        (logps * weights).sum().backward()
        grads = {n: p.grad.clone() for n, p in t.model.named_parameters() if p.grad is not None}
        return logps.detach(), entropies.detach(), grads

    theirs = scored(lambda: GRPOTrainer_scores(t, ids, mask, width))
    ours = scored(lambda: packed_logps(t.model, ids, mask, width, compute_entropy=True))
    on = completion_mask.bool()
    assert torch.allclose(theirs[0][on], ours[0][on], atol=1e-5) and (ours[0][~on] == 0).all()
    assert torch.allclose(theirs[1][on], ours[1][on], atol=1e-4)
    assert theirs[2].keys() == ours[2].keys() and theirs[2]
    assert all(torch.allclose(theirs[2][n], ours[2][n], atol=1e-5) for n in theirs[2])


def GRPOTrainer_scores(t, ids, mask, width):  # TRL's own row-by-row scoring, bypassing the packed scorer
    from trl import GRPOTrainer

    logps, entropies, _ = GRPOTrainer._get_per_token_logps_and_entropies(t, t.model, ids, mask, width,
                                                                         compute_entropy=True)
    return logps, entropies


def fixed_rows(prompts, trainer):  # a step's rows: shared prompts, Eq. 6 advantages of rewards [1,0,0] / [1,1,0]
    p, c = shared_prompt_batch()
    return {"prompt_ids": p, "completion_ids": c, "logprobs": [[-1.0] * len(x) for x in c],
            "env_mask": [[1] * len(x) for x in c],
            "advantages": group_advantages([1, 0, 0]) + group_advantages([1, 1, 0]),
            "task_index": [0] * 3 + [1] * 3, "num_tasks": 2, "metrics": {}}


def one_sgd_step(tmp_path, pack_prefixes, state=None):
    from datasets import Dataset

    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.stage import grpo_args, lora_config
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    cfg = StageConfig(steps=1, tasks_per_step=2, num_generations=3, pack_prefixes=pack_prefixes,
                      learning_rate=0.5, max_grad_norm=1e6, output_dir=str(tmp_path))
    args = grpo_args(cfg, tmp_path / "out", 0.7)
    args.optim = "sgd"  # an update proportional to the gradient (Adam's first step is not)
    model, tok = load_policy(tiny_llama_checkpoint(tmp_path / "base"))
    t = HarnessGRPOTrainer(model=model, reward_funcs=[first_token_reward], args=args, processing_class=tok,
                           train_dataset=Dataset.from_list([{"prompt": "p0"}, {"prompt": "p1"}]),
                           peft_config=lora_config(cfg), rollout_func=fixed_rows, pack_prefixes=pack_prefixes)
    if state is None:
        with torch.no_grad():
            for name, p in t.model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
    else:
        t.model.load_state_dict(state, strict=False)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters() if p.requires_grad}
    t.train()
    after = dict(t.model.named_parameters())
    return before, {n: after[n].detach() - v for n, v in before.items()}, t.state.log_history[0]


def test_a_packed_step_makes_the_update_of_row_by_row_micro_steps(tmp_path):
    """The stage's objective is unchanged by packing and by one micro-step instead of one per row:
    the same loss, gradient norm and (SGD) update for the same sampled tokens."""
    before, unpacked, log_a = one_sgd_step(tmp_path / "a", pack_prefixes=False)
    _, packed, log_b = one_sgd_step(tmp_path / "b", pack_prefixes=True, state=before)
    assert log_a["loss"] == pytest.approx(log_b["loss"], abs=1e-6)
    assert log_a["grad_norm"] == pytest.approx(log_b["grad_norm"], rel=1e-4) and log_a["grad_norm"] > 0
    assert unpacked.keys() == packed.keys() and unpacked
    assert all(torch.allclose(unpacked[n], packed[n], atol=1e-6) for n in unpacked)
