"""Can a comparison separate its strategies at all? The numbers behind the warnings ``coevo compare``
prints above its table (``coevo.report.caveats.separation_warnings``): a comparison run on a budget that
allows one proposal per run and ten test tasks prints intervals like any other, and a reader takes a tie
for a finding (the complaint of gepa#375): the smallest paired difference n tasks can separate, and the
tasks a difference needs.
"""

from __future__ import annotations

import math

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
