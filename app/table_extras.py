"""The numbers a paper's table adds beside its comparison (``coevo.app.tables``: a table config's ``extras``).

The extras (``coevo.app.tables.EXTRAS``; each computed from the archive after the comparison; the ones that
evaluate run outside the rollout cap, on the test split, with the run's own ``eval`` settings, and are stored
under the run so a rerun reads them back):

- ``rejected_test`` (VACE: "were the rejections right?"): every rejected gate decision's candidate and its
  incumbent evaluated on test under the checkpoint the gate judged them with (the round's updated
  weights), paired per task (``coevo.report.tables.rejection_summary``).
- ``ranks`` (Harness-S Table 5): Rank-r routed test under the final policy against H0 under it, from the
  runs' own final test (``coevo.report.tables.rank_summary``).
- ``best_reached`` (WHALE: best accuracy and the rollouts spent to reach it): every round's incumbent pair
  evaluated on test, and the final pair when no round ended holding it (the budget stopped the run mid-round);
  per run the best mean@k and the cumulative train + val + search rollouts at the first round that reached it
  (``coevo.report.tables.best_summary``).
- ``decompose`` (which lever did what): ``coevo decompose`` of every run of the reference strategy — the 2x2
  of (H0, H_final) x (W0, W_final) on test, each effect paired per task (``coevo.app.decompose``).
- ``promoted_timr`` (CoEvo-RSI: inheritance lowers TIMR): the TIMR of every promoted pair on val from the
  run's promotion records, and the final pair's test TIMR (``coevo.report.tables.timr_summary``).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from coevo.app.compare import Comparison, StrategyRun, run_config
from coevo.config import RunConfig
from coevo.evaluation.stats import Estimate
from coevo.graphs.registry import get_strategy
from coevo.meta.state import EvalSummary
from coevo.observe.progress import Reporter
from coevo.records import GateDecision
from coevo.storage import Archive


class Rejection(BaseModel):
    """One rejected gate decision re-tested (``rejected_on_test``): its run, seed and round, the gate's val
    ``b`` and ``c``, the ``checkpoint`` the gate judged with, and the incumbent's and candidate's test
    evaluations under it."""

    strategy: str
    seed: int
    run_id: str
    round: int
    checkpoint: str
    b: float
    c: float
    incumbent: EvalSummary
    candidate: EvalSummary


class RoundTest(BaseModel):
    """A run's round-``round`` incumbent pair on test (``round_tests``): its mean@k ``score`` and the run's
    cumulative train + val + search ``rollouts`` by the end of that round (None: no budget rows then);
    ``final``: the run's final pair, held after a round that did not end (``final_pair_test``)."""

    strategy: str
    seed: int
    round: int
    rollouts: float | None
    score: float
    harness_id: str
    checkpoint_id: str
    final: bool = False


ContextFor = Callable[[RunConfig], Any]


def _evaluator(run: StrategyRun, config: RunConfig, archive: Archive, context_for: ContextFor | None,
               reporter: Reporter | None = None) -> Any:
    """The run's services for re-evaluations: its config (strategy, seed) without a rollout cap, no
    trainer and no meta roles (``static``'s row), stored under the run's id, its evaluations' progress on
    ``reporter``; ``context_for(config)`` replaces the default services (tests)."""
    from coevo.app.services import make_context

    cfg = run_config(config, run.strategy, run.seed).model_copy(update={"budget": 0})
    if context_for is None:
        return make_context(cfg, archive, run.run_id, reporter=reporter, strategy=get_strategy("static"))
    ctx = context_for(cfg)
    ctx.run_id = run.run_id
    if reporter is not None:
        ctx.reporter = reporter
    return ctx


async def rejected_on_test(comparison: Comparison, config: RunConfig, archive: Archive,
                           context_for: ContextFor | None = None, reporter: Reporter | None = None) -> list[Rejection]:
    """Every run's rejected gate decisions (VACE: "were the rejections right?"): the incumbent and the
    candidate evaluated on test under the checkpoint of the decision's round (the round summary's: the
    updated weights the gate judged them with), with the run's ``eval`` settings and seed, outside any
    rollout cap. A decision whose round has no summary is skipped."""
    out = []
    for run in comparison.runs:
        rejected = [d for d in archive.list(GateDecision, run_id=run.run_id) if not d.accepted]
        checkpoints = {r: ckpt for r, _, ckpt in run.rounds}
        if not rejected:
            continue
        ctx = _evaluator(run, config, archive, context_for, reporter)
        for d in rejected:
            if d.round not in checkpoints:
                continue
            ckpt = checkpoints[d.round]
            inc = EvalSummary.of(await ctx.evaluate(d.incumbent_id, ckpt, "test"))
            cand = EvalSummary.of(await ctx.evaluate(d.candidate_id, ckpt, "test"))
            out.append(Rejection(strategy=run.strategy, seed=run.seed, run_id=run.run_id, round=d.round,
                                 checkpoint=ckpt, b=d.b, c=d.c, incumbent=inc, candidate=cand))
    return out


