"""Soak: many fake rollouts through evaluation and many fake GRPO steps in one process, with flat memory
and no leaked threads or file handles.

Phase 1 runs ``--rollouts`` rollouts (default 10^4) through ``coevo.evaluation.engine.evaluate`` into a
SQLite archive, in chunks (one evaluation each: ``--tasks`` lookup tasks x k), a scripted policy calling
the env's tool then answering (``tests/training_kit.py``: no model weights). Phase 2 runs ``--steps`` GRPO
steps (default 200) as stages of ``--stage-steps`` steps (``train_grpo``, LoRA) on a random 2-layer Llama
(hidden 32, char tokenizer) scoring the same scripted policy's replies, each stage saving its adapter and
recording its checkpoint in the archive. After each chunk or stage it reads the process's RSS
(``/proc/self/status`` VmRSS), its thread count and its open file descriptors (``/proc/self/fd``).

Growth is measured after warm-up (the first ``--warmup`` fraction of each phase: imports, caches, the
allocator's arenas): RSS at the end over RSS after warm-up, threads and file handles at the end against
after warm-up. Prints one JSON line per sample with ``--verbose`` and a markdown row per phase:

    python benchmarks/soak.py                          # 10^4 rollouts, 200 GRPO steps
    python benchmarks/soak.py --rollouts 2000 --steps 20   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                     "TRL_EXPERIMENTAL_SILENCE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}.items():
    os.environ.setdefault(_key, _value)


def sample(phase: str, done: int) -> dict[str, Any]:
    """The process's RSS (MB), threads and open file descriptors now, after a full collection."""
    gc.collect()
    rss_kb = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                  if line.startswith("VmRSS:"))
    return {"phase": phase, "done": done, "rss_mb": rss_kb / 1024, "threads": threading.active_count(),
            "fds": len(os.listdir("/proc/self/fd")), "t": time.perf_counter()}


def evaluation_phase(folder: Path, rollouts: int, tasks: int, chunks: int, verbose: bool) -> list[dict[str, Any]]:
    """``rollouts`` fake rollouts through ``evaluate`` in ``chunks`` evaluations into one archive."""
    from training_kit import LookupEnv, lookup_policy

    from coevo.evaluation.engine import evaluate
    from coevo.harnesses.spec import HarnessSpec, Parser, Prompt
    from coevo.storage import Archive

    env = LookupEnv(tuple(f"k{i}" for i in range(tasks)))
    spec = HarnessSpec(prompt=Prompt(system="Look the key up, then answer."), parser=Parser(mode="python_call"))
    k = max(1, rollouts // (chunks * tasks))
    samples = [sample("eval", 0)]
    with Archive(folder / "soak.db") as archive:
        for chunk in range(chunks):
            result = asyncio.run(evaluate(spec, "fake", env, "train", k=k, seeds=chunk * k, model=lookup_policy(),
                                          archive=archive, concurrency=8, run_id=f"soak-{chunk}"))
            assert result.n_tasks == tasks
            samples.append(sample("eval", (chunk + 1) * tasks * k))
            if verbose:
                print(json.dumps(samples[-1]), flush=True)
    return samples


def grpo_phase(folder: Path, steps: int, stage_steps: int, verbose: bool) -> list[dict[str, Any]]:
    """``steps`` GRPO steps on a tiny random Llama, ``stage_steps`` per stage."""
    from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

    from coevo.harnesses.spec import HarnessSpec, Parser, Prompt
    from coevo.storage import Archive
    from coevo.training.grpo.stage import train_grpo

    env = LookupEnv(("a", "b", "c", "d"))
    spec = HarnessSpec(prompt=Prompt(system="Look the key up, then answer."), parser=Parser(mode="python_call"))
    base = tiny_llama_checkpoint(folder / "tiny")
    samples = [sample("grpo", 0)]
    with Archive(folder / "soak.db") as archive:
        for stage in range(steps // stage_steps):
            cfg = {"steps": stage_steps, "learning_rate": 1e-3, "tasks_per_step": 2, "num_generations": 4,
                   "output_dir": str(folder / "runs" / f"s{stage}")}
            train_grpo(base, spec, env, env.tasks(), cfg, archive=archive, run_id="soak",
                       policy_factory=lambda tr: lookup_policy(right_every=2))
            samples.append(sample("grpo", (stage + 1) * stage_steps))
            if verbose:
                print(json.dumps(samples[-1]), flush=True)
    return samples


def summary(samples: list[dict[str, Any]], warmup: float) -> dict[str, Any]:
    """RSS, threads and file descriptors after warm-up and at the end, and the RSS growth between."""
    last = samples[-1]
    warm = next(s for s in samples if s["done"] >= warmup * last["done"] and s["done"] > 0)
    return {"work": last["done"], "warm_at": warm["done"], "rss_warm_mb": round(warm["rss_mb"], 1),
            "rss_end_mb": round(last["rss_mb"], 1),
            "rss_growth_pct": round(100 * (last["rss_mb"] / warm["rss_mb"] - 1), 2),
            "threads": f"{warm['threads']} -> {last['threads']}", "fds": f"{warm['fds']} -> {last['fds']}",
            "wall_s": round(last["t"] - samples[0]["t"], 1)}


def main() -> None:
    """Run both phases and print their rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=100, help="lookup tasks per evaluation")
    parser.add_argument("--chunks", type=int, default=20, help="evaluations the rollouts are split into")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--stage-steps", type=int, default=10)
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of each phase counted as warm-up")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"python benchmarks/soak.py --rollouts {args.rollouts} --steps {args.steps} (commit {commit}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [("evaluation", summary(evaluation_phase(Path(tmp), args.rollouts, args.tasks, args.chunks,
                                                         args.verbose), args.warmup)),
                ("GRPO", summary(grpo_phase(Path(tmp), args.steps, args.stage_steps, args.verbose), args.warmup))]
    print("| phase | work | RSS after warm-up -> end (MB) | growth | threads | open fds | wall (s) |")
    print("|---|---|---|---|---|---|---|")
    for name, s in rows:
        unit = "rollouts" if name == "evaluation" else "steps"
        print(f"| {name} | {s['work']} {unit} (warm-up {s['warm_at']}) | {s['rss_warm_mb']} -> {s['rss_end_mb']} | "
              f"{s['rss_growth_pct']:+.2f} % | {s['threads']} | {s['fds']} | {s['wall_s']} |")


if __name__ == "__main__":
    main()
