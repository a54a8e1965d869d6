"""EvoHarness-RL's ablation (issue 26): test success and BPE harness-action rate with and without
BPE state, with and without the cost term, at equal GRPO rollouts.

Runs ``coevo run`` once per condition on one config (default ``configs/evoharness_small.toml``), each
with a fresh archive, and prints per condition the final pair's test success (pass rate over the test
tasks with its Wilson 95 % interval, n = tasks x k), its mean reward, and its harness use on test
(BPE actions per model turn, reads and writes per rollout), plus the stages' training action rate:

    no BPE        strategy rl_only (GRPO under H0, no BPE state)
    BPE, lambda=0 strategy evoharness_rl, train.action_cost = 0 (teacher SFT, then GRPO on the task reward)
    BPE, lambda   strategy evoharness_rl, train.action_cost as in the config (cost-aware GRPO)

Every condition makes the same GRPO rollouts (rounds x steps x tasks_per_step x num_generations); the
BPE conditions add the harness SFT stage's teacher demonstrations (not policy rollouts). One run after
the other; wall times are printed but are not the point (use a quiet machine if you publish them).

    OMP_NUM_THREADS=2 python benchmarks/bench_bpe.py --set env.n_test=24
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = {"no BPE": ["strategy=rl_only"], "BPE, lambda=0": ["strategy=evoharness_rl", "train.action_cost=0"],
              "BPE, lambda": ["strategy=evoharness_rl"]}


def run_condition(config: Path, folder: Path, settings: list[str]) -> dict[str, Any]:
    """``coevo run CONFIG`` with ``settings`` (KEY=VALUE) writing under ``folder``; its ``summary``."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    sets = [f"--set=db={folder / 'coevo.db'}", f"--set=out_dir={folder}"] + [f"--set={s}" for s in settings]
    command = [sys.executable, "-c", "from coevo.cli.app import main; main()", "run", str(config), "--no-report", *sets]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"coevo run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"wall_s": time.perf_counter() - started, **summary(folder / "coevo.db")}


def summary(db: Path) -> dict[str, Any]:
    """The final pair's test success (Wilson 95 %), mean reward and harness use, and the GRPO
    stages' mean training action rate, from the run's archive."""
    from coevo.evaluation.stats import score_estimate
    from coevo.models.checkpoint import Checkpoint
    from coevo.models.trajectory import Trajectory
    from coevo.records import EvaluationRecord, RunRecord
    from coevo.storage.archive import Archive

    with Archive(db) as archive:
        (run,) = archive.list(RunRecord)
        tests = sorted((e for e in archive.list(EvaluationRecord, run_id=run.id, split="test") if e.aggregates),
                       key=lambda e: e.created_at)
        final = tests[-1]
        trajs = archive.list(Trajectory, evaluation_id=final.id)
        stages = [c.metrics for c in archive.list(Checkpoint, run_id=run.id)
                  if any("action_rate" in h for h in (c.metrics or {}).get("history", []))]
    turns = sum(t.model_turns for t in trajs)
    success = score_estimate([float(t.passed) for t in trajs])
    return {"success": [success.mean, success.low, success.high], "n": success.n,
            "mean_reward": statistics.fmean(t.reward for t in trajs),
            "test_action_rate": sum(len(t.harness_actions) for t in trajs) / turns if turns else 0.0,
            "test_reads": statistics.fmean(t.harness_reads for t in trajs),
            "test_writes": statistics.fmean(t.harness_writes for t in trajs),
            "train_action_rate": [round(h["action_rate"], 3) for m in stages for h in m["history"]
                                  if "action_rate" in h]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "evoharness_small.toml"))
    parser.add_argument("--set", action="append", default=[], help="a config override for every run (KEY=VALUE)")
    parser.add_argument("--only", action="append", default=[], help="run only these conditions (by label)")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--keep", help="write each condition's archive and outputs under this folder (default: a "
                        "temporary one, removed at the end); `coevo report` then shows each run's action-rate curve")
    args = parser.parse_args()
    labels = [label for label in CONDITIONS if not args.only or label in args.only]
    names = {label: label.replace(" ", "_").replace(",", "").replace("=", "") for label in labels}
    if args.keep and (taken := [n for n in names.values() if (Path(args.keep) / n).exists()]):
        parser.error(f"--keep {args.keep}: {taken} already hold a run (its archive would be mixed with this one's); "
                     "pick another folder or remove them")  # checked before hours of runs, not after the first
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label in labels:
            settings = CONDITIONS[label]
            folder = Path(args.keep or tmp).resolve() / names[label]
            folder.mkdir(parents=True)
            results[label] = run_condition(Path(args.config).resolve(), folder, settings + args.set)
            print(label, json.dumps(results[label]), flush=True)
    print("| condition | test success [95 %] n | mean reward | actions / turn (test) | reads, writes / rollout "
          "(test) | train action rate per step | wall |")
    print("|---|---|---:|---:|---|---|---:|")
    for label, r in results.items():
        s = r["success"]
        print(f"| {label} | {s[0]:.3f} [{s[1]:.2f}, {s[2]:.2f}] n={r['n']} | {r['mean_reward']:.3f} | "
              f"{r['test_action_rate']:.3f} | {r['test_reads']:.2f}, {r['test_writes']:.2f} | "
              f"{r['train_action_rate']} | {r['wall_s']:.0f} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
