"""WHALE's state (``WhaleState``: the search state plus the run's phase plan and the persistent
sampler's position) and its own nodes (§3-4): each strategy's ``plan`` (WHALE's fixed or adaptive phases, FST's
prompt-only search, stagewise's one long phase each, the single-component baselines' one phase),
the weight phase (``weight_phase``: §3.1's persistent sampler, a length in epochs or the patience
rule, RSFT) and ``accept`` (after each search iteration the best of the whole archive, and whether
the harness phase ends). Every stopping decision here reads training signals only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from langgraph.runtime import Runtime

from coevo.harnesses.patch import PROMPT_FIELDS
from coevo.meta.context import MetaContext
from coevo.meta.sealing import sealed_tasks, unseal
from coevo.meta.search import Plan, SearchState
from coevo.nodes.loop import run_stage, stage_tasks
from coevo.nodes.search import best_of_archive, close_phase, iteration_record, rescored
from coevo.records import Phase
from coevo.timestamps import utcnow
from coevo.training.kinds import RSFT
from coevo.training.schedule import Patience, PersistentSampler, WeightPhase, epochs_to_steps


class WhaleState(SearchState, total=False):
    """``SearchState`` plus WHALE's phase plan and sampler position."""

    plan: Plan
    """Replaced once by the strategy's ``plan`` node (WHALE, FST or stagewise)."""
    sampler_position: int
    """Replaced by each weight phase: tasks drawn so far from the persistent sampler (WHALE §3.1)."""


def _plan(**overrides: Any) -> Callable[[WhaleState, Runtime[MetaContext]], dict]:
    def plan(state: WhaleState, runtime: Runtime[MetaContext]) -> dict:
        ctx = runtime.context
        config = ctx.config
        w = config.whale
        values = {"strategy": config.strategy, "cycles": config.rounds, "weight_epochs": w.weight_epochs,
                  "search_iterations": w.search_iterations, "adaptive": w.schedule == "adaptive", "fields": None}
        for key, value in overrides.items():
            values[key] = value(config) if callable(value) else value
        plan = Plan(**values)
        ctx.log("plan", f"{plan.model_dump_json()}")
        return {"plan": plan, "fields": plan.fields, "sampler_position": state.get("sampler_position", 0),
                "rounds": plan.cycles}

    plan.__doc__ = "Write the run's phase plan (``Plan``; module doc) and its cycles as the rounds to run."
    return plan


whale_plan = _plan()
"""WHALE (§4): ``rounds`` cycles; fixed phase lengths or the adaptive patience rule (``whale.schedule``)."""
adaptive_plan = _plan(adaptive=True)
"""WHALE (§4) with the adaptive patience rule whatever ``whale.schedule`` says (``whale_adaptive``), so one
comparison holds both of WHALE's schedules."""
fst_plan = _plan(fields=list(PROMPT_FIELDS))
"""FST (WHALE §5's control): WHALE's schedule, harness edits confined to the system and user prompts."""
stagewise_plan = _plan(cycles=1, adaptive=False, weight_epochs=lambda c: c.rounds * c.whale.weight_epochs,
                       search_iterations=lambda c: c.rounds * c.whale.search_iterations)
"""Stagewise (WHALE §6): one weight phase and one search phase holding WHALE's cumulative fixed budgets."""
weight_only_plan = _plan(cycles=1, adaptive=False, weight_epochs=lambda c: c.rounds * c.whale.weight_epochs,
                         search_iterations=0)
"""Weight-only (WHALE §5): one RSFT phase holding the cumulative fixed weight budget of ``rounds`` WHALE cycles."""
harness_only_plan = _plan(cycles=1, adaptive=False, weight_epochs=0.0,
                          search_iterations=lambda c: c.rounds * c.whale.search_iterations)
"""Harness-only (WHALE §5): one Meta-Harness phase under W0 holding the cumulative fixed search budget of
``rounds`` WHALE cycles."""


def phase_options(ctx: MetaContext, state: WhaleState, n_tasks: int) -> WeightPhase:
    """The weight phase of a WHALE cycle on ``n_tasks`` train tasks: the run's persistent
    sampler at ``state["sampler_position"]`` over all the run's train tasks (``stream``: those a
    demonstration answers are passed over, so each epoch still visits every other task once), a
    length in steps from the plan's epochs (fixed) or ``whale.max_epochs`` with the patience rule in
    steps (adaptive: minimum, patience and window from ``whale.min_epochs``/``patience_epochs``/
    ``window_epochs``)."""
    plan, cfg, tps = state["plan"], ctx.config.whale, ctx.config.train.tasks_per_step

    def steps(epochs: float) -> int:
        return epochs_to_steps(epochs, n_tasks, tps)

    stop = Patience(steps(cfg.min_epochs), steps(cfg.patience_epochs), steps(cfg.window_epochs)).stop \
        if plan.adaptive else None
    return WeightPhase(sampler=PersistentSampler(ctx.config.seed), stream=ctx.tasks("train"),
                       position=state.get("sampler_position", 0),
                       max_steps=steps(cfg.max_epochs if plan.adaptive else plan.weight_epochs), stop=stop)


