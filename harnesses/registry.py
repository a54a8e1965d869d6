"""Registries of hook conditions and hook actions (Harness-S Table 7: event × condition → action).

Code components live here; an editor can only *name* what is registered, so every candidate spec
can be checked statically before it runs. Users extend both from Python::

    from coevo.harnesses import register_condition

    @register_condition("mentions_refund")
    def mentions_refund(ctx, *, word: str = "refund") -> bool:
        return word in ctx.observation

A condition is ``fn(ctx: HookContext, **parameters) -> bool``; its keyword parameters are the
parameters a spec may pass (checked by name, required ones must be given; values of parameters
annotated ``int``/``float``/``str``/``bool`` are type-checked, and a parameter named ``pattern`` must
compile as a regex), so a spec that validates never crashes a rollout on its hook parameters. An action is
``fn(ctx: HookContext, message: str) -> Effect``.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from coevo.errors import InputError

EVENTS = ("before_model", "after_model", "after_tool", "on_tool_error", "before_finish")


@dataclass
class HookContext:
    """What a condition may look at when a hook event fires.

    ``reply`` is the last model reply text; ``observation`` the last tool output (or error text);
    ``tool`` the last tool's name; ``error`` the last tool error text or ``""``; ``answer`` the
    candidate final answer (``before_finish``) or ``None``; ``parsed`` whether the last reply parsed
    to an action or answer; ``model_calls``/``env_actions`` the counts so far and
    ``remaining_steps`` the fewer of the two budgets left.
    """

    event: str
    reply: str = ""
    observation: str = ""
    tool: str = ""
    error: str = ""
    answer: str | None = None
    parsed: bool = True
    model_calls: int = 0
    env_actions: int = 0
    remaining_steps: int = 0


@dataclass
class Effect:
    """What an action asks the graph to do: inject ``messages`` (harness text, not policy tokens);
    ``retry`` re-asks the model without its last reply; ``block`` refuses the parsed tool calls or
    final answer (or replaces a tool output); ``stop`` ends the episode."""

    messages: list[str] = field(default_factory=list)
    retry: bool = False
    block: bool = False
    stop: bool = False


CONDITIONS: dict[str, Callable[..., bool]] = {}
ACTIONS: dict[str, Callable[[HookContext, str], Effect]] = {}


def register_condition(name: str) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Decorator: register ``fn(ctx, **params) -> bool`` as hook condition ``name``.

    Raises ``ValueError`` if ``name`` is already registered to a different function.
    """

    def deco(fn: Callable[..., bool]) -> Callable[..., bool]:
        if CONDITIONS.get(name, fn) is not fn:
            raise InputError(f"hook condition {name!r} is already registered; pick another name")
        CONDITIONS[name] = fn
        return fn

    return deco


def register_action(
        name: str) -> Callable[[Callable[[HookContext, str], Effect]], Callable[[HookContext, str], Effect]]:
    """Decorator: register ``fn(ctx, message) -> Effect`` as hook action ``name``.

    Raises ``ValueError`` if ``name`` is already registered to a different function.
    """

    def deco(fn: Callable[[HookContext, str], Effect]) -> Callable[[HookContext, str], Effect]:
        if ACTIONS.get(name, fn) is not fn:
            raise InputError(f"hook action {name!r} is already registered; pick another name")
        ACTIONS[name] = fn
        return fn

    return deco


_SIMPLE_TYPES: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def _value_problem(condition: str, name: str, annotation: Any, value: Any) -> str | None:
    kinds = _SIMPLE_TYPES.get(annotation)
    if kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and annotation is not bool)):
        return f"condition {condition!r} parameter {name!r} must be {annotation.__name__}, got {value!r}"
    if name == "pattern" and isinstance(value, str):
        try:
            re.compile(value)
        except re.error as err:
            return f"condition {condition!r} parameter 'pattern' is not a valid regex ({err}): {value!r}"
    return None


