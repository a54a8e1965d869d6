"""A real weight stage's peak memory under ``train.max_memory_gb`` (issue 44, item 7): the plan it trained
with, or the one-paragraph refusal it stopped with before any step.

Two stages, each alone in its own process, SmolLM2-135M-Instruct on CPU:

- ``grpo``: the default job's GRPO stage (``stage_kit.default_stage``: ``configs/default.toml``'s round-0
  stage under H0, its ``[train]`` size);
- ``harness-sft``: EvoHarness-RL's supervised harness fine-tuning (the strategy's own ``setup`` ->
  ``equip`` -> ``harness_sft`` nodes, ``bench_bpe_sft.sft_stage``) on ``--config`` (default
  ``configs/evoharness_textworld.toml``, the stage that peaked at 23.1 GB RSS without a cap), no evaluation.

``--set KEY=VALUE`` overrides a config key (``train.max_memory_gb=8``; a smaller slice:
``evoharness.sft_steps=1``). Prints JSON: the plan (``micro_steps``/``micro_batches``, ``max_len``,
``estimate_gb``, ``budget_gb``, what it changed) or ``refused`` (the ``MemoryBudgetError`` paragraph), the
stage's own wall seconds (``stage_s``, from its metrics) and steps, rows' policy tokens and loss (harness SFT:
also its rows uncut and at the planned ``max_len``, ``rows_of``), the whole
process's wall and CPU seconds (user + system, this process and its children: TextWorld builds its games
in child processes the first time) and the peak RSS (``ru_maxrss``, GB). Run it under ``/usr/bin/time -v``
for the same peak from outside:

    OMP_NUM_THREADS=1 nice -n 19 /usr/bin/time -v python benchmarks/stage_memory.py grpo --set train.max_memory_gb=8
    OMP_NUM_THREADS=1 nice -n 19 /usr/bin/time -v python benchmarks/stage_memory.py harness-sft \\
        --set train.max_memory_gb=8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLANS: list[Any] = []
"""Every ``MemoryPlan`` the stage derived (recorded by ``record_plans``)."""


def record_plans() -> None:
    """Record each plan ``coevo.training.memory`` hands a GRPO stage and ``coevo.training.rsft`` an RSFT stage."""
    from coevo.training import memory, rsft

    for module, name in ((memory, "plan_memory"), (rsft, "plan_sft_memory")):
        planner = getattr(module, name)

        def recorded(*args: Any, _planner: Any = planner) -> Any:
            plan = _planner(*args)
            PLANS.append(plan)
            return plan

        setattr(module, name, recorded)


def usage() -> dict[str, float]:
    """CPU seconds (user + system, this process and its waited-for children) and the peak RSS in GB."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 1),
            "peak_rss_gb": round(max(own.ru_maxrss, children.ru_maxrss) / 1024**2, 2)}  # ru_maxrss: KiB on Linux


def grpo(overrides: dict[str, Any]) -> dict[str, Any]:
    """The default job's GRPO stage with ``overrides`` (``train.*`` keys only)."""
    from stage_kit import default_stage

    from coevo.training.grpo.stage import train_grpo

    bad = [k for k in overrides if not k.startswith("train.")]
    if bad:
        raise SystemExit(f"grpo takes train.* overrides only, not {bad}")
    stage = default_stage(**{k.removeprefix("train."): v for k, v in overrides.items()})
    new, trajectories = train_grpo(stage["checkpoint"], stage["spec"], stage["env"], stage["tasks"], stage["config"])
    m = new.metrics
    return {"stage_s": round(m.get("wall_time_s", 0.0), 1), "steps": len(m.get("history", [])),
            "rollouts": len(trajectories), "reward_mean": m.get("reward_mean"),
            "micro_batches": new.config.get("micro_batches"), "max_len": new.config.get("max_len")}


def harness_sft(config_path: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """EvoHarness-RL's harness SFT stage on ``config_path`` with ``overrides``, in a fresh archive."""
    from bench_bpe_sft import sft_stage

    from coevo.config import load_config
    from coevo.models.checkpoint import Checkpoint
    from coevo.models.trajectory import Trajectory
    from coevo.storage.archive import Archive
    from coevo.training.rsft import accepted

    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(config_path, {**overrides, "db": str(Path(tmp) / "coevo.db"), "out_dir": tmp})
        with Archive(config.db) as archive:
            _, state, _ = asyncio.run(sft_stage(config, archive, "stage-memory"))
            m = archive.get(Checkpoint, state["checkpoint"]).metrics or {}  # type: ignore[union-attr]
            kept = accepted(archive.list(Trajectory, run_id="stage-memory", split="train"))  # the stage's rollouts
    history = m.get("history", [])
    cap = (m.get("memory") or {}).get("max_len")
    return {"stage_s": round(m.get("wall_time_s", 0.0), 1), "rounds": len(history), "sft_steps": m.get("steps"),
            "tokens": m.get("tokens"), "kept": [h.get("kept") for h in history], "loss": m.get("loss"),
            "memory": m.get("memory"), "rows_uncut": rows_of(kept, None), "rows_at_cap": rows_of(kept, cap)}


def rows_of(trajectories: list[Any], max_len: int | None) -> dict[str, int]:
    """How many harness SFT rows ``trajectories`` give at ``max_len`` (None: uncut), the longest one's tokens
    and their policy tokens: what a lowered ``max_len`` cuts from the stage's data."""
    from coevo.training.grpo.harness_cost import harness_sft_rows
    from coevo.training.rsft import policy_tokens

    rows = [r for t in trajectories for r in harness_sft_rows(t, max_len)]
    return {"rows": len(rows), "longest": max((len(r.prompt_ids) + len(r.completion_ids) for r in rows), default=0),
            "policy_tokens": policy_tokens(rows)}


def main() -> None:
    from coevo.cli.common import key_values
    from coevo.training.memory import MemoryBudgetError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["grpo", "harness-sft"])
    parser.add_argument("--config", default=str(ROOT / "configs" / "evoharness_textworld.toml"),
                        help="harness-sft's run config")
    parser.add_argument("--set", action="append", default=[], help="a config override (KEY=VALUE)")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    overrides = key_values(args.set, "train.max_memory_gb=8")
    record_plans()
    started = time.perf_counter()
    result: dict[str, Any] = {"stage": args.stage, "overrides": overrides}
    try:
        result |= grpo(overrides) if args.stage == "grpo" else harness_sft(args.config, overrides)
    except MemoryBudgetError as err:
        result["refused"] = str(err)
    result["plans"] = [{"micro_batches": p.micro_batches, "max_len": p.max_len, "estimate_gb": round(p.estimate_gb, 2),
                        "budget_gb": round(p.budget_gb, 2), "changed": list(p.changed)} for p in PLANS]
    result |= {"wall_s": round(time.perf_counter() - started, 1), **usage()}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