def weight_phase_end(ctx: MetaContext, state: WhaleState, options: WeightPhase, metrics: dict[str, Any],
                     checkpoint: str, started: datetime) -> dict:
    """The state update closing a weight phase: its ``Phase`` (length in epochs, reward per step,
    why it stopped), the advanced ``phase`` and the sampler position the next phase starts from."""
    plan, phase = state["plan"], state.get("phase", -1) + 1
    rewards = [h["reward"] for h in metrics.get("history", [])]
    reason = metrics.get("stop_reason") or (
        f"reached whale.max_epochs = {ctx.config.whale.max_epochs:g}" if plan.adaptive
        else f"fixed length: {plan.weight_epochs:g} epochs")
    record = Phase(index=phase, cycle=state.get("round", 0), kind="weights", length=metrics.get("epochs", 0.0),
                   unit="epochs", steps=len(rewards), harness_id=state["incumbent"], checkpoint=checkpoint,
                   signal=rewards, stop_reason=reason)
    record = close_phase(ctx, record, started)
    ctx.log("phase", f"{phase} weights: {record.length:.2f} epochs in {record.steps} steps; {reason}")
    position = metrics.get("sampler_position", options.position + len(rewards) * ctx.config.train.tasks_per_step)
    return {"phases": [record], "phase": phase, "sampler_position": position}


async def weight_phase(state: WhaleState, runtime: Runtime[MetaContext]) -> dict:
    """W[c+1] = RSFT(W[c], H[c], sampler) (WHALE §3.1, Alg. 1): the weight stage under the incumbent
    as a weight phase (``phase_options``), closed by a ``Phase`` record (``weight_phase_end``).
    Returns ``train``'s update plus the phase's. Raises ``ValueError`` unless ``train.algorithm``
    is ``rsft``: WHALE's weight phases are RSFT (the strategy table makes it the default)."""
    ctx = runtime.context
    if ctx.config.train.algorithm != "rsft":
        raise ValueError(f"strategy {ctx.config.strategy!r} runs WHALE weight phases, which are RSFT (WHALE §3.1); "
                         "set train.algorithm = \"rsft\" in the run config")
    spec = ctx.spec(state["incumbent"])
    options = phase_options(ctx, state, len(stage_tasks(ctx, state)))
    started = utcnow()
    checkpoint, trajectories, stage = await run_stage(ctx, state, spec, state["checkpoint"], RSFT(phase=options))
    record = ctx.checkpoint(checkpoint)  # the record ctx.train read
    metrics = record.metrics if record is not None else {}
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage,
            **weight_phase_end(ctx, state, options, metrics, checkpoint, started)}


def search_stop(state: WhaleState, runtime: Runtime[MetaContext], signal: list[float]) -> str:
    """Why the harness phase ends after this iteration ("" to go on): its fixed length
    (``plan.search_iterations``), or adaptively (WHALE §4) the patience rule on the best train
    score so far (``signal``: the seed's, then one per iteration), at least ``whale.min_iterations``
    and at most ``whale.max_iterations``."""
    plan, cfg, it = state["plan"], runtime.context.config.whale, state.get("iteration", 0)
    if not plan.adaptive:
        return f"fixed length: {plan.search_iterations} iterations" if it >= plan.search_iterations else ""
    rule = Patience(minimum=cfg.min_iterations + 1, patience=cfg.search_patience, unit="iterations")
    if reason := rule.stop(signal):
        return reason
    return f"reached whale.max_iterations = {cfg.max_iterations}" if it >= cfg.max_iterations else ""


def accept(state: WhaleState, runtime: Runtime[MetaContext]) -> dict:
    """After iteration i the best harness of the whole archive is accepted as the incumbent (it may
    be older than this iteration). Records the iteration and, when the phase ends, the ``Phase``;
    the phase's proposals not accepted then leave ``sealed``."""
    ctx = runtime.context
    excluded = sealed_tasks(state)
    entries, phase, it = state["search"], state.get("phase", 0), state.get("iteration", 0)
    best = best_of_archive(entries, excluded)
    record = iteration_record(state, best.harness_id, best.score, best.harness_id != state["incumbent"])
    seed = rescored(entries[:1], excluded)[0].score
    signal = [seed] + [s.score for s in state.get("search_iterations", []) if s.phase == phase] + [best.score]
    reason = search_stop(state, runtime, signal)
    ctx.log("accept", f"{it}: {best.harness_id[:12]} (iteration {best.iteration}) train score {best.score:.3f}"
                     + (f"; phase ends: {reason}" if reason else ""))
    out: dict = {"incumbent": best.harness_id, "search_iterations": [record], "phase_done": bool(reason)}
    if reason:
        record = Phase(index=phase, cycle=state.get("round", 0), kind="harness", length=it, unit="iterations", steps=it,
                       harness_id=best.harness_id, checkpoint=state["checkpoint"], signal=signal, stop_reason=reason,
                       fields=state.get("fields"))
        out["phases"] = [close_phase(ctx, record, state.get("phase_started"))]
        out["sealed"] = unseal([e.harness_id for e in entries if e.iteration > 0 and e.harness_id != best.harness_id],
                               {**state, "incumbent": best.harness_id})
    return out
