"""The CoEvo-RSI part of the run report (docs/papers.md, Figures 3 and 8): per round, each
editor's chosen base, each model proposal (selection or merge with alpha) with its val score and
TIMR, the promotion with its margin, and the harness × checkpoint TIMR matrix on val."""

from __future__ import annotations

import html
from pathlib import Path

from coevo.graphs.coevo_rsi.archive_view import pair_stats
from coevo.records import BaseChoice, ModelProposal, Promotion
from coevo.report.markup import html_row
from coevo.report.numbers import plain, score_text, stored_estimates
from coevo.report.plots import timr_matrix_plot
from coevo.storage import Archive


def rsi_section(archive: Archive, run_id: str, out_dir: Path) -> str:
    """The HTML of the CoEvo-RSI rounds (one table per round) and the TIMR matrix (``timr_matrix.png``
    in ``out_dir``); "" when the run has no promotion (not a CoEvo-RSI run)."""
    promotions = archive.list(Promotion, run_id=run_id)
    if not promotions:
        return ""
    choices = archive.list(BaseChoice, run_id=run_id)
    proposals = archive.list(ModelProposal, run_id=run_id)
    val = stored_estimates(archive, run_id, "val")
    order = {h.id: i for i, h in enumerate(archive.run_harnesses(run_id))}
    parts = []
    for p in promotions:
        bases = "".join(html_row(c.direction, f"#{c.index} {c.base_id[:12]}",
                                 "incumbent" if c.base_id == c.incumbent_id else "older archived harness",
                                 (c.child_id or "–")[:12], c.reason) for c in choices if c.round == p.round)
        models = "".join(html_row(m.harness_id[:12], m.kind,
                                  ", ".join(f"{a:.2f}·{s}" for s, a in zip(m.sources, m.alpha)),
                                  m.checkpoint_id or "–", score_text(val.get((m.harness_id, m.checkpoint_id or ""))),
                                  plain(m.timr), m.status + (f": {m.reason}" if m.status == "refused" else ""))
                         for m in proposals if m.round == p.round)
        compared = {"incumbent": p.incumbent, "best": p.best, "adapted": p.adapted}
        pairs = "".join(html_row(name, pair.harness_id[:12], pair.checkpoint_id,
                                 score_text(val.get((pair.harness_id, pair.checkpoint_id))), plain(pair.timr))
                        for name, pair in compared.items() if pair)
        parts.append(
            f"<h3>Round {p.round}</h3><p>Editors' bases</p><table><tr><th>brief</th><th>base (index in A&lt;t)</th>"
            f"<th>which</th><th>child</th><th>why</th></tr>{bases}</table><p>Model proposals (val)</p><table><tr>"
            f"<th>harness</th><th>kind</th><th>α · checkpoint</th><th>checkpoint</th><th>val [95 %] n</th><th>TIMR</th>"
            f"<th>status</th></tr>{models}</table><p>Promotion (δ_prom = {p.margin}): "
            f"<b>{'promoted' if p.accepted else 'incumbent kept'}</b> ({p.harness_id[:12]}, {p.checkpoint_id}) — "
            f"{html.escape(p.reason)}</p><table><tr><th>pair</th><th>harness</th><th>checkpoint</th>"
            f"<th>val [95 %] n</th><th>TIMR</th></tr>{pairs}</table>")
    stats = pair_stats(archive, run_id, "val")
    harnesses = sorted({h for h, _ in stats}, key=lambda h: order.get(h, len(order)))
    checkpoints = list(dict.fromkeys(c for (_, c) in sorted(stats, key=lambda k: k[1])))
    promoted = {(p.harness_id, p.checkpoint_id) for p in promotions}
    plot = timr_matrix_plot({k: s.timr for k, s in stats.items()}, harnesses, checkpoints, promoted,
                            out_dir / "timr_matrix.png")
    return ("<h2>CoEvo-RSI rounds</h2>" + "".join(parts)
            + f"<h2>TIMR per harness × checkpoint (val)</h2><img src='{plot.name}' alt='TIMR matrix'>")
