"""The harness engine: node functions and routers of the agent loop, and the context they run in.

The loop (docs/design.md, Harness graph) is assemble context → call model → parse reply → run tools →
(loop | finish), with hooks firing at ``before_model``, ``after_model``, ``after_tool``,
``on_tool_error`` and ``before_finish`` (Harness-S Table 7) and budgets (Harness-S Table 8) ending
every episode. Nodes are flat functions ``node(state, runtime) -> dict`` (a partial update of
``coevo.harnesses.state.HarnessState``); the run's spec, model and episode reach them as
``runtime.context``, an ``EngineContext``, through LangGraph's ``context_schema`` as in the meta graphs.
Each node that awaits (the model call, tools) has an ``a``-prefixed async twin so that ``ainvoke``
never hops to a thread. The ``run_tools`` node is in ``coevo.harnesses.acting``; the wiring is in
``coevo.harnesses.runtime``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from coevo.compat import areply, bind_tools_within, unbind
from coevo.envs.base import Episode, Tool
from coevo.envs.interaction import next_user_turn
from coevo.harnesses.bpe import bpe_tools, initial_state, render_state
from coevo.harnesses.constrain import constrained_format
from coevo.harnesses.fit import TokenMeter, meter_of
from coevo.harnesses.hooks import fire
from coevo.harnesses.parse import parse_reply as parse
from coevo.harnesses.spec import HarnessSpec
from coevo.harnesses.state import HarnessState
from coevo.harnesses.view import render_messages
from coevo.models.base import record_call

ROLE = "coevo_role"  # additional_kwargs key: prompt | injection | observation (never policy tokens)


def call_seed(seed: int, index: int) -> int:
    """The sampling seed of model call ``index`` (0-based) of a rollout sampled with ``seed``.

    A pure function of ``(seed, index)``: a rollout replays exactly, yet a retry after an interface
    violation samples afresh instead of repeating the reply it replaces.
    Returns an int in [0, 2**31) (what every backend accepts as a seed).
    """
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") >> 1


def decoding_kwargs(spec: HarnessSpec) -> dict[str, Any]:
    """The keyword arguments every model call of ``spec`` is made with: ``temperature``, ``top_p``,
    ``max_tokens`` (``budget.max_output_tokens``) and ``stop`` when set (the seed is per call)."""
    d = spec.decoding
    return {"temperature": d.temperature, "top_p": d.top_p, "max_tokens": spec.budget.max_output_tokens,
            **({"stop": list(d.stop)} if d.stop else {})}


@dataclass
class EngineContext:
    """What the nodes of one harness run are given (LangGraph ``context_schema``).

    ``spec`` the harness, ``model`` the policy (a chat model, possibly wrapped with ``bind``,
    ``with_config`` or ``with_retry``), ``episode`` the task's fresh episode (its tools and state),
    ``seed`` the rollout's sampling seed (used when ``spec.decoding.seed`` is ``None``; each call samples
    with ``call_seed(seed, call index)``), ``experience`` the lineage's lessons a BPE harness starts with.

    Derived once (``bind_tools``): ``tools`` the model-visible tools by shown name (the episode's
    tools filtered and renamed by ``spec.tool_view``, plus ``note`` when the scratchpad is on and the
    four BPE harness actions with ``spec.bpe``),
    ``schemas`` their function schemas, ``target``/``kwargs``, what ``call_model`` calls:
    ``target.invoke(messages, **call_kwargs(i))`` for call ``i``, and ``meter``, how ``visible`` counts
    the context against its budget (``coevo.harnesses.fit.meter_of(target)``).
    """

    spec: HarnessSpec
    model: Runnable
    episode: Episode
    seed: int = 0
    experience: tuple[str, ...] = ()
    tools: dict[str, Tool] = field(init=False, repr=False)
    schemas: list[dict] = field(init=False, repr=False)
    target: Runnable = field(init=False, repr=False)
    kwargs: dict[str, Any] = field(init=False, repr=False)
    n_env_tools: int = field(init=False, repr=False)
    meter: TokenMeter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.spec.decoding.seed is not None:
            self.seed = self.spec.decoding.seed
        self.bind_tools()

    def bind_tools(self) -> None:
        """(Re)derive the model-visible tools from ``episode.tools`` and bind them to the model; called
        again when a conversational episode reveals new tools at a later user turn."""
        view, spec = self.spec.tool_view, self.spec
        self.n_env_tools = len(self.episode.tools)
        exposed = [t for t in self.episode.tools if view.exposed is None or t.name in view.exposed]
        self.tools = {view.renames.get(t.name, t.name): dataclasses.replace(
            t, name=view.renames.get(t.name, t.name), description=view.descriptions.get(t.name, t.description))
            for t in exposed}
        if spec.memory.scratchpad:
            self.tools["note"] = Tool(
                "note", "Write a note to your scratchpad; notes stay visible for the rest of the episode.",
                {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                lambda text: "noted")
        if spec.bpe is not None:
            self.tools.update({t.name: t for t in bpe_tools()})
        self.schemas = [t.schema() for t in self.tools.values()]
        model = (bind_tools_within(self.model, self.schemas) if spec.parser.mode == "native" and self.schemas
                 else self.model).bind(**decoding_kwargs(spec))
        # a plain kwargs binding is called as bound(**kwargs): same call, without a config merge per model call
        self.target, self.kwargs = unbind(model)
        self.meter = meter_of(self.target)

    def call_kwargs(self, index: int, env_actions: int = 0) -> dict[str, Any]:
        """Model call ``index``'s (0-based) keyword arguments: decoding, seed, ``constrained_format``'s schema
        for the actions allowed after ``env_actions`` env actions (none of the env's tools once
        ``budget.max_env_actions`` is spent: the reply must then be an answer or a harness action, and the
        answer is allowed under ``constrain = "actions"`` too)."""
        spent = env_actions >= self.spec.budget.max_env_actions
        env = [self.spec.tool_view.renames.get(t.name, t.name) for t in self.episode.tools] if spent else ()
        schema = constrained_format(self.spec, self.tools, spent, env)
        return {**self.kwargs, "seed": call_seed(self.seed, index), **schema}


def engine(runtime: Runtime[EngineContext]) -> EngineContext:
    """The run's ``EngineContext``. Raises ``ValueError`` (how to build one) when the graph runs without it."""
    ctx = runtime.context
    if not isinstance(ctx, EngineContext):
        raise ValueError("the harness graph ran without its EngineContext (spec, model, episode): build it with "
                         "coevo.build_harness_graph(spec, model, episode), or pass context=EngineContext(...) "
                         "to invoke")
    return ctx


