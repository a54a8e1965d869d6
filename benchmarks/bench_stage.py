"""A coevo GRPO weight stage against TRL's own, and its sampling rate against the engine's (issue 24).

Measured side by side in one run, on the default job's single-turn chain_sum tasks, SmolLM2-135M-
Instruct, under the round-0 harness H0 (``stage_kit.default_stage``; ``--round 1``: H0 + two
demonstrations), with the same group size, steps, LoRA, learning rate, temperature and token limit:

- (a) wall time of ``trainer.train()`` of a coevo stage (``train_grpo``: rollouts through the
  harness graph and the local engine; dynamic sampling off, so both sample the same number of
  completions) vs TRL's ``GRPOTrainer`` with its built-in generation (``model.generate``) on the
  same prompts (the harness's opening messages as conversational prompts; reward: the harness's
  parser + the env's scorer). Target: ratio <= 1.0.
- (b) sampled tokens/s over the coevo stage's rollouts vs the engine's batched rate at the same
  batch size, two ways: (b1) the engine decoding the stage's own prompts, a step's rollouts per
  ``generate_batch`` call, with their seeds, temperature and token limit, on the base model (what
  the engine does with the stage's workload, without the stage around it); (b2)
  ``bench_local_batching``'s measurement (that many concurrent greedy "Explain ..." requests, every
  row decoding to the token limit). Target: ratio >= 0.8.

    python benchmarks/bench_stage.py                    # 8 steps of 2 tasks x 4 rollouts, 48 new tokens
    python benchmarks/bench_stage.py --steps 1 --header # a smoke run, with the table header

Prints a markdown table row per measurement (header with ``--header``) and, with ``--json``, the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from stage_kit import default_stage


def coevo_stage(stage: dict[str, Any], callbacks: list | None = None) -> dict[str, Any]:
    """One coevo stage (``train_grpo``; ``callbacks``: transformers ``TrainerCallback``s for its trainer):
    ``train_s`` (``trainer.train()``), ``sampled_tokens_per_s``, rollouts."""
    from coevo.training.grpo.stage import train_grpo

    new, trajectories = train_grpo(stage["checkpoint"], stage["spec"], stage["env"], stage["tasks"], stage["config"],
                                   callbacks=callbacks)
    m = new.metrics
    return {"train_s": m["wall_time_s"], "sampled_tokens_per_s": m["sampled_tokens_per_s"],
            "rollouts": len(trajectories), "sampled_tokens": sum(t.output_tokens for t in trajectories),
            "reward": m["reward_mean"], "trajectories": trajectories}


def trl_stage(stage: dict[str, Any], callbacks: list | None = None) -> dict[str, Any]:
    """TRL's ``GRPOTrainer`` with its own generation on the same prompts and settings (``callbacks``:
    ``TrainerCallback``s for it): ``train_s``, rollouts, ``sampled_tokens`` (completion tokens)."""
    from datasets import Dataset
    from langchain_core.messages import AIMessage
    from trl import GRPOTrainer

    from coevo.harnesses.parse import parse_reply
    from coevo.harnesses.view import render_messages
    from coevo.training.checkpoint import load_policy
    from coevo.training.grpo.stage import grpo_args, lora_config

    spec, env, cfg = stage["spec"], stage["env"], stage["config"]
    tasks = {t.id: t for t in stage["tasks"]}
    calls = {"completions": 0, "tokens": 0}

    def reward(prompts: list, completions: list, task_id: list[str], completion_ids: list,
               **kwargs: Any) -> list[float]:
        calls["completions"] += len(completions)
        calls["tokens"] += sum(len(ids) for ids in completion_ids)
        out = []
        for completion, tid in zip(completions, task_id):
            answer = parse_reply(AIMessage(completion[-1]["content"]), spec.parser).answer
            out.append(env.score(tasks[tid], answer, env.episode(tasks[tid])).reward)
        return out

    rows = [{"prompt": [{"role": role, "content": text} for role, text in render_messages(spec, t.prompt)],
             "task_id": t.id} for t in stage["tasks"]]
    args = grpo_args(cfg, Path(cfg.output_dir) / "trl", spec.decoding.temperature)
    args.max_completion_length = spec.budget.max_output_tokens
    model, tokenizer = load_policy(stage["checkpoint"], trainable=True)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(rows), peft_config=lora_config(cfg), callbacks=callbacks)
    started = time.perf_counter()
    trainer.train()
    return {"train_s": time.perf_counter() - started, "rollouts": calls["completions"],
            "sampled_tokens": calls["tokens"]}


def engine_on_stage(stage: dict[str, Any], trajectories: list, batch: int) -> float:
    """Tokens/s of the engine (base model) decoding the stage's first model calls again, ``batch``
    rollouts (one step) per ``generate_batch`` call, with each call's seed and the stage's sampling, at the
    torch threads the stage's sampler decoded with (``train.sampler_threads``; unset: torch's default), so
    the two rates compare the same work on the same cores."""
    import torch

    from coevo.harnesses.engine import call_seed
    from coevo.models.local import LocalChatModel
    from coevo.models.sampling import GenerationRequest

    spec = stage["spec"]
    chat = LocalChatModel.from_pretrained(stage["checkpoint"].base_model, max_batch=batch)
    requests = [GenerationRequest(prompt_ids=t.calls[0].prompt_token_ids, max_tokens=spec.budget.max_output_tokens,
                                  temperature=spec.decoding.temperature, top_p=spec.decoding.top_p,
                                  seed=call_seed(t.seed, 0)) for t in trajectories if t.calls]
    before, threads = torch.get_num_threads(), stage["config"].sampler_threads
    torch.set_num_threads(threads or before)
    try:
        chat.engine.generate_batch(requests[:2])  # warm-up
        tokens, seconds = 0, 0.0
        for i in range(0, len(requests), batch):
            started = time.perf_counter()
            results = chat.engine.generate_batch(requests[i:i + batch])
            seconds += time.perf_counter() - started
            tokens += sum(len(r.completion_token_ids) for r in results)
    finally:
        torch.set_num_threads(before)
    return tokens / seconds


def engine_rate(batch: int, new_tokens: int) -> float:
    """The engine's batched tokens/s at ``batch`` concurrent requests (``bench_local_batching.run``)."""
    from bench_local_batching import run

    return asyncio.run(run("local:smollm2-135m", batch, new_tokens))["batched_tps"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--round", type=int, default=0, choices=(0, 1))
    parser.add_argument("--header", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    stage = default_stage(args.round, args.steps, resample=0)
    cfg = stage["config"]
    coevo = coevo_stage(stage)
    trl = trl_stage(stage)
    batch = cfg.tasks_per_step * cfg.num_generations
    own = engine_on_stage(stage, coevo.pop("trajectories"), batch)
    engine = engine_rate(batch, stage["spec"].budget.max_output_tokens)
    rate = coevo["sampled_tokens_per_s"]
    a, b1, b = coevo["train_s"] / trl["train_s"], rate / own, rate / engine
    shape = f"{args.steps} steps x {cfg.tasks_per_step} tasks x {cfg.num_generations}, round {args.round}"
    if args.header:
        print("| # | benchmark | coevo | reference | ratio | target | met |\n|---|---|---|---|---|---|---|")
    print(f"| (a) | GRPO stage `trainer.train()` wall, {shape} | {coevo['train_s']:.1f} s ({coevo['rollouts']} "
          f"rollouts) | TRL `GRPOTrainer` {trl['train_s']:.1f} s ({trl['rollouts']} completions) | **{a:.2f}x** "
          f"| <= 1.0x | {'yes' if a <= 1.0 else 'no'} |")
    print(f"| (b1) | sampled tokens/s during the stage ({coevo['sampled_tokens']} tokens) | "
          f"{coevo['sampled_tokens_per_s']:.1f} | engine on the stage's prompts, {batch} a call: {own:.1f} | "
          f"**{b1:.2f}x** | >= 0.8x | {'yes' if b1 >= 0.8 else 'no'} |")
    print(f"| (b2) | same | {coevo['sampled_tokens_per_s']:.1f} | `bench_local_batching`, {batch} requests: "
          f"{engine:.1f} | **{b:.2f}x** | >= 0.8x | {'yes' if b >= 0.8 else 'no'} |")
    if args.json:
        args.json.write_text(json.dumps({"coevo": coevo, "trl": trl, "engine_on_stage_tps": own, "engine_tps": engine,
                                         "a": a, "b1": b1, "b2": b}, indent=2))


if __name__ == "__main__":
    main()
