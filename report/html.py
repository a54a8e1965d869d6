"""The run report: an HTML page with PNG plots and the final harness diff against H0 (``coevo report``).
Every score is written with its 95 % interval and n (``coevo.report.numbers``)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from coevo.errors import InputError
from coevo.evaluation.parity import parity_note
from coevo.evaluation.results import paired_difference
from coevo.evaluation.stats import score_estimate
from coevo.harnesses import diff, load_harness
from coevo.records import BudgetRecord, Checkpoint, EvaluationRecord, GateDecision, HarnessRecord, RunRecord
from coevo.report.decompose import decompose_section, newest_effects
from coevo.report.engineer import engineer_section
from coevo.report.harness_s import harness_s_sections
from coevo.report.harness_use import harness_use_section
from coevo.report.numbers import difference_text, plain, score_text, stored_estimate, stored_score
from coevo.report.phases import phases_html
from coevo.report.plots import decompose_plot, lineage_plot, train_plot, validation_plot
from coevo.report.rsi import rsi_section
from coevo.report.stages import weight_stages
from coevo.storage import Archive


def _gate_row(d: Any) -> str:
    """One gate decision: b and c each with the interval of its per-task values (the stored pairs)."""
    b = score_estimate([p.b for p in d.pairs]) if d.pairs else None
    c = score_estimate([p.c for p in d.pairs]) if d.pairs else None
    return (f"<tr><td>{d.round}</td><td>{d.candidate_id[:12]}</td><td>{score_text(b) if b else plain(d.b)}</td>"
            f"<td>{score_text(c) if c else plain(d.c)}</td><td>{'accepted' if d.accepted else 'rejected'}</td>"
            f"<td>{html.escape(d.reason)}</td></tr>")


def _with_parity(score: str, aggregates: dict[str, Any]) -> str:
    """``score`` followed by the parity note of an evaluation's ``aggregates`` (``EvalResult``
    fields; ``coevo.evaluation.parity.parity_note``) when its harness transformed replies."""
    note = parity_note(aggregates.get("reply_transforms") or [], aggregates.get("suite_reward"))
    return f"{score} ({note})" if note else score


def _test_rows(state: dict[str, Any] | None, evals: list[Any]) -> str:
    """The test table's rows: the start and final pairs and their paired difference when the run's
    final ``state`` is given, else every stored test evaluation of the run."""
    test = (state or {}).get("test") or {}
    if test:
        start, final = test["start"], test["final"]
        rows = [(name, e.harness_id, e.checkpoint_id, _with_parity(score_text(e.estimate), vars(e)),
                 f"pass@{e.k} {score_text(e.pass_estimate)}",
                 plain(e.trivial_baseline)) for name, e in (("start pair (H0, W0)", start), ("final pair", final))]
        difference = paired_difference(start.per_task, final.per_task)
        rows.append(("final − start (paired)", "", "", difference_text(difference), "", ""))
        for r in sorted(k for k in test if k.startswith("rank")):  # Harness-S Table 5: router ranks, final W
            e = test[r]
            rows.append((f"final W, {r[:4].title()}-{r[4:]} routing", e.harness_id, e.checkpoint_id,
                         score_text(e.estimate), f"pass@{e.k} {score_text(e.pass_estimate)}",
                         plain(e.trivial_baseline)))
            rows.append((f"{r[:4].title()}-{r[4:]} − final pair (paired)", "", "",
                         difference_text(paired_difference(final.per_task, e.per_task)), "", ""))
    else:
        rows = [("", e.harness_id, e.checkpoint_id,
                 _with_parity(score_text(stored_estimate(e.aggregates)), e.aggregates),
                 plain(e.aggregates.get("pass_at_k")), plain(e.aggregates.get("trivial_baseline")))
                for e in evals if e.split == "test"]
    rows = [(name, harness[:12], checkpoint[:24], *rest) for name, harness, checkpoint, *rest in rows]
    return "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in row) + "</tr>" for row in rows)


def _stage_table(archive: Archive, run_id: str) -> str:
    """The run's weight stages (``coevo.report.stages``): val of the harness each trained under,
    before and after it, train reward, effective groups and the size of its change; "" without any."""
    stages = weight_stages(archive, run_id)
    if not stages:
        return ""
    rows = "".join(f"<tr><td>{s.checkpoint_before[:18]} → {s.checkpoint_after[:18]}</td>"
                   f"<td>{s.harness_id[:12]}</td>"
                   f"<td>{plain(s.val_before)} → {plain(s.val_after)} (n={_n(s)})</td>"
                   f"<td>{plain(s.train_reward)}</td>"
                   f"<td>{plain(s.effective_group_rate)} ({plain(s.contrast_rate)})</td><td>{_g(s.delta_norm)}</td>"
                   f"<td>{_g(s.total_delta_norm)}</td></tr>" for s in stages)
    return ("<h2>Weight stages</h2><p>val of the harness each stage trained under, before and after the stage (same "
            "tasks, same seeds); ||ΔW||: sum over LoRA layers of ||s·B·A||<sub>F</sub>, the stage's own change and "
            "the checkpoint's change from the base model.</p><table><tr><th>checkpoint</th><th>harness</th>"
            "<th>val before → after</th><th>train reward</th><th>effective groups (with reward contrast)</th>"
            f"<th>||ΔW|| stage</th><th>||ΔW|| total</th></tr>{rows}</table>")


def _budget_table(archive: Archive, run_id: str) -> str:
    """The run's spend per phase (``coevo.meta.budget``): one row per (round, phase, split) with its
    rollouts, policy tokens and meta-LLM calls, tokens and cost, then the total charged (measurement
    apart: test rollouts and the ``MEASURE`` phases', ``coevo.meta.budget``); "" when nothing was recorded."""
    from coevo.meta.budget import SPEND, totals

    records = archive.list(BudgetRecord, run_id=run_id)
    if not records:
        return ""
    groups: dict[tuple[int, str, str], list[Any]] = {}
    for r in records:
        groups.setdefault((r.round, r.phase, r.split), []).append(r)

    def cells(spent: dict[str, float]) -> str:
        return "".join(f"<td>{spent[k]:.4f}</td>" if k.endswith("_usd") else f"<td>{spent[k]:.0f}</td>"
                       for k in SPEND)

    rows = "".join(f"<tr><td>{rnd}</td><td>{html.escape(phase)}</td><td>{split or '–'}</td>"
                   f"{cells(totals(rs, include_test=True))}</tr>" for (rnd, phase, split), rs in groups.items())
    rows += f"<tr><th colspan=3>total charged (measurement apart)</th>{cells(totals(records))}</tr>"
    head = "".join(f"<th>{k.replace('_', ' ')}</th>" for k in SPEND)
    return (f"<h2>Budget per phase</h2><table><tr><th>round</th><th>phase</th><th>split</th>{head}</tr>{rows}"
            "</table>")


def _n(stage: Any) -> str:
    return str(len(stage.after.per_task)) if stage.after else "–"


def _g(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def write_report(run_id: str, db: str | Archive, out_dir: Path, state: dict[str, Any] | None = None) -> Path:
    """Write ``out_dir/index.html`` (+ PNGs) for run ``run_id`` from the archive at ``db`` (a path or URL,
    opened and closed here, or an open ``Archive``, left open); with the
    run's final ``state`` (``run_meta``'s result, or ``coevo.app.run.read_state``) the test table
    names the start and final pairs and prints their paired difference. A section appears only for
    a mechanism the run used (gate decisions, weight stages, phases, CoEvo-RSI, Harness-S, rescue,
    Harness-R1's engineer stages, test scores): a VACE run without rescue shows no rescue table. The
    train reward curve is the policy's: the engineer's own stages (``config["stage"]`` ``engineer_*``)
    are left out of it.

    Raises ``ValueError`` when the run is not in the archive.
    """
    if isinstance(db, Archive):
        return _write(run_id, db, db.url, out_dir, state)
    with Archive(db) as archive:
        return _write(run_id, archive, db, out_dir, state)


def _write(run_id: str, archive: Archive, db: str, out_dir: Path, state: dict[str, Any] | None) -> Path:
    run = archive.get(RunRecord, run_id)
    if run is None:
        raise InputError(f"no run {run_id!r} in {db}; `coevo archive list --db {db}` shows the runs")
    out_dir.mkdir(parents=True, exist_ok=True)
    decisions = sorted(archive.list(GateDecision, run_id=run_id), key=lambda d: (d.round, d.created_at))
    harnesses = [h for h in archive.run_harnesses(run_id) if h.origin != "sampling"]  # not their variants
    evals = [e for e in archive.list(EvaluationRecord, run_id=run_id) if e.aggregates]
    trivial_val = next((e.aggregates.get("trivial_baseline") for e in evals if e.split == "val"), None)
    trivial_train = next((e.aggregates.get("trivial_baseline") for e in evals if e.split == "train"), trivial_val)
    steps = [s for c in sorted(archive.list(Checkpoint, run_id=run_id), key=lambda c: c.created_at)
             if not str((c.config or {}).get("stage", "")).startswith("engineer")  # the policy's, not Harness-R1's
             for s in (c.metrics or {}).get("history", [])]
    accepted = [d.candidate_id for d in decisions if d.accepted]
    base = next((h for h in harnesses if h.origin == "base"), None)
    figures = []
    if decisions:
        figures.append(("Validation score per round",
                        validation_plot(decisions, trivial_val, out_dir / "validation.png")))
    if steps:
        figures.append(("Train reward per step", train_plot(steps, trivial_train, out_dir / "train_reward.png")))
    if harnesses:
        figures.append(("Harness lineage", lineage_plot(harnesses, set(accepted), out_dir / "lineage.png")))
    if (numbers := newest_effects(archive, run_id)) is not None:
        trivial_test = next((e.aggregates.get("trivial_baseline") for e in evals if e.split == "test"), None)
        figures.append(("Which lever did what (coevo decompose)",
                        decompose_plot(numbers.cells, trivial_test, out_dir / "decompose.png")))
    final_diff = ""
    if base is not None:
        incumbent = (state or {}).get("incumbent")  # gateless strategies (WHALE) accept without a gate decision
        final = archive.get(HarnessRecord, incumbent or (accepted[-1] if accepted else base.id)) or base
        final_diff = (diff(load_harness(base.spec), load_harness(final.spec))
                      or "(the final harness is H0: no candidate was accepted)")
    rows = "".join(_gate_row(d) for d in decisions)
    gates = ("<h2>Gate decisions</h2><table><tr><th>round</th><th>candidate</th><th>b (incumbent, val)</th>"
             f"<th>c (candidate, val)</th><th>decision</th><th>reason</th></tr>{rows}</table>" if rows else "")
    test_rows = _test_rows(state, evals)
    test = ("<h2>Test</h2><table><tr><th>pair</th><th>harness</th><th>checkpoint</th><th>mean@k reward [95 %] n</th>"
            f"<th>pass@k [95 %]</th><th>trivial</th></tr>{test_rows}</table>" if test_rows else "")
    budget = _budget_table(archive, run_id)
    harness_s = harness_s_sections(archive, run_id)
    imgs = "".join(f"<h2>{t}</h2><img src='{p.name}' alt='{t}'>" for t, p in figures)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>coevo run {run_id}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}\
td,th{{padding:4px 8px;border-bottom:1px solid #ddd}}
pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style></head><body>
<h1>coevo run <code>{run_id}</code></h1><p>strategy <b>{run.strategy}</b>, status {run.status},
env <code>{html.escape(str(run.config.get('env', {}).get('ref', '')))}</code>, \
policy <code>{html.escape(str(run.config.get('policy', '')))}</code>;
trivial-policy baseline on val: {stored_score(trivial_val)}</p>
<p>Scores: mean [95 % interval] n = tasks (Wilson for pass/fail, bootstrap for partial credit; a difference is
paired per task and significant at 95 % when its interval excludes 0).</p>
{gates}
{_stage_table(archive, run_id)}{budget}{phases_html(state)}{rsi_section(archive, run_id, out_dir)}{harness_s}
{harness_use_section(archive, run_id, out_dir)}{engineer_section(state, out_dir)}
{test}
{decompose_section(archive, run_id)}
{imgs}<h2>Final harness vs H0</h2><pre>{html.escape(final_diff)}</pre></body></html>"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path
