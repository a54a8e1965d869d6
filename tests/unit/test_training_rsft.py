"""Online RSFT (WHALE §3.1): keep verifier-accepted rollouts, SFT on their policy tokens only."""

from pathlib import Path

import pytest
import torch
from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

from coevo.config import TrainConfig
from coevo.config.train import StageConfigError
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.training import rsft, sft
from coevo.training.checkpoint import load_policy
from coevo.training.grpo.samples import Row

SPEC = HarnessSpec(parser={"mode": "python_call"},
                   hooks={"nudge": {"event": "after_tool", "condition": "always", "action": "inject",
                                    "message": "HOOK-TEXT"}})


def text(ids):
    return "".join(chr(i) for i in ids)


def test_accepted_keeps_rewards_strictly_above_the_threshold():
    trajs = [Trajectory(task_id="t", reward=r) for r in (0.0, 0.5, 0.51, 1.0)]
    assert [t.reward for t in rsft.accepted(trajs, 0.5)] == [0.51, 1.0]


def test_sft_loss_is_the_token_mean_nll_of_policy_tokens(tmp_path):
    model, _ = load_policy(tiny_llama_checkpoint(tmp_path / "base"))
    rows = [Row([5, 6], [7, 8, 9], [1, 0, 1], [0.0] * 3, 1.0, 0), Row([5], [10, 11], [1, 1], [0.0] * 2, 1.0, 0)]
    manual = []
    for r in rows:
        ids = torch.tensor([r.prompt_ids + r.completion_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1)
        for pos, (tok, m) in enumerate(zip(r.completion_ids, r.env_mask)):
            if m:
                manual.append(-logp[len(r.prompt_ids) + pos - 1, tok])
    assert float(rsft.sft_loss(model, rows)) == pytest.approx(float(torch.stack(manual).mean()), rel=1e-5)
    with pytest.raises(ValueError, match="no policy tokens"):
        rsft.sft_loss(model, [Row([5], [6], [0], [0.0], 1.0, 0)])


def test_sft_loss_projects_only_policy_positions_and_shares_prompts_with_the_full_forwards_loss_and_gradients(
        tmp_path, monkeypatch):
    """The loss keeps only the logits of positions that predict a policy token (``logits_to_keep`` as a mask;
    without it, every position projected and the rest dropped), and runs a prompt its rows share once (its
    KV cache repeated to their completions): on a LoRA policy, rows of unequal length with masked completion
    tokens, three of them on one prompt, give the full forward's loss and adapter gradients on every path.
    Under active dropout the rows keep their own forwards (a shared one would share its mask)."""
    from peft import LoraConfig, get_peft_model

    base, _ = load_policy(tiny_llama_checkpoint(tmp_path / "base"))
    model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "k_proj", "v_proj"],
                                            init_lora_weights=False))
    shared = [5, 6, 7, 8]
    rows = [Row(shared, [7, 8, 9], [1, 0, 1], [0.0] * 3, 1.0, 0), Row([5], [10, 11], [1, 1], [0.0] * 2, 1.0, 1),
            Row([9, 9], [12], [0], [0.0], 1.0, 2), Row(shared, [12], [1], [0.0], 1.0, 0),
            Row(shared, [13, 14, 15, 16], [0, 1, 1, 1], [0.0] * 4, 1.0, 0)]

    def full_forward():
        width = max(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
        ids, mask = torch.zeros((len(rows), width), dtype=torch.long), torch.zeros((len(rows), width))
        for i, r in enumerate(rows):
            ids[i, :len(r.prompt_ids) + len(r.completion_ids)] = torch.tensor(r.prompt_ids + r.completion_ids)
            mask[i, len(r.prompt_ids):len(r.prompt_ids) + len(r.completion_ids)] = torch.tensor(r.env_mask).float()
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=(ids > 0).long()).logits[:, :-1], -1)
        return -(logp.gather(-1, ids[:, 1:, None]).squeeze(-1) * mask[:, 1:]).sum() / 8  # 8 policy tokens

    def loss_and_grads(loss_fn):
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return float(loss), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    projected = []  # how many positions each forward projects onto the vocabulary
    model.get_output_embeddings().register_forward_hook(lambda module, args, out: projected.append(
        args[0].shape[:-1].numel()))
    model.train()
    assert sft.keeps_logits(model) and sft.shares_prompts(model, rows)
    assert not sft.shares_prompts(model, rows[:3])  # no prompt repeats
    reference, reference_grads = loss_and_grads(full_forward)
    paths = [
        # shared prompts: per prompt its last position, then its rows' kept positions (first tokens excluded)
        ({"shares_prompts": True}, [1, 4, 1, 1, 1]),  # the last group predicts its first token only
        ({"shares_prompts": False}, [8]),  # each row its own forward: the 8 policy positions
        ({"shares_prompts": False, "keeps_logits": False}, [5 * 8]),  # every position of 5 rows of 8
    ]
    for forced, positions in paths:
        for name, value in forced.items():
            monkeypatch.setattr(sft, name, lambda *args, value=value: value)
        projected.clear()
        loss, grads = loss_and_grads(lambda: sft.sft_loss(model, rows))
        assert projected == positions, forced
        assert loss == pytest.approx(reference, rel=1e-5)
        assert all(torch.allclose(g, r, rtol=1e-4, atol=1e-7) for g, r in zip(grads, reference_grads))
        monkeypatch.undo()
    # rows whose completions are empty or hold a first policy token only: the shared path skips what predicts nothing
    edge = [Row(shared, [], [], [], 1.0, 0), Row(shared, [], [], [], 1.0, 0), Row([9, 9], [12], [1], [0.0], 1.0, 1),
            Row([9, 9], [13], [1], [0.0], 1.0, 1)]
    assert sft.shares_prompts(model, edge)
    assert float(sft.sft_loss(model, edge)) == pytest.approx(float(-sft._row_logp(model, edge) / 2), rel=1e-6)
    # training-mode settings under which the rows keep their own forwards
    base_model = model.get_base_model()
    model.base_model.model.dropout_probe = torch.nn.Dropout(0.1)
    assert not sft.shares_prompts(model, rows)  # active dropout: a shared forward would share its mask
    del model.base_model.model.dropout_probe
    base_model.config.attention_dropout = 0.1  # a rate applied inside attention, not by a module
    assert not sft.shares_prompts(model, rows)
    base_model.config.attention_dropout = 0.0
    base_model.gradient_checkpointing_enable()  # its layers keep no cache: the completions would lose their prompt
    assert not sft.shares_prompts(model, rows)
    model.eval()
    assert sft.shares_prompts(model, rows)


