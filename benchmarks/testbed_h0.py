"""H0's pass rate per task category of a run config's suite, at the training temperature, with the
trivial baseline per category (issue 23, item 4: the testbed's admission numbers).

Samples ``--k`` rollouts of each of the first ``--n`` train tasks under the config's H0 as training
samples them (``train.temperature``, ``train.max_new_tokens``: ``coevo.training.stage`` settings),
with the config's policy, and prints per category (reasoning-gym family, BFCL category, ...) the
pass rate over rollouts with its 95 % Wilson interval, the failure causes the offline curator reads
(``coevo.roles.diagnosis``), and the best constant answer's pass rate on all of that category's train
and val tasks. Writes ``--out`` as JSON. Not part of CI (it runs the real model).

    OMP_NUM_THREADS=1 python benchmarks/testbed_h0.py configs/testbed.toml --n 120 --k 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(_key, _value)


def constant_by_category(env, split: str, n: int | None = None) -> dict[str, tuple[str, float, int]]:
    """Per category, the best constant answer (of the suite's candidates) and its pass rate on the
    first ``n`` tasks of ``split`` (all when None) in that category, with the number of tasks."""
    from coevo.roles.diagnosis import task_category

    tasks = env.tasks(split, n)
    out = {}
    for cat in sorted({task_category(t) for t in tasks}):
        mine = [t for t in tasks if task_category(t) == cat]
        best = ("", 0.0)
        for c in env.constant_candidates("train"):
            rate = sum(env.score(t, c, env.episode(t)).passed for t in mine) / len(mine)
            best = max(best, (c, rate), key=lambda x: x[1])
        out[cat] = (best[0], best[1], len(mine))
    return out


def main() -> None:
    """Measure and print (see module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--n", type=int, default=120, help="train tasks (the first n of the split)")
    ap.add_argument("--k", type=int, default=4, help="sampled rollouts per task")
    ap.add_argument("--harness", default="", help="H0 (default: the config's)")
    ap.add_argument("--out", default="benchmarks/results/testbed_h0.json")
    args = ap.parse_args()

    from coevo.config import load_config
    from coevo.envs.registry import get_env
    from coevo.evaluation.engine import evaluate
    from coevo.evaluation.stats import score_estimate
    from coevo.harnesses import load_harness
    from coevo.models.refs import load_model
    from coevo.records import Trajectory
    from coevo.roles.diagnosis import diagnose, task_category
    from coevo.storage import Archive
    from coevo.training.kinds import training_spec

    config = load_config(args.config)
    env = get_env(config.env.ref, **config.env.settings())
    spec = training_spec(load_harness(args.harness or config.harness or env.name), config.train)
    tasks = env.tasks("train", args.n)
    archive = Archive(str(Path(tempfile.mkdtemp()) / "testbed_h0.db"))  # the rollouts, read back per category
    started = time.time()
    result = asyncio.run(evaluate(spec, "base", env, "train", k=args.k, seeds=config.seed,
                                  model=load_model(config.policy), tasks=tasks, archive=archive,
                                  run_id=f"testbed-{int(started)}", concurrency=config.eval.concurrency))
    by_id = {t.id: t for t in tasks}
    passed: dict[str, list[float]] = defaultdict(list)
    causes: dict[str, Counter] = defaultdict(Counter)
    for t in archive.list(Trajectory, evaluation_id=result.evaluation_id):
        cat = task_category(by_id[t.task_id])
        passed[cat].append(float(t.passed))
        if not t.passed:
            causes[cat][diagnose(t, spec, by_id[t.task_id])] += 1
    train_const = constant_by_category(env, "train")  # the whole split: a category's own constant, n >> 10
    val_const = constant_by_category(env, "val")
    rows = {}
    for cat in sorted(passed):
        est = score_estimate(passed[cat])
        rows[cat] = {"rollouts": len(passed[cat]), "tasks": len(passed[cat]) // args.k, "pass": est.mean,
                     "low": est.low, "high": est.high, "causes": dict(causes[cat].most_common()),
                     "best_constant_train": train_const.get(cat), "best_constant_val": val_const.get(cat)}
        print(f"{cat:24s} pass {sum(passed[cat]):3.0f}/{len(passed[cat]):3d} = {est.mean:.3f} "
              f"[{est.low:.3f}, {est.high:.3f}]  constant train {train_const.get(cat)} val {val_const.get(cat)}")
        print(f"{'':24s} causes {dict(causes[cat].most_common(6))}")
    whole = env.trivial_baseline("val", config.env.n_val)
    print(f"suite: best constant on val {whole['best_constant']} (n={whole['n']}); wall {time.time() - started:.0f} s")
    Path(args.out).write_text(json.dumps({"config": args.config, "harness": spec.id, "n": args.n, "k": args.k,
                                          "temperature": config.train.temperature,
                                          "max_new_tokens": config.train.max_new_tokens, "categories": rows,
                                          "suite_best_constant_val": whole["best_constant"],
                                          "wall_s": time.time() - started}, indent=1))


if __name__ == "__main__":
    main()
