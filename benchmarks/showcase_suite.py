"""A candidate showcase suite's admission numbers (README "The showcase suite"): where a run config's
policy starts under its H0, and how far each lever moves it alone.

For the config's env, policy and H0, at the training temperature (``train.temperature``):

- **H0**: exact pass@1 on the val split (mean over ``--k`` sampled rollouts per task, the checker's
  1/0), with its 95 % interval, beside the suite's trivial baseline (best constant answer on val);
- **the harness lever**: each edit the offline operators in ``--operators`` make of H0 (``--variants``
  seeded variants each, duplicates dropped), evaluated on the same val tasks and seeds under W0, as a
  paired per-task difference to H0 with its interval;
- **the weight lever** (``--stage``): one weight stage under H0 as the config trains it (a one-round
  ``rl_only`` run), and the stage's own effect on val (H0 under W0 and under W1, same tasks and seeds:
  VACE's measured stage effect);
- **cost**: CPU-seconds per evaluation rollout (this process's CPU time over the H0 evaluation) and per
  weight-stage rollout (the stage's CPU time over its sampled rollouts, the stage's val evaluations
  taken out at the measured evaluation cost).

Writes ``--out`` as JSON and prints one markdown row per measurement. Not part of CI (it runs the real
model); run it alone on the machine::

    python benchmarks/showcase_suite.py configs/default.toml --k 2 --stage \\
        --operators tool_expose,decoding_constrain,answer_format_rule,demonstrations
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
                     "TRL_EXPERIMENTAL_SILENCE": "1"}.items():
    os.environ.setdefault(_key, _value)

DEFAULT_OPERATORS = "tool_expose,decoding_constrain,answer_format_rule,exact_value_rule,demonstrations,parser_number"


def concrete(cause: str) -> str:
    """A cause kind an operator's declared prefix addresses (``value:`` -> ``value:wrong``)."""
    return cause + "wrong" if cause.endswith(":") else cause


def edits(names: list[str], h0, env, config, variants: int) -> list[tuple[str, str, object]]:
    """(operator, why, child spec) for each distinct edit the named operators make of ``h0``."""
    from coevo.harnesses.patch import apply_patch
    from coevo.meta.state import Direction, Evidence
    from coevo.roles.editor import demonstration_source, env_tool_names
    from coevo.roles.operators import OPERATORS, Material

    train = {t.id: t for t in env.tasks("train", config.env.n_train)}
    tools = env_tool_names(env)
    seen, out = {h0.id}, []
    for name in names:
        op = OPERATORS[name]
        if not op.fits(h0):
            print(f"{name}: does not fit H0, skipped")
            continue
        evidence = [Evidence(task_id=t, answer="") for t in list(train)[:4]]
        direction = Direction(id="d", cause=concrete(op.causes[0]), description="", task_ids=list(train)[:4],
                              evidence=evidence)
        material = Material(direction, h0, train, demo_answer=demonstration_source(env), env_tools=tools)
        for seed in range(variants):
            edit = op.make(material, random.Random(seed))
            if edit is None or not edit.ops:
                continue
            child = apply_patch(h0, edit.ops)
            if child.id not in seen:
                seen.add(child.id)
                out.append((name, edit.why, child))
    return out