async def round_tests(comparison: Comparison, config: RunConfig, archive: Archive,
                      context_for: ContextFor | None = None, reporter: Reporter | None = None) -> list[RoundTest]:
    """Every run's incumbent pair at the end of each round evaluated on test (WHALE's best accuracy and the
    rollouts spent to reach it), with the run's settings outside any cap, and the run's cumulative rollouts
    by then (its curve). A pair already evaluated under the run is read back from the archive."""
    out = []
    for run in comparison.runs:
        ctx = _evaluator(run, config, archive, context_for, reporter)
        spent = {p.round: p.rollouts for p in run.curve}
        for rnd, harness, ckpt in run.rounds:
            summary = EvalSummary.of(await ctx.evaluate(harness, ckpt, "test"))
            out.append(RoundTest(strategy=run.strategy, seed=run.seed, round=rnd, rollouts=spent.get(rnd),
                                 score=summary.score, harness_id=harness, checkpoint_id=ckpt))
        last = final_pair_test(run)
        if last is not None:
            out.append(last)
    return out


def final_pair_test(run: StrategyRun) -> RoundTest | None:
    """The run's final pair as a ``RoundTest`` (``final=True``) when no round ended holding it: a run the
    budget stopped after a weight stage and before its round's search ends on a checkpoint no round summary
    names. Its score is the run's own final test, its rollouts everything the run was charged
    (``budget["rollouts"]``), its round the one after the last summarised. None when the budget did not stop
    the run (a final pair of its own, such as Harness-S's H0 under the final policy, is no round's incumbent),
    the run has no final test, its last round already held the pair, or the pair is the start pair."""
    final = run.final
    if final is None or not run.budget_stop:
        return None
    pair = (final.harness_id, final.checkpoint_id)
    if (run.rounds and tuple(run.rounds[-1][1:]) == pair) or (
            run.start is not None and (run.start.harness_id, run.start.checkpoint_id) == pair):
        return None
    return RoundTest(strategy=run.strategy, seed=run.seed, round=run.rounds[-1][0] + 1 if run.rounds else 0,
                     rollouts=run.budget.get("rollouts"), score=final.score, harness_id=final.harness_id,
                     checkpoint_id=final.checkpoint_id, final=True)


class Decomposed(BaseModel):
    """One reference run's ``coevo decompose`` (``decompositions``): its four cells' scores and the paired
    effects (``coevo.evaluation.decompose.Effects``), each an ``Estimate`` over ``n`` test tasks."""

    strategy: str
    seed: int
    run_id: str
    cells: dict[str, Estimate]
    effects: dict[str, Estimate]
    interaction: Estimate
    total: Estimate
    n: int


async def decompositions(comparison: Comparison, config: RunConfig, archive: Archive,
                         context_for: ContextFor | None = None, reporter: Reporter | None = None) -> list[Decomposed]:
    """``coevo decompose`` of every run of the comparison's reference strategy (``coevo.app.decompose``),
    with the run's own test tasks, k, seed and temperature, outside any cap; its two diagonal cells are the
    run's final test, read back. A run without a final pair is skipped."""
    from coevo.app.decompose import decompose
    from coevo.app.run import RunError

    out = []
    for run in comparison.runs:
        if run.strategy != comparison.reference or run.final is None:
            continue
        try:
            done = await decompose(config.db, run.run_id, archive=archive,
                                   context=_evaluator(run, config, archive, context_for, reporter))
        except RunError:
            continue
        n = done.numbers
        out.append(Decomposed(strategy=run.strategy, seed=run.seed, run_id=run.run_id, cells=n.cells,
                              effects=n.effects, interaction=n.interaction, total=n.total, n=n.n))
    return out
