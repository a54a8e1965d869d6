"""How a number is written in a log line and a table, the same way everywhere (the report's
renderers and the nodes' log lines): a score with three decimals, a rate as a whole percentage."""

from __future__ import annotations

from typing import Any


def plain(x: Any) -> str:
    """A score with three decimals, ``–`` for None."""
    return "–" if x is None else f"{x:.3f}"


def percent(x: float | None) -> str:
    """A rate in [0, 1] as a whole percentage (``0.38`` -> ``38%``), ``–`` for None."""
    return "–" if x is None else f"{x:.0%}"
