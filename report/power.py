"""Can a comparison separate its strategies at all? The warnings ``coevo compare`` prints above its
table: a comparison run on a budget that allows one proposal per run and ten
test tasks prints intervals like any other, and a reader takes a tie for a finding (the complaint of
gepa#375). Each warning says which number is too small, what it costs, and the fix.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from coevo.evaluation.stats import LEVEL

MIN_DIFFERENCE = 0.10
"""A comparison whose test split cannot resolve a paired difference this large (best case) is warned about."""


def separable_difference(n: int, level: float = LEVEL) -> float:
    """The smallest mean paired difference over ``n`` tasks that a percentile-bootstrap interval at
    ``level`` can tell from 0, in the best case: every per-task difference 0 or +1, none negative. A
    resample of ``n`` tasks then draws only zeros with probability (1 − d)^n, and the interval's lower
    end is above 0 only when that is below (1 − level)/2, so d > 1 − ((1 − level)/2)^(1/n): 0.31 for
    n = 10, 0.088 for n = 40, 0.036 for n = 100. 1.0 for n = 0. Any task that gets worse raises it."""
    return 1.0 if n < 1 else 1 - ((1 - level) / 2) ** (1 / n)


def tasks_needed(difference: float, level: float = LEVEL) -> int:
    """The fewest tasks whose ``separable_difference`` is at most ``difference`` (in (0, 1))."""
    return math.ceil(math.log((1 - level) / 2) / math.log(1 - difference))


def separation_warnings(comparison: Any) -> list[str]:
    """What keeps ``comparison`` (a ``coevo.app.compare.Comparison``) from separating its strategies:
    too few test tasks for a difference of ``MIN_DIFFERENCE`` (``separable_difference``), paired
    intervals wider than every difference measured, at most one harness proposal reaching a gate
    per run, one seed. Empty when none applies."""
    out = []
    n = comparison.n_test
    smallest = separable_difference(n)
    if smallest > MIN_DIFFERENCE:
        out.append(f"{n} test tasks: no paired difference below {smallest:.2f} can be told from 0 at 95 %, even "
                   f"when no task gets worse; raise env.n_test (≥ {tasks_needed(MIN_DIFFERENCE)} tasks resolve "
                   f"{MIN_DIFFERENCE:.2f})")
    diffs = [r.vs_reference for r in comparison.rows if r.vs_reference is not None and r.vs_reference.n]
    if diffs and not any(d.excludes_zero for d in diffs):
        width = statistics.median(d.half_width for d in diffs)
        largest = max(abs(d.mean) for d in diffs)
        if width > largest:
            out.append(f"no strategy differs from {comparison.reference} at 95 %: the paired intervals are "
                       f"±{width:.2f} wide (median), wider than any difference measured ({largest:.2f} at most), so "
                       "the table cannot rank these strategies")
    refining = [r for r in comparison.rows if r.gated and r.seeds and r.strategy in _refines(comparison)]
    if refining:
        most = max((r.accepted + r.rejected) / len(r.seeds) for r in refining)
        if most <= 1:
            out.append(f"at most {most:.0f} harness proposal per run reached a gate "
                       f"({', '.join(r.strategy for r in refining)}): one try cannot show what the harness lever "
                       "is worth; raise rounds or meta.candidates (or the budget)")
    seeds = max((len(r.seeds) for r in comparison.rows), default=0)
    if seeds == 1:
        out.append("one seed per strategy: how much a strategy's score moves from seed to seed is unknown, so a "
                   "difference may be one training run's luck; use --seeds 3 or more")
    return out


def _refines(comparison: Any) -> set[str]:
    """The strategies of ``comparison`` that propose harnesses (their strategy row names an editor or
    proposer role)."""
    from coevo.strategies import STRATEGIES

    return {r.strategy for r in comparison.rows if r.strategy in STRATEGIES
            and {"editor", "proposer"} & set(STRATEGIES[r.strategy].roles)}
