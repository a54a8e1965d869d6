"""Harness-R1 on the testbed (issue 27): train the harness engineer, then compare editors.

``train``: the engineer (the config's ``harness_r1.engineer``, SmolLM2-135M on CPU) gets cold-start
SFT on the accepted edits of ``--sft-db`` (an archive; none accepted: no SFT), then ``--steps`` GRPO
steps of one episode x ``--group`` patches. Episodes: the frozen target (the config's policy, W0)
under H0 samples the first ``--n`` train tasks once at the training temperature; its failures, in
batches of ``--batch``, are the episodes. Prints and writes the reward curve (mean reward per step),
the patch validity rate and the adapter's path (``--out``).

``summary DB...``: per archive (a ``harness_only`` run each: the offline editor, the untrained
engineer, the trained one), the edits proposed, those that passed the check, the gate's acceptance
rate over proposed edits (95 % Wilson interval) and the mean val gain c - b of gated candidates
(bootstrap interval); ``--edits N``: each run's first N proposed edits only (an equal number of edits).

    OMP_NUM_THREADS=1 python benchmarks/bench_harness_r1.py train configs/testbed.toml --sft-db offline.db
    OMP_NUM_THREADS=1 python benchmarks/bench_harness_r1.py summary offline.db untrained.db trained.db

Not part of CI (it runs the real model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(_key, _value)


def train(args: argparse.Namespace) -> None:
    """Cold start and GRPO of the engineer (module doc)."""
    from coevo.config import load_config
    from coevo.config.train import StageConfig
    from coevo.envs.registry import get_env
    from coevo.evaluation.engine import evaluate
    from coevo.evaluation.stats import difference_estimate, score_estimate
    from coevo.harnesses import load_harness
    from coevo.models.refs import load_model
    from coevo.records import Trajectory
    from coevo.storage import Archive
    from coevo.training.harness_r1.edit_env import EditEnv, EditEpisode, evaluation_rerun
    from coevo.training.harness_r1.engineer import (
        engineer_checkpoint,
        engineer_reference,
        train_engineer_grpo,
        train_engineer_sft,
    )
    from coevo.training.harness_r1.engineer_data import accepted_examples
    from coevo.training.kinds import training_spec

    config = load_config(args.config)
    env = get_env(config.env.ref, **config.env.settings())
    h0 = load_harness(config.harness or env.name)
    target = load_model(config.policy)
    out = Path(args.out_dir)
    started = time.time()
    ckpt = engineer_checkpoint(config.harness_r1.engineer)
    stage = StageConfig(**config.train.model_dump(include=set(StageConfig.model_fields) - {"seed", "output_dir"}),
                        seed=config.seed, output_dir=str(out / "adapters"))
    stage = stage.model_copy(update={"steps": args.steps, "tasks_per_step": 1, "num_generations": args.group,
                                     "resample": 0, "micro_batches": None, "epochs": args.sft_epochs,
                                     "minibatch_size": 1})
    examples = []
    if args.sft_db:
        with Archive(args.sft_db) as archive:
            examples = accepted_examples(archive)
    sft_loss = None
    if examples:
        ckpt = train_engineer_sft(ckpt, examples, stage)
        sft_loss = ckpt.metrics["loss"]
    print(f"cold start: {len(examples)} accepted edits, SFT loss {sft_loss} ({time.time() - started:.0f} s)")
    # the episodes: H0's failures on the first n train tasks, sampled as training samples them
    tasks = env.tasks("train", args.n)
    archive = Archive("sqlite://")
    sampled = asyncio.run(evaluate(training_spec(h0, config.train), "w0", env, "train", k=1, seeds=config.seed,
                                   model=target, tasks=tasks, archive=archive, run_id="bench",
                                   concurrency=config.eval.concurrency))
    failures = [t for t in archive.list(Trajectory, evaluation_id=sampled.evaluation_id) if not t.passed]
    by_id = {t.id: t for t in tasks}
    episodes = [EditEpisode.of_failures(f"ep{i}", h0, failures[j:j + args.batch], by_id, 10_000_000 + i)
                for i, j in enumerate(range(0, len(failures), args.batch))][:args.steps]
    print(f"{len(failures)}/{len(tasks)} train tasks failed under H0 -> {len(episodes)} episodes of <= {args.batch}")
    rerun = evaluation_rerun(target, env, "w0", evaluate, config.eval.concurrency)
    edit_env = EditEnv(rerun, config.harness_r1.penalty)
    new, trajectories, rollout = train_engineer_grpo(ckpt, episodes, edit_env, stage, config.harness_r1.temperature,
                                                     args.max_tokens, config.harness_r1.max_ops)
    outcomes = [o for _, _, o in rollout.outcomes]
    curve = [h.get("reward") for h in new.metrics["history"]]
    valid = score_estimate([float(o.valid) for o in outcomes])
    valid_outcomes = [o for o in outcomes if o.valid]
    reasons = sorted({o.reason[:90] for o in outcomes if not o.valid})
    result = {"config": args.config, "engineer": engineer_reference(new), "sft_examples": len(examples),
              "sft_loss": sft_loss, "episodes": len(episodes), "episode_tasks": [len(e.tasks) for e in episodes],
              "group": args.group, "steps": args.steps, "penalty": config.harness_r1.penalty, "reward_curve": curve,
              "patches": len(outcomes), "valid": sum(o.valid for o in outcomes),
              "validity": valid.model_dump(),
              "valid_reward": (difference_estimate([o.unpatched for o in valid_outcomes],
                                                   [o.patched for o in valid_outcomes]).model_dump()
                               if valid_outcomes else None),
              "invalid_reasons": reasons, "wall_s": time.time() - started}
    print(json.dumps(result, indent=1))
    Path(args.out).write_text(json.dumps(result, indent=1))


def summary(args: argparse.Namespace) -> None:
    """Gate numbers per archive (module doc)."""
    from coevo.evaluation.stats import difference_estimate, score_estimate
    from coevo.records import EditRecord, EvaluationRecord, GateDecision, RunRecord
    from coevo.storage import Archive

    rows = {}
    for db in args.dbs:
        with Archive(db) as archive:
            (run,) = archive.list(RunRecord)
            edits = archive.list(EditRecord, run_id=run.id)
            final = {}  # one fate per proposed candidate: its last revision
            for e in sorted(edits, key=lambda e: e.created_at):
                final[e.id.rsplit("-v", 1)[0]] = e
            gates = archive.list(GateDecision, run_id=run.id)
            accepted = {g.candidate_id for g in gates if g.accepted}
            evals = [e for e in archive.list(EvaluationRecord, run_id=run.id) if e.split == "val"]
        proposed = sorted(final.values(), key=lambda e: e.created_at)[:args.edits or None]
        gates = [g for g in gates if g.candidate_id in {e.child_id for e in proposed}]
        accepted &= {g.candidate_id for g in gates}
        acc = score_estimate([float(e.child_id in accepted) for e in proposed]) if proposed else None
        gains = difference_estimate([g.b for g in gates], [g.c for g in gates]) if gates else None
        first = min(evals, key=lambda e: e.created_at)
        rows[db] = {"run": run.id, "proposed": len(proposed), "checked": sum(e.status == "checked" for e in proposed),
                    "gated": len(gates), "accepted": len(accepted),
                    "acceptance": acc.model_dump() if acc else None,
                    "val_gain_gated": gains.model_dump() if gains else None,
                    "h0_val": first.aggregates.get("mean_reward")}
        print(f"{db}: {rows[db]['proposed']} edits, {rows[db]['checked']} checked, {len(gates)} gated, "
              f"{len(accepted)} accepted ({acc}); val gain c-b of gated {gains}; "
              f"H0 val {rows[db]['h0_val']}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str))


def main() -> None:
    """Parse and run a subcommand (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("config")
    t.add_argument("--sft-db", default="")
    t.add_argument("--sft-epochs", type=int, default=2)
    t.add_argument("--n", type=int, default=16, help="train tasks sampled for failures")
    t.add_argument("--batch", type=int, default=3, help="failed tasks per episode")
    t.add_argument("--steps", type=int, default=4, help="GRPO steps (one episode each)")
    t.add_argument("--group", type=int, default=4, help="patches per episode (G)")
    t.add_argument("--max-tokens", type=int, default=256)
    t.add_argument("--out-dir", default="/tmp/harness_r1_bench")
    t.add_argument("--out", default="benchmarks/results/harness_r1_train.json")
    s = sub.add_parser("summary")
    s.add_argument("dbs", nargs="+")
    s.add_argument("--edits", type=int, default=0, help="only each run's first N proposed edits (0: all)")
    s.add_argument("--out", default="benchmarks/results/harness_r1_editors.json")
    args = ap.parse_args()
    train(args) if args.cmd == "train" else summary(args)


if __name__ == "__main__":
    main()
