"""How a score and a difference are written, the same way in every table and page: the mean, its
95 % interval and n (``coevo.evaluation.stats.Estimate``), and for a difference whether it is
significant at 95 % (the interval excludes 0)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coevo.observe.text import count, magnitude, percent, plain, signed
from coevo.records import EvaluationRecord

__all__ = ["count", "difference_text", "magnitude", "percent", "plain", "score_text", "significance", "signed",
           "stored_estimate", "stored_estimates", "stored_score"]

if TYPE_CHECKING:  # SciPy (~1 s) loads only when an interval is computed
    from coevo.evaluation.stats import Estimate


def score_text(est: Estimate | None) -> str:
    """``0.300 [0.17, 0.47] n=40`` (``–`` for None)."""
    return "–" if est is None else str(est)


def stored_score(value: Any) -> str:
    """A number read from a stored record (an evaluation's aggregates) with three decimals (``plain``),
    ``–`` when it is missing or not a number."""
    return plain(value if isinstance(value, (int, float)) else None)


def significance(est: Estimate) -> str:
    """``significant at 95 %`` when the difference's interval excludes 0, else ``not significant at 95 %``
    (with n = 0: ``no paired tasks``)."""
    if est.n == 0:
        return "no paired tasks"
    return f"{'' if est.excludes_zero else 'not '}significant at {est.level:.0%}".replace("%", " %")


def difference_text(est: Estimate | None) -> str:
    """``+0.100 [-0.05, 0.25] n=40, not significant at 95 %`` (``–`` for None)."""
    if est is None:
        return "–"
    return f"{est.mean:+.3f} [{est.low:+.2f}, {est.high:+.2f}] n={est.n}, {significance(est)}"


def stored_estimates(archive: Any, run_id: str, split: str) -> dict[tuple[str, str], Estimate]:
    """The estimate of every finished ``split`` evaluation of run ``run_id`` in ``archive`` (a
    ``coevo.storage.Archive``; ``EvalResult.estimate`` of its stored per-task outcomes), keyed by
    ``(harness id, checkpoint id)``."""
    return {(e.harness_id, e.checkpoint_id): stored_estimate(e.aggregates)
            for e in archive.list(EvaluationRecord, run_id=run_id) if e.split == split and e.aggregates}


def stored_estimate(aggregates: dict[str, Any]) -> Estimate:
    """``EvalResult.estimate`` of an evaluation's stored ``aggregates`` (its ``per_task`` outcomes)."""
    from coevo.evaluation.results import TaskOutcome, outcome_estimate

    return outcome_estimate({t: TaskOutcome.model_validate(o) for t, o in aggregates.get("per_task", {}).items()})