def test_rsft_trains_on_policy_tokens_of_accepted_rollouts_only(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    seen: list[Row] = []
    real_loss = rsft.sft_loss
    monkeypatch.setattr(rsft, "sft_loss",
                        lambda model, rows, tokens=None: seen.extend(rows) or real_loss(model, rows, tokens))
    env, spec = LookupEnv(), SPEC
    cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "minibatch_size": 2, "learning_rate": 1e-2,
           "output_dir": str(tmp_path / "runs")}
    new, trajs = rsft.train_rsft(tiny_llama_checkpoint(tmp_path / "base"), spec, env, env.tasks(), cfg,
                                 policy_factory=lambda model, tok: lookup_policy(right_every=2))
    assert len(trajs) == 8 and sum(t.passed for t in trajs) == 4
    assert len(seen) == 4  # one row per accepted trajectory, each seen once (one epoch)
    for row in seen:
        policy = text(i for i, m in zip(row.completion_ids, row.env_mask) if m)
        assert "Final answer: VALUE-" in policy and "nope" not in policy and "HOOK" not in policy
    m = new.metrics
    assert m["kept_rate"] == 0.5 and m["steps"] == 2 and m["tokens"] == sum(r.policy_tokens for r in seen)
    lora_b = [v for k, v in load_file(str(Path(new.adapter_path) / "adapter_model.safetensors")).items()
              if "lora_B" in k]
    assert any(float(v.abs().max()) > 0 for v in lora_b)
    assert new.parents == ["ckpt-tiny"] and new.config["stage"] == "rsft"


