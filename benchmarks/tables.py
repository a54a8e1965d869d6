"""The papers' comparison tables (issue 25), one command each::

    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/vace.toml

runs the table config's strategies × seeds at its matched rollout budget (``coevo compare --budget``: the
runs go to ``coevo_runs/tables/NAME.db``; finished runs are read back, stopped ones resumed, so the same
command continues an interrupted table), adds the table's extras (``coevo.app.tables``) and writes
``benchmarks/results/table_NAME.json`` (the comparison, the extras, commit, and the wall and CPU seconds of
every invocation that worked on it, summed: ``TableResult.continued``; one stopped before it wrote results,
by Ctrl-C, ``kill`` or ``kill -9``, counts from the record it kept while running, ``coevo.app.table_costs``) and
``benchmarks/results/table_NAME.png`` (test mean@k per strategy with 95 % intervals) and ``table_NAME.md`` (the
tables and extras as Markdown, included by docs/benchmarks/papers.md), the full compare report
under ``coevo_runs/tables/NAME/compare/``, and prints the tables.

A smoke run checks a table end to end at a tiny size (results ``table_NAME.smoke.{json,png}``, its own
archive, never the table's)::

    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/vace.toml --smoke \\
        --set env.n_train=4 --set env.n_val=4 --set env.n_test=4 --budget 60

``--smoke`` means one seed and ``rounds = 1`` unless ``--seeds``/``--set rounds=`` say otherwise. Not part of
CI (it runs the real model).

Two single-threaded processes use a 2-core machine's two cores: each runs some of the table's seeds into
the same archive (SQLite in WAL mode takes both), then one plain invocation reads every run back, adds the
extras still missing and writes the table, its cost summed over all three (the parts' results,
``table_NAME.seeds-S.json``, hold theirs)::

    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/vace.toml --only-seeds 0,2 &
    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/vace.toml --only-seeds 1; wait
    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/vace.toml

When a seed is left and its strategies are many, ``--only-strategies`` splits them (a planned baseline runs with
the reference, which it reads back once that has finished; results ``table_NAME.seeds-S.strategies-A-B.json``)::

    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/whale.toml --only-seeds 2 \\
        --only-strategies whale,whale_adaptive,fst
    # once whale seed 2 has finished:
    OMP_NUM_THREADS=1 python benchmarks/tables.py configs/tables/whale.toml --only-seeds 2 \\
        --only-strategies whale,stagewise,whale_weight_only,whale_harness_only
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def run_costs(result: dict) -> list[tuple[float, float, float]]:
    """Per run that ran in this process (``cpu_s`` set) of a table results JSON: (CPU seconds, weight-stage
    rollouts, evaluation rollouts): the stage's are the ``train`` phase's; evaluations are every other phase's
    (val, checks, search), what the run measured without charging it (``measured_by_phase``: the stage effect,
    the final val) and the test rollouts of the start and final pairs and the run's other tests."""
    out = []
    for run in result["comparison"]["runs"]:
        if run.get("cpu_s") is None:
            continue
        tests = [run.get("start"), run.get("final"), *run.get("tests", {}).values()]
        test = sum(len(o["rewards"]) for t in tests if t for o in t["per_task"].values())
        spent, measured = run.get("spent_by_phase", {}), run.get("measured_by_phase", {})
        train = spent.get("train", 0.0)
        out.append((run["cpu_s"], train, sum(spent.values()) - train + sum(measured.values()) + test))
    return out


