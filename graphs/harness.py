"""The agent: a ``HarnessSpec`` compiled to a LangGraph state machine (DESIGN.md, Harness graph).

Loop: assemble context → call model → parse reply → run tools → (loop | finish), with hooks
firing at ``before_model``, ``after_model``, ``after_tool``, ``on_tool_error`` and
``before_finish`` (Harness-S Table 7). Budgets (Harness-S Table 8) end every episode: a model
that never stops ends at its budget with the reason recorded. The compiled graph is what apps
embed and Studio draws; ``arun_rollout`` runs it on an env task and returns a ``Trajectory``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import operator
import time
from functools import lru_cache
from typing import Annotated, Any, Callable, TypedDict, get_origin, get_type_hints

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage,
                                     SystemMessage, ToolMessage, messages_to_dict)
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.base import RunnableBindingBase
from langgraph._internal._runnable import RunnableCallable  # LangGraph's own cheap node wrapper (no source parsing)
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langsmith.utils import tracing_is_enabled

from coevo.envs.base import Env, Episode, Task, Tool
from coevo.envs.interaction import next_user_turn
from coevo.harnesses.parse import Action, parse_reply
from coevo.harnesses.registry import ACTIONS, CONDITIONS, Effect, HookContext
from coevo.harnesses.spec import HarnessSpec
from coevo.harnesses.view import render_messages
from coevo.models.base import areply, record_call
from coevo.models.trajectory import ModelCall, Trajectory

ROLE = "coevo_role"  # additional_kwargs key: prompt | injection | observation (never policy tokens)


class HarnessState(TypedDict, total=False):
    """State of one episode.

    ``messages`` accumulates (LangGraph ``add_messages``); ``calls`` and ``hook_events`` accumulate
    (list concatenation); every other field is replaced by the node that writes it.
    """

    task: str
    """The task text (input)."""
    messages: Annotated[list[AnyMessage], add_messages]
    """Full history: prompt, model replies, observations and harness injections."""
    calls: Annotated[list[dict], operator.add]
    """Recorded model calls (``ModelCall`` dicts), in order."""
    hook_events: Annotated[list[dict], operator.add]
    """Hooks that fired: ``{"hook", "event", "action"}``."""
    model_calls: int
    env_actions: int
    violations: int
    """Interface violations (unparseable replies, unexposed tools, contract breaches)."""
    scratchpad: list[str]
    pending: list[dict]
    """Actions parsed from the last reply, awaiting ``run_tools``."""
    last: dict
    """Facts for hook conditions: last reply, observation, tool, error, parsed."""
    answer: str | None
    stop_reason: str | None


def _harness(text: str, role: str = "injection") -> HumanMessage:
    return HumanMessage(content=text, additional_kwargs={ROLE: role})


def _with_tools(model: Runnable, schemas: list[dict]) -> Runnable:
    """``model.bind_tools(schemas)``, keeping the wrappers around the chat model (``.bind(stop=...)``,
    ``with_config``, ``with_retry``): a ``RunnableBinding`` forwards ``bind_tools`` to the model it
    wraps and drops its own kwargs and config (or fails, for ``with_retry``)."""
    if isinstance(model, RunnableBindingBase):  # RunnableBinding, RunnableRetry
        return model.model_copy(update={"bound": _with_tools(model.bound, schemas)})
    return model.bind_tools(schemas)  # type: ignore[attr-defined]


class HarnessRunner:
    """The node functions of one compiled harness: a spec, a model and an episode's tools.

    Tools the model sees are the env tools filtered/renamed by ``spec.tool_view`` plus ``note``
    when the scratchpad is on. ``seed`` is used when ``spec.decoding.seed`` is ``None``.
    """

    def __init__(self, spec: HarnessSpec, model: BaseChatModel, episode: Episode, seed: int = 0) -> None:
        self.spec, self.episode, self.base_model = spec, episode, model
        d = spec.decoding
        self.decoding = {"temperature": d.temperature, "top_p": d.top_p, "seed": d.seed if d.seed is not None else seed,
                         "max_tokens": spec.budget.max_output_tokens}
        self.bind_tools()

    def bind_tools(self) -> None:
        """(Re)build the model-visible tools from ``episode.tools`` and bind them to the model; called
        again when a conversational episode reveals new tools at a later user turn."""
        view = self.spec.tool_view
        self.n_env_tools = len(self.episode.tools)
        exposed = [t for t in self.episode.tools if view.exposed is None or t.name in view.exposed]
        self.tools: dict[str, Tool] = {
            view.renames.get(t.name, t.name): dataclasses.replace(t, name=view.renames.get(t.name, t.name),
                                                                  description=view.descriptions.get(t.name, t.description))
            for t in exposed}
        if self.spec.memory.scratchpad:
            self.tools["note"] = Tool("note", "Write a note to your scratchpad; notes stay visible for the rest of the episode.",
                                      {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                                      lambda text: "noted")
        self.schemas = [t.schema() for t in self.tools.values()]
        native = self.spec.parser.mode == "native" and self.schemas
        self.model = (_with_tools(self.base_model, self.schemas) if native else self.base_model).bind(**self.decoding)
        # a plain kwargs binding is called as bound(**kwargs): same call, without a config merge per model call
        plain = isinstance(self.model, RunnableBinding) and not self.model.config and not self.model.config_factories
        self._target, self._kwargs = (self.model.bound, self.model.kwargs) if plain else (self.model, {})

    # --- hooks ------------------------------------------------------------------------------

    def remaining(self, state: HarnessState) -> int:
        b = self.spec.budget
        return min(b.max_model_calls - state.get("model_calls", 0), b.max_env_actions - state.get("env_actions", 0))

    def fire(self, event: str, state: HarnessState, **facts: Any) -> tuple[Effect, list[dict], str | None]:
        """Run every hook on ``event`` whose condition holds; merge their effects.

        Returns the merged effect, the fired hooks' events, and ``hook:<name>`` of the first hook
        whose action stopped the episode (``None`` when none did)."""
        ctx = HookContext(event=event, model_calls=state.get("model_calls", 0), env_actions=state.get("env_actions", 0),
                          remaining_steps=self.remaining(state), **{**state.get("last", {}), **facts})
        total, events, stopped = Effect(), [], None
        for name, hook in sorted(self.spec.hooks.items()):  # by name: the id sorts keys, so order must not matter
            if hook.event == event and CONDITIONS[hook.condition](ctx, **hook.parameters):
                eff = ACTIONS[hook.action](ctx, hook.message)
                stopped = stopped or (f"hook:{name}" if eff.stop else None)
                total.messages += eff.messages
                total.retry, total.block, total.stop = total.retry or eff.retry, total.block or eff.block, total.stop or eff.stop
                events.append({"hook": name, "event": event, "action": hook.action})
        return total, events, stopped

    # --- nodes ------------------------------------------------------------------------------

    def assemble_context(self, state: HarnessState) -> dict:
        """Start the episode (system + task messages) and check budgets; fire ``before_model``."""
        update: dict[str, Any] = {}
        if not state.get("messages"):
            task = state.get("task") or self.episode.task.prompt
            kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
            update["messages"] = [kinds[role](text, additional_kwargs={ROLE: "prompt"})
                                  for role, text in render_messages(self.spec, task, self.schemas)]
        if state.get("model_calls", 0) >= self.spec.budget.max_model_calls:
            return {**update, "stop_reason": "budget:model_calls"}
        effect, events, stopped = self.fire("before_model", state)
        update["hook_events"] = events
        update["messages"] = update.get("messages", []) + [_harness(m) for m in effect.messages]
        if stopped:
            update["stop_reason"] = stopped
        return update

    def visible(self, state: HarnessState) -> list[BaseMessage] | None:
        """What the model sees: prompt + the last ``history_turns`` turns (+ scratchpad), cut to the
        context-token budget by dropping the oldest turns; ``None`` if even the prompt is too long."""
        msgs = list(state["messages"])
        n = next((i for i, m in enumerate(msgs) if m.additional_kwargs.get(ROLE) != "prompt"), len(msgs))
        head = msgs[:n]  # system, few-shot turns and the task: never windowed away
        starts = [i for i, m in enumerate(msgs) if i >= n and isinstance(m, AIMessage)]
        turns = [msgs[n:starts[0]]] if starts and starts[0] > n else ([msgs[n:]] if not starts else [])
        turns += [msgs[s:e] for s, e in zip(starts, starts[1:] + [len(msgs)])]
        if self.spec.context.history_turns is not None:
            turns = turns[-self.spec.context.history_turns:] if len(turns) > self.spec.context.history_turns else turns
        notes = [_harness("Scratchpad:\n" + "\n".join(f"- {n}" for n in state["scratchpad"]))] if state.get("scratchpad") else []
        budget = self.spec.budget.max_context_tokens * 4
        while True:
            seq = head + [m for t in turns for m in t] + notes
            if sum(len(str(m.content)) for m in seq) <= budget:
                return seq
            if not turns:
                return None
            turns = turns[1:]

    def _after_call(self, seq: list[BaseMessage], reply: AIMessage, started: float, state: HarnessState) -> dict:
        call = record_call(seq, reply, time.perf_counter() - started)
        return {"messages": [reply], "calls": [call.model_dump()], "model_calls": state.get("model_calls", 0) + 1}

    def call_model(self, state: HarnessState) -> dict:
        """Call the policy on the visible context and record the call (tokens, logprobs, latency)."""
        seq = self.visible(state)
        if seq is None:
            return {"stop_reason": "budget:context_tokens"}
        started = time.perf_counter()
        return self._after_call(seq, self._target.invoke(seq, **self._kwargs), started, state)

    async def acall_model(self, state: HarnessState) -> dict:
        seq = self.visible(state)
        if seq is None:
            return {"stop_reason": "budget:context_tokens"}
        started = time.perf_counter()
        return self._after_call(seq, await areply(self._target, seq, **self._kwargs), started, state)

    def parse_reply(self, state: HarnessState) -> dict:
        """Parse the last reply into actions or a final answer; fire ``after_model`` and, for an
        answer, ``before_finish``. A reply that breaks the interface counts as a violation."""
        reply = state["messages"][-1]
        parsed = parse_reply(reply, self.spec.parser)
        ok = bool(parsed.actions) or parsed.answer is not None
        last = {"reply": str(reply.content), "parsed": ok, "answer": None}
        update: dict[str, Any] = {"last": {**state.get("last", {}), **last}, "pending": [], "answer": None,
                                  "violations": state.get("violations", 0) + (0 if ok else 1)}
        effect, events, stopped = self.fire("after_model", {**state, "last": update["last"]})
        msgs: list[BaseMessage] = []
        if effect.retry:
            msgs.append(RemoveMessage(id=reply.id))
        elif not ok and self.spec.parser.on_no_action == "violation" or parsed.error:
            msgs.append(_harness(f"{self.spec.parser.violation_message} ({parsed.error})"))
        elif parsed.actions and not (effect.block or effect.stop):
            update["pending"] = [{"name": a.name, "args": a.args, "id": a.id} for a in parsed.actions]
        elif parsed.answer is not None and not effect.block:
            fin, fin_events, fin_stopped = self.fire("before_finish", {**state, "last": update["last"]}, answer=parsed.answer)
            events += fin_events
            effect.messages += fin.messages
            stopped = stopped or fin_stopped
            if not fin.block:
                follow = next_user_turn(self.episode, parsed.answer)  # conversations (BFCL multi_turn)
                if follow is None:
                    update["answer"] = parsed.answer
                else:
                    msgs.append(HumanMessage(follow, additional_kwargs={ROLE: "prompt"}))
                    if len(self.episode.tools) != self.n_env_tools:
                        self.bind_tools()
        msgs += [_harness(m) for m in effect.messages]
        if native_orphans := self._orphan_tool_results(reply, update["pending"], effect.retry):
            msgs = native_orphans + msgs
        update.update(messages=msgs, hook_events=events)
        if stopped:
            update["stop_reason"] = stopped
        return update

    def _orphan_tool_results(self, reply: BaseMessage, pending: list[dict], retried: bool) -> list[BaseMessage]:
        """Native tool calls that will not run still need a tool result, or chat templates break."""
        if retried or pending or not isinstance(reply, AIMessage) or not reply.tool_calls:
            return []
        return [ToolMessage("Not executed.", tool_call_id=c["id"] or "call", additional_kwargs={ROLE: "observation"})
                for c in reply.tool_calls]

    def _observe(self, action: dict, text: str) -> BaseMessage:
        if self.spec.parser.mode == "native":
            return ToolMessage(text, tool_call_id=action["id"], name=action["name"], additional_kwargs={ROLE: "observation"})
        return _harness(f"[{action['name']} output]\n{text}", "observation")

    def _format(self, output: Any) -> str:
        text = output if isinstance(output, str) else json.dumps(output, default=str)
        if self.spec.tool_view.output_format == "json":
            try:
                text = json.dumps(json.loads(text), indent=2, sort_keys=True)
            except (json.JSONDecodeError, TypeError):
                pass
        cut = self.spec.context.tool_output_chars
        if cut is not None and len(text) > cut:
            text = text[:cut] + f"\n[... truncated {len(text) - cut} characters]"
        return text

    def _run_one(self, action: dict, state: dict) -> tuple[dict, list[BaseMessage]]:
        """Execute one action; returns the state delta and the messages it adds."""
        name, args = action["name"], action["args"]
        tool = self.tools.get(name)
        delta: dict[str, Any] = {}
        error = ""
        if tool is None:
            delta["violations"] = state.get("violations", 0) + 1
            error = f"unknown tool {name!r}; available tools: {sorted(self.tools)}"
            text = f"Error: {error}"
        else:
            missing = [r for r in tool.parameters.get("required", []) if r not in args]
            try:
                if missing:
                    delta["violations"] = state.get("violations", 0) + 1
                    raise TypeError(f"missing required argument(s) {missing}")
                output = tool.fn(**args)
                text = self._format(output)
            except Exception as err:  # a tool that raises is an observation, not a crash
                error = f"{type(err).__name__}: {err}"
                text = f"Error: {error}"
            if name == "note" and self.spec.memory.scratchpad and not error:
                delta["scratchpad"] = list(state.get("scratchpad", [])) + [str(args.get("text", ""))]
            else:
                delta["env_actions"] = state.get("env_actions", 0) + 1
        delta["last"] = {**state.get("last", {}), "observation": text, "tool": name, "error": error}
        effect, events, stopped = self.fire("on_tool_error" if error else "after_tool", {**state, **delta})
        if effect.block:
            text, effect.messages = " ".join(effect.messages) or "Tool output withheld by the harness.", []
        delta["hook_events"] = events
        if stopped:
            delta["stop_reason"] = stopped
        return delta, [self._observe(action, text)] + [_harness(m) for m in effect.messages]

    def run_tools(self, state: HarnessState) -> dict:
        """Run the pending actions in order, enforcing the env-action budget; fire ``after_tool`` or
        ``on_tool_error`` after each."""
        cur: dict[str, Any] = dict(state)
        msgs: list[BaseMessage] = []
        events: list[dict] = []
        for action in state.get("pending", []):
            if cur.get("stop_reason"):
                msgs.append(self._observe(action, "Not executed: the episode has ended."))
                continue
            if cur.get("env_actions", 0) >= self.spec.budget.max_env_actions and action["name"] != "note":
                cur["stop_reason"] = "budget:env_actions"
                msgs.append(self._observe(action, "Not executed: the env-action budget is spent."))
                continue
            delta, new = self._run_one(action, cur)
            events += delta.pop("hook_events")
            cur.update(delta)
            msgs += new
        keys = ("env_actions", "violations", "scratchpad", "last", "stop_reason")
        return {**{k: cur[k] for k in keys if k in cur}, "messages": msgs, "hook_events": events, "pending": []}

    async def arun_tools(self, state: HarnessState) -> dict:
        """``run_tools`` under ``ainvoke``: on the event loop when every pending tool is fast
        (``Tool.blocking`` false), else in a worker thread so a slow tool (the Python sandbox, a game
        engine) never stalls the other rollouts."""
        pending = state.get("pending", [])
        if any(getattr(self.tools.get(a["name"]), "blocking", False) for a in pending):
            return await asyncio.to_thread(self.run_tools, state)
        return self.run_tools(state)

    def finish(self, state: HarnessState) -> dict:
        """Close the episode: record why it ended."""
        return {"stop_reason": state.get("stop_reason") or ("final_answer" if state.get("answer") is not None else "no_answer")}

    # --- routing ----------------------------------------------------------------------------

    @staticmethod
    def after_assemble(state: HarnessState) -> str:
        return "finish" if state.get("stop_reason") else "call_model"

    @staticmethod
    def after_call(state: HarnessState) -> str:
        return "finish" if state.get("stop_reason") else "parse_reply"

    @staticmethod
    def after_parse(state: HarnessState) -> str:
        if state.get("stop_reason") or state.get("answer") is not None:
            return "finish"
        return "run_tools" if state.get("pending") else "assemble_context"

    @staticmethod
    def after_tools(state: HarnessState) -> str:
        return "finish" if state.get("stop_reason") else "assemble_context"


RUNNER_KEY = "coevo_runner"
"""``config["configurable"]`` key holding the ``HarnessRunner`` (episode, tools, bound model) of a run."""


def _runner(config: RunnableConfig) -> HarnessRunner:
    runner = (config.get("configurable") or {}).get(RUNNER_KEY)
    if runner is None:
        raise ValueError(f"harness graph run without a HarnessRunner in config['configurable'][{RUNNER_KEY!r}]: "
                         "build the graph with build_harness_graph(spec, model, episode)")
    return runner


def _node(method: str, amethod: str | None = None) -> RunnableCallable:
    """A node calling ``HarnessRunner.<method>`` of the run's runner, with an async twin so that
    ``ainvoke`` never hops to a thread for pure steps (``amethod`` for steps that await)."""

    def run(state: HarnessState, config: RunnableConfig) -> dict:
        return getattr(_runner(config), method)(state)

    async def arun(state: HarnessState, config: RunnableConfig) -> dict:
        runner = _runner(config)
        return await getattr(runner, amethod)(state) if amethod else getattr(runner, method)(state)

    return RunnableCallable(run, arun, name=method, trace=False)


def _route(fn: Callable[[HarnessState], str]) -> RunnableCallable:
    """A conditional-edge router with an async twin (no thread hop under ``ainvoke``)."""

    async def arun(state: HarnessState) -> str:
        return fn(state)

    return RunnableCallable(fn, arun, name=fn.__name__, trace=False)


def recursion_limit(spec: HarnessSpec) -> int:
    """A LangGraph recursion limit that the budgets, not LangGraph, always reach first."""
    return 4 * (spec.budget.max_model_calls + spec.budget.max_env_actions) + 16


NODES: dict[str, tuple[str, str | None]] = {
    "assemble_context": ("assemble_context", None),
    "call_model": ("call_model", "acall_model"),
    "parse_reply": ("parse_reply", None),
    "run_tools": ("run_tools", "arun_tools"),
    "finish": ("finish", None),
}
"""The harness loop's nodes: name -> (``HarnessRunner`` method, async method or ``None`` when pure)."""

