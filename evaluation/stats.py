"""Uncertainty for every score coevo prints: n and a 95 % interval beside each number.

A score over tasks is a mean of per-task values in [0, 1]. When every value is 0 or 1 (pass
rates with k = 1) the interval is Wilson's score interval for a binomial proportion (SciPy's
``binomtest(...).proportion_ci(method="wilson")``); otherwise (partial credit, k > 1) it is a
percentile bootstrap over tasks. A paired difference (candidate − incumbent on the same tasks and
seeds, VACE's gate; strategy vs strategy across seeds in ``coevo compare``) gets a percentile
bootstrap interval of the mean per-task difference. Bootstrap resamples use a fixed seed, so a
report printed twice shows the same interval.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
from pydantic import BaseModel

LEVEL = 0.95
RESAMPLES = 2000


class Estimate(BaseModel):
    """A mean with its ``level`` interval [``low``, ``high``] over ``n`` units (tasks or seeds).

    ``method`` is ``wilson`` (binary outcomes), ``bootstrap`` (percentile, over units) or
    ``none`` (n < 2 for a bootstrap, or n = 0: the interval is the point itself, or [0, 1]).
    """

    mean: float
    low: float
    high: float
    n: int
    method: Literal["wilson", "bootstrap", "none"] = "none"
    level: float = LEVEL

    @property
    def half_width(self) -> float:
        """Half the interval's width (same units as ``mean``)."""
        return (self.high - self.low) / 2

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0 (for differences: significant at ``level``)."""
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.2f}, {self.high:.2f}] n={self.n}"


def _bootstrap(values: np.ndarray, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (shape (n,))."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(RESAMPLES, len(values)))].mean(axis=1)
    alpha = (1 - LEVEL) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def score_estimate(values: Sequence[float], seed: int = 0) -> Estimate:
    """The mean of per-unit scores ``values`` (each in [0, 1]) with a 95 % interval.

    All values 0 or 1: Wilson score interval (exact for a pass rate over n tasks). Otherwise a
    percentile bootstrap over units (``RESAMPLES`` resamples, ``seed``). With no values: mean 0,
    interval [0, 1], n = 0. Raises ``ValueError`` for a value outside [0, 1].
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return Estimate(mean=0.0, low=0.0, high=1.0, n=0)
    if (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"scores must lie in [0, 1]; got min {arr.min():.3f}, max {arr.max():.3f}")
    mean = float(arr.mean())
    if np.isin(arr, (0.0, 1.0)).all():
        from scipy.stats import binomtest  # on first use: importing scipy.stats cost every `coevo` command ~1 s

        ci = binomtest(int(arr.sum()), int(arr.size)).proportion_ci(confidence_level=LEVEL, method="wilson")
        return Estimate(mean=mean, low=float(ci.low), high=float(ci.high), n=int(arr.size), method="wilson")
    if arr.size < 2:
        return Estimate(mean=mean, low=mean, high=mean, n=1)
    low, high = _bootstrap(arr, seed)
    return Estimate(mean=mean, low=low, high=high, n=int(arr.size), method="bootstrap")


def difference_estimate(a: Sequence[float], b: Sequence[float], seed: int = 0) -> Estimate:
    """Mean paired difference ``b - a`` (per unit: the same task, or the same seed) with a
    percentile-bootstrap 95 % interval over units.

    Raises ``ValueError`` when ``a`` and ``b`` differ in length. With fewer than 2 pairs the
    interval is the point itself (``method="none"``).
    """
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths; got {len(a)} and {len(b)}")
    diffs = np.asarray(list(b), dtype=float) - np.asarray(list(a), dtype=float)
    if diffs.size == 0:
        return Estimate(mean=0.0, low=0.0, high=0.0, n=0)
    mean = float(diffs.mean())
    if diffs.size < 2 or np.all(diffs == diffs[0]):
        return Estimate(mean=mean, low=mean, high=mean, n=int(diffs.size),
                        method="none" if diffs.size < 2 else "bootstrap")
    low, high = _bootstrap(diffs, seed)
    return Estimate(mean=mean, low=low, high=high, n=int(diffs.size), method="bootstrap")
