"""The harness graph's ``run_tools`` node: the pending actions of a reply executed in order under the
env-action budget — env tools, the scratchpad's ``note`` and EvoHarness-RL's BPE actions — each
output formatted as the tool view says and observed by the model, with ``after_tool`` /
``on_tool_error`` hooks after each (the rest of the loop is ``coevo.harnesses.engine``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.runtime import Runtime

from coevo.harnesses.bpe import ACTIONS as BPE_ACTIONS
from coevo.harnesses.bpe import action_record, apply_action, initial_state
from coevo.harnesses.engine import ROLE, EngineContext, _harness, _violation, engine
from coevo.harnesses.hooks import fire
from coevo.harnesses.state import HarnessState


def _observe(ctx: EngineContext, action: dict, text: str) -> BaseMessage:
    if ctx.spec.parser.mode == "native" and action.get("native", True):  # a choice_action reply has no tool call
        return ToolMessage(text, tool_call_id=action["id"], name=action["name"],
                           additional_kwargs={ROLE: "observation"})
    return _harness(f"[{action['name']} output]\n{text}", "observation")


def _format(ctx: EngineContext, output: Any) -> str:
    """A tool's output as the model sees it: JSON pretty-printed when the view asks, then truncated."""
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    if ctx.spec.tool_view.output_format == "json":
        try:
            text = json.dumps(json.loads(text), indent=2, sort_keys=True)
        except (json.JSONDecodeError, TypeError):
            pass
    cut = ctx.spec.context.tool_output_chars
    if cut is not None and len(text) > cut:
        text = text[:cut] + f"\n[... truncated {len(text) - cut} characters]"
    return text


def _run_one(ctx: EngineContext, action: dict, state: dict) -> tuple[dict, list[BaseMessage]]:
    """Execute one action; returns the state delta and the messages it adds. An unexposed tool or a
    missing required argument is an interface violation; a tool that raises is an observation."""
    name, args = action["name"], action["args"]
    tool = ctx.tools.get(name)
    delta: dict[str, Any] = {}
    error = ""
    bpe = ctx.spec.bpe is not None and name in BPE_ACTIONS
    if tool is None:
        delta.update(_violation(state))
        error = f"unknown tool {name!r}; available tools: {sorted(ctx.tools)}"
        text = f"Error: {error}"
    else:
        missing = [r for r in tool.parameters.get("required", []) if r not in args]
        try:
            if missing:
                delta.update(_violation(state))
                raise TypeError(f"missing required argument(s) {missing}")
            if bpe:
                delta["bpe"], text = apply_action(ctx.spec.bpe, state.get("bpe")
                                                  or initial_state(ctx.experience, ctx.spec.bpe), name, args)
            else:
                text = _format(ctx, tool.fn(**args))
        except Exception as err:  # a tool that raises is an observation, not a crash
            error = f"{type(err).__name__}: {err}"
            text = f"Error: {error}"
        if name == "note" and ctx.spec.memory.scratchpad and not error:
            delta["scratchpad"] = list(state.get("scratchpad", [])) + [str(args.get("text", ""))]
        elif bpe:
            delta["harness_actions"] = [*state.get("harness_actions", []),
                                        action_record(ctx.spec.bpe, name, state.get("model_calls", 0), error)]
        else:
            delta["env_actions"] = state.get("env_actions", 0) + 1
    delta["last"] = {**state.get("last", {}), "observation": text, "tool": name, "error": error}
    effect, events, stopped = fire(ctx.spec, "on_tool_error" if error else "after_tool", {**state, **delta})
    if effect.block:
        text, effect.messages = " ".join(effect.messages) or "Tool output withheld by the harness.", []
    delta["hook_events"] = events
    if stopped:
        delta["stop_reason"] = stopped
    return delta, [_observe(ctx, action, text)] + [_harness(m) for m in effect.messages]


_TOOL_KEYS = ("env_actions", "violations", "violated_turns", "scratchpad", "bpe", "harness_actions", "last",
              "stop_reason")


def run_tools(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """Run the pending actions in order, enforcing the env-action budget; fire ``after_tool`` or
    ``on_tool_error`` after each."""
    ctx = engine(runtime)
    cur: dict[str, Any] = dict(state)
    msgs: list[BaseMessage] = []
    events: list[dict] = []
    for action in state.get("pending", []):
        if cur.get("stop_reason"):
            msgs.append(_observe(ctx, action, "Not executed: the episode has ended."))
            continue
        harness_action = action["name"] == "note" or (ctx.spec.bpe is not None and action["name"] in BPE_ACTIONS)
        if cur.get("env_actions", 0) >= ctx.spec.budget.max_env_actions and not harness_action:
            cur["stop_reason"] = "budget:env_actions"
            msgs.append(_observe(ctx, action, "Not executed: the env-action budget is spent."))
            continue
        delta, new = _run_one(ctx, action, cur)
        events += delta.pop("hook_events")
        cur.update(delta)
        msgs += new
    return {**{k: cur[k] for k in _TOOL_KEYS if k in cur}, "messages": msgs, "hook_events": events, "pending": []}


async def arun_tools(state: HarnessState, runtime: Runtime[EngineContext]) -> dict:
    """``run_tools`` under ``ainvoke``: on the event loop when every pending tool is fast
    (``Tool.blocking`` false), else in a worker thread so a slow tool (the Python sandbox, a game
    engine) never stalls the other rollouts."""
    tools = engine(runtime).tools
    if any(getattr(tools.get(a["name"]), "blocking", False) for a in state.get("pending", [])):
        return await asyncio.to_thread(run_tools, state, runtime)
    return run_tools(state, runtime)