ROUTES: dict[str, tuple[Callable[[HarnessState], str], tuple[str, ...]]] = {
    "assemble_context": (HarnessRunner.after_assemble, ("call_model", "finish")),
    "call_model": (HarnessRunner.after_call, ("parse_reply", "finish")),
    "parse_reply": (HarnessRunner.after_parse, ("run_tools", "assemble_context", "finish")),
    "run_tools": (HarnessRunner.after_tools, ("assemble_context", "finish")),
}
"""Conditional edges: node -> (router, its destinations). ``START`` goes to ``assemble_context``;
``finish`` goes to ``END``. The compiled graph and ``arun_state`` are both built from these tables."""

ENTRY, EXIT = "assemble_context", "finish"


@lru_cache(maxsize=256)
def _compiled(name: str) -> CompiledStateGraph:
    """The harness state machine, compiled once per graph name: every per-run object (spec, model,
    episode tools, seed) lives in the ``HarnessRunner`` passed through the run's config."""
    builder = StateGraph(HarnessState)
    for node, (method, amethod) in NODES.items():
        builder.add_node(node, _node(method, amethod))
    builder.add_edge(START, ENTRY)
    for node, (router, targets) in ROUTES.items():
        builder.add_conditional_edges(node, _route(router), list(targets))
    builder.add_edge(EXIT, END)
    return builder.compile(name=name)


