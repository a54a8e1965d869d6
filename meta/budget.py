"""Budget accounting: what each phase of a run spent, for comparisons at equal rollout budgets
(WHALE §6 matches cumulative budgets; VACE and Harness-S report rollouts per method).

A *phase* is one run of one meta-graph node in one round (the weight stage ``train``, the
refinement steps ``curate``/``edit``/``check``, ``validate``, ``gate``, an evaluation such as
``stage_effect`` or ``final_test``, and whatever nodes a strategy adds). Nodes do nothing for it:
the graph ``meta_graph`` returns (``coevo.nodes.loop.PhasedGraph``) wraps every node it is
given (``phased``) so the node runs with its ``PhaseKey``
(the state's ``round``, the node's name) as the current phase, and the ``MetaContext`` services
that spend — ``evaluate`` (rollouts), ``train`` (the weight stage's rollouts), ``store_calls``
(meta-LLM calls) — store one ``BudgetRecord`` each under it (``eval_budget``, ``stage_budget``,
``calls_budget``); Harness-R1's engineer stage (``train_engineer``) accounts its target reruns and
engineer replies through ``MetaContext.account`` (``engineer_budget``). A record's id names what was
paid for, so an evaluation reused by a later phase, or redone by a resume, is counted once, where it
first ran.

``score_curve`` reads a run's records back as cumulative spend at the end of each round beside the
round's incumbent val score; ``mean_curve``, ``matched_budget`` and ``score_at`` average such
curves over seeds and read each strategy's score at a matched budget (``coevo compare``'s "score
vs rollouts").

**A rollout cap** (``RunConfig.budget`` = N rollouts on train + val + search; ``coevo compare
--budget``): every spending call declares its size before it starts — an evaluation ``tasks x k``
(0 when the same evaluation was paid for before), a weight stage its most rollouts
(``coevo.training.kinds.stage_rollouts``), an engineer stage its most reruns
(``coevo.training.harness_r1.engineer.grpo_rollouts``) — and ``MetaContext.reserve`` raises ``BudgetExhausted``
when that would take the run past N. The phase (the node) that made the call ends there, having
spent only what fit (an earlier call of the same node stays counted), and so does the run: ``phased``
turns the exception into the state's ``budget_stop``, every later node but ``final_test`` is passed
over, and every loop's router (``ending``) goes to ``done``, so the strategy's own final test
measures the pair it holds. A run therefore never spends more than N.

**Measurement is reported, not charged.** Spend counts what a strategy's algorithm uses to decide
(train, checks, val for a gate or a selection, search). Test rollouts, and every evaluation of a
``MEASURE`` phase — ``final_test``, and VACE's ``stage_effect`` (val of H[t] under W[t] and W[t+1]:
not a step of VACE's Algorithm 1, it selects nothing in any strategy) — run outside the cap and are
stored under a ``measure:`` key (``eval_budget``), left out of ``totals`` and listed by
``measured_by_phase``. An evaluation a measuring phase ran is charged to the first deciding phase
that uses it (VACE's ``validate`` reads stage_effect's W[t+1] evaluation as its b: it declares and
is charged its full size there, though nothing is rolled out again), and one already charged is not
listed again as measurement. So a strategy pays the same for the same decisions whether or not the
run also measured the stage's own effect.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pydantic import BaseModel

from coevo.records import BudgetRecord, LLMCallRecord

OUTSIDE = "outside"
"""The phase name of spending outside any meta-graph node (a service called directly)."""

MEASURE = ("final_test", "stage_effect")
"""Phases whose evaluations measure the run rather than decide anything (the final test, and the final
pair's val score a budgeted run records there; VACE's stage effect): outside the rollout cap, stored under
``measure:`` keys and left out of ``totals`` (module doc)."""

ALWAYS = ("setup", "final_test")
"""Nodes that run even after the budget stopped a run (``phased``)."""


class BudgetExhausted(Exception):
    """A spending call whose declared size would take the run past its rollout cap; the message says
    what, how much, and what was spent (``over_cap``; ``MetaContext.reserved``)."""


_PAST = " would take the run past budget = "


def over_cap(what: str, rollouts: int, cap: int, spent: float, running: int = 0) -> str:
    """Why a run stopped at its cap (its state's ``budget_stop``): ``"budget: <what> (<n> rollouts) would
    take the run past budget = <cap> (spent <s>[, running <r>])"``; ``running``: rollouts that calls
    still running had reserved."""
    held = f", running {running}" if running else ""
    return f"budget: {what} ({rollouts} rollouts){_PAST}{cap} (spent {spent:.0f}{held})"


def over_updates(what: str, updates: int, cap: int, made: int) -> str:
    """Why a run stopped at its updates cap (``RunConfig.updates``, Harness-S Table 9's protocol):
    ``"updates: <what> (<n> updates) would take the run past updates = <cap> (made <m>)"``."""
    return f"updates: {what} ({updates} updates) would take the run past updates = {cap} (made {made})"


def cut_call(stop: str) -> str:
    """The call an ``over_cap`` or ``over_updates`` message says did not fit, with its size (``"round 2's
    weight stage (8 rollouts)"``); the message itself when it is not one."""
    return stop.removeprefix("budget: ").removeprefix("updates: ").split(" would take the run past ")[0]


@dataclass(frozen=True)
class PhaseKey:
    """A phase: ``round`` (the meta state's round when the node started; -1 unknown) and ``name``
    (the node's name)."""

    round: int
    name: str


_PHASE: ContextVar[PhaseKey | None] = ContextVar("coevo_phase", default=None)


def current_phase() -> PhaseKey:
    """The phase the caller runs in: the one ``phased`` set, else — in a LangGraph node added
    without ``meta_graph`` — that node's name from LangGraph's run config with round -1, else
    ``PhaseKey(-1, OUTSIDE)``."""
    phase = _PHASE.get()
    if phase is not None:
        return phase
    try:
        from langgraph.config import get_config

        name = (get_config().get("metadata") or {}).get("langgraph_node") or OUTSIDE
    except RuntimeError:  # not inside a runnable
        name = OUTSIDE
    return PhaseKey(-1, str(name))


def _round(args: tuple) -> int:
    """The round in a node's first argument (the meta state, or a ``Send`` payload such as
    ``EditRequest``); 0 when it has none."""
    state = args[0] if args else None
    value = state.get("round") if isinstance(state, Mapping) else getattr(state, "round", None)
    return int(value or 0)


def stopped(args: tuple, kwargs: dict) -> str:
    """Why the budget stopped this run ("" while it runs): the state's ``budget_stop`` (a node's first
    argument), else the context's (a ``Send`` payload's node; read from the context's own attributes,
    so a lazily built context is not built for it)."""
    state = args[0] if args else None
    if isinstance(state, Mapping) and state.get("budget_stop"):
        return str(state["budget_stop"])
    runtime = kwargs.get("runtime")
    context = getattr(runtime, "context", None)
    return str(getattr(context, "__dict__", {}).get("budget_stop") or "")


async def _stop(kwargs: dict, name: str, reason: BudgetExhausted) -> dict:
    """End the node that hit the cap: wait for its spending calls still running (a gather's siblings),
    say so on the run's log, and return the state update ``{"budget_stop": reason}``."""
    context = getattr(kwargs.get("runtime"), "context", None)
    settle = getattr(type(context), "settle", None)
    if settle is not None:
        await settle(context)
        context.log(name, f"{reason}; the run ends here, then its final test")
    return {"budget_stop": str(reason)}


def phased(name: str, action: Any) -> Any:
    """``action`` (a node function, sync or async) wrapped so that it runs with
    ``PhaseKey(state round, name)`` as the current phase; anything else (a runnable, a class) is
    returned unchanged. The wrapper keeps the function's signature and annotations
    (``functools.wraps``), which LangGraph reads to pass ``runtime`` and infer input schemas.

    Under a rollout cap (module doc): once the run is ``stopped`` the node is passed over (no update)
    unless it is one of ``ALWAYS``; a ``BudgetExhausted`` raised in it ends the node with the state
    update ``{"budget_stop": reason}`` after its other spending calls have settled."""
    if not (inspect.isfunction(action) or inspect.ismethod(action)):
        return action
    if inspect.iscoroutinefunction(action):
        @functools.wraps(action)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            if name not in ALWAYS and stopped(args, kwargs):
                return {}
            token = _PHASE.set(PhaseKey(_round(args), name))
            try:
                return await action(*args, **kwargs)
            except BudgetExhausted as reason:
                return await _stop(kwargs, name, reason)
            finally:
                _PHASE.reset(token)

        return run_async

    @functools.wraps(action)
    def run(*args: Any, **kwargs: Any) -> Any:
        if name not in ALWAYS and stopped(args, kwargs):
            return {}
        token = _PHASE.set(PhaseKey(_round(args), name))
        try:
            return action(*args, **kwargs)
        finally:
            _PHASE.reset(token)

    return run


def ending(path: Any) -> Any:
    """A loop's router (``path``, returning ``"continue"``/``"done"``-style keys) that returns
    ``"done"`` once the budget stopped the run (``stopped``), so every loop ends at the cap."""

    @functools.wraps(path)
    def route(*args: Any, **kwargs: Any) -> Any:
        if stopped(args, kwargs):
            return "done"
        return path(*args, **kwargs)

    return route


def _record(run_id: str, key: str, **spent: Any) -> BudgetRecord:
    phase = current_phase()
    return BudgetRecord(id=f"{run_id}:{key}", run_id=run_id, round=phase.round, phase=phase.name, **spent)


def measuring() -> bool:
    """Whether the current phase measures rather than decides (``MEASURE``)."""
    return current_phase().name in MEASURE


def charged_key(run_id: str, evaluation_id: str) -> str:
    """The id of the record that charges an evaluation to a deciding phase (``eval_budget``)."""
    return f"{run_id}:eval:{evaluation_id}"


def eval_budget(run_id: str, result: Any) -> BudgetRecord:
    """The spend of an evaluation (an ``EvalResult``): its rollouts, policy tokens and cost on its
    split, keyed by its evaluation id — ``eval:<id>`` (``charged_key``) in a deciding phase,
    ``measure:<id>`` in a ``MEASURE`` phase (reported, not charged; module doc)."""
    kind = "measure" if measuring() else "eval"
    return _record(run_id, f"{kind}:{result.evaluation_id}", split=result.split, rollouts=result.n_rollouts,
                   policy_input_tokens=result.input_tokens, policy_output_tokens=result.output_tokens,
                   policy_cost_usd=result.cost_usd)


def stage_budget(run_id: str, checkpoint_id: str, trajectories: Sequence[Any]) -> BudgetRecord:
    """The spend of a weight stage that made ``checkpoint_id``: its rollouts (``Trajectory``, on
    train) and their policy tokens and cost, keyed by the new checkpoint."""
    return _record(run_id, f"stage:{checkpoint_id}", split="train", rollouts=len(trajectories),
                   policy_input_tokens=sum(t.input_tokens for t in trajectories),
                   policy_output_tokens=sum(t.output_tokens for t in trajectories),
                   policy_cost_usd=sum(t.cost_usd for t in trajectories))


def engineer_budget(run_id: str, checkpoint_id: str, reruns: Sequence[Any], replies: Sequence[Any]) -> BudgetRecord:
    """The spend of a Harness-R1 engineer stage that made ``checkpoint_id``: the frozen target's
    patched and unpatched ``reruns`` (``EvalResult`` s, on train: rollouts, policy tokens, cost) and
    the engineer's own GRPO ``replies`` (``Trajectory`` s, one model call each: a meta role's calls,
    counted as ``meta_calls`` and meta tokens like an LLM editor's), keyed by the new checkpoint."""
    return _record(run_id, f"engineer:{checkpoint_id}", split="train", rollouts=sum(r.n_rollouts for r in reruns),
                   policy_input_tokens=sum(r.input_tokens for r in reruns),
                   policy_output_tokens=sum(r.output_tokens for r in reruns),
                   policy_cost_usd=sum(r.cost_usd for r in reruns), meta_calls=len(replies),
                   meta_input_tokens=sum(t.input_tokens for t in replies),
                   meta_output_tokens=sum(t.output_tokens for t in replies),
                   meta_cost_usd=sum(t.cost_usd for t in replies))


def calls_budget(run_id: str, calls: Sequence[LLMCallRecord]) -> BudgetRecord:
    """The spend of meta-role LLM ``calls`` (tokens, cost in USD), keyed by a digest of their ids."""
    digest = hashlib.sha256("\0".join(sorted(c.id for c in calls)).encode()).hexdigest()[:16]
    return _record(run_id, f"llm:{digest}", meta_calls=len(calls),
                   meta_input_tokens=sum(c.input_tokens for c in calls),
                   meta_output_tokens=sum(c.output_tokens for c in calls),
                   meta_cost_usd=sum(c.cost_usd for c in calls))


SPEND = ("rollouts", "policy_input_tokens", "policy_output_tokens", "policy_cost_usd", "meta_calls",
         "meta_input_tokens", "meta_output_tokens", "meta_cost_usd")
"""The summed fields of a ``BudgetRecord``."""


def measures(record: BudgetRecord) -> bool:
    """Whether ``record`` measures the run (a test evaluation, or one made in a ``MEASURE`` phase)."""
    return record.split == "test" or record.phase in MEASURE


def totals(records: Sequence[BudgetRecord], include_test: bool = False) -> dict[str, float]:
    """Each ``SPEND`` field summed over ``records``; measurement (``measures``: test rollouts and the
    final test's evaluations, not search) is left out unless ``include_test``."""
    kept = [r for r in records if include_test or not measures(r)]
    return {name: sum(getattr(r, name) for r in kept) for name in SPEND}


def _per_phase(records: Sequence[BudgetRecord], keep: Any) -> dict[str, float]:
    """Rollouts per phase name of the ``records`` that ``keep(record)`` accepts, summed over rounds, in the
    order each phase first spent."""
    out: dict[str, float] = {}
    for r in records:
        if r.rollouts and keep(r):
            out[r.phase] = out.get(r.phase, 0.0) + r.rollouts
    return out


def measured_by_phase(records: Sequence[BudgetRecord]) -> dict[str, float]:
    """Rollouts per measuring phase on train and val (``stage_effect``, ``final_test``'s final val), summed
    over rounds: what the run measured beside its spend, reported and not charged (module doc); test
    rollouts are left out (every run's test is its measurement)."""
    return _per_phase(records, lambda r: r.split != "test" and r.phase in MEASURE)


def by_phase(records: Sequence[BudgetRecord]) -> dict[str, float]:
    """Rollouts per phase name (``train``, ``validate``, ``search_evaluate``, ...) summed over rounds,
    measurement left out, in the order each phase first spent."""
    return _per_phase(records, lambda r: not measures(r))


class CurvePoint(BaseModel):
    """A point of a score-vs-budget curve: the end of ``round``, cumulative ``rollouts`` and
    ``meta_tokens`` spent by then (test rollouts excluded; means over seeds in ``mean_curve``), and
    the incumbent's ``val`` score then (None when the round validated nothing)."""

    round: int
    rollouts: float
    meta_tokens: float
    val: float | None = None


def score_curve(records: Sequence[BudgetRecord], history: Sequence[Any]) -> list[CurvePoint]:
    """One ``CurvePoint`` per round summary in ``history`` (``RoundSummary``: ``round``,
    ``incumbent_val``): the ``totals`` of the records of that round and earlier (setup's included;
    records of unknown round -1 count from round 0; test rollouts excluded)."""
    points = []
    for summary in history:
        spent = totals([r for r in records if r.round <= summary.round])
        points.append(CurvePoint(round=summary.round, rollouts=spent["rollouts"],
                                 meta_tokens=spent["meta_input_tokens"] + spent["meta_output_tokens"],
                                 val=summary.incumbent_val))
    return points


def mean_curve(curves: Sequence[Sequence[CurvePoint]]) -> list[CurvePoint]:
    """The seeds' curves averaged round by round over the rounds every curve has (val: over the
    seeds that have one)."""
    out = []
    for points in zip(*curves):
        vals = [p.val for p in points if p.val is not None]
        out.append(CurvePoint(round=points[0].round, rollouts=sum(p.rollouts for p in points) / len(points),
                              meta_tokens=sum(p.meta_tokens for p in points) / len(points),
                              val=sum(vals) / len(vals) if vals else None))
    return out


def score_at(curve: Sequence[CurvePoint], budget: float) -> float | None:
    """The val score of the last point of ``curve`` whose rollouts are within ``budget`` (what the
    strategy had reached when it had spent that much); None when even its first round spent more."""
    within = [p for p in curve if p.rollouts <= budget + 1e-9 and p.val is not None]
    return within[-1].val if within else None


def matched_budget(curves: Sequence[Sequence[CurvePoint]]) -> float | None:
    """The largest rollout budget every strategy with a curve reached: the smallest of their final
    cumulative rollouts (None when no strategy has a curve)."""
    finals = [c[-1].rollouts for c in curves if c]
    return min(finals) if finals else None