def _harness(text: str, role: str = "injection") -> HumanMessage:
    return HumanMessage(content=text, additional_kwargs={ROLE: role})


def _violation(state: HarnessState) -> dict[str, Any]:
    """One more interface violation, made in the current model turn: ``violations`` counts events,
    ``violated_turns`` the turns with at least one (TIMR, CoEvo-RSI)."""
    turn, turns = state.get("model_calls", 0), state.get("violated_turns", [])
    return {"violations": state.get("violations", 0) + 1,
            "violated_turns": turns if turns and turns[-1] == turn else [*turns, turn]}


# --- nodes ------------------------------------------------------------------------------


def assemble_context(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """Start the episode (system + task messages) and check budgets; fire ``before_model``."""
    ctx = engine(runtime)
    update: dict[str, Any] = {}
    if not state.get("messages"):
        task = state.get("task") or ctx.episode.task.prompt
        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        update["messages"] = [kinds[role](text, additional_kwargs={ROLE: "prompt"})
                              for role, text in render_messages(ctx.spec, task, ctx.schemas)]
        if ctx.spec.bpe is not None:
            update["bpe"] = initial_state(ctx.experience, ctx.spec.bpe)
    if state.get("model_calls", 0) >= ctx.spec.budget.max_model_calls:
        return {**update, "stop_reason": "budget:model_calls"}
    effect, events, stopped = fire(ctx.spec, "before_model", state)
    update["hook_events"] = events
    update["messages"] = update.get("messages", []) + [_harness(m) for m in effect.messages]
    if stopped:
        update["stop_reason"] = stopped
    return update


def visible(ctx: EngineContext, state: HarnessState) -> list[BaseMessage] | None:
    """What the model sees: prompt + the last ``history_turns`` turns (+ scratchpad, + the BPE state
    when ``spec.bpe.render`` is ``always``; with ``on_read`` only ``bpe_read`` shows it), cut to the
    context-token budget (``ctx.meter``: the smaller of ``budget.max_context_tokens`` and the policy's own
    context, counted by its tokenizer where it is local, else 4 characters a token) by dropping the
    oldest turns; ``None`` if even the prompt is too long."""
    msgs = list(state["messages"])
    n = next((i for i, m in enumerate(msgs) if m.additional_kwargs.get(ROLE) != "prompt"), len(msgs))
    head = msgs[:n]  # system, few-shot turns and the task: never windowed away
    starts = [i for i, m in enumerate(msgs) if i >= n and isinstance(m, AIMessage)]
    turns = [msgs[n:starts[0]]] if starts and starts[0] > n else ([msgs[n:]] if not starts else [])
    turns += [msgs[s:e] for s, e in zip(starts, starts[1:] + [len(msgs)])]
    keep = ctx.spec.context.history_turns
    if keep is not None and len(turns) > keep:
        turns = turns[-keep:]
    notes = ([_harness("Scratchpad:\n" + "\n".join(f"- {n}" for n in state["scratchpad"]))]
             if state.get("scratchpad") else [])
    if ctx.spec.bpe is not None and ctx.spec.bpe.render == "always" and state.get("bpe"):
        notes.append(_harness("Harness state:\n" + render_state(state["bpe"])))
    budget = ctx.meter.budget(ctx.spec)
    while True:
        seq = head + [m for t in turns for m in t] + notes
        if ctx.meter.tokens(seq) <= budget:
            return seq
        if not turns:
            return None
        turns = turns[1:]


def _called(seq: list[BaseMessage], reply: AIMessage, started: float, state: HarnessState, seed: int) -> dict:
    call = record_call(seq, reply, time.perf_counter() - started, seed)
    return {"messages": [reply], "calls": [call.model_dump()], "model_calls": state.get("model_calls", 0) + 1}


def call_model(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """Call the policy on the visible context and record the call (tokens, logprobs, latency and the
    seed it sampled with); call ``i`` samples with ``call_seed(seed, i)``."""
    ctx = engine(runtime)
    seq = visible(ctx, state)
    if seq is None:
        return {"stop_reason": "budget:context_tokens"}
    started, kwargs = time.perf_counter(), ctx.call_kwargs(state.get("model_calls", 0), state.get("env_actions", 0))
    reply = ctx.target.invoke(seq, **kwargs)
    return _called(seq, reply, started, state, kwargs["seed"])


async def acall_model(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """``call_model`` under ``ainvoke`` (through ``coevo.compat.areply``)."""
    ctx = engine(runtime)
    seq = visible(ctx, state)
    if seq is None:
        return {"stop_reason": "budget:context_tokens"}
    started, kwargs = time.perf_counter(), ctx.call_kwargs(state.get("model_calls", 0), state.get("env_actions", 0))
    reply = await areply(ctx.target, seq, **kwargs)
    return _called(seq, reply, started, state, kwargs["seed"])


def parse_reply(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """Parse the last reply into actions or a final answer; fire ``after_model`` and, for an
    answer, ``before_finish``. A reply that parses to neither is an interface violation."""
    ctx = engine(runtime)
    reply = state["messages"][-1]
    parsed = parse(reply, ctx.spec.parser)
    ok = bool(parsed.actions) or parsed.answer is not None
    last = {**state.get("last", {}), "reply": str(reply.content), "parsed": ok, "answer": None}
    counts = {"violations": state.get("violations", 0), "violated_turns": state.get("violated_turns", [])}
    update: dict[str, Any] = {"last": last, "pending": [], "answer": None, **(counts if ok else _violation(state))}
    effect, events, stopped = fire(ctx.spec, "after_model", {**state, "last": last})
    msgs: list[BaseMessage] = []
    if effect.retry:
        msgs.append(RemoveMessage(id=reply.id))
    elif (not ok and ctx.spec.parser.on_no_action == "violation") or parsed.error:
        msgs.append(_harness(f"{ctx.spec.parser.violation_message} ({parsed.error})"))
    elif parsed.actions and not (effect.block or effect.stop):
        update["pending"] = [{"name": a.name, "args": a.args, "id": a.id, "native": a.native} for a in parsed.actions]
    elif parsed.answer is not None and not effect.block:
        fin, fin_events, fin_stopped = fire(ctx.spec, "before_finish", {**state, "last": last}, answer=parsed.answer)
        events += fin_events
        effect.messages += fin.messages
        stopped = stopped or fin_stopped
        if not fin.block:
            follow = next_user_turn(ctx.episode, parsed.answer)  # conversations (BFCL multi_turn)
            if follow is None:
                update["answer"] = parsed.answer
            else:
                msgs.append(HumanMessage(follow, additional_kwargs={ROLE: "prompt"}))
                if len(ctx.episode.tools) != ctx.n_env_tools:
                    ctx.bind_tools()
    msgs += [_harness(m) for m in effect.messages]
    if orphans := _orphan_tool_results(reply, update["pending"], effect.retry):
        msgs = orphans + msgs
    update.update(messages=msgs, hook_events=events)
    if stopped:
        update["stop_reason"] = stopped
    return update


def _orphan_tool_results(reply: BaseMessage, pending: list[dict], retried: bool) -> list[BaseMessage]:
    """Native tool calls that will not run still need a tool result, or chat templates break."""
    if retried or pending or not isinstance(reply, AIMessage) or not reply.tool_calls:
        return []
    return [ToolMessage("Not executed.", tool_call_id=c["id"] or "call", additional_kwargs={ROLE: "observation"})
            for c in reply.tool_calls]


def finish(state: HarnessState) -> dict:
    """Close the episode: record why it ended."""
    return {"stop_reason": state.get("stop_reason")
            or ("final_answer" if state.get("answer") is not None else "no_answer")}


# --- routers ----------------------------------------------------------------------------


def after_assemble(state: HarnessState) -> str:
    """``call_model``, or ``finish`` when a budget or hook ended the episode."""
    return "finish" if state.get("stop_reason") else "call_model"


def after_call(state: HarnessState) -> str:
    """``parse_reply``, or ``finish`` when the context budget ended the episode."""
    return "finish" if state.get("stop_reason") else "parse_reply"


def after_parse(state: HarnessState) -> str:
    """``finish`` on an answer or a stop; ``run_tools`` with pending actions; else back to ``assemble_context``."""
    if state.get("stop_reason") or state.get("answer") is not None:
        return "finish"
    return "run_tools" if state.get("pending") else "assemble_context"


def after_tools(state: HarnessState) -> str:
    """Back to ``assemble_context``, or ``finish`` when a budget or hook ended the episode."""
    return "finish" if state.get("stop_reason") else "assemble_context"
