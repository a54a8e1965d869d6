"""The gate rule: H[t+1] = H'[t] if gate(b, c) else H[t] — VACE's validation gate (Algorithm 1, line 5).

Accept iff the candidate's validation score c beats the incumbent's b by more than
``gate.min_margin`` (a tie is rejected) and, when configured, a paired test on the per-task
outcomes agrees (one-sided paired bootstrap on reward differences, or exact McNemar on pass/fail
pairs, at level ``gate.alpha``). When m > 1 candidates reach the gate in one round on the same val
tasks, ``gate.multiplicity`` states the rule: ``bonferroni`` (the default) also requires each one's
one-sided paired test (``gate.test``, or the paired bootstrap when it is ``none``) at level
``alpha / m``, bounding the chance that any non-improving candidate is accepted by ``alpha``; the
best accepted c then wins. VACE's Alg. 1 gates one candidate per round (``meta.candidates = 1``).
Every decision is stored with b, c, the pairs and the reason; the reason states the paired
difference c − b with its 95 % interval over the val tasks (``coevo.evaluation.stats``). A rejected
candidate leaves ``sealed`` (its demonstrated train tasks return to the train set).
With ``gate.approve`` (``--approve-gate``) a person confirms each decision through a LangGraph
``interrupt`` (one question per candidate, answered by its interrupt id; ``coevo.app.run``).

This module holds the pure statistics (no graph, no archive); the ``gate`` node that applies them
each round is in ``coevo.nodes.loop``.
"""

from __future__ import annotations

import math
import random

from coevo.config import GateConfig
from coevo.evaluation.stats import difference_estimate
from coevo.observe.text import signed
from coevo.records import GatePair


def bootstrap_p(diffs: list[float], n: int = 2000, seed: int = 0) -> float:
    """One-sided paired bootstrap p-value for mean(diffs) ≤ 0 (diffs: candidate − incumbent per task)."""
    if not diffs:
        return 1.0
    rng = random.Random(seed)
    worse = sum(sum(rng.choice(diffs) for _ in diffs) <= 0 for _ in range(n))
    return worse / n


def mcnemar_p(b_only: int, c_only: int) -> float:
    """Exact one-sided McNemar p-value that the candidate wins ``c_only`` of the discordant pairs by chance."""
    n = b_only + c_only
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(c_only, n + 1)) / 2 ** n


def gate_difference(pairs: list[GatePair], seed: int = 0) -> str:
    """The paired difference over the per-task ``pairs`` with its 95 % interval
    (``coevo.evaluation.stats.difference_estimate``), e.g. ``c − b = +0.10 [−0.05, 0.25] over 10 tasks``."""
    est = difference_estimate([p.b for p in pairs], [p.c for p in pairs], seed=seed)
    return f"c − b = {signed(est.mean, plus=True)} [{signed(est.low)}, {signed(est.high)}] over {est.n} tasks"


def decide(b: float, c: float, pairs: list[GatePair], cfg: GateConfig, seed: int = 0,
           m: int = 1) -> tuple[bool, str]:
    """The gate rule on scores ``b`` (incumbent) and ``c`` (candidate) and the per-task ``pairs``,
    one of ``m`` candidates gated in the round (module doc: ``gate.multiplicity``). Returns
    ``(accepted, reason)``; with pairs, the reason ends with their paired difference and its 95 %
    interval (``gate_difference``)."""
    rule = cfg
    if m > 1 and cfg.multiplicity == "bonferroni":
        rule = cfg.model_copy(update={"test": "bootstrap" if cfg.test == "none" else cfg.test, "alpha": cfg.alpha / m})
    accepted, reason = _rule(b, c, pairs, rule, seed)
    if rule is not cfg:
        reason += f" (Bonferroni over {m} candidates: level {cfg.alpha:g}/{m})"
    return accepted, f"{reason}; {gate_difference(pairs, seed)}" if pairs else reason


def _rule(b: float, c: float, pairs: list[GatePair], cfg: GateConfig, seed: int) -> tuple[bool, str]:
    if not c > b + cfg.min_margin:
        margin = f" by more than {cfg.min_margin}" if cfg.min_margin else ""
        return False, f"c={c:.4f} does not beat b={b:.4f}{margin}"
    if cfg.test == "bootstrap":
        p = bootstrap_p([x.c - x.b for x in pairs], seed=seed)
    elif cfg.test == "mcnemar":
        b_only = sum(x.b_passed and not x.c_passed for x in pairs)
        p = mcnemar_p(b_only, sum(x.c_passed and not x.b_passed for x in pairs))
    else:
        return True, f"c={c:.4f} beats b={b:.4f}"
    if p >= cfg.alpha:
        return False, f"c={c:.4f} beats b={b:.4f} but the paired {cfg.test} test gives p={p:.3f} ≥ {cfg.alpha}"
    return True, f"c={c:.4f} beats b={b:.4f}, paired {cfg.test} p={p:.3f}"
