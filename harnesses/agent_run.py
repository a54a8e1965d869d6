"""One rollout of a user's LangGraph agent (``coevo.harnesses.agent``) on an env task, as a ``Trajectory``.

The user's graph runs unchanged: coevo builds it with ``factory(params, model[, tools])`` per
rollout, where ``model`` is a ``RecordingChatModel`` around the policy (coevo's decoding, a seed per
call, the model-call budget) and ``tools`` the episode's tools as LangChain tools (the spec's tool
view applied: exposed set, renames, descriptions), and invokes it on ``{"messages": [task prompt]}``.
Its recorded calls are the trajectory's ``calls`` (token ids, logprobs: the loss mask of
``Trajectory.segments`` covers the sampled tokens only); its final ``messages`` the trajectory's.
The answer is the final state's ``answer`` when the graph sets one, else the last AI message's text
read with the spec's ``parser.final_answer_pattern`` (the whole text when the pattern does not match).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, messages_from_dict
from langchain_core.messages import messages_to_dict as to_dicts
from langchain_core.tools import StructuredTool
from langgraph.errors import GraphRecursionError

from coevo.compat import detached
from coevo.envs.base import Env, Episode, Task, Tool
from coevo.harnesses.agent import AgentError, load_agent
from coevo.harnesses.engine import call_seed, decoding_kwargs
from coevo.harnesses.parse import last_answer_match
from coevo.harnesses.spec import HarnessSpec
from coevo.models.fake import ScriptedChatModel
from coevo.models.recording import CallBudgetSpent, RecordingChatModel
from coevo.models.trajectory import Trajectory

__all__ = ["agent_tools", "arun_agent_rollout", "dry_run", "read_answer"]


def agent_tools(spec: HarnessSpec, episode: Episode) -> list[StructuredTool]:
    """The episode's tools as LangChain tools, through ``spec.tool_view`` (exposed, renamed, described);
    each returns its output as text (JSON for a non-string) and reports a raised error as its output."""
    view = spec.tool_view
    shown = [t for t in episode.tools if view.exposed is None or t.name in view.exposed]
    return [_lc_tool(dataclasses.replace(t, name=view.renames.get(t.name, t.name),
                                         description=view.descriptions.get(t.name, t.description))) for t in shown]


def _lc_tool(tool: Tool) -> StructuredTool:
    def run(**kwargs: Any) -> str:
        out = tool.fn(**kwargs)
        return out if isinstance(out, str) else json.dumps(out, default=str)

    return StructuredTool(name=tool.name, description=tool.description, args_schema=tool.parameters, func=run,
                          handle_tool_error=True)


def read_answer(state: dict[str, Any], spec: HarnessSpec) -> str | None:
    """The rollout's answer: ``state["answer"]`` when a string, else the last AI message's text read
    with ``spec.parser.final_answer_pattern`` (group 1, else the whole match; the whole text when it
    does not match); None without an AI message."""
    if isinstance(state.get("answer"), str):
        return state["answer"]
    reply = next((m for m in reversed(state.get("messages", [])) if isinstance(m, AIMessage)), None)
    if reply is None:
        return None
    text = reply.text if isinstance(reply.text, str) else str(reply.content)
    pattern = spec.parser.final_answer_pattern
    match = last_answer_match(pattern, text) if pattern else None
    if match is None:
        return text.strip()
    return (match.group(1) if match.re.groups else match.group(0)).strip()


def recursion_limit(spec: HarnessSpec) -> int:
    """The LangGraph recursion limit of a user graph: room for a few steps per model call and tool
    action (a ReAct loop takes two per turn), so the model-call budget normally ends a runaway first."""
    return 4 * (spec.budget.max_model_calls + spec.budget.max_env_actions) + 16


async def arun_agent_rollout(spec: HarnessSpec, model: Any, env: Env, task: Task, seed: int = 0,
                             checkpoint_id: str = "", split: str | None = None,
                             experience: Sequence[str] = ()) -> Trajectory:
    """One rollout of ``spec.agent`` (``arun_rollout``'s signature and result; ``experience`` is
    unused: a user agent has no BPE state). ``stop_reason``: ``final_answer`` (an answer was read),
    ``no_answer``, ``budget:model_calls`` (the recording model's budget ended it) or
    ``budget:recursion`` (LangGraph's recursion limit). The episode is always closed. Raises
    ``AgentError`` for a factory or graph that raises (the model's own errors propagate as they are)."""
    agent = load_agent(spec.agent or "")
    params = agent.params(spec)
    episode = env.episode(task, seed)
    started = time.perf_counter()
    first = spec.decoding.seed if spec.decoding.seed is not None else seed
    recorder = RecordingChatModel(policy=model, decoding=decoding_kwargs(spec), max_calls=spec.budget.max_model_calls,
                                  seed_of=lambda i: call_seed(first, i))
    try:
        graph = agent.build(params, recorder, agent_tools(spec, episode) if agent.takes_tools else ())
        stop = ""
        try:
            with detached():  # its own root run: not a subgraph of the meta loop's node (checkpointer)
                state = await graph.ainvoke({"messages": [HumanMessage(task.prompt)]},
                                            {"recursion_limit": recursion_limit(spec)})
        except (CallBudgetSpent, GraphRecursionError) as err:
            stop = "budget:model_calls" if isinstance(err, CallBudgetSpent) else "budget:recursion"
            state = {"messages": _last_messages(recorder)}
        except Exception as err:
            if err is recorder.error:
                raise
            raise AgentError(spec.agent or "", f"the graph raised {type(err).__name__}: {err}") from err
        answer = None if stop else read_answer(state, spec)
        messages = list(state.get("messages", []))
        traj = Trajectory(
            task_id=task.id, env=task.env, split=split or task.split, harness_id=spec.id,
            checkpoint_id=checkpoint_id, seed=seed, messages=to_dicts(messages), calls=list(recorder.calls),
            final_answer=answer, stop_reason=stop or ("final_answer" if answer is not None else "no_answer"),
            model_turns=len(recorder.calls), env_actions=sum(isinstance(m, ToolMessage) for m in messages))
        score = env.score(task, answer, episode)
    finally:
        episode.close()
    traj.reward, traj.passed, traj.score_detail = score.reward, score.passed, score.detail
    traj.latency_s = time.perf_counter() - started
    return traj


def _last_messages(recorder: RecordingChatModel) -> list[BaseMessage]:
    """The conversation as far as it went: the last recorded call's input and reply."""
    if not recorder.calls:
        return []
    last = recorder.calls[-1]
    return messages_from_dict([*last.input, last.output])



async def dry_run(spec: HarnessSpec, env: Env) -> Trajectory | None:
    """Run ``spec``'s agent once, before a run stores anything, on the env's first train task with a
    scripted model that answers ``Final answer: 0`` (no weights, no network): a factory that raises or
    returns no graph, params that fail validation, or a graph that raises fail here with
    ``AgentError``. Returns the trajectory; None for a spec without an agent or an env without train tasks."""
    tasks = env.tasks("train", 1) if spec.agent is not None else []
    if not tasks:
        return None
    return await arun_agent_rollout(spec, ScriptedChatModel(script=["Final answer: 0"]), env, tasks[0])