def fit_costs(paths: list[str]) -> dict[str, float]:
    """Least squares over the runs of the results JSONs ``paths`` (smoke runs): CPU seconds per run =
    ``per_run`` + ``per_train_rollout`` x stage rollouts + ``per_eval_rollout`` x evaluation rollouts
    (``run_costs``); with ``runs``, the number of runs fitted. On a shared machine a single-threaded
    run's CPU seconds estimate its wall seconds on a quiet one."""
    import json

    import numpy as np

    rows = [c for p in paths for c in run_costs(json.loads(Path(p).read_text()))]
    if len(rows) < 3:
        raise SystemExit(f"--fit needs at least 3 runs with CPU seconds; {paths} hold {len(rows)}")
    y = np.array([r[0] for r in rows])
    x = np.array([[1.0, r[1], r[2]] for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return {"runs": len(rows), "per_run": float(coef[0]), "per_train_rollout": float(coef[1]),
            "per_eval_rollout": float(coef[2])}


def only_seeds(text: str, first: int, count: int) -> list[int]:
    """``--only-seeds S,S`` as seeds, each one of the table's ``first .. first + count - 1``; a bad list
    exits with a one-line error naming the table's seeds."""
    allowed = list(range(first, first + count))
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or any(s not in allowed for s in seeds) or len(set(seeds)) != len(seeds):
        raise SystemExit(f"--only-seeds {text!r}: give distinct seeds of this table, comma-separated, from {allowed}")
    return seeds


def only_strategies(text: str, spec: Any) -> list[str]:
    """``--only-strategies A,B`` as the table's strategies to run, in the table's order. A planned baseline
    (stagewise, sia, WHALE's single-component ones) is matched to the rounds its seed's reference ran, so it
    needs the reference among them (run, or read back once it has finished); a bad list exits with a
    one-line error naming the table's strategies."""
    from coevo.strategies import get_strategy

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or any(n not in spec.strategies for n in names) or len(set(names)) != len(names):
        raise SystemExit(f"--only-strategies {text!r}: give distinct strategies of this table, comma-separated, "
                         f"from {spec.strategies}")
    planned = [n for n in names if n != spec.reference and not get_strategy(n).open_ended]
    if planned and spec.reference not in names:
        raise SystemExit(f"--only-strategies {text!r}: {', '.join(planned)} run the rounds the reference "
                         f"{spec.reference!r} ran in each seed; add {spec.reference} (read back once it has finished)")
    return [n for n in spec.strategies if n in names]


def main() -> None:
    """Parse the flags, run the table, print its tables and write its results (``--fit``: print the
    fitted per-rollout CPU costs of finished results instead)."""
    from coevo.app.table_costs import CostLedger
    from coevo.app.tables import counted, load_table, results_json, run_table
    from coevo.cli.common import console, key_values, user_errors
    from coevo.observe.progress import RichReporter
    from coevo.report.compare import write_compare_report
    from coevo.report.plots import compare_plot
    from coevo.report.tables import table_markdown
    from coevo.report.terminal import budget_table, compare_table, spend_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", nargs="?", help="a table config, configs/tables/NAME.toml")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE run-config override")
    ap.add_argument("--seeds", type=int, default=None, help="seeds (default: the table's; --smoke: 1)")
    ap.add_argument("--only-seeds", default=None, metavar="S,S",
                    help="run only these of the table's seeds (comma-separated), e.g. in two processes at once")
    ap.add_argument("--only-strategies", default=None, metavar="A,B",
                    help="run only these of the table's strategies (a planned baseline with the reference), e.g. one "
                         "seed's strategies in two processes; a plain invocation then writes the whole table")
    ap.add_argument("--budget", type=int, default=None, help="rollouts per run (default: the table's)")
    ap.add_argument("--smoke", action="store_true", help="a smoke run: own archive and results, 1 seed, 1 round")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="results folder")
    ap.add_argument("--fit", nargs="+", default=None, metavar="RESULTS_JSON",
                    help="print the per-run and per-rollout CPU seconds fitted over these results (no run)")
    args = ap.parse_args()
    if args.fit:
        print(fit_costs(args.fit))
        return
    if not args.table:
        ap.error("name a table config (configs/tables/NAME.toml) or --fit RESULTS_JSON ...")

    with user_errors():
        overrides = key_values(args.sets, "env.n_test=4")
        if args.smoke:
            overrides.setdefault("rounds", 1)
        spec, config = load_table(args.table, overrides)
        if args.smoke and not any(k in overrides for k in ("db", "out_dir")):
            config = config.model_copy(update={"db": config.db.replace(".db", ".smoke.db"),
                                               "out_dir": config.out_dir + ".smoke"})
        seeds: int | list[int] | None = args.seeds or (1 if args.smoke else None)
        if args.only_seeds:
            seeds = only_seeds(args.only_seeds, config.seed, seeds or spec.seeds)
        # what makes invocations one table's (coevo.app.table_costs): the run config, the table, the effective budget
        # and seed count (a part's --only-seeds / --only-strategies are its own, not the table's)
        key = {"config": config.model_dump(mode="json"), "table": spec.model_dump(mode="json"),
               "budget": spec.budget if args.budget is None else args.budget,
               "seeds": args.seeds or (1 if args.smoke else spec.seeds)}
        if args.only_strategies:
            spec = spec.model_copy(update={"strategies": only_strategies(args.only_strategies, spec)})
        out = Path(args.out)
        stem = f"table_{spec.name}" + (".smoke" if args.smoke else "")
        part = isinstance(seeds, list) or bool(args.only_strategies)
        if isinstance(seeds, list):
            stem += ".seeds-" + "-".join(map(str, seeds))
        if args.only_strategies:
            stem += (".seeds-all" if not isinstance(seeds, list) else "") + ".strategies-" + "-".join(spec.strategies)
        ledger = CostLedger(out, stem, _commit(), seeds if isinstance(seeds, list) else [], key,
                            strategies=spec.strategies if args.only_strategies else [])
        try:
            with ledger:  # `kill PID` records what this invocation cost, then ends it at once; Ctrl-C too
                with RichReporter(console=console) as reporter:
                    result = asyncio.run(run_table(spec, config, reporter=reporter, seeds=seeds, budget=args.budget))
                result, folded = counted(result, ledger, part)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{stem}.json").write_text(results_json(result))
                ledger.done(folded)
        except KeyboardInterrupt:
            console.print(f"stopped; what this invocation cost is in {ledger.path} (unless a warning above says it "
                          "could not be written) and joins the table's cost when it is next written. The same "
                          "command continues the table.")
            raise SystemExit(130) from None
        comparison = result.comparison
        console.print(compare_table(comparison))
        console.print(budget_table(comparison))
        if comparison.budget:
            console.print(spend_table(comparison))
        for name, value in result.extras.items():
            console.print(f"[bold]{name}[/bold]: {value}")
        (out / f"{stem}.md").write_text(table_markdown(result))
        trivial = next((r.trivial for r in comparison.rows if r.trivial is not None), None)
        compare_plot(comparison.rows, trivial, out / f"{stem}.png")
        report = write_compare_report(comparison, Path(config.out_dir) / "compare" / comparison.id)
    console.print(f"results: {out / stem}.json, .png; report: {report}; wall {result.wall_s:.0f} s, "
                  f"CPU {result.cpu_s:.0f} s over {len(result.invocations)} invocation(s), the last at {result.commit}")


if __name__ == "__main__":
    main()
