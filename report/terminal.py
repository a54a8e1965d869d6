"""The tables ``coevo`` prints on a terminal (rich ``Table``s; the CLI only prints them): a run's summary
(``summary_table``, ``coevo run``) and a comparison's scores, budgets and equal-spend table
(``compare_table``, ``budget_table``, ``spend_table``: ``coevo compare`` and the papers' tables,
``benchmarks/tables.py``), their rows and numbers written as the report writes them
(``coevo.report.compare``, ``coevo.report.numbers``)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from rich.markup import escape
from rich.table import Table

from coevo.evaluation.results import paired_difference
from coevo.report.compare import BUDGET_HEADERS, HEADERS, SPEND_HEADERS, budget_rows, spend_rows, table_rows
from coevo.report.numbers import difference_text, magnitude, percent, plain, score_text, stored_estimates

WEIGHT_COLUMNS = ("val H[t]: W[t] -> W[t+1]", "train reward", "effective groups (contrast)", "||dW||")
"""The weight stage's columns of the summary table (``weight_cells``)."""


def weight_cells(summary: Any) -> list[str]:
    """A round's weight-stage cells (``RoundSummary.weights``, a ``WeightStage``): val of the
    incumbent before -> after the stage (same tasks and seeds), the stage's train reward, its
    effective-group rate (and in brackets the rate of groups with any reward contrast), and the size
    of its LoRA change; dashes when the round trained nothing."""
    w = getattr(summary, "weights", None)
    if w is None:
        return ["–"] * len(WEIGHT_COLUMNS)
    groups = percent(w.effective_group_rate)
    if w.contrast_rate is not None:
        groups += f" ({percent(w.contrast_rate)})"
    return [f"{plain(w.val_before)} -> {plain(w.val_after)}", plain(w.train_reward), groups, magnitude(w.delta_norm)]


def summary_table(state: dict[str, Any], archive: Any = None) -> Table:
    """Rounds, incumbent val score, candidates with their val scores and fate, and the test scores of
    the start and final pairs (mean@k, and pass@k for the final pair) with their paired difference
    final − start — each score with its 95 %
    interval and n (``coevo.report.numbers``) beside the trivial-policy baseline, and, when the
    strategy trains, each round's weight stage (``weight_cells``) (``state`` as
    ``run_meta`` returns it: ``RoundSummary`` history, ``EvalSummary`` test scores). Val intervals
    come from the run's stored evaluations in ``archive`` (a ``coevo.storage.Archive``); without
    it, val scores are printed alone."""
    val = stored_estimates(archive, state["run_id"], "val") if archive is not None else {}

    def val_text(harness: str | None, checkpoint: str, score: float | None) -> str:
        est = val.get((harness or "", checkpoint))
        return score_text(est) if est is not None and score is not None else plain(score)

    table = Table(title=f"run {state['run_id']}: summary (score [95 % interval] n=tasks)")
    trained = any(getattr(h, "weights", None) is not None for h in state.get("history", []))
    for col in ("round", "incumbent", "incumbent val", "candidates (val, fate)", "trivial") + WEIGHT_COLUMNS * trained:
        table.add_column(escape(col))
    for h in state.get("history", []):
        cands = ", ".join(f"{(c.id or '-')[:8]} {val_text(c.id, h.checkpoint, c.val)} {c.fate}"
                          for c in h.candidates) or "none"
        table.add_row(str(h.round), h.incumbent[:12], val_text(h.incumbent, h.checkpoint, h.incumbent_val), cands,
                      plain(h.trivial), *weight_cells(h)[:len(WEIGHT_COLUMNS) * trained])
    test = state.get("test") or {}
    if test:
        start, final = test["start"], test["final"]
        diff = paired_difference(start.per_task, final.per_task)
        table.add_row("test", "start pair (H0, W0)", score_text(start.estimate), "", plain(start.trivial_baseline))
        table.add_row("test", "final pair", score_text(final.estimate),
                      f"pass@{final.k} {score_text(final.pass_estimate)} (start {score_text(start.pass_estimate)})",
                      plain(start.trivial_baseline))
        table.add_row("test", "final − start (paired)", difference_text(diff), "same tasks and seeds", "")
        for r in sorted(k for k in test if k.startswith("rank")):  # Harness-S: final W under router rank r
            routed = test[r]
            table.add_row("test", f"final W, {r[:4].title()}-{r[4:]} routing", score_text(routed.estimate),
                          f"vs final pair {difference_text(paired_difference(final.per_task, routed.per_task))}",
                          plain(start.trivial_baseline))
        table.caption = (f"test: final − start = {difference_text(diff)} "
                         "(paired bootstrap over test tasks; significant when the interval excludes 0)")
    return table



def rich_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """A rich ``Table`` titled ``title`` with ``headers`` as its columns and one row per item of ``rows``."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    return table


def protocol_text(comparison) -> str:
    """The comparison's protocol in words (``coevo.app.compare``, "Protocols")."""
    protocol = getattr(comparison, "protocol", "caps")
    if protocol == "budget":
        return f"at equal spend ({comparison.budget} rollouts)"
    if protocol == "updates":
        return f"at equal updates ({comparison.updates} weight updates)"
    rounds = (comparison.config.get("run") or {}).get("rounds")
    return f"at the configured caps ({rounds} rounds per run, each strategy's own phases)" if rounds else \
        "at the configured caps"


def compare_table(comparison) -> Table:
    """The comparison as a rich table (``coevo.report.compare.table_rows``)."""
    return rich_table(f"compare {comparison.id}: test, {comparison.n_test} tasks, reference {comparison.reference}, "
                      f"{protocol_text(comparison)}", HEADERS, table_rows(comparison))


def budget_table(comparison) -> Table:
    """The comparison's budgets as a rich table (``coevo.report.compare.budget_rows``)."""
    budget = comparison.matched_budget
    title = "budget per strategy (means over seeds)" + (f", matched at {budget:.0f} rollouts" if budget else "")
    return rich_table(title, BUDGET_HEADERS, budget_rows(comparison))


def spend_table(comparison) -> Table:
    """The equal-spend table of a comparison at a budget (``coevo.report.compare.spend_rows``)."""
    return rich_table(f"at equal spend: {comparison.budget} rollouts on train + val + search per run "
                      "(a phase that would overrun ends the run before it starts)", SPEND_HEADERS,
                      spend_rows(comparison))
