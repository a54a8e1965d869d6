"""Which lever did what: the 2×2 of (H0, H_final) × (W0, W_final) on the same tasks and seeds.

A co-evolution run changes the harness and the weights together, so the start-to-final gain alone
cannot say which change earned it. Evaluating the two harnesses under the two checkpoints separates
them (a two-factor factorial design): the **harness effect** is H_final − H0 under one fixed set of
weights, the **weight effect** W_final − W0 under one fixed harness, and the **interaction** how much
the harness effect under W_final differs from the one under W0 (equivalently, the weight effect
under H_final minus the one under H0). Every effect is a paired per-task difference with a
percentile-bootstrap 95 % interval over tasks (``coevo.evaluation.stats.difference_estimate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from coevo.evaluation.results import Metric, TaskOutcome, outcome_estimate, paired_difference
from coevo.evaluation.stats import Estimate, difference_estimate

CELLS: dict[str, tuple[str, str]] = {"h0_w0": ("start", "start"), "h0_wf": ("start", "final"),
                                     "hf_w0": ("final", "start"), "hf_wf": ("final", "final")}
"""The four cells by name -> (which harness, which checkpoint): ``start`` is H0 / W0, ``final`` H_final / W_final."""

EFFECTS: dict[str, tuple[str, str, str]] = {
    "harness_under_w0": ("hf_w0", "h0_w0", "harness effect under W0: H_final×W0 − H0×W0"),
    "harness_under_wf": ("hf_wf", "h0_wf", "harness effect under W_final: H_final×W_final − H0×W_final"),
    "weights_under_h0": ("h0_wf", "h0_w0", "weight effect under H0: H0×W_final − H0×W0"),
    "weights_under_hf": ("hf_wf", "hf_w0", "weight effect under H_final: H_final×W_final − H_final×W0"),
}
"""Each simple effect by name -> (minuend cell, subtrahend cell, what it is)."""


@dataclass(frozen=True)
class Effects:
    """The decomposition's numbers: ``cells`` (each cell's score with n and its 95 % interval),
    ``effects`` (``EFFECTS``' paired differences), ``interaction`` ((H_final×W_final − H0×W_final) −
    (H_final×W0 − H0×W0), paired per task) and ``total`` (H_final×W_final − H0×W0), all over ``n``
    tasks the four cells share, in the units of ``metric`` (mean reward per task by default)."""

    cells: dict[str, Estimate]
    effects: dict[str, Estimate]
    interaction: Estimate
    total: Estimate
    n: int


def effects(per_task: Mapping[str, Mapping[str, TaskOutcome]], metric: Metric = "reward") -> Effects:
    """The ``Effects`` of four evaluations' per-task outcomes, ``per_task[cell][task_id]``, cells named
    as in ``CELLS``; only the tasks all four hold count (in ``h0_w0``'s order).

    Raises ``ValueError`` naming the cells missing from ``per_task`` or when no task is shared."""
    if missing := [c for c in CELLS if c not in per_task]:
        raise ValueError(f"the decomposition needs all four cells; missing {missing}")
    common = [t for t in per_task["h0_w0"] if all(t in per_task[c] for c in CELLS)]
    if not common:
        raise ValueError("the four evaluations share no task: they must run on the same tasks")
    cells = {c: {t: per_task[c][t] for t in common} for c in CELLS}
    value = {c: [cells[c][t].value(metric) for t in common] for c in CELLS}
    under_w0 = [a - b for a, b in zip(value["hf_w0"], value["h0_w0"], strict=True)]
    under_wf = [a - b for a, b in zip(value["hf_wf"], value["h0_wf"], strict=True)]
    return Effects(cells={c: outcome_estimate(cells[c], metric) for c in CELLS},
                   effects={name: paired_difference(cells[b], cells[a], metric) for name, (a, b, _) in EFFECTS.items()},
                   interaction=difference_estimate(under_w0, under_wf),
                   total=paired_difference(cells["h0_w0"], cells["hf_wf"], metric), n=len(common))
