"""The papers' comparison tables' extra numbers (``coevo.app.tables``), summarised from a
``coevo.app.compare.Comparison``, the archive and the re-evaluations ``coevo.app.tables`` ran. Every
interval is a 95 % one over test tasks (``coevo.evaluation.stats``); a value the runs do not have is None."""

from __future__ import annotations

from typing import Any, Sequence

from coevo.evaluation.stats import difference_estimate, score_estimate
from coevo.records import Promotion
from coevo.records.pairing import paired_tasks
from coevo.report.numbers import count, difference_text, plain, score_text


def strategy_rows(comparison: Any) -> dict[str, dict[str, Any]]:
    """Per strategy what every table shows beside its scores: gate accepted / rejected (summed over seeds),
    candidates adopted ungated, the weight stages' effective-group rate (Harness-S §3: groups holding a
    success and a failure) and reward-spread rate (means over seeds), the final pair's test TIMR per seed."""
    tim = {}
    for run in comparison.runs:
        tim.setdefault(run.strategy, []).append(run.final.timr if run.final is not None else None)
    return {r.strategy: {"accepted": r.accepted, "rejected": r.rejected, "adopted": r.adopted,
                         "effective_group_rate": r.effective_group_rate, "spread_rate": r.spread_rate,
                         "final_test_timr": tim.get(r.strategy, [])} for r in comparison.rows}


def rejection_summary(rejections: Sequence[Any]) -> dict[str, Any]:
    """Per strategy, its rejected gate decisions re-tested (``coevo.app.table_extras.Rejection``): how many, how
    many were right (the candidate's test mean@k not above its incumbent's under the same weights), the
    candidates' and incumbents' test scores pooled over decisions and tasks, and candidate − incumbent
    paired per (decision, task) (``difference_estimate``: bootstrap over the pooled pairs)."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r.strategy for r in rejections):
        mine = [r for r in rejections if r.strategy == name]
        inc, cand = [], []
        for r in mine:
            shared = paired_tasks(r.incumbent.per_task, r.candidate.per_task)
            inc += [r.incumbent.per_task[t].mean_reward for t in shared]
            cand += [r.candidate.per_task[t].mean_reward for t in shared]
        out[name] = {"decisions": len(mine), "right": sum(r.candidate.score <= r.incumbent.score for r in mine),
                     "candidate": score_estimate(cand).model_dump() if cand else None,
                     "incumbent": score_estimate(inc).model_dump() if inc else None,
                     "difference": difference_estimate(inc, cand).model_dump() if inc else None}
    return out


def _task_means(summaries: Sequence[Any]) -> dict[str, float]:
    """Each task's mean reward averaged over the summaries (seeds) that hold it."""
    values: dict[str, list[float]] = {}
    for s in summaries:
        for task_id, outcome in s.per_task.items():
            values.setdefault(task_id, []).append(outcome.mean_reward)
    return {t: sum(v) / len(v) for t, v in values.items()}


def rank_summary(comparison: Any) -> dict[str, Any]:
    """Per strategy with routed tests (Harness-S Table 5: ``rank1``, ``rank2``, ... in ``StrategyRun.tests``):
    H0's test score under the final policy and each Rank-r routing's, with Rank-r − H0 paired per task
    on the seeds that have both (each side averaged over them first)."""
    out: dict[str, Any] = {}
    for row in comparison.rows:
        runs = [r for r in comparison.runs if r.strategy == row.strategy and r.final is not None]
        keys = list(dict.fromkeys(k for r in runs for k in r.tests if k.startswith("rank")))
        if not keys:
            continue
        h0 = _task_means([r.final for r in runs])
        entry: dict[str, Any] = {"h0": score_estimate(list(h0.values())).model_dump()}
        for key in keys:
            routed = _task_means([r.tests[key] for r in runs if key in r.tests])
            shared = paired_tasks(routed, h0)
            entry[key] = {"score": score_estimate([routed[t] for t in shared]).model_dump(),
                          "minus_h0": difference_estimate([h0[t] for t in shared],
                                                          [routed[t] for t in shared]).model_dump()}
        out[row.strategy] = entry
    return out