def _reducers() -> dict[str, Callable[[Any, Any], Any]]:
    hints = get_type_hints(HarnessState, include_extras=True)
    return {k: h.__metadata__[0] for k, h in hints.items() if get_origin(h) is Annotated}


REDUCERS = _reducers()
"""``HarnessState`` fields with a reducer (``add_messages``, ``operator.add``); all others are replaced."""


async def arun_state(spec: HarnessSpec, runner: HarnessRunner, inputs: dict[str, Any]) -> HarnessState:
    """Run the harness loop of ``runner`` on ``inputs`` (e.g. ``{"task": str}``) with LangGraph's state
    semantics, without LangGraph's Pregel engine; returns the final ``HarnessState``.

    Same nodes, routers and reducers as the compiled graph (``NODES``, ``ROUTES``, ``REDUCERS``), so
    the final state matches ``build_harness_graph(...).ainvoke(inputs)`` (message ids aside). It
    exists for throughput: Pregel costs ~0.2 ms of CPU per superstep (17 supersteps in a 4-call
    rollout), which alone exceeds the engine's CPU budget at 32 concurrent 50 ms model calls.
    Raises ``GraphRecursionError`` past ``recursion_limit(spec)`` node steps, like the graph.
    """
    state: dict[str, Any] = {**{k: [] for k in REDUCERS}, **inputs}
    node = ENTRY
    for _ in range(recursion_limit(spec)):
        method, amethod = NODES[node]
        update = await getattr(runner, amethod)(state) if amethod else getattr(runner, method)(state)
        state = dict(state)
        for key, value in (update or {}).items():
            state[key] = REDUCERS[key](state[key], value) if key in REDUCERS else value
        if node == EXIT:
            return state  # type: ignore[return-value]
        node = ROUTES[node][0](state)
    raise GraphRecursionError(f"Recursion limit of {recursion_limit(spec)} reached without hitting a stop condition "
                              f"(harness {spec.name!r}): the budgets should end every episode first; this is a bug")