def test_the_adamw_state_carries_from_one_rsft_stage_to_the_next_and_not_from_elsewhere(tmp_path):
    """Issue 39 item 5: the optimiser no longer resets every cycle. A stage from an RSFT checkpoint resumes its
    AdamW moments and step count (at its own learning rate); a stage from the base starts a fresh one."""
    base = tiny_llama_checkpoint(tmp_path / "base")
    cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "minibatch_size": 2, "learning_rate": 1e-2,
           "output_dir": str(tmp_path / "runs")}

    def stage(start, **over):
        return rsft.train_rsft(start, SPEC, LookupEnv(), LookupEnv().tasks(), {**cfg, **over},
                               policy_factory=lambda model, tok: lookup_policy(right_every=2))[0]

    first = stage(base)
    assert (Path(first.adapter_path).parent / rsft.OPTIMIZER).is_file()
    assert first.metrics["optimizer_resumed"] is False and first.metrics["optimizer_steps"] == first.metrics["steps"]
    second = stage(first, learning_rate=1e-3)
    assert second.metrics["optimizer_resumed"] is True
    assert second.metrics["optimizer_steps"] == first.metrics["steps"] + second.metrics["steps"]
    saved = torch.load(Path(second.adapter_path).parent / rsft.OPTIMIZER, weights_only=True)
    assert {g["lr"] for g in saved["param_groups"]} == {1e-3}  # the resumed stage's own rate
    assert stage(base).metrics["optimizer_resumed"] is False
    fresh = rsft.train_rsft(second, SPEC, LookupEnv(), LookupEnv().tasks(), cfg, resume=False,
                            policy_factory=lambda model, tok: lookup_policy(right_every=2))[0]
    assert fresh.metrics["optimizer_resumed"] is False and fresh.metrics["optimizer_steps"] == fresh.metrics["steps"]


def test_rsft_reads_the_train_section_names_as_rounds_and_batch(tmp_path):
    cfg = TrainConfig(algorithm="rsft", steps=3, tasks_per_step=1, num_generations=2, lora_r=4).stage(0, 7, tmp_path)
    assert (cfg.steps, cfg.tasks_per_step, cfg.num_generations, cfg.lora_r) == (3, 1, 2, 4)
    new, trajs = rsft.train_rsft(tiny_llama_checkpoint(tmp_path / "base"), SPEC, LookupEnv(), LookupEnv().tasks(), cfg,
                                 policy_factory=lambda model, tok: lookup_policy(right_every=2))
    assert [h["round"] for h in new.metrics["history"]] == [1, 2, 3] and len(trajs) == 3 * 1 * 2
    assert [t.task_id for t in trajs] == ["lookup-a"] * 2 + ["lookup-b"] * 2 + ["lookup-a"] * 2
    assert Path(new.adapter_path).parent.parent == tmp_path / "adapters" and new.config["seed"] == 7
    with pytest.raises(StageConfigError, match="rounds"):  # WHALE's word is not a second name for steps
        rsft.train_rsft(tiny_llama_checkpoint(tmp_path / "base"), SPEC, LookupEnv(), LookupEnv().tasks(), {"rounds": 2})


def test_rsft_phases_continue_the_persistent_sampler_and_stop_on_the_patience_rule(tmp_path):
    from coevo.training.schedule import Patience, PersistentSampler

    env = LookupEnv(keys=("a", "b", "c"))
    cfg = {"steps": 9, "tasks_per_step": 1, "num_generations": 1, "output_dir": str(tmp_path / "runs")}
    ckpt, position, drawn = tiny_llama_checkpoint(tmp_path / "base"), 0, []
    for max_steps in (2, 4):  # two WHALE cycles: the second continues mid-epoch
        ckpt, trajs = rsft.train_rsft(ckpt, SPEC, env, env.tasks(), cfg, sampler=PersistentSampler(3),
                                      position=position, max_steps=max_steps,
                                      policy_factory=lambda model, tok: lookup_policy(right_every=2))
        assert ckpt.metrics["sampler_position"] == position + max_steps and ckpt.metrics["stop_reason"] == ""
        position = ckpt.metrics["sampler_position"]
        drawn += [t.task_id for t in trajs]
    assert sorted(drawn[:3]) == sorted(drawn[3:]) == ["lookup-a", "lookup-b", "lookup-c"]
    stopped, trajs = rsft.train_rsft(ckpt, SPEC, env, env.tasks(), cfg, sampler=PersistentSampler(3),
                                     position=position, stop=Patience(minimum=2, patience=1).stop,
                                     policy_factory=lambda model, tok: lookup_policy(right_every=1))
    assert len(trajs) == 2 and "patience 1" in stopped.metrics["stop_reason"]  # constant reward: no new best
    assert stopped.metrics["epochs"] == pytest.approx(2 / 3)
