"""Control operators: hooks (``/hooks``: retry a reply the parser cannot read, a self-check before
finishing, stop or retry on repetition, finish before the budget, advice after a tool error), budgets
(``/budget``: output tokens, model calls), decoding (``/decoding``: temperature, stop sequences) and
the context policy (``/context``: history window, tool-output truncation). Hooks name only
registered conditions and actions (``coevo.harnesses.registry``), so every child validates.
"""

from __future__ import annotations

import random
import re

from coevo.roles.operators.base import Edit, Material, operator
from coevo.roles.operators.prompt import answer_line


def _hook(name: str, event: str, condition: str, parameters: dict, action: str, message: str) -> dict:
    return {"op": "add", "path": f"/hooks/{name}", "value": {"event": event, "condition": condition,
                                                             "parameters": parameters, "action": action,
                                                             "message": message}}


def _set(path: str, value: object) -> dict:
    return {"op": "replace", "path": path, "value": value}


def unreadable(pattern: str) -> str:
    """A regex matching what ``pattern`` (a final-answer pattern) reads, or a bare reply of one
    token: ``reply_lacks`` on it fires on a reply the parser cannot read an answer from. Leading
    global flags (``(?is)``) stay in front, where Python requires them."""
    flags = re.match(r"\(\?[aiLmsux]+\)", pattern)
    head, body = (flags.group(0), pattern[flags.end():]) if flags else ("", pattern)
    return rf"{head}(?:{body})|^\s*\S+\s*$"


@operator("hook_retry_unparsed", "hooks", ("format:no_marker", "format:empty", "no_answer"),
          ("/hooks", "/budget/max_model_calls"))
def hook_retry_unparsed(m: Material, rng: random.Random) -> Edit | None:
    """After a reply the parser cannot read an answer from, drop it and ask again (``retry``) with
    a reminder of the answer line; model calls capped at 2-3 so a stuck model stops early."""
    pattern = m.spec.parser.final_answer_pattern
    line = answer_line(m.spec)
    if not pattern or not line:
        return None
    calls = rng.choice([2, 3])
    message = f"Your reply had no '{line}' line. Reply again, ending with it."
    return Edit([_hook("retry_unparsed", "after_model", "reply_lacks", {"pattern": unreadable(pattern)}, "retry",
                       message),
                 _set("/budget/max_model_calls", min(calls, m.spec.budget.max_model_calls))],
                f"retry a reply without an answer line (at most {calls} calls)")


@operator("hook_self_check", "hooks", ("value:", "form:", "wrong_answer"), ("/hooks",))
def hook_self_check(m: Material, rng: random.Random) -> Edit | None:
    """Before the first final answer, block it once and ask the model to check it and answer again."""
    if m.spec.budget.max_model_calls < 2:
        return None
    line = answer_line(m.spec) or "the answer"
    message = rng.choice([f"Check your answer against the task (sign, each number used once), then give {line} again.",
                          f"Re-read the task and verify the result; then repeat {line}."])
    return Edit([_hook("self_check", "before_finish", "model_calls_lt", {"n": 2}, "block", message)],
                "self-check before finishing")


@operator("hook_repetition", "hooks", ("loop:", "truncated:"), ("/hooks",))
def hook_repetition(m: Material, rng: random.Random) -> Edit | None:
    """On a reply that repeats itself: retry with a warning, or stop the episode."""
    action = rng.choice(["retry", "retry", "stop"])
    message = "Do not repeat yourself: give the final answer in one line." if action == "retry" else ""
    return Edit([_hook("on_repetition", "after_model", "reply_repeats", {"words": 4, "times": 3}, action, message)],
                f"{action} on a repeating reply")


@operator("hook_finish_before_budget", "hooks", ("no_answer:budget", "no_answer:hook", "loop:"), ("/hooks",))
def hook_finish_before_budget(m: Material, rng: random.Random) -> Edit | None:
    """A warning when few steps remain: give the final answer now."""
    return Edit([_hook("finish_before_budget", "after_model", "remaining_steps_lte", {"threshold": rng.choice([1, 2])},
                       "warn", "Few steps remain: give your final answer now.")],
                "runs end at the budget without an answer")


@operator("hook_tool_error", "hooks", ("tool:",), ("/hooks",))
def hook_tool_error(m: Material, rng: random.Random) -> Edit | None:
    """After a failed tool call, advice to fix the arguments or to answer without the tool."""
    message = rng.choice(["The tool call failed: check the arguments against its schema and call it again.",
                          "The tool failed: answer from your own reasoning instead."])
    return Edit([_hook("on_tool_error", "on_tool_error", "tool_error", {}, "inject", message)], "advice on tool errors")


