"""RSFT and TIES merging on SmolLM2-135M-Instruct (CPU): an RSFT round updates the adapter, and a
TIES merge of two adapters is a checkpoint that evaluates (generates through the harness graph)."""

import asyncio

import pytest
import torch
from training_kit import NamingEnv

from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.refs import resolve_base
from coevo.training.coevo_rsi.merge import merge_adapters
from coevo.training.rsft import train_rsft

pytestmark = pytest.mark.integration

SPEC = HarnessSpec(parser={"mode": "text"}, budget={"max_output_tokens": 24, "max_model_calls": 1},
                   decoding={"temperature": 1.0})


@pytest.fixture(scope="module")
def rsft_checkpoints(tmp_path_factory):
    torch.set_num_threads(1)  # 2 shared cores: one thread avoids OpenMP oversubscription stalls
    out = tmp_path_factory.mktemp("rsft")
    env, base = NamingEnv(), Checkpoint(id="smollm2", base_model="smollm2-135m")
    results = []
    for seed in (0, 1):
        cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "rsft_threshold": 0.3, "minibatch_size": 4,
               "learning_rate": 1e-4, "seed": seed, "output_dir": str(out)}
        results.append(train_rsft(base, SPEC, env, env.tasks(), cfg))
    return results


def test_rsft_round_keeps_accepted_rollouts_and_updates_the_adapter(rsft_checkpoints):
    from safetensors.torch import load_file

    new, trajs = rsft_checkpoints[0]
    kept = [t for t in trajs if t.reward > 0.3]
    assert len(trajs) == 8 and kept, [t.reward for t in trajs]
    assert new.metrics["kept_rate"] == len(kept) / 8 and new.metrics["tokens"] > 0
    lora_b = [v for k, v in load_file(f"{new.adapter_path}/adapter_model.safetensors").items() if "lora_B" in k]
    assert max(float(v.abs().max()) for v in lora_b) > 0


def test_ties_merge_of_two_rsft_adapters_evaluates(rsft_checkpoints, tmp_path):
    from coevo.models.local import LocalChatModel

    (a, _), (b, _) = rsft_checkpoints
    merged = merge_adapters([a, b], {"combination_type": "ties", "density": 0.5, "output_dir": str(tmp_path)})
    assert merged.parents == [a.id, b.id]
    policy = LocalChatModel.from_pretrained(resolve_base(merged.base_model), adapter=merged.adapter_path)
    env = NamingEnv()
    try:
        traj = asyncio.run(arun_rollout(SPEC, policy, env, env.tasks()[0], checkpoint_id=merged.id))
    finally:
        policy.engine.close()
    assert traj.final_answer and traj.calls[0].completion_token_ids
    assert traj.checkpoint_id == merged.id and 0.0 <= traj.reward <= 1.0
