"""Table markup shared by the reports: HTML (the run and compare reports; every cell and header escaped) and
Markdown (the papers' tables, ``coevo.report.tables.table_markdown``)."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence


def html_row(*cells: Any) -> str:
    """One ``<tr>`` of ``<td>`` ``cells``, each ``str()``-ed and escaped."""
    return "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


def html_table(headers: Sequence[str], rows: Iterable[Iterable[Any]]) -> str:
    """A ``<table>`` with one header row (``headers``, escaped) and one ``html_row`` per row."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>" + "".join(html_row(*r) for r in rows) + "</table>"


def markdown_table(headers: Sequence[str], rows: Iterable[Iterable[Any]]) -> str:
    """A Markdown (GitHub) table: one header row, a rule, one line per row; each cell ``str()``-ed with its
    ``|`` escaped and line breaks as spaces."""
    def line(cells: Iterable[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)])