@operator("budget_output_tokens", "budget", ("truncated:", "loop:"), ("/budget/max_output_tokens",))
def budget_output_tokens(m: Material, rng: random.Random) -> Edit | None:
    """More output tokens for truncated replies, fewer for looping ones."""
    now = m.spec.budget.max_output_tokens
    grow = any(k.startswith("truncated") for k in m.kinds) and rng.random() < 0.7
    value = min(now * 2, 4096) if grow else max(now // 2, 32)
    return None if value == now else Edit([_set("/budget/max_output_tokens", value)], f"output tokens {now} -> {value}")


@operator("budget_model_calls", "budget", ("no_answer:budget:model_calls", "loop:", "tool:", "format:violation"),
          ("/budget/max_model_calls",))
def budget_model_calls(m: Material, rng: random.Random) -> Edit | None:
    """More model calls when episodes run out of them, fewer when they loop or retry without end."""
    now = m.spec.budget.max_model_calls
    value = min(now * 2, 64) if any(k.startswith("no_answer:budget") for k in m.kinds) else max(now // 2, 1)
    return None if value == now else Edit([_set("/budget/max_model_calls", value)], f"model calls {now} -> {value}")


@operator("decoding_temperature", "decoding", ("loop:", "value:", "wrong_answer", "truncated:"),
          ("/decoding/temperature",), weight=0.6)
def decoding_temperature(m: Material, rng: random.Random) -> Edit | None:
    """Another sampling temperature (greedy decoding repeats itself; sampling slips)."""
    now = m.spec.decoding.temperature
    value = rng.choice([t for t in (0.0, 0.2, 0.5) if t != now])
    return Edit([_set("/decoding/temperature", value)], f"temperature {now} -> {value}")


@operator("decoding_stop", "decoding", ("loop:", "truncated:", "form:"), ("/decoding/stop",), weight=0.6)
def decoding_stop(m: Material, rng: random.Random) -> Edit | None:
    """Stop sequences that end a reply early: a blank line, or the start of an invented next turn."""
    stop = rng.choice([["\n\n"], ["\nQuestion", "\nUser:"], ["\n\n\n"]])
    if m.spec.decoding.stop == stop:
        return None
    return Edit([{"op": "add", "path": "/decoding/stop", "value": stop}], f"stop sequences {stop!r}")


@operator("context_history", "context", ("loop:", "no_answer:budget:context_tokens", "tool:", "format:violation"),
          ("/context/history_turns",), weight=0.5)
def context_history(m: Material, rng: random.Random) -> Edit | None:
    """A history window: only the last few model turns stay in context."""
    value = rng.choice([2, 4, 6])
    if m.spec.context.history_turns == value:
        return None
    return Edit([_set("/context/history_turns", value)], f"keep the last {value} turns")


@operator("context_tool_output", "context", ("tool:", "no_answer:budget:context_tokens"),
          ("/context/tool_output_chars",), weight=0.5)
def context_tool_output(m: Material, rng: random.Random) -> Edit | None:
    """Cut each tool output to a few hundred or thousand characters."""
    value = rng.choice([400, 1000, 3000])
    if m.spec.context.tool_output_chars == value:
        return None
    return Edit([_set("/context/tool_output_chars", value)], f"tool outputs cut to {value} characters")


CONSTRAINED_FORMAT = ('Reply with one JSON object: {"final_answer": "<answer>"} to answer, or '
                      '{"tool": NAME, "arguments": {...}} to call a tool.')
"""The output format a ``decoding_constrain`` edit writes beside the constraint (what the schema enforces)."""


@operator("decoding_constrain", "decoding", ("format:", "no_answer", "form:", "place:", "truncated:", "loop:"),
          ("/decoding/constrain", "/parser/mode", "/prompt/output_format"),
          needs=lambda spec: spec.decoding.constrain == "none")
def decoding_constrain(m: Material, rng: random.Random) -> Edit | None:
    """Decode every reply under the JSON schema of the actions allowed at that moment, the answer
    included (``decoding.constrain = "actions_or_answer"``, parser ``json``): no reply can miss the
    answer's place or format again, and a reply is only as long as its action (``Decoding.constrain``)."""
    return Edit([_set("/decoding/constrain", "actions_or_answer"), _set("/parser/mode", "json"),
                 _set("/prompt/output_format", CONSTRAINED_FORMAT)],
                "decode replies under the schema of the allowed actions or the answer")
