"""Firing a spec's hooks: event × registered condition → registered action (Harness-S Table 7).

The harness engine calls ``fire`` at ``before_model``, ``after_model``, ``after_tool``,
``on_tool_error`` and ``before_finish``; conditions and actions come from
``coevo.harnesses.registry`` (a spec can only name registered ones).
"""

from __future__ import annotations

from typing import Any, Mapping

from coevo.harnesses.registry import ACTIONS, CONDITIONS, Effect, HookContext
from coevo.harnesses.spec import HarnessSpec


def remaining(spec: HarnessSpec, state: Mapping[str, Any]) -> int:
    """Steps left in an episode with ``state``'s counts: the fewer of the model-call and env-action
    budgets (Harness-S Table 8)."""
    b = spec.budget
    return min(b.max_model_calls - state.get("model_calls", 0), b.max_env_actions - state.get("env_actions", 0))


def fire(spec: HarnessSpec, event: str, state: Mapping[str, Any],
         **facts: Any) -> tuple[Effect, list[dict], str | None]:
    """Run every hook of ``spec`` on ``event`` whose condition holds; merge their effects.

    ``state`` is the episode's ``HarnessState`` (its counts and ``last`` facts); ``facts`` add or
    override ``HookContext`` fields (e.g. ``answer``). Returns the merged effect, the fired hooks'
    events (``{"hook", "event", "action"}``), and ``hook:<name>`` of the first hook whose action
    stopped the episode (``None`` when none did). Hooks run in name order (the spec id sorts keys,
    so order must not matter).
    """
    if not spec.hooks:
        return Effect(), [], None
    ctx = HookContext(event=event, model_calls=state.get("model_calls", 0), env_actions=state.get("env_actions", 0),
                      remaining_steps=remaining(spec, state), **{**state.get("last", {}), **facts})
    total, events, stopped = Effect(), [], None
    for name, hook in sorted(spec.hooks.items()):
        if hook.event == event and CONDITIONS[hook.condition](ctx, **hook.parameters):
            eff = ACTIONS[hook.action](ctx, hook.message)
            stopped = stopped or (f"hook:{name}" if eff.stop else None)
            total.messages += eff.messages
            total.retry, total.block, total.stop = (total.retry or eff.retry, total.block or eff.block,
                                                    total.stop or eff.stop)
            events.append({"hook": name, "event": event, "action": hook.action})
    return total, events, stopped
