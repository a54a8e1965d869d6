"""The agent: a ``HarnessSpec`` compiled to a LangGraph state machine (docs/design.md, Harness graph).

Loop: assemble context → call model → parse reply → run tools → (loop | finish), with hooks
firing at ``before_model``, ``after_model``, ``after_tool``, ``on_tool_error`` and
``before_finish`` (Harness-S Table 7). Budgets (Harness-S Table 8) end every episode: a model
that never stops ends at its budget with the reason recorded. The nodes and routers are in
``coevo.harnesses.engine``, the state (``HarnessState``, re-exported here) in
``coevo.harnesses.state``; the spec, model and episode reach them as ``runtime.context``
(``EngineContext``). ``graph`` is compiled once; ``build_harness_graph`` binds it to one episode
(what apps embed and Studio draws); ``arun_rollout`` runs it on an env task and returns a ``Trajectory``.
"""

from __future__ import annotations

import time
from typing import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import messages_to_dict
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langsmith.utils import tracing_is_enabled

from coevo.compat import arun_state, bind_context, node, route
from coevo.envs.base import Env, Episode, Task
from coevo.harnesses.acting import arun_tools, run_tools
from coevo.harnesses.agent_run import arun_agent_rollout
from coevo.harnesses.engine import (
    EngineContext,
    acall_model,
    after_assemble,
    after_call,
    after_parse,
    after_tools,
    assemble_context,
    call_model,
    finish,
    parse_reply,
)
from coevo.harnesses.spec import HarnessSpec
from coevo.harnesses.state import HarnessState
from coevo.models.trajectory import ModelCall, Trajectory

__all__ = ["HarnessState", "EngineContext", "builder", "graph", "recursion_limit", "build_harness_graph",
           "to_trajectory", "arun_rollout"]


def recursion_limit(spec: HarnessSpec) -> int:
    """A LangGraph recursion limit that the budgets, not LangGraph, always reach first."""
    return 4 * (spec.budget.max_model_calls + spec.budget.max_env_actions) + 16


def build_harness_graph(spec: HarnessSpec, model: BaseChatModel, episode: Episode, seed: int = 0,
                        experience: Sequence[str] = ()) -> CompiledStateGraph:
    """Compile ``spec`` around ``model`` for ``episode`` (its task and tools).

    Input state: ``{"task": str}`` (defaults to ``episode.task.prompt``); output: ``HarnessState``
    with ``answer`` and ``stop_reason``. Works with ``invoke``, ``ainvoke``, ``stream`` and Studio.
    A cheap copy of the shared compiled ``graph``, named ``harness:<spec name>``, with a recursion
    limit above the budgets and a fresh ``EngineContext(spec, model, episode, seed, experience)`` bound
    as its run context (``coevo.compat.bind_context``), so concurrent rollouts never share tools.
    ``experience``: the lessons a BPE harness starts with (``arun_rollout``'s).
    """
    config = {**(graph.config or {}), "recursion_limit": recursion_limit(spec)}
    context = EngineContext(spec, model, episode, seed, tuple(experience))
    return bind_context(graph, context, config=config, name=f"harness:{spec.name}")


def to_trajectory(state: HarnessState, task: Task, spec: HarnessSpec, seed: int = 0,
                  checkpoint_id: str = "") -> Trajectory:
    """The ``Trajectory`` of a finished run (not yet scored)."""
    return Trajectory(
        task_id=task.id, env=task.env, split=task.split, harness_id=spec.id, checkpoint_id=checkpoint_id, seed=seed,
        messages=messages_to_dict(state.get("messages", [])), calls=[ModelCall(**c) for c in state.get("calls", [])],
        final_answer=state.get("answer"), stop_reason=state.get("stop_reason") or "",
        hook_events=state.get("hook_events", []), interface_violations=state.get("violations", 0),
        violation_turns=len(state.get("violated_turns", [])),
        model_turns=state.get("model_calls", 0), env_actions=state.get("env_actions", 0),
        harness_actions=state.get("harness_actions", []), harness_state=state.get("bpe", {}))


async def arun_rollout(spec: HarnessSpec, model: BaseChatModel, env: Env, task: Task, seed: int = 0,
                       checkpoint_id: str = "", split: str | None = None,
                       experience: Sequence[str] = ()) -> Trajectory:
    """One rollout: a fresh episode of ``task``, the harness graph run to the end, the verifier's score.

    The loop runs through ``coevo.compat.arun_state`` (the graph's nodes, routers and reducers without
    Pregel's per-step cost), or through the compiled graph when LangSmith tracing is on, so traces show
    every node. ``experience``: the harness lineage's lessons a BPE harness starts with
    (``EngineContext.experience``). Returns a scored ``Trajectory`` (reward, passed, score_detail).
    The episode is always closed. Raises whatever the model raises (e.g. a network error); tool errors never propagate.
    A spec naming a user's agent (``spec.agent``) runs that agent's graph instead (``arun_agent_rollout``).
    """
    if spec.agent is not None:
        return await arun_agent_rollout(spec, model, env, task, seed, checkpoint_id, split, experience)
    episode = env.episode(task, seed)
    started = time.perf_counter()
    try:
        context = EngineContext(spec, model, episode, seed, tuple(experience))
        inputs, limit = {"task": task.prompt}, recursion_limit(spec)
        if tracing_is_enabled():  # LangSmith on: run the compiled graph so the rollout is traced node by node
            state = await graph.ainvoke(inputs, {"recursion_limit": limit, "run_name": f"harness:{spec.name}"},
                                        context=context)
        else:
            state = await arun_state(graph, context, inputs, limit)
        traj = to_trajectory(state, task, spec, seed, checkpoint_id)  # type: ignore[arg-type]
        score = env.score(task, traj.final_answer, episode)
    finally:
        episode.close()
    traj.split = split or task.split
    traj.reward, traj.passed, traj.score_detail = score.reward, score.passed, score.detail
    traj.latency_s = time.perf_counter() - started
    return traj


builder = StateGraph(HarnessState, context_schema=EngineContext)
builder.add_node("assemble_context", node(assemble_context))
builder.add_node("call_model", node(call_model, acall_model))
builder.add_node("parse_reply", node(parse_reply))
builder.add_node("run_tools", node(run_tools, arun_tools))
builder.add_node("finish", node(finish))
builder.add_edge(START, "assemble_context")
builder.add_conditional_edges("assemble_context", route(after_assemble), ["call_model", "finish"])
builder.add_conditional_edges("call_model", route(after_call), ["parse_reply", "finish"])
builder.add_conditional_edges("parse_reply", route(after_parse), ["run_tools", "assemble_context", "finish"])
builder.add_conditional_edges("run_tools", route(after_tools), ["assemble_context", "finish"])
builder.add_edge("finish", END)

graph = builder.compile(name="harness")
"""The harness state machine, unbound: run it with ``context=EngineContext(spec, model, episode)``."""
