"""The comparison report (``coevo compare``): an HTML table of strategies with intervals and paired
differences to the reference, one PNG, and the comparison's numbers as JSON."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from coevo.report.caveats import separation_warnings
from coevo.report.markup import html_table
from coevo.report.numbers import difference_text, plain, score_text
from coevo.report.plots import compare_plot, rollout_plot


def gate_text(row: Any) -> str:
    """``3 / 5`` accepted / rejected at the gate; ``no gate (2 adopted)`` for an ungated strategy;
    ``–`` for one that does not refine."""
    if row.gated:
        return f"{row.accepted} / {row.rejected}"
    return f"no gate ({row.adopted} adopted)" if row.adopted else "–"


NO_SIGNAL = "no learning signal (no contrast, no update)"
"""The difference cell of two strategies whose weight stages had no reward contrast and made no update."""


def table_rows(comparison: Any) -> list[tuple[str, ...]]:
    """The comparison's rows as text cells: strategy, seeds, final test score [95 %] n, per-seed
    scores, start pair, difference to the reference, gate accepted / rejected, effective-group and
    reward-spread rates, trivial baseline (``coevo.app.compare.Comparison``). Where this strategy and
    the reference both had no learning signal (``StrategyRow.no_signal``) the difference cell says
    ``NO_SIGNAL`` instead of a difference that would read as a measured tie."""
    out = []
    silent = {r.strategy for r in comparison.rows if getattr(r, "no_signal", False)}
    for r in comparison.rows:
        vs = "(reference)" if r.strategy == comparison.reference else difference_text(r.vs_reference)
        if r.strategy in silent and (comparison.reference in silent or r.strategy == comparison.reference):
            vs = NO_SIGNAL if r.strategy != comparison.reference else "(reference) " + NO_SIGNAL
        out.append((r.strategy, str(len(r.seeds)), score_text(r.score), " ".join(f"{x:.2f}" for x in r.per_seed),
                    score_text(r.start), vs, gate_text(r), plain(r.effective_group_rate), plain(r.spread_rate),
                    plain(r.trivial)))
    return out


HEADERS = ("strategy", "seeds", "test mean@k [95 %] n=tasks", "per seed", "start pair (H0, W0)",
           "− reference, paired [95 %]", "gate accepted / rejected", "effective-group rate",
           "reward-spread rate", "trivial")


def budget_rows(comparison: Any) -> list[tuple[str, ...]]:
    """The budget table's rows (means over seeds, ``coevo.app.compare.StrategyRow``): strategy,
    rollouts on train + val, policy tokens and cost (USD), meta-LLM tokens and cost (USD), rounds
    with a val score, and the val score at the comparison's matched budget."""
    return [(r.strategy, f"{r.rollouts:.0f}", f"{r.policy_tokens:.0f}", f"{r.policy_cost_usd:.4f}",
             f"{r.meta_tokens:.0f}",
             f"{r.meta_cost_usd:.4f}", str(sum(p.val is not None for p in r.curve)), plain(r.val_at_budget))
            for r in comparison.rows]


BUDGET_HEADERS = ("strategy", "rollouts (train + val)", "policy tokens", "policy cost ($)", "meta-LLM tokens",
                  "meta-LLM cost ($)", "rounds validated", "val @ matched budget")


def phases_text(spent: dict[str, float]) -> str:
    """Rollouts per phase as ``train 32, stage_effect 12, validate 8`` (``–`` when nothing was spent)."""
    return ", ".join(f"{name} {n:.0f}" for name, n in spent.items()) or "–"


def spend_rows(comparison: Any) -> list[tuple[str, ...]]:
    """The equal-spend table's rows (a comparison at a budget N, ``coevo.app.compare``): strategy,
    rollouts spent (mean over seeds) of N, the spend by phase, the final pair's val score at the
    budget [95 %], the test mean@k [95 %] (the first table's), and how each seed's run ended; beside the
    spend, the rollouts of phases that measure and decide nothing (``coevo.meta.budget``: not charged)."""
    n = comparison.budget
    return [(r.strategy, f"{r.rollouts:.0f} / {n}", phases_text(r.spent_by_phase), phases_text(r.measured_by_phase),
             score_text(r.val_estimate), score_text(r.score), "; ".join(r.ended) or "–") for r in comparison.rows]


