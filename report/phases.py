"""The phases of an alternating run (WHALE §4, FST, stagewise, PACE) as the report shows them:
each phase's kind, length and why it stopped, and the harness accepted after every search
iteration — an HTML section for ``coevo report`` and a rich table for ``coevo run``'s summary."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from coevo.report.markup import html_table


def phase_rows(state: dict[str, Any] | None) -> list[list[str]]:
    """One row per finished phase: index, cycle, kind, length with its unit, steps, the harness
    (and checkpoint) it ended with, the fields it could edit and its stopping reason."""
    rows = []
    for p in (state or {}).get("phases", []):
        fields = "any" if p.fields is None else ", ".join(p.fields)
        rows.append([str(p.index), str(p.cycle), p.kind, f"{p.length:g} {p.unit}", str(p.steps), p.harness_id[:12],
                     p.checkpoint, fields if p.kind != "weights" else "–", p.stop_reason])
    return rows


def iteration_rows(state: dict[str, Any] | None) -> list[list[str]]:
    """One row per harness-search iteration: phase, iteration, the accepted harness and its score
    (train; PACE: val), whether it changed, candidates evaluated and rejected."""
    return [[str(s.phase), str(s.iteration), s.accepted[:12], f"{s.score:.3f}", "yes" if s.changed else "no",
             str(len(s.candidates)), str(len(s.rejected))] for s in (state or {}).get("search_iterations", [])]


PHASE_HEAD = ["phase", "cycle", "kind", "length", "steps", "harness", "checkpoint", "fields", "stopping reason"]
ITERATION_HEAD = ["phase", "iteration", "accepted", "score", "changed", "candidates", "rejected"]


def phases_html(state: dict[str, Any] | None) -> str:
    """The report's "Phases" and "Accepted harness per iteration" sections ("" for runs without phases)."""
    if not (state or {}).get("phases"):
        return ""
    return (f"<h2>Phases</h2>{html_table(PHASE_HEAD, phase_rows(state))}"
            f"<h2>Accepted harness per iteration</h2>{html_table(ITERATION_HEAD, iteration_rows(state))}")


def phases_tables(state: dict[str, Any]) -> list[Table]:
    """The same two tables for the terminal ([] for runs without phases)."""
    if not state.get("phases"):
        return []
    out = []
    for title, head, rows in (("phases", PHASE_HEAD, phase_rows(state)),
                              ("accepted harness per iteration", ITERATION_HEAD, iteration_rows(state))):
        table = Table(title=title)
        for h in head:
            table.add_column(h)
        for row in rows:
            table.add_row(*row)
        out.append(table)
    return out
