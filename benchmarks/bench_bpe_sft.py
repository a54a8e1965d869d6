"""EvoHarness-RL's supervised harness fine-tuning, measured (issue 26): does teacher SFT make the
policy call the BPE harness actions on its own?

Runs the strategy's own nodes on one config (default ``configs/evoharness_small.toml``) with a fresh
archive: ``setup`` (H0, W0, the tasks) -> ``equip`` (H_BPE) -> ``harness_sft`` (``evoharness.sft_steps``
rounds of the scripted teacher's demonstrations on train tasks, ``evoharness.sft_epochs`` passes at
``evoharness.sft_learning_rate``, each defaulting to ``[train]``'s), then evaluates the SFT checkpoint
under H_BPE on the val and test tasks (never trained on) as GRPO's rollouts run
(``coevo.training.kinds.training_spec``: sampled at ``train.temperature``, ``train.max_new_tokens`` per
reply), ``--k`` rollouts per task. Prints, with 95 % intervals over the n rollouts
(``coevo.evaluation.stats.score_estimate``):

    actions/turn   BPE actions per model turn, the mean over rollouts (the annealing curve's y)
    any action     share of rollouts with at least one BPE action
    first turn     share of rollouts whose first reply is a BPE action (the teacher always opens with one)
    answered       share of rollouts that gave a final answer (not cut off by the call budget)
    success        share of rollouts the env passed

plus the SFT stage's optimiser steps, rows, first and last loss, wall time, and a few first replies.
``--set evoharness.sft_steps=0`` measures the base policy (no SFT). Peak memory: run it under
``/usr/bin/time -v``.

    OMP_NUM_THREADS=1 python benchmarks/bench_bpe_sft.py --set evoharness.sft_steps=4 --set train.epochs=4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def sft_stage(config: Any, archive: Any, run_id: str = "bench-bpe-sft") -> tuple[Any, dict[str, Any], float]:
    """The strategy's own ``setup`` -> ``equip`` -> ``harness_sft`` nodes with ``config`` on ``archive``:
    ``(the run's MetaContext, the state after the SFT stage, the stage's wall seconds)``."""
    from langgraph.runtime import Runtime

    from coevo.app.services import make_context
    from coevo.graphs.evoharness.nodes import equip, harness_sft
    from coevo.nodes.loop import setup

    ctx = make_context(config, archive, run_id)
    runtime = Runtime(context=ctx)
    state: dict[str, Any] = dict(setup({}, runtime))
    state |= equip(state, runtime)
    started = time.perf_counter()
    state |= await harness_sft(state, runtime)
    return ctx, state, time.perf_counter() - started


async def measure(config: Any, folder: Path, k: int) -> dict[str, Any]:
    """SFT then evaluate (module doc) with ``config`` writing under ``folder``; the numbers as a dict."""
    from coevo.evaluation.stats import score_estimate
    from coevo.models.checkpoint import Checkpoint
    from coevo.models.trajectory import Trajectory
    from coevo.storage.archive import Archive
    from coevo.training.kinds import training_spec

    with Archive(folder / "coevo.db") as archive:
        ctx, state, sft_s = await sft_stage(config, archive)
        checkpoint = archive.get(Checkpoint, state["checkpoint"])
        history = (checkpoint.metrics or {}).get("history", []) if checkpoint else []
        spec = ctx.spec(state["incumbent"])  # evaluated as GRPO's rollouts run it: their temperature and tokens
        variant = archive.add_harness(training_spec(spec, config.train), [spec.id], "bpe", ctx.run_id)
        trajs: list[Trajectory] = []
        started = time.perf_counter()
        for split in ("val", "test"):
            result = await ctx.evaluate(variant, state["checkpoint"], split, k=k)
            trajs += archive.list(Trajectory, evaluation_id=result.evaluation_id)
        eval_s = time.perf_counter() - started

    def estimate(values: list[float]) -> list[float]:
        e = score_estimate(values)
        return [round(e.mean, 4), round(e.low, 4), round(e.high, 4)]

    return {
        "sft_steps": config.evoharness.sft_steps, "epochs": config.evoharness.sft_epochs or config.train.epochs,
        "learning_rate": config.evoharness.sft_learning_rate or config.train.learning_rate,
        "demonstrations": len(history) * config.train.tasks_per_step * config.train.num_generations,
        "optimiser_steps": sum(h.get("sft_steps", 0) for h in history),
        "rows_tokens": sum(h.get("tokens", 0) for h in history),
        "loss_per_round": [h.get("loss") for h in history], "sft_s": round(sft_s, 1), "eval_s": round(eval_s, 1),
        "n": len(trajs), "k": k,
        "actions_per_turn": estimate([len(t.harness_actions) / t.model_turns if t.model_turns else 0.0
                                      for t in trajs]),
        "any_action": estimate([float(bool(t.harness_actions)) for t in trajs]),
        "first_turn_action": estimate([float(any(int(a["turn"]) == 1 for a in t.harness_actions)) for t in trajs]),
        "answered": estimate([float(t.final_answer is not None) for t in trajs]),
        "success": estimate([float(t.passed) for t in trajs]),
        "model_turns_mean": round(sum(t.model_turns for t in trajs) / len(trajs), 2) if trajs else 0.0,
        "actions": sorted({a.get("action", a.get("name", "?")) for t in trajs for a in t.harness_actions}),
        "first_replies": [str(t.calls[0].output.get("data", {}).get("content", ""))[:160]
                          for t in trajs[:4] if t.calls],
    }


def main() -> None:
    from coevo.cli.common import key_values
    from coevo.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "evoharness_small.toml"))
    parser.add_argument("--set", action="append", default=[], help="a config override (KEY=VALUE)")
    parser.add_argument("--k", type=int, default=2, help="rollouts per val/test task")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    overrides = key_values(args.set, "evoharness.sft_steps=4")
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(args.config, {**overrides, "db": str(Path(tmp) / "coevo.db"), "out_dir": tmp})
        result = asyncio.run(measure(config, Path(tmp), args.k))
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