def best_summary(round_tests: Sequence[Any]) -> dict[str, Any]:
    """Per strategy (WHALE: best accuracy and the rollouts spent to reach it), from each run's round-end
    test scores (``coevo.app.table_extras.RoundTest``): per seed the best mean@k, the first round reaching it and
    the cumulative rollouts then; and their means over seeds."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r.strategy for r in round_tests):
        seeds = []
        for seed in dict.fromkeys(r.seed for r in round_tests if r.strategy == name):
            mine = sorted((r for r in round_tests if r.strategy == name and r.seed == seed), key=lambda r: r.round)
            best = max(r.score for r in mine)
            first = next(r for r in mine if r.score == best)
            seeds.append({"seed": seed, "best": best, "round": first.round, "rollouts": first.rollouts,
                          "final": getattr(first, "final", False)})
        spent = [s["rollouts"] for s in seeds if s["rollouts"] is not None]
        out[name] = {"per_seed": seeds, "best_mean": sum(s["best"] for s in seeds) / len(seeds),
                     "rollouts_mean": sum(spent) / len(spent) if spent else None}
    return out


def timr_summary(comparison: Any, archive: Any) -> dict[str, Any]:
    """Per strategy (CoEvo-RSI: inheritance lowers TIMR), the val TIMR of every promoted pair (each
    accepted ``Promotion``'s kept pair) with its run's seed and round, and their mean; strategies without
    promotions get an empty list (their final test TIMR is in ``strategy_rows``)."""
    out: dict[str, Any] = {}
    for row in comparison.rows:
        pairs = []
        for run in (r for r in comparison.runs if r.strategy == row.strategy):
            for p in archive.list(Promotion, run_id=run.run_id):
                if p.accepted:
                    pairs.append({"seed": run.seed, "round": p.round, "harness_id": p.harness_id,
                                  "checkpoint_id": p.checkpoint_id, "val": p.promoted.val, "timr": p.promoted.timr})
        timrs = [p["timr"] for p in pairs if p["timr"] is not None]
        out[row.strategy] = {"promoted": pairs, "mean_timr": sum(timrs) / len(timrs) if timrs else None}
    return out


def decomposition_summary(parts: Sequence[Any]) -> dict[str, Any]:
    """Per decomposed run (``coevo.app.table_extras.Decomposed``), ``"<strategy> seed <s>"`` -> each effect and the
    interaction and total as ``difference_text`` (paired per task, n tasks), the cells' scores beside."""
    out = {}
    for d in parts:
        row = {name: difference_text(e) for name, e in {**d.effects, "interaction": d.interaction,
                                                         "total": d.total}.items()}
        row["cells"] = {name: round(e.mean, 3) for name, e in d.cells.items()}
        row["n"] = d.n
        out[f"{d.strategy} seed {d.seed}"] = row
    return out


def table_extras(extras: Sequence[str], comparison: Any, archive: Any, rejections: Sequence[Any] = (),
                 round_tests: Sequence[Any] = (), decompositions: Sequence[Any] = ()) -> dict[str, Any]:
    """The extras a table asks for (``coevo.app.tables.EXTRAS``) by name, plus ``strategies``
    (``strategy_rows``) for every table."""
    out: dict[str, Any] = {"strategies": strategy_rows(comparison)}
    if "rejected_test" in extras:
        out["rejected_test"] = rejection_summary(rejections)
    if "ranks" in extras:
        out["ranks"] = rank_summary(comparison)
    if "best_reached" in extras:
        out["best_reached"] = best_summary(round_tests)
    if "decompose" in extras:
        out["decompose"] = decomposition_summary(decompositions)
    if "promoted_timr" in extras:
        out["promoted_timr"] = timr_summary(comparison, archive)
    return out


def _estimate(value: Any) -> Any:
    """An ``Estimate`` from its stored dict (None stays None)."""
    from coevo.evaluation.stats import Estimate

    return None if value is None else Estimate.model_validate(value)


def extras_lines(extras: dict[str, Any]) -> list[str]:
    """The table's extras (``table_extras``) as Markdown bullets, one per strategy or run, with every score
    and difference written as ``coevo.report.numbers`` writes them (mean [95 %] n)."""
    out = []
    for name, entry in extras.get("rejected_test", {}).items():
        out.append(f"- rejected candidates re-tested, {name}: {entry['right']} of {entry['decisions']} rejections "
                   f"right on test; candidate {score_text(_estimate(entry['candidate']))}, incumbent "
                   f"{score_text(_estimate(entry['incumbent']))}; candidate − incumbent "
                   f"{difference_text(_estimate(entry['difference']))}")
    for run, row in extras.get("decompose", {}).items():
        effects = "; ".join(f"{k} {v}" for k, v in row.items() if k not in ("cells", "n"))
        cells = ", ".join(f"{k} {v:.3f}" for k, v in row["cells"].items())
        out.append(f"- decompose, {run} (n = {row['n']} tasks): {effects}; cells {cells}")
    for name, entry in extras.get("ranks", {}).items():
        ranks = "; ".join(f"{k} {score_text(_estimate(v['score']))}, − H0 {difference_text(_estimate(v['minus_h0']))}"
                          for k, v in entry.items() if k != "h0")
        out.append(f"- routing, {name}: H0 under the final policy {score_text(_estimate(entry['h0']))}; {ranks}")
    for name, entry in extras.get("best_reached", {}).items():
        seeds = ", ".join(f"seed {s['seed']} {s['best']:.3f} at {_reached(s)} ({count(s['rollouts'])} rollouts)"
                          for s in entry["per_seed"])
        out.append(f"- best test mean@k reached, {name}: mean {entry['best_mean']:.3f} after "
                   f"{count(entry['rollouts_mean'])} rollouts on average ({seeds})")
    for name, entry in extras.get("promoted_timr", {}).items():
        out.append(f"- promoted pairs, {name}: {len(entry['promoted'])}, mean val TIMR {plain(entry['mean_timr'])}")
    return out


def _reached(seed: dict[str, Any]) -> str:
    """Where a seed's best pair was held: its round, or the final pair of a round the budget cut short."""
    if seed.get("final"):
        return f"round {seed['round']}'s final pair, the round the budget cut short"
    return f"round {seed['round']}"


def table_markdown(result: Any) -> str:
    """A table's results (``coevo.app.tables.TableResult``) as Markdown, for the docs: what ran (config
    name, seeds, protocol, commit, each invocation's wall and CPU seconds and their sums), the comparison
    table and the budget table (``coevo.report.compare``), the spend table under a rollout budget, then the
    extras (``extras_lines``)."""
    from coevo.report.compare import BUDGET_HEADERS, HEADERS, SPEND_HEADERS, budget_rows, spend_rows, table_rows
    from coevo.report.markup import markdown_table
    from coevo.report.terminal import protocol_text

    c = result.comparison
    seeds = sorted({r.seed for r in c.runs})
    pieces = [f"{i.commit or '?'}{' seeds ' + ','.join(map(str, i.seeds)) if i.seeds else ''}"
              f"{' strategies ' + ','.join(i.strategies) if i.strategies else ''}: "
              f"wall {i.wall_s:.0f} s, CPU {i.cpu_s:.0f} s" for i in result.invocations if not i.stopped]
    stopped = [i for i in result.invocations if i.stopped]
    if stopped:  # a table stopped and continued many times: summed here, each one in the results JSON
        commits = ", ".join(dict.fromkeys(i.commit or "?" for i in stopped))
        wall, cpu = sum(i.wall_s for i in stopped), sum(i.cpu_s for i in stopped)
        pieces.append(f"{len(stopped)} stopped before writing results (at {commits}; measured to their last "
                      f"record): wall {wall:.0f} s, CPU {cpu:.0f} s")
    runs = "; ".join(pieces)
    parts = [f"**{result.spec.title or result.spec.name}**: `OMP_NUM_THREADS=1 python benchmarks/tables.py "
             f"configs/tables/{result.spec.name}.toml`, seeds {', '.join(map(str, seeds))}, test {c.n_test} tasks, "
             f"reference {c.reference}, {protocol_text(c)}. Last commit {result.commit}; wall {result.wall_s:.0f} s "
             f"and CPU {result.cpu_s:.0f} s summed over {len(result.invocations)} invocation(s) ({runs}).",
             "", markdown_table(HEADERS, table_rows(c)), "", markdown_table(BUDGET_HEADERS, budget_rows(c))]
    if c.budget:
        parts += ["", markdown_table(SPEND_HEADERS, spend_rows(c))]
    lines = extras_lines(result.extras)
    if lines:
        parts += ["", *lines]
    return "\n".join(parts) + "\n"
