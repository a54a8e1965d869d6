"""GPU check: a GRPO stage whose rollouts run on vLLM servers, with per-step LoRA hot-loading.

Run by ``benchmarks/gpu_grpo_vllm.sh`` (which starts the servers). The trainer (TRL + PEFT, bf16 on
the GPU) syncs its adapter to every server before each step (``coevo.training.vllm_sync.VLLMStepSync``;
names carry the adapter's content hash), the harness graph samples through
``hosted_vllm/<adapter>`` (coevo's router across the servers when there are several), on Ray workers
with ``--executor ray`` (``coevo.evaluation.executors.sampling_on``), and Eq. 16's truncated
importance weight corrects the vLLM/transformers mismatch. After the stage the new checkpoint is
published on every server and one evaluation rollout goes through it (``litellm:hosted_vllm/<name>``).
Writes ``<out>/gpu_grpo_vllm.json`` with per-step reward, sampler tokens/s, the mean
|log pi_old - log q| and the IS weight. UNVERIFIED: not yet run on a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}.items():
    os.environ.setdefault(_key, _value)
sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", default="http://localhost:8011", help="server root(s), comma-separated")
    parser.add_argument("--executor", default="inprocess", choices=("inprocess", "ray"))
    parser.add_argument("--base-model", default="smollm2-135m", help="same weights the server serves")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tasks-per-step", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--out", default="runs/benchmarks/gpu_grpo_vllm")
    args = parser.parse_args()

    from grpo_curve import ENVS, harness_with_demos

    from coevo.envs.registry import get_env
    from coevo.evaluation.executors import make_executor
    from coevo.harnesses.runtime import arun_rollout
    from coevo.models.checkpoint import Checkpoint
    from coevo.models.litellm_model import LiteLLMChatModel
    from coevo.training.grpo.stage import train_grpo
    from coevo.training.vllm_sync import VLLMStepSync, publish_checkpoint

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ref, base_name, answer_format, overrides = ENVS["chain_sum"]
    env = get_env(ref)
    train = env.tasks("train", 2 + 4 * args.tasks_per_step)
    spec = harness_with_demos(base_name, env, train[:2], answer_format, overrides)
    spec = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"temperature": 0.7}),
                                   "budget": spec.budget.model_copy(update={"max_output_tokens": 32})})
    roots = args.base_url.split(",")
    sync = VLLMStepSync(roots, out / "sync", prefix="grpo")  # content-hashed names: no stale adapter on a rerun
    executor = make_executor(args.executor)
    config = {"steps": args.steps, "tasks_per_step": args.tasks_per_step, "num_generations": args.num_generations,
              "learning_rate": 3e-4, "lora_r": 16, "lora_alpha": 32, "micro_batches": 1,
              "activation_checkpointing": False, "output_dir": str(out / "adapters")}
    started = time.perf_counter()
    try:
        ckpt, trajs = train_grpo(Checkpoint(id="base", base_model=args.base_model), spec, env, train[2:], config,
                                 policy_factory=sync, executor=executor)
    finally:
        executor.close()
    wall = time.perf_counter() - started
    model_ref = publish_checkpoint(ckpt, roots)
    policy = LiteLLMChatModel(model=model_ref.removeprefix("litellm:"), api_base=f"{roots[0]}/v1")
    check = asyncio.run(arun_rollout(spec, policy, env, train[2], checkpoint_id=ckpt.id))
    result = {"wall_time_s": wall, "checkpoint": ckpt.id, "published_as": model_ref, "loaded": sync.loaded,
              "servers": roots, "executor": args.executor,
              "config": ckpt.config, "sampled_tokens_per_s": ckpt.metrics["sampled_tokens_per_s"],
              "history": ckpt.metrics["history"], "rollouts": len(trajs),
              "post_publish_rollout": {"reward": check.reward, "answer": check.final_answer,
                                       "tokens": check.output_tokens}}
    (out / "gpu_grpo_vllm.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: v for k, v in result.items() if k not in ("history", "config")}, indent=2, default=str))


if __name__ == "__main__":
    main()