SPEND_HEADERS = ("strategy", "rollouts spent / budget", "spent by phase (rollouts)",
                 "measured, not charged (rollouts)", "val at the budget [95 %]", "test mean@k [95 %]",
                 "how each seed ended")


def write_compare_report(comparison: Any, out_dir: Path) -> Path:
    """Write ``out_dir/index.html``, ``out_dir/compare.png`` (test scores), ``out_dir/rollouts.png``
    (score vs rollouts) and ``out_dir/comparison.json`` for a ``coevo.app.compare.Comparison``, with
    what keeps it from separating its strategies above the table (``coevo.report.power``); returns
    the HTML path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    trivial = next((r.trivial for r in comparison.rows if r.trivial is not None), None)
    png = compare_plot(comparison.rows, trivial, out_dir / "compare.png")
    curves = rollout_plot(comparison, out_dir / "rollouts.png")
    budget = ("no strategy validated anything, so there is no matched budget" if comparison.matched_budget is None
              else f"matched budget: {comparison.matched_budget:.0f} rollouts, the smallest total among the "
              "strategies with a curve; each strategy's val score there is its incumbent's at the last round it "
              "had reached within that budget")
    (out_dir / "comparison.json").write_text(comparison.model_dump_json(indent=1))
    table = html_table(HEADERS, table_rows(comparison))
    warnings = "".join(f"<p><b>warning:</b> {html.escape(w)}</p>" for w in separation_warnings(comparison))
    budget_table = html_table(BUDGET_HEADERS, budget_rows(comparison))
    spend = "" if not comparison.budget else (
        f"<h2>At equal spend: {comparison.budget} rollouts</h2><p>Every run could spend {comparison.budget} "
        "rollouts on train + val + search; a phase whose declared size would take it past that ended the run "
        "before it started, then its final test ran. Val at the budget is the final pair's val score "
        "(measured outside the budget).</p>"
        + html_table(SPEND_HEADERS, spend_rows(comparison)))
    warned = "".join(f"<li>{html.escape(w)}</li>" for w in comparison.warnings)
    warned = f"<h2>Warnings</h2><ul>{warned}</ul>" if warned else ""
    runs = "".join(f"<tr><td>{html.escape(r.strategy)}</td><td>{r.seed}</td><td><code>{html.escape(r.run_id)}</code>"
                   f"</td><td>{plain(r.final.score if r.final else None)}</td><td>{r.source}</td>"
                   f"<td>{'–' if r.wall_s is None else f'{r.wall_s:.0f}'}</td></tr>" for r in comparison.runs)
    cfg = comparison.config.get("run", {})
    env, policy = html.escape(str(cfg.get("env", {}).get("ref", ""))), html.escape(str(cfg.get("policy", "")))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>coevo compare {comparison.id}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}\
td,th{{padding:4px 8px;border-bottom:1px solid #ddd}}</style>
</head><body><h1>coevo compare <code>{comparison.id}</code></h1>
<p>env <code>{env}</code>, policy <code>{policy}</code>, {cfg.get('rounds')} round(s), {comparison.n_test} test tasks,
reference <b>{comparison.reference}</b>. Test scores (mean@k) are the final pair's mean reward over seeds with a 95 %
interval over test tasks (each task averaged over seeds); the difference to the reference is paired per (seed, task) and
significant at 95 % when its interval excludes 0.</p>
{warnings}{table}<img src="{png.name}" alt="test score per strategy">
{spend}{warned}
<h2>Score vs rollouts</h2><p>Cumulative rollouts on train and val (test rollouts only measure) at the end of each
round against the incumbent's val score, means over seeds; the final pair's test score at its total. {budget}.</p>
{budget_table}
<img src="{curves.name}" alt="score vs rollouts per strategy">
<h2>Runs</h2><table><tr><th>strategy</th><th>seed</th><th>run id</th><th>final test score</th><th>source</th>\
<th>wall (s)</th></tr>{runs}</table>
</body></html>"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path


