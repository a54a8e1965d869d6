"""How a number is written in a log line and a table, the same way everywhere (the report's
renderers, ``coevo.report.numbers``, build on these; the nodes' log lines use them directly, as
nodes sit below the report): a score with three decimals, a rate as a whole percentage, a
magnitude with significant digits, a signed difference with a true minus sign."""

from __future__ import annotations

from typing import Any


def plain(x: Any) -> str:
    """A score with three decimals, ``–`` for None."""
    return "–" if x is None else f"{x:.3f}"


def count(x: float | None) -> str:
    """A count such as rollouts: whole when it is (``830``), else to one decimal (a mean over seeds,
    ``811.5``), ``–`` for None."""
    if x is None:
        return "–"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def percent(x: float | None) -> str:
    """A rate in [0, 1] as a whole percentage (``0.38`` -> ``38%``), ``–`` for None."""
    return "–" if x is None else f"{x:.0%}"


def magnitude(x: Any, digits: int = 3) -> str:
    """A float with ``digits`` significant digits (``0.0123``, ``1.2e+03``), any other value as it is,
    ``–`` for None (a norm, a count per turn)."""
    return "–" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def signed(x: float, plus: bool = False) -> str:
    """``x`` to two decimals with a true minus sign (``−0.05``) and, with ``plus``, a ``+`` on a
    positive value; never ``−0.00``."""
    x = round(x, 2) + 0.0  # no "-0.00"
    return (f"{x:+.2f}" if plus else f"{x:.2f}").replace("-", "−")