def _run_config(spec: HarnessSpec, runner: HarnessRunner) -> RunnableConfig:
    return {"recursion_limit": recursion_limit(spec), "configurable": {RUNNER_KEY: runner}}


def build_harness_graph(spec: HarnessSpec, model: BaseChatModel, episode: Episode, seed: int = 0) -> CompiledStateGraph:
    """Compile ``spec`` around ``model`` for ``episode`` (its task and tools).

    Input state: ``{"task": str}`` (defaults to ``episode.task.prompt``); output: ``HarnessState``
    with ``answer`` and ``stop_reason``. The graph carries a recursion limit above the budgets.
    Works with ``invoke`` and ``ainvoke``. The state machine is compiled once per spec name and
    cached; this graph is a cheap copy bound (through ``config["configurable"]``) to a fresh
    ``HarnessRunner`` of this spec, model, episode and seed, so concurrent rollouts never share tools.
    """
    runner = HarnessRunner(spec, model, episode, seed)
    return _compiled(f"harness:{spec.name}").with_config(_run_config(spec, runner))


def to_trajectory(state: HarnessState, task: Task, spec: HarnessSpec, seed: int = 0, checkpoint_id: str = "") -> Trajectory:
    """The ``Trajectory`` of a finished run (not yet scored)."""
    return Trajectory(
        task_id=task.id, env=task.env, split=task.split, harness_id=spec.id, checkpoint_id=checkpoint_id, seed=seed,
        messages=messages_to_dict(state.get("messages", [])), calls=[ModelCall(**c) for c in state.get("calls", [])],
        final_answer=state.get("answer"), stop_reason=state.get("stop_reason") or "", hook_events=state.get("hook_events", []),
        interface_violations=state.get("violations", 0), model_turns=state.get("model_calls", 0),
        env_actions=state.get("env_actions", 0))


