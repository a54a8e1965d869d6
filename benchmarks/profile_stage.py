"""Where a GRPO weight stage's time goes (issue 24, item 1): the default job's stage, timed by part.

Runs ``coevo.training.grpo.stage.train_grpo`` on the default job's stage (``stage_kit.default_stage``:
chain_sum, SmolLM2-135M-Instruct, 2 tasks x 4 rollouts a step at T = 0.7, 48 new tokens) with a
timer on each part, then stores the stage's trajectories and checkpoint in a fresh archive as the
meta-loop's train node does, and prints one table row per part:

- model load (``load_policy``) and trainer set-up (PEFT wrap, TRL's ``GRPOTrainer.__init__``);
- rollouts (TRL's ``rollout_func``: every harness rollout of a step), split into prompt rendering
  (chat template + tokenizer), prompt prefill (each ``generate`` call up to its first sampled
  token), decoding (the rest of each ``generate`` call), scoring (``env.score``) and the rest
  (harness graph, asyncio, waiting for a batch to fill);
- batch assembly (``generation_batch`` around the rollouts: padding, Eq. 15/16 weights);
- the TRL step: forward + backward of every micro-batch (``training_step``), and the rest of the
  trainer loop (optimiser step, logging, data loading);
- adapter save (``save_pretrained``) and archive writes (trajectories + checkpoint).

Also: ``generate`` calls and their batch sizes, decoded tokens kept vs rows x decoding steps computed
(what a batch spends on rows that already ended), and sampled tokens/s. Timings on a loaded machine are
noisy: compare parts within one run, or run it in a quiet window.

    python benchmarks/profile_stage.py                     # the round-0 stage, 8 steps
    python benchmarks/profile_stage.py --round 1 --steps 2 # under H0 + 2 demonstrations, 2 steps
    python benchmarks/profile_stage.py --steps 1 --json /tmp/profile.json
    python benchmarks/profile_stage.py --no-merge          # the live sampler unmerged (train.merge_sampler = false)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from stage_kit import Timer, default_stage


def profile(round: int, steps: int, **train: Any) -> dict[str, Any]:
    """Run the stage with timers; returns ``{"parts": {label: seconds}, "calls": ..., "stats": ...}``."""
    import peft

    from coevo.models import local_engine
    from coevo.models.sampling import RowSampler
    from coevo.storage.archive import Archive
    from coevo.training.checkpoint import record_checkpoint
    from coevo.training.grpo import stage as grpo
    from coevo.training.grpo.rollout import HarnessRollout
    from coevo.training.grpo.trainer import HarnessGRPOTrainer

    stage = default_stage(round, steps, **train)
    env = stage["env"]
    timer = Timer()
    stats: dict[str, Any] = {"batch_sizes": [], "kept_tokens": 0, "decode_rows_x_steps": 0}
    first: dict[str, float] = {}

    original_pick = RowSampler.pick

    def pick(self: Any, scores: Any, rows: Any) -> Any:
        if first.get("sampler") is not self:  # the first decoding step of a generate call: prefill is done
            first["at"], first["sampler"] = time.perf_counter(), self
        stats["decode_rows_x_steps"] += len(rows)
        return original_pick(self, scores, rows)

    original_generate = local_engine.LocalEngine.generate_batch

    def generate_batch(self: Any, requests: Any) -> Any:
        started = time.perf_counter()
        results = original_generate(self, requests)
        ended = time.perf_counter()
        at = first.get("at", ended)
        timer.seconds["rollouts: prompt prefill"] += at - started
        timer.seconds["rollouts: decoding"] += ended - at
        timer.calls["rollouts: prompt prefill"] += 1
        stats["batch_sizes"].append(len(requests))
        stats["kept_tokens"] += sum(len(r.completion_token_ids) for r in results)
        return results

    RowSampler.pick = pick
    local_engine.LocalEngine.generate_batch = generate_batch
    timer.wrap(grpo, "load_policy", "model load")
    timer.wrap(HarnessGRPOTrainer, "__init__", "trainer set-up (PEFT, TRL)")
    timer.wrap(HarnessRollout, "__call__", "rollouts")
    timer.wrap(local_engine.LocalEngine, "render", "rollouts: prompt rendering")
    timer.wrap(type(env), "score", "rollouts: scoring")
    timer.wrap(HarnessGRPOTrainer, "generation_batch", "batch assembly + rollouts")
    timer.wrap(HarnessGRPOTrainer, "training_step", "TRL step: forward + backward")
    timer.wrap(HarnessGRPOTrainer, "train", "trainer.train")
    timer.wrap(peft.PeftModel, "save_pretrained", "adapter save")
    try:
        with timer.span("stage"):
            new, trajectories = grpo.train_grpo(stage["checkpoint"], stage["spec"], env, stage["tasks"],
                                                stage["config"])
        with tempfile.TemporaryDirectory() as folder, Archive(Path(folder) / "coevo.db") as archive:
            with timer.span("archive writes"):
                record_checkpoint(archive, new)
                archive.add_trajectories(trajectories, None, "bench")
    finally:
        timer.restore()
        RowSampler.pick = original_pick
        local_engine.LocalEngine.generate_batch = original_generate
    s = timer.seconds
    generation = s["rollouts: prompt prefill"] + s["rollouts: decoding"]
    parts = {
        "model load": s["model load"],
        "trainer set-up (PEFT, TRL)": s["trainer set-up (PEFT, TRL)"],
        "rollouts": s["rollouts"],
        "rollouts: prompt rendering": s["rollouts: prompt rendering"],
        "rollouts: prompt prefill": s["rollouts: prompt prefill"],
        "rollouts: decoding": s["rollouts: decoding"],
        "rollouts: scoring": s["rollouts: scoring"],
        "rollouts: rest (harness, asyncio, batch wait)": s["rollouts"] - generation - s["rollouts: prompt rendering"]
        - s["rollouts: scoring"],
        "batch assembly": s["batch assembly + rollouts"] - s["rollouts"],
        # TRL generates inside the first micro-step's training_step (``_prepare_inputs``)
        "TRL step: forward + backward": s["TRL step: forward + backward"] - s["batch assembly + rollouts"],
        "TRL step: rest (optimiser, logging)": s["trainer.train"] - s["TRL step: forward + backward"],
        "adapter save": s["adapter save"],
        "archive writes": s["archive writes"],
        "stage (train_grpo) + archive writes": s["stage"] + s["archive writes"],
    }
    sampled = sum(t.output_tokens for t in trajectories)
    stats.update(steps=new.metrics["steps"], rollouts=len(trajectories), sampled_tokens=sampled,
                 sampled_tokens_per_s=sampled / s["rollouts"] if s["rollouts"] else 0.0,
                 generate_calls=len(stats["batch_sizes"]),
                 decode_efficiency=stats["kept_tokens"] / max(1, stats["decode_rows_x_steps"]))
    return {"round": round, "parts": parts, "calls": dict(timer.calls), "stats": stats}


def table(result: dict[str, Any]) -> str:
    """The parts as a markdown table (seconds, share of the stage, per step)."""
    total = result["parts"]["stage (train_grpo) + archive writes"]
    steps = max(1, result["stats"]["steps"])
    lines = [f"round {result['round']} stage: {steps} steps, {result['stats']['rollouts']} rollouts", "",
             "| part | seconds | share | per step |", "|---|---:|---:|---:|"]
    for label, seconds in result["parts"].items():
        lines.append(f"| {label} | {seconds:.2f} | {100 * seconds / total:.1f} % | {seconds / steps:.2f} |")
    st = result["stats"]
    lines += ["", f"generate calls {st['generate_calls']}, batch sizes {st['batch_sizes']}; decoded tokens kept / "
              f"(rows x decoding steps) {100 * st['decode_efficiency']:.0f} %; sampled {st['sampled_tokens']} tokens, "
              f"{st['sampled_tokens_per_s']:.1f} tokens/s over the rollouts"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", type=int, default=0, choices=(0, 1), help="0: H0; 1: H0 + 2 demonstrations")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--no-merge", action="store_true", help="train.merge_sampler = false: sample unmerged")
    args = parser.parse_args()
    result = profile(args.round, args.steps, **({"merge_sampler": False} if args.no_merge else {}))
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