def parameter_problems(condition: str, parameters: dict[str, Any]) -> list[str]:
    """Why ``parameters`` do not fit registered condition ``condition`` (empty list when they do):
    unknown condition, unknown or missing parameters, wrongly typed values, invalid ``pattern`` regex."""
    fn = CONDITIONS.get(condition)
    if fn is None:
        return [f"unknown hook condition {condition!r}; registered: {sorted(CONDITIONS)}"]
    try:
        sig = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        sig = inspect.signature(fn)
    accepted = {n: p for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    problems = [f"condition {condition!r} takes no parameter {k!r}; it takes {sorted(accepted)}"
                for k in parameters if k not in accepted]
    problems += [f"condition {condition!r} needs parameter {n!r}"
                 for n, p in accepted.items() if p.default is inspect.Parameter.empty and n not in parameters]
    problems += [m for k, v in parameters.items() if k in accepted
                 if (m := _value_problem(condition, k, accepted[k].annotation, v))]
    return problems


# --- built-in conditions -------------------------------------------------------------------


@register_condition("always")
def always(ctx: HookContext) -> bool:
    """True at every firing of the event."""
    return True


@register_condition("pagination_present")
def pagination_present(ctx: HookContext, *,
                       pattern: str = r"next_page|page_token|has_more|next_cursor|\bpage\s*\d+\s*of\s*\d+") -> bool:
    """True when the last tool output carries pagination metadata (Harness-S Table 7, case 1)."""
    return re.search(pattern, ctx.observation, re.IGNORECASE) is not None


@register_condition("remaining_steps_lte")
def remaining_steps_lte(ctx: HookContext, *, threshold: int) -> bool:
    """True when at most ``threshold`` steps (model calls or env actions) remain (Table 7, case 3)."""
    return ctx.remaining_steps <= threshold


@register_condition("tool_error")
def tool_error(ctx: HookContext) -> bool:
    """True when the last tool call raised."""
    return bool(ctx.error)


@register_condition("reply_matches")
def reply_matches(ctx: HookContext, *, pattern: str) -> bool:
    """True when the last model reply matches regex ``pattern``."""
    return re.search(pattern, ctx.reply) is not None


@register_condition("observation_matches")
def observation_matches(ctx: HookContext, *, pattern: str) -> bool:
    """True when the last tool output matches regex ``pattern``."""
    return re.search(pattern, ctx.observation) is not None


@register_condition("unparsed_reply")
def unparsed_reply(ctx: HookContext) -> bool:
    """True when the last reply gave neither an action nor a final answer."""
    return not ctx.parsed


@register_condition("reply_lacks")
def reply_lacks(ctx: HookContext, *, pattern: str) -> bool:
    """True when the last model reply has no match of regex ``pattern`` (e.g. the parser's
    final-answer pattern: a reply the parser cannot read an answer from)."""
    return re.search(pattern, ctx.reply) is None


def repeats(text: str, words: int = 4, times: int = 3) -> bool:
    """Whether ``text`` repeats itself: a non-empty line occurring ``times`` times, or a run of
    ``words`` words occurring ``times`` times."""
    lines = Counter(x.strip() for x in text.splitlines() if x.strip())
    if lines and lines.most_common(1)[0][1] >= times:
        return True
    tokens = text.split()
    grams = Counter(tuple(tokens[i:i + words]) for i in range(len(tokens) - words + 1))
    return bool(grams) and grams.most_common(1)[0][1] >= times


@register_condition("reply_repeats")
def reply_repeats(ctx: HookContext, *, words: int = 4, times: int = 3) -> bool:
    """True when the last model reply repeats itself (``repeats``: a line, or a run of ``words``
    words, occurring ``times`` times): a model stuck in a loop."""
    return repeats(ctx.reply, words, times)


@register_condition("answer_empty")
def answer_empty(ctx: HookContext) -> bool:
    """True when the candidate final answer is empty or whitespace."""
    return ctx.answer is not None and not ctx.answer.strip()


@register_condition("answer_matches")
def answer_matches(ctx: HookContext, *, pattern: str) -> bool:
    """True when the candidate final answer matches regex ``pattern``."""
    return ctx.answer is not None and re.search(pattern, ctx.answer) is not None


@register_condition("tool_is")
def tool_is(ctx: HookContext, *, name: str) -> bool:
    """True when the last tool called was ``name`` (the name the model sees)."""
    return ctx.tool == name


@register_condition("model_calls_gte")
def model_calls_gte(ctx: HookContext, *, n: int) -> bool:
    """True once at least ``n`` model calls have been made."""
    return ctx.model_calls >= n


@register_condition("model_calls_lt")
def model_calls_lt(ctx: HookContext, *, n: int) -> bool:
    """True while fewer than ``n`` model calls have been made (e.g. a self-check only on the first answer)."""
    return ctx.model_calls < n


# --- built-in actions ----------------------------------------------------------------------


@register_action("warn")
def warn(ctx: HookContext, message: str) -> Effect:
    """Append a reminder (``Warning: ...``) to the model's next context."""
    return Effect(messages=[f"Warning: {message}"])


@register_action("inject")
def inject(ctx: HookContext, message: str) -> Effect:
    """Append ``message`` verbatim as harness text to the model's next context."""
    return Effect(messages=[message])


@register_action("retry")
def retry(ctx: HookContext, message: str) -> Effect:
    """Drop the last model reply and ask again with ``message`` (after_model; elsewhere: inject)."""
    return Effect(messages=[message] if message else [], retry=ctx.event == "after_model")


@register_action("block")
def block(ctx: HookContext, message: str) -> Effect:
    """Refuse the parsed actions / final answer (after_model, before_finish) or replace the tool
    output (after_tool, on_tool_error), telling the model why with ``message``."""
    return Effect(messages=[message] if message else [], block=True)


@register_action("stop")
def stop(ctx: HookContext, message: str) -> Effect:
    """End the episode now (stop reason ``hook:<hook name>``)."""
    return Effect(messages=[message] if message else [], stop=True)