async def arun_rollout(spec: HarnessSpec, model: BaseChatModel, env: Env, task: Task, seed: int = 0,
                       checkpoint_id: str = "", split: str | None = None) -> Trajectory:
    """One rollout: a fresh episode of ``task``, the harness graph run to the end, the verifier's score.

    The loop runs through ``arun_state`` (the graph's nodes and edges without Pregel's per-step cost),
    or through the compiled graph when LangSmith tracing is on, so traces show every node. Returns a scored ``Trajectory`` (reward, passed, score_detail). The episode is always closed.
    Raises whatever the model raises (e.g. a network error); tool errors never propagate.
    """
    episode = env.episode(task, seed)
    started = time.perf_counter()
    try:
        runner = HarnessRunner(spec, model, episode, seed)
        if tracing_is_enabled():  # LangSmith on: run the compiled graph so the rollout is traced node by node
            state = await _compiled(f"harness:{spec.name}").ainvoke({"task": task.prompt}, _run_config(spec, runner))
        else:
            state = await arun_state(spec, runner, {"task": task.prompt})
        traj = to_trajectory(state, task, spec, seed, checkpoint_id)
        score = env.score(task, traj.final_answer, episode)
    finally:
        episode.close()
    traj.split = split or task.split
    traj.reward, traj.passed, traj.score_detail = score.reward, score.passed, score.detail
    traj.latency_s = time.perf_counter() - started
    return traj