def main() -> None:
    """Measure and print (see module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], help="a config override KEY=VALUE (repeatable)")
    ap.add_argument("--k", type=int, default=2, help="sampled rollouts per val task")
    ap.add_argument("--operators", default=DEFAULT_OPERATORS, help="comma-separated offline operators to try")
    ap.add_argument("--variants", type=int, default=2, help="seeded variants per operator")
    ap.add_argument("--stage", action="store_true", help="also run one weight stage under H0 (rl_only, 1 round)")
    ap.add_argument("--out", default="benchmarks/results/showcase_suite.json")
    args = ap.parse_args()

    from coevo.app.run import run_meta
    from coevo.app.services import engine_options
    from coevo.cli.common import key_values
    from coevo.config import load_config
    from coevo.envs.registry import get_env
    from coevo.evaluation.engine import evaluate
    from coevo.evaluation.results import outcome_estimate, paired_difference
    from coevo.harnesses.agent import start_harness
    from coevo.models.refs import load_model

    config = load_config(args.config, key_values(args.set, "env.n_val=100"))
    env = get_env(config.env.ref, **config.env.settings())
    h0 = start_harness(config.harness, env.name)
    model = load_model(config.policy, **engine_options(config))  # as a run loads it (eval.concurrency, eval.threads)
    temperature = config.train.temperature
    val = env.tasks("val", config.env.n_val)
    out: dict = {"config": args.config, "overrides": args.set, "env": config.env.ref, "harness": h0.id,
                 "policy": config.policy, "temperature": temperature, "k": args.k, "n_val": len(val), "rows": []}

    def measure(spec):
        cpu, wall = time.process_time(), time.time()
        result = asyncio.run(evaluate(spec, "base", env, "val", k=args.k, seeds=config.seed, model=model, tasks=val,
                                      concurrency=config.eval.concurrency, temperature=temperature))
        return result, (time.process_time() - cpu) / (len(val) * args.k), time.time() - wall

    base, cpu_rollout, wall = measure(h0)
    est = outcome_estimate(base.per_task, "avg_at_k")
    out.update(h0_pass=est.model_dump(), trivial=base.trivial_baseline, trivial_detail=base.trivial_detail,
               eval_cpu_s_per_rollout=cpu_rollout, h0_wall_s=wall)
    print(f"| H0 | {est} | trivial {base.trivial_baseline} | {cpu_rollout:.3f} CPU-s/rollout | {wall:.0f} s |")
    for name, why, child in edits([n for n in args.operators.split(",") if n], h0, env, config, args.variants):
        result, cpu_child, wall = measure(child)
        diff = paired_difference(base.per_task, result.per_task, "avg_at_k")
        out["rows"].append({"operator": name, "why": why, "harness": child.id, "pass": result.avg_at_k,
                            "difference": diff.model_dump(), "cpu_s_per_rollout": cpu_child, "wall_s": wall})
        print(f"| {name} | {why} | {result.avg_at_k:.3f} | {diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] "
              f"n={diff.n} | {cpu_child:.3f} CPU-s/rollout |")
    if args.stage:
        folder = Path(tempfile.mkdtemp(prefix="showcase-stage-"))
        stage_config = config.model_copy(update={"strategy": "rl_only", "rounds": 1, "db": str(folder / "run.db"),
                                                 "out_dir": str(folder),
                                                 "env": config.env.model_copy(update={"n_test": 0})})
        cpu, wall = time.process_time(), time.time()
        state = asyncio.run(run_meta(stage_config, run_id="showcase-stage"))
        cpu, wall = time.process_time() - cpu, time.time() - wall
        stage = state["history"][0].weights
        diff = paired_difference(stage.before.per_task, stage.after.per_task, "avg_at_k")
        rollouts = config.train.steps * config.train.tasks_per_step * config.train.num_generations
        evals = 2 * len(stage.before.per_task) * stage.before.k
        stage_cpu = max(0.0, cpu - evals * cpu_rollout) / rollouts
        out["stage"] = {"before": stage.val_before, "after": stage.val_after, "difference": diff.model_dump(),
                        "train_reward": stage.train_reward, "effective_group_rate": stage.effective_group_rate,
                        "rollouts": rollouts, "cpu_s": cpu, "wall_s": wall, "cpu_s_per_stage_rollout": stage_cpu,
                        "eval_k": stage.before.k, "eval_temperature": config.eval.temperature}
        print(f"| one weight stage under H0 | val {stage.val_before:.3f} -> {stage.val_after:.3f} | "
              f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] n={diff.n} | train reward "
              f"{stage.train_reward} | {stage_cpu:.2f} CPU-s/stage rollout | {wall:.0f} s |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
