"""The meta loop of VACE's Algorithm 1 (docs/papers.md), phase by phase, and its wiring::

    setup                                                # H0, W0 and the run's tasks
    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)        # train (sample: T[t] with frozen weights)
        H'[t]        = refine(H[t], T[t])                # coevo.nodes.refine
        b, c         = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
        H[t+1]       = H'[t] if gate(b, c) else H[t]     # gate (the rule: coevo.evaluation.gate)
                                                         # next_round / more_rounds
    final_test                                           # (H0, W0) and (H[T], W[T]) on test

Every family shares these nodes; ``setup``: fix the starting pair and the run's tasks in the archive;
``train``/``run_stage``: the weight stage under a harness; ``sample``: T[t] with frozen weights;
``validate``: the paired val evaluation; ``gate``: the acceptance step; ``next_round``/``more_rounds``:
the loop over t; ``final_test``: the test of the start and final pairs. The module ends with the
sub-wirings a strategy calls by name (``meta_graph``: start and end; ``add_rounds``: the round loop),
so a strategy module stays the place where its algorithm is read.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Callable

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from coevo.config import RunConfig
from coevo.envs.base import Task
from coevo.evaluation.gate import decide
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.budget import ending, phased
from coevo.meta.context import MetaContext
from coevo.meta.sealing import accepted_harnesses, sealed_tasks, unseal
from coevo.meta.state import Candidate, CandidateOutcome, EvalSummary, MetaState, RoundSummary, WeightStage
from coevo.models.trajectory import Trajectory
from coevo.observe.text import magnitude, percent, plain
from coevo.records import Checkpoint, GateDecision, GatePair
from coevo.training.kinds import StageKind, configured, training_spec


def base_checkpoint(config: RunConfig) -> Checkpoint:
    """W0: the configured policy without an adapter (id derived from the policy ref), evaluated
    through the vLLM servers that serve it when ``train.vllm`` names them (``served_ref``)."""
    ref = config.policy
    if config.train.vllm:
        from coevo.training.vllm_sync import served_ref

        ref = served_ref(config.train.vllm, config.train.vllm_model)
    key = config.policy if ref == config.policy else f"{config.policy}@{ref}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    base = config.policy.split(":", 1)[1] if config.policy.startswith("local:") else config.policy
    return Checkpoint(id=f"base-{digest}", base_model=base, model_ref=ref)


def setup(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Store H0 (``ctx.start()``: ``config.harness`` or the env's base harness, built once) and W0
    unless the input names them (``incumbent``, ``checkpoint``), and the run's train/val/test tasks
    (and a searching strategy's search split); record the context's run id and the rounds to run
    (``config.rounds``) in the state. Idempotent."""
    ctx = runtime.context
    run_id = ctx.run_id
    incumbent = state.get("incumbent")
    if not incumbent:
        incumbent = ctx.archive.add_harness(ctx.start(), [], "base", run_id)  # H0 as the driver built it
    checkpoint = state.get("checkpoint")
    if not checkpoint:
        checkpoint = ctx.record_base_checkpoint(base_checkpoint(ctx.config))
    for split in ("train", "val", "test"):
        if getattr(ctx.config.env, f"n_{split}"):
            ctx.archive.put(*ctx.tasks(split))
    if ctx.searches and ctx.config.search.tasks:
        ctx.archive.put(*ctx.search_tasks())  # refuses a train split too short for the search split
    ctx.log("setup", f"run {run_id}: H0={incumbent[:12]} W0={checkpoint} env={ctx.env.name} "
                     f"train/val/test={ctx.config.env.n_train}/{ctx.config.env.n_val}/{ctx.config.env.n_test}")
    return {"run_id": run_id, "round": 0, "incumbent": incumbent, "checkpoint": checkpoint,
            "start_harness": incumbent, "start_checkpoint": checkpoint, "rounds": ctx.config.rounds}


def stage_tasks(ctx: MetaContext, state: MetaState) -> list[Task]:
    """The run's train tasks less those a live harness answers (``sealed_tasks``; docs/design.md,
    Principles). Raises ``ValueError`` when none is left."""
    excluded = sealed_tasks(state)
    tasks = [t for t in ctx.tasks("train") if t.id not in excluded]
    if not tasks:
        raise ValueError(f"every one of the {ctx.config.env.n_train} train tasks went into a demonstration; raise "
                         "env.n_train so later weight stages and checks have tasks the harness does not answer")
    return tasks


