"""One real GRPO step with SmolLM2-135M-Instruct on CPU, rollouts through the harness graph.

2 tasks x 4 rollouts sampled by the live LoRA policy (``LocalChatModel`` over the trainer's model),
scored by a toy verifier with graded credit (so groups have reward spread), one TRL update; the
saved adapter must differ from its zero-initialised ``lora_B``. With Eq. 16 switched on, the
trainer's log-probs of the sampled tokens (at the harness temperature) must match the sampler's:
the rows carry exactly the tokens and context the policy generated.
"""

import pytest
import torch
from training_kit import NamingEnv

from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.training.grpo.stage import train_grpo

pytestmark = pytest.mark.integration


def test_one_grpo_step_on_smollm2_changes_the_adapter(tmp_path):
    from safetensors.torch import load_file

    torch.set_num_threads(1)  # 2 shared cores: one thread avoids OpenMP oversubscription stalls
    spec = HarnessSpec(parser={"mode": "text"}, budget={"max_output_tokens": 24, "max_model_calls": 1},
                       decoding={"temperature": 0.7})
    env = NamingEnv()
    base = Checkpoint(id="smollm2", base_model="smollm2-135m")
    cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "learning_rate": 1e-4,
           "importance_correction": True, "output_dir": str(tmp_path)}
    new, trajs = train_grpo(base, spec, env, env.tasks(), cfg)

    assert len(trajs) == 8 and all(t.calls and t.calls[0].completion_token_ids for t in trajs)
    assert all(t.harness_id == spec.id for t in trajs)
    assert len({t.final_answer for t in trajs}) > 1  # sampled, not greedy
    assert new.metrics["effective_token_share"] > 0, [t.reward for t in trajs]
    lora_b = [v for k, v in load_file(f"{new.adapter_path}/adapter_model.safetensors").items() if "lora_B" in k]
    assert lora_b and max(float(v.abs().max()) for v in lora_b) > 0
    assert new.parents == ["smollm2"] and new.metrics["tokens"] > 0
    step = new.metrics["history"][0]
    assert step["sampler_logp_diff_mean"] < 0.02 and abs(step["is_weight_mean"] - 1.0) < 0.02, step
