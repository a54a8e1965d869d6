"""Effective-group rate of GRPO with Harness-S rescue vs plain GRPO (Harness-S §3.3, Eq. 5; the
paper reports 79.38 % vs 64.69 %): a metric, not a timing.

Both arms run one weight stage (``coevo.training.stage.StageTrainer``) from W0 under H0 on the same
train tasks, with the same seeds, steps, group size K and no dynamic sampling; the rescue arm
replaces each all-fail group by one rollout under each of the Rule Router's top-K siblings from a
finished ``harness_s`` run's pool (its profiles at W0). An effective group has both a success and a
failure (``coevo.training.grpo.advantages.effective_group_rate``). The rescue arm samples K more rollouts
per triggered group (the paper's accounting too); the rollout counts are printed beside the rates.

    coevo run configs/harness_s_small.toml                       # the pool (any harness_s run)
    python benchmarks/rescue_effective_groups.py --db coevo_runs/harness_s_small.db --steps 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
                     "TRL_EXPERIMENTAL_SILENCE": "1"}.items():
    os.environ.setdefault(_key, _value)


def main() -> None:
    """Run both arms and print (and write ``--out``) their stage metrics as JSON."""
    from coevo.app.bundle import router_bundle
    from coevo.config import RunConfig
    from coevo.envs.registry import get_env
    from coevo.graphs.harness_s.evolution import carried_tasks
    from coevo.graphs.harness_s.router import Router
    from coevo.harnesses.spec import load_harness
    from coevo.records import Checkpoint, HarnessRecord, PoolMember, Profile, RunRecord
    from coevo.roles.voter import RuleVoter
    from coevo.storage import Archive
    from coevo.training.harness_s import Routed
    from coevo.training.kinds import GRPO
    from coevo.training.stage import StageTrainer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="archive of a finished harness_s run (copied; never written)")
    ap.add_argument("--run-id", default="", help="the harness_s run (default: the archive's last harness_s run)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--tasks-per-step", type=int, default=2)
    ap.add_argument("--out", default="", help="write the JSON here too")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="rescue_bench_"))
    shutil.copy(args.db, scratch / "run.db")
    archive = Archive(str(scratch / "run.db"))
    runs = [r for r in archive.list(RunRecord, strategy="harness_s") if r.id == args.run_id or not args.run_id]
    if not runs:
        raise SystemExit(f"no harness_s run {args.run_id!r} in {args.db}; run `coevo run configs/harness_s_small.toml`")
    run = runs[-1]
    config = RunConfig.model_validate(run.config).model_copy(update={"out_dir": str(scratch)})
    config.train = config.train.model_copy(update={"steps": args.steps, "tasks_per_step": args.tasks_per_step,
                                                   "resample": 0})
    env = get_env(config.env.ref, **config.env.settings())
    members = archive.list(PoolMember, run_id=run.id)
    h0 = next(m.harness_id for m in members if m.round < 0)
    w0 = next(c.id for c in archive.list(Checkpoint) if not c.parents)
    first = {}
    for p in archive.list(Profile, run_id=run.id):  # oldest first: keep each harness's profile at W0
        if p.checkpoint_id == w0:
            first.setdefault(p.harness_id, p)
    bundle = router_bundle(archive, run.id)
    val = {t["id"]: t for t in bundle["val_tasks"]}
    from coevo.envs.base import Task

    router = Router([RuleVoter()], first, {i: Task.model_validate(t) for i, t in val.items()}, h0,
                    ballot=config.harness_s.ballot, seed=config.seed)
    specs = {h: load_harness(archive.get(HarnessRecord, h).spec) for h in first}
    siblings = [s for h, s in specs.items() if h != h0]
    # a train task whose prompt a sibling's demonstration carries is left out of both arms (DESIGN.md,
    # Principles: the rescue would copy its answer, not solve it)
    everything = env.tasks("train", config.env.n_train)
    carried = {t for s in siblings for t in carried_tasks(s, everything)}
    tasks = [t for t in everything if t.id not in carried]

    async def route(task, k):
        return await router.top_k(task, config.harness_s.rescue_k or k)

    results = {}
    for arm, kind in (("plain GRPO", GRPO()), ("GRPO + rescue", Routed(siblings=tuple(siblings), route=route))):
        trainer = StageTrainer(config, env, archive, f"bench-{arm}")
        checkpoint, trajectories = asyncio.run(trainer(w0, specs[h0], tasks, 0, kind))
        m = archive.get(Checkpoint, checkpoint).metrics
        results[arm] = {"effective_group_rate": m["effective_group_rate"], "rescue_rate": m.get("rescue_rate"),
                        "rescue_success": m.get("rescue_success"), "groups": args.steps * args.tasks_per_step,
                        "rollouts": len(trajectories), "steps": m.get("steps"), "wall_s": m.get("wall_time_s")}
    report = {"run": run.id, "pool": len(specs), "env": config.env.ref, "n_train": len(tasks),
              "demonstrated_left_out": len(everything) - len(tasks),
              "k": config.train.num_generations, "seed": config.seed, "arms": results}
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