def rescue_pool(ctx: MetaContext, state: MetaState, spec: HarnessSpec) -> list[HarnessSpec]:
    """The Eq. 5 rescue pool of a weight stage under ``spec``: the harnesses the run accepted
    before (``accepted_harnesses``; VACE's analogue of Harness-S's pool of checked siblings), newest
    first, other than ``spec`` itself — never a candidate the gate rejected."""
    return [ctx.spec(h) for h in reversed(accepted_harnesses(state)) if h != spec.id]


async def train(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """The weight stage under the incumbent harness (VACE Alg. 1, line 2): GRPO or RSFT via the
    context's ``trainer`` on the train tasks no live harness answers (``stage_tasks``), with the
    harnesses accepted earlier as the Eq. 5 rescue pool (``rescue_pool``, used with
    ``train.rescue``). Returns the new
    checkpoint id, the ids of the stage's trajectories and the stage's training numbers
    (``WeightStage``; ``stage_effect`` adds its val effect)."""
    ctx = runtime.context
    spec = ctx.spec(state["incumbent"])
    pool = rescue_pool(ctx, state, spec) if ctx.config.train.rescue else []
    checkpoint, trajectories, stage = await run_stage(ctx, state, spec, state["checkpoint"],
                                                      configured(ctx.config.train, pool))
    return {"checkpoint": checkpoint, "train_trajectories": [t.id for t in trajectories], "stage": stage}


async def run_stage(ctx: MetaContext, state: MetaState, spec: HarnessSpec, before: str,
                    kind: StageKind | None = None) -> tuple[str, list[Trajectory], WeightStage]:
    """One weight stage from checkpoint ``before`` under ``spec`` on ``stage_tasks``, of the ``kind`` the
    family chose (``coevo.training.kinds``; None: ``configured``, the ``[train]`` algorithm's plain
    stage): the new checkpoint id, its trajectories (stored, split ``train``, under the harnesses
    themselves rather than their training variants) and its ``WeightStage`` numbers. Raises
    ``ValueError`` when the run has no trainer or no train task is left."""
    rnd = state.get("round", 0)
    tasks = stage_tasks(ctx, state)
    kind = kind if kind is not None else configured(ctx.config.train)
    checkpoint, trajectories = await ctx.train(before, spec, tasks, rnd, kind)  # accounted
    # rollouts ran the training variants (``training_spec``); they are stored under the harnesses themselves
    names = {training_spec(s, ctx.config.train).id: s.id for s in [spec, *kind.harnesses()]}
    trajectories = [t.model_copy(update={"split": "train", "harness_id": names.get(t.harness_id, spec.id)})
                    for t in trajectories]
    ctx.archive.add_trajectories(trajectories, None, ctx.run_id)
    record = ctx.checkpoint(checkpoint)  # the record ctx.train read
    m = record.metrics if record is not None else {}
    stage = WeightStage(round=rnd, harness_id=spec.id, checkpoint_before=before, checkpoint_after=checkpoint,
                        steps=m.get("steps"), train_reward=m.get("reward_mean"),
                        effective_group_rate=m.get("effective_group_rate"), contrast_rate=m.get("nonzero_std_rate"),
                        rescue_rate=m.get("rescue_rate"), rescue_success=m.get("rescue_success"),
                        resampled_groups=m.get("resampled_groups"), delta_norm=m.get("delta_norm"),
                        total_delta_norm=m.get("total_delta_norm"),
                        excluded_tasks=len(ctx.tasks("train")) - len(tasks))
    mean = sum(t.reward for t in trajectories) / len(trajectories) if trajectories else 0.0
    rescue = (f", rescue triggered {percent(stage.rescue_rate)} (rescued groups with a success "
              f"{percent(stage.rescue_success)})" if kind.pool() else "")
    ctx.log("train", f"round {rnd}: {before} -> {checkpoint}  {len(trajectories)} rollouts on {len(tasks)} "
                     f"tasks, mean reward {mean:.3f}, effective groups {percent(stage.effective_group_rate)} "
                     f"(with reward contrast {percent(stage.contrast_rate)}){rescue}, "
                     f"||dW|| {magnitude(stage.delta_norm, 4)}")
    return checkpoint, trajectories, stage


async def sample(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Trajectories T[t] for refinement when weights are frozen (harness_only): the incumbent on
    the train tasks no demonstration answers, sampled as the weight stage would
    (``training_spec``: ``train.temperature``, ``train.max_new_tokens``) with round-dependent
    seeds (``seed + 1000 * round``, like ``TrainConfig.stage``), so a later round refines from
    fresh evidence instead of re-proposing a rejected candidate from the same rollouts."""
    ctx = runtime.context
    rnd = state.get("round", 0)
    spec = training_spec(ctx.spec(state["incumbent"]), ctx.config.train)
    sampler = ctx.archive.add_harness(spec, [state["incumbent"]], "sampling", ctx.run_id)
    result = await ctx.evaluate(sampler, state["checkpoint"], "train", stage_tasks(ctx, state),
                                seed=ctx.config.seed + 1000 * rnd)
    ids = [i for o in result.per_task.values() for i in o.trajectory_ids]
    ctx.log("sample", f"round {rnd}: {len(ids)} train rollouts, mean reward {result.mean_reward:.3f}")
    return {"train_trajectories": ids}


async def validate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Paired evaluation of the incumbent and every checked candidate on the sealed val split under
    the current checkpoint (VACE Alg. 1, line 4). Evaluations are resumable by id, so a resumed
    run reuses finished rollouts."""
    ctx = runtime.context
    ids = list(dict.fromkeys([state["incumbent"]] + [c.spec_id for c in state.get("checked", [])
                                                      if c.status == "checked" and c.spec_id]))
    results = await asyncio.gather(*(ctx.evaluate(i, state["checkpoint"], "val") for i in ids))
    validation = {i: EvalSummary.of(r) for i, r in zip(ids, results)}
    ctx.log("validate", f"round {state.get('round', 0)}: " + ", ".join(
        f"{i[:12]}={v.score:.3f}" for i, v in validation.items()) + f" (trivial {plain(results[0].trivial_baseline)})")
    return {"validation": validation}


def gate(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """H[t+1] = H'[t] if gate(b, c) else H[t]: decide each validated candidate against the incumbent
    (``coevo.evaluation.gate.decide``, with the multiplicity rule over the round's m candidates); the
    best accepted one becomes H[t+1]. With ``gate.approve`` a person confirms each decision through a
    LangGraph ``interrupt`` (one per candidate). Every decision is stored
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


def _fate(cand: Candidate, decision: GateDecision | None, incumbent: str) -> str:
    if cand.status == "rejected":
        return "rejected (check)"
    if decision is not None:
        return "accepted" if decision.accepted else "rejected (gate)"
    return "adopted" if cand.spec_id == incumbent else "not adopted"


def next_round(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Close round t: append its ``RoundSummary`` (incumbent, checkpoint, val scores, each
    candidate's fate, the round's weight stage) to ``history`` and advance ``round``."""
    rnd, incumbent = state.get("round", 0), state["incumbent"]
    val = state.get("validation", {})
    decisions = {d.candidate_id: d for d in state.get("decisions", []) if d.round == rnd}
    candidates = [CandidateOutcome(id=c.spec_id, status=c.status, reason=c.reason,
                                   val=val[c.spec_id].score if c.spec_id in val else None,
                                   fate=_fate(c, decisions.get(c.spec_id or ""), incumbent))
                  for c in state.get("checked", [])]
    stage = state.get("stage")
    stage = stage if stage is not None and stage.round == rnd else None
    summary = RoundSummary(round=rnd, incumbent=incumbent, checkpoint=state["checkpoint"],
                           incumbent_val=val[incumbent].score if incumbent in val else None,
                           trivial=next((v.trivial_baseline for v in val.values()), None), candidates=candidates,
                           weights=stage)
    return {"history": [summary], "round": rnd + 1}


def more_rounds(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """``"continue"`` while ``round < state["rounds"]`` (``setup`` wrote ``config.rounds``; a plan
    node may replace it), else ``"done"``."""
    rounds = state.get("rounds", runtime.context.config.rounds)
    return "continue" if state.get("round", 0) < rounds else "done"


async def val_at_budget(state: MetaState, ctx: MetaContext) -> dict:
    """Under a rollout cap (``config.budget``): ``final_val``, the final pair (H[T], W[T]) on the val
    split, measured at the budget — every strategy's val score at equal spend, the WHALE family's
    included, whose loop never validates (``coevo compare --budget``). Reused, not rerun, when the run
    validated that pair; a final-test phase, so outside the cap. Without a cap: nothing."""
    if not ctx.config.budget:
        return {}
    return {"final_val": EvalSummary.of(await ctx.evaluate(state["incumbent"], state["checkpoint"], "val"))}


async def final_test(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """Evaluate the start pair (H0, W0) and the final pair (H[T], W[T]) on the test split (and, under
    a rollout cap, the final pair on val: ``val_at_budget``): one after the other on a ``local:`` policy
    (each checkpoint has its own engine, and two decoding at once on a few cores are slower than two in
    turn), together on a served one."""
    ctx = runtime.context
    measured = await val_at_budget(state, ctx)
    if not ctx.config.env.n_test:
        return {"test": {}, **measured}
    pairs = ((state["start_harness"], state["start_checkpoint"]), (state["incumbent"], state["checkpoint"]))
    if ctx.config.policy.startswith("local:"):  # two local engines at once share the cores and thrash: in turn
        start, final = [await ctx.evaluate(h, w, "test") for h, w in pairs]
    else:
        start, final = await asyncio.gather(*(ctx.evaluate(h, w, "test") for h, w in pairs))
    ctx.log("test", f"start {start.mean_reward:.3f} -> final {final.mean_reward:.3f} "
                     f"(trivial {plain(start.trivial_baseline)})")
    return {"test": {"start": EvalSummary.of(start), "final": EvalSummary.of(final)}, **measured}


class PhasedGraph(StateGraph):
    """A ``StateGraph`` whose node functions run as budget phases (``coevo.meta.budget.phased``:
    the state's round and the node's name), so every strategy's spending is attributed per phase
    without a line in its nodes, and whose loops end once a rollout cap stopped the run (a router
    with a ``"done"`` branch goes there: ``coevo.meta.budget.ending``)."""

    def add_node(self, node: Any, action: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        """``StateGraph.add_node`` with the node function ``phased`` under its node name."""
        if action is None and not isinstance(node, str):
            return super().add_node(phased(getattr(node, "__name__", ""), node), **kwargs)
        return super().add_node(node, phased(node, action) if action is not None else None, **kwargs)

    def add_conditional_edges(self, source: str, path: Any, path_map: Any = None) -> Any:  # type: ignore[override]
        """``StateGraph.add_conditional_edges``; a router whose ``path_map`` has a ``"done"`` branch
        takes it once the budget stopped the run."""
        if isinstance(path_map, dict) and "done" in path_map and callable(path):
            path = ending(path)
        return super().add_conditional_edges(source, path, path_map)


def meta_graph(test: Callable[..., Any] = final_test, state: type = MetaState) -> StateGraph:
    """A meta-loop ``StateGraph`` (state ``state``: the core ``MetaState`` or a family's extension
    of it; context ``MetaContext``; a ``PhasedGraph``) that starts with ``setup`` (H0, W0 and the
    run's tasks) and ends with ``final_test`` (``test``: by default the test of the start and final
    pairs; Harness-S passes its routed test); the strategy wires what lies between."""
    builder = PhasedGraph(state, context_schema=MetaContext)
    builder.add_node("setup", setup)
    builder.add_node("final_test", test)
    builder.add_edge(START, "setup")
    builder.add_edge("final_test", END)
    return builder


def add_rounds(builder: StateGraph, first: str, last: str | None) -> None:
    """``for t in rounds``: after ``last`` (None: the caller routes to it), ``next_round`` closes
    round t and goes back to ``first`` while rounds remain, else to ``final_test``."""
    builder.add_node("next_round", next_round)
    if last is not None:
        builder.add_edge(last, "next_round")
    builder.add_conditional_edges("next_round", more_rounds, {"continue": first, "done": "final_test"})
