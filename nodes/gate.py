"""``gate``: H[t+1] = H'[t] if gate(b, c) else H[t] — VACE's validation gate.

Accept iff the candidate's validation score c beats the incumbent's b by more than
``gate.min_margin`` (a tie is rejected) and, when configured, a paired test on the per-task
outcomes agrees (one-sided paired bootstrap on reward differences, or exact McNemar on pass/fail
pairs, at level ``gate.alpha``). When m > 1 candidates reach the gate in one round on the same val
tasks, ``gate.multiplicity`` states the rule: ``bonferroni`` (the default) also requires each one's
one-sided paired test (``gate.test``, or the paired bootstrap when it is ``none``) at level
``alpha / m``, bounding the chance that any non-improving candidate is accepted by ``alpha``; the
best accepted c then wins. VACE's Alg. 1 gates one candidate per round (``meta.candidates = 1``).
Every decision is stored with b, c, the pairs and the reason; the reason states the paired
difference c − b with its 95 % interval over the val tasks. A rejected candidate leaves ``sealed``
(its demonstrated train tasks return to the train set).
With ``gate.approve`` (``--approve-gate``) a person confirms each decision through a LangGraph
``interrupt`` (one question per candidate, answered by its interrupt id; ``coevo.app.run``).
"""

from __future__ import annotations

import math
import random

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from coevo.config import GateConfig
from coevo.evaluation.stats import difference_estimate
from coevo.meta.context import MetaContext
from coevo.meta.sealing import unseal
from coevo.meta.state import MetaState
from coevo.observe.text import signed
from coevo.records import GateDecision, GatePair


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


def gate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Decide each validated candidate against the incumbent (``decide``, with the multiplicity rule
    over the round's m candidates); the best accepted one becomes H[t+1]. Every decision is stored
    (``MetaContext.record_gate``); the round's accepted and rejected counts and best c − b go to the
    tracker (``gate/...``); a rejected candidate leaves ``sealed``."""
    ctx = runtime.context
    val, inc_id, rnd = state.get("validation", {}), state["incumbent"], state.get("round", 0)
    decisions: list[GateDecision] = []
    best: GateDecision | None = None
    # one decision per distinct child harness: two candidates (samples of directions) that made the
    # same edit name the same harness, validated once
    children = dict.fromkeys(c.spec_id for c in state.get("checked", []) if c.status == "checked" and c.spec_id in val)
    for spec_id in children:
        incumbent, candidate = val[inc_id], val[spec_id or ""]
        b, c = incumbent.score, candidate.score
        pairs = GatePair.pairs(incumbent, candidate)
        accepted, reason = decide(b, c, pairs, ctx.config.gate, ctx.config.seed, len(children))
        if ctx.config.gate.approve:
            # one interrupt per candidate, in order: LangGraph ids each by its place, and a resume
            # answers exactly the ids it names (an unanswered question stays pending)
            answer = interrupt({"round": rnd, "incumbent": inc_id, "candidate": candidate.harness_id, "b": b, "c": c,
                                "gate_says": accepted, "reason": reason, "question": "accept this candidate? (yes/no)"})
            human = str(answer).strip().lower() in ("y", "yes", "accept")
            reason, accepted = f"{reason}; person {'accepted' if human else 'rejected'}", human
        decision = GateDecision(id=f"{ctx.run_id}-r{rnd}-{candidate.harness_id[:12]}", run_id=ctx.run_id, round=rnd,
                                incumbent_id=inc_id, candidate_id=candidate.harness_id, b=b, c=c, accepted=accepted,
                                reason=reason, pairs=pairs)
        decisions.append(decision)
        if accepted and (best is None or c > best.c):
            best = decision
    ctx.record_gate(decisions)
    if decisions:
        ctx.track({"gate/accepted": sum(d.accepted for d in decisions),
                   "gate/rejected": sum(not d.accepted for d in decisions),
                   "gate/best_c_minus_b": max(d.c - d.b for d in decisions)}, rnd)
    for d in decisions:
        verdict = "ACCEPTED" if d is best else "rejected"
        ctx.log("gate", f"round {rnd}: {d.candidate_id[:12]} {verdict}: {d.reason}")
    if not decisions:
        ctx.log("gate", f"round {rnd}: no checked candidate; incumbent kept")
    new = best.candidate_id if best else inc_id
    return {"decisions": decisions, "incumbent": new,
            "sealed": unseal([d.candidate_id for d in decisions if not d.accepted], state)}

