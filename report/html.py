"""The run report: an HTML page with PNG plots and the final harness diff against H0 (``coevo report``)."""

from __future__ import annotations

import html
from pathlib import Path

from coevo.harnesses import diff, load_harness
from coevo.report.plots import lineage_plot, train_plot, validation_plot
from coevo.storage import Archive


def write_report(run_id: str, db: str, out_dir: Path) -> Path:
    """Write ``out_dir/index.html`` (+ PNGs) for run ``run_id`` from the archive at ``db``.

    Raises ``ValueError`` when the run is not in the archive.
    """
    archive = Archive(db)
    run = archive.get_run(run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {db}; `coevo archive list --db {db}` shows the runs")
    out_dir.mkdir(parents=True, exist_ok=True)
    decisions = sorted(archive.list_gate_decisions(run_id), key=lambda d: (d.round, d.created_at))
    harnesses = archive.list_harnesses(run_id)
    evals = [e for e in archive.list_evaluations(run_id) if e.aggregates]
    trivial_val = next((e.aggregates.get("trivial_baseline") for e in evals if e.split == "val"), None)
    trivial_train = next((e.aggregates.get("trivial_baseline") for e in evals if e.split == "train"), trivial_val)
    steps = [s for c in sorted(archive.list_checkpoints(run_id), key=lambda c: c.created_at)
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
    final_diff = ""
    if base is not None:
        final = archive.get_harness(accepted[-1]) if accepted else base
        final_diff = (diff(load_harness(base.spec), load_harness(final.spec))
                      or "(the final harness is H0: no candidate was accepted)")
    tests = {e.harness_id: e.aggregates for e in evals if e.split == "test"}
    rows = "".join(f"<tr><td>{d.round}</td><td>{d.candidate_id[:12]}</td><td>{d.b:.3f}</td><td>{d.c:.3f}</td>"
                   f"<td>{'accepted' if d.accepted else 'rejected'}</td><td>{html.escape(d.reason)}</td></tr>"
                   for d in decisions)
    test_rows = "".join(f"<tr><td>{h[:12]}</td><td>{a.get('mean_reward', 0):.3f}</td>"
                        f"<td>{a.get('pass_at_k', 0):.3f}</td>"
                        f"<td>{a.get('trivial_baseline')}</td></tr>" for h, a in tests.items())
    imgs = "".join(f"<h2>{t}</h2><img src='{p.name}' alt='{t}'>" for t, p in figures)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>coevo run {run_id}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}\
td,th{{padding:4px 8px;border-bottom:1px solid #ddd}}
pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style></head><body>
<h1>coevo run <code>{run_id}</code></h1><p>strategy <b>{run.strategy}</b>, status {run.status},
env <code>{html.escape(str(run.config.get('env', {}).get('ref', '')))}</code>, \
policy <code>{html.escape(str(run.config.get('policy', '')))}</code>;
trivial-policy baseline on val: {trivial_val}</p>
<h2>Gate decisions</h2><table><tr><th>round</th><th>candidate</th><th>b (incumbent)</th><th>c (candidate)</th>\
<th>decision</th><th>reason</th></tr>{rows}</table>
<h2>Test</h2><table><tr><th>harness</th><th>mean reward</th><th>pass@k</th><th>trivial</th></tr>{test_rows}</table>
{imgs}<h2>Final harness vs H0</h2><pre>{html.escape(final_diff)}</pre></body></html>"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path
