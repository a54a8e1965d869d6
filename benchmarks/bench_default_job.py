"""The default job's wall time before and after a change (issue 24, row (c)).

Runs ``coevo run`` (``configs/default.toml``, the README's quickstart job) on the code of ``--before``
(a git revision, unpacked into a temporary folder and put first on ``PYTHONPATH``, so both runs share
this checkout's virtual environment) and then on this checkout, each with a fresh archive, and prints
for each: wall time, each weight stage's wall time, rollout seconds and sampled tokens/s (from its
checkpoint's metrics), the train reward and the final test score, so that a change in the numbers
shows beside the change in time. One run after the other on a quiet machine.

    python benchmarks/bench_default_job.py --before d0f3406
    python benchmarks/bench_default_job.py --before d0f3406 --set train.steps=1 --set rounds=1  # a smoke run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_job(code: Path | None, folder: Path, settings: list[str]) -> dict[str, Any]:
    """``coevo run`` on the package at ``code`` (``None``: this checkout) writing under ``folder``."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    if code is not None:
        env["PYTHONPATH"] = str(code.parent) + os.pathsep + env.get("PYTHONPATH", "")
    sets = [f"--set=db={folder / 'coevo.db'}", f"--set=out_dir={folder}"] + [f"--set={s}" for s in settings]
    command = [sys.executable, "-c", "from coevo.cli.app import main; main()", "run", "--no-report", *sets]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"coevo run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"wall_s": wall, **summary(folder / "coevo.db"), "log_tail": done.stdout[-1500:]}


def summary(db: Path) -> dict[str, Any]:
    """The run's weight stages (wall, rollout seconds, sampled tokens/s, train reward) and test score."""
    from coevo.models.checkpoint import Checkpoint
    from coevo.records import EvaluationRecord, RunRecord
    from coevo.storage.archive import Archive

    with Archive(db) as archive:
        (run,) = archive.list(RunRecord)
        stages = [c.metrics for c in archive.list(Checkpoint, run_id=run.id) if c.metrics.get("steps")]
        tests = archive.list(EvaluationRecord, run_id=run.id, split="test")
    return {"stages": [{"wall_s": m["wall_time_s"], "rollout_s": sum(h.get("rollout_s", 0.0) for h in m["history"]),
                        "sampled_tokens_per_s": m["sampled_tokens_per_s"], "train_reward": m["reward_mean"]}
                       for m in stages],
            "test": [round(e.aggregates.get("mean_reward", float("nan")), 3) for e in tests]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a git revision of this repository (e.g. d0f3406)")
    parser.add_argument("--set", action="append", default=[], help="a config override for both runs (KEY=VALUE)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp) / "code" / "coevo"
        code.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
        results = {}
        for label, source in (("before", code), ("after", None)):
            folder = Path(tmp) / label
            folder.mkdir()
            results[label] = run_job(source, folder, args.set)
    print("| run | wall | stages: wall / rollouts, sampled tokens/s, train reward | test scores |")
    print("|---|---:|---|---|")
    for label, r in results.items():
        stages = "; ".join(f"{s['wall_s']:.0f} s / {s['rollout_s']:.0f} s, {s['sampled_tokens_per_s']:.1f} tok/s, "
                           f"{s['train_reward']:.3f}" for s in r["stages"])
        print(f"| {label} ({args.before if label == 'before' else 'this checkout'}) | {r['wall_s']:.0f} s | "
              f"{stages} | {r['test']} |")
    ratio = results["after"]["wall_s"] / results["before"]["wall_s"]
    print(f"\nwall time after / before: {ratio:.2f}x")


if __name__ == "__main__":
    main()
