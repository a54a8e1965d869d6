"""Turning a model reply into actions or a final answer, per ``Parser`` mode (docs/design.md, HarnessSpec).

Modes: ``native`` (the chat model's own tool calls), ``json`` (``{"tool": name, "arguments": {...}}``
or ``{"final_answer": ...}`` in the text), ``python_call`` (``[f(a=1), g(b="x")]``, keyword
arguments only), ``text`` (no actions). In every mode a reply with no action may carry a final
answer through ``final_answer_pattern``; with ``choice_action`` (``TOOL.ARG``) a reply with no
action that starts with an option number ("2", "2.", "option 2") is first read as ``TOOL(ARG="2")``.

A reply that states its answer more than once is read by its LAST complete answer span, as
reasoning-gym's ``extract_answer`` takes the last ``<answer>...</answer>``: for a pattern, the last
match, where a later marker inside a greedy match starts a new one (``last_answer_match``); in
``json`` mode, the last ``{"final_answer": ...}`` object. The span found is the trajectory's
``final_answer``: the one text the verifier scores and the archive stores.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage

from coevo.envs.common import leading_choice
from coevo.harnesses.spec import Parser

FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n?(.*?)```", re.DOTALL)


@dataclass
class Action:
    """One tool call the model asked for: shown ``name``, keyword ``args``, a call ``id``, and
    ``native``: true for the chat model's own tool call (its result goes back as a tool message), false
    for one read from the text (json, python_call, ``choice_action``)."""

    name: str
    args: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")
    native: bool = False


@dataclass
class Parsed:
    """The reading of one reply: ``actions`` to run, or an ``answer``, or neither with ``error``
    saying why the reply broke the interface (an interface violation)."""

    actions: list[Action] = field(default_factory=list)
    answer: str | None = None
    error: str = ""


def strip_fences(text: str) -> str:
    """Replace each ```fenced``` block by its inner text."""
    return FENCE.sub(lambda m: m.group(1), text)


def _last_final_answer(text: str, pos: int, answer: Any) -> Any:
    """The value of the last complete ``{"final_answer": ...}`` object in ``text`` from ``pos`` on
    (``answer`` when there is none)."""
    decoder = json.JSONDecoder()
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        if isinstance(obj, dict) and "final_answer" in obj:
            answer = obj["final_answer"]
        pos = end
    return answer


def _json_action(text: str) -> Parsed | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as err:
        return Parsed(error=f"malformed JSON action: {err.msg}")
    if not isinstance(obj, dict):
        return Parsed(error="a JSON action must be an object")
    if "final_answer" in obj:
        return Parsed(answer=str(_last_final_answer(text, end, obj["final_answer"])))
    name = obj.get("tool", obj.get("name"))
    args = obj.get("arguments", obj.get("args", {}))
    if not isinstance(name, str) or not isinstance(args, dict):
        return Parsed(error='a JSON action needs "tool" (a string) and "arguments" (an object)')
    return Parsed(actions=[Action(name, args)])


def _has_marker(match: re.Match[str]) -> bool:
    """True when ``match`` consumed text before its answer group (a marker such as "Final answer:")."""
    return match.re.groups > 0 and match.start(1) > match.start()


def last_answer_match(pattern: str | re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last complete answer span of ``pattern`` in ``text`` (``None`` when it never matches).

    Matches are taken left to right; a later match replaces the current one when it starts after
    it ends, or when it starts inside it with a marker of its own (text before group 1): so a greedy
    ``final answer:\\s*(.+)`` on "Final answer: a ... Final answer: b" gives "b", while a marker-less
    ``(\\d+)`` on "1000" stays "1000". Empty matches never replace a non-empty one. This is the
    rule of reasoning-gym's ``extract_answer`` (the last ``<answer>`` span) for any pattern. A
    marker with no answer after it (a reply cut off at "Final answer:") does not match, so it
    stays inside the span before it.
    """
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    last: re.Match[str] | None = None
    pos = 0
    while pos <= len(text) and (m := rx.search(text, pos)) is not None:
        if last is None or (m.end() > m.start() and (m.start() >= last.end() or _has_marker(m))):
            last = m
        elif m.start() < last.end():  # a marker-less match inside the current span: resume after it
            pos = max(last.end(), m.start() + 1)
            continue
        pos = m.start() + 1
    return last


def _literal(node: ast.expr) -> Any:
    return ast.literal_eval(node)


def parse_python_calls(text: str) -> Parsed | None:
    """Parse the first ``[f(a=1), ...]`` list in ``text``; ``None`` when there is none.

    Positional arguments and non-literal values are interface violations (``Parsed.error``).
    """
    match = re.search(r"\[\s*[A-Za-z_][\w.]*\s*\(.*\)\s*\]", text, re.DOTALL)
    if not match:
        return None
    try:
        tree = ast.parse(match.group(0), mode="eval")
    except SyntaxError as err:
        return Parsed(error=f"unparseable call list: {err.msg}")
    if not isinstance(tree.body, ast.List):
        return Parsed(error="expected a list of calls like [f(a=1)]")
    actions = []
    for call in tree.body.elts:
        if not isinstance(call, ast.Call):
            return Parsed(error="each list element must be a call like f(a=1)")
        if call.args:
            return Parsed(error=f"{ast.unparse(call.func)} was given positional arguments; use keyword arguments")
        try:
            args = {kw.arg: _literal(kw.value) for kw in call.keywords if kw.arg}
        except (ValueError, SyntaxError):
            return Parsed(error=f"{ast.unparse(call.func)} has an argument that is not a literal value")
        actions.append(Action(ast.unparse(call.func), args))
    return Parsed(actions=actions)


def parse_reply(reply: AIMessage, parser: Parser) -> Parsed:
    """Read ``reply`` per ``parser`` (see module doc). Never raises: problems come back in ``error``."""
    text = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    if parser.strip_code_fences:
        text = strip_fences(text)
    found: Parsed | None = None
    if parser.mode == "native" and reply.tool_calls:
        found = Parsed(actions=[Action(c["name"], dict(c.get("args") or {}), c.get("id") or Action("", {}).id, True)
                                for c in reply.tool_calls])
    elif parser.mode == "json":
        found = _json_action(text)
    elif parser.mode == "python_call":
        found = parse_python_calls(text)
    if found is not None and (found.actions or found.answer is not None):
        return found
    if parser.choice_action and (number := leading_choice(text)) is not None:
        tool, arg = parser.choice_action.split(".")
        return Parsed(actions=[Action(tool, {arg: str(number)})])
    if parser.final_answer_pattern:
        m = last_answer_match(parser.final_answer_pattern, text)
        if m:
            return Parsed(answer=((m.group(1) if m.re.groups else m.group(0)) or "").strip())
    if found is not None and found.error:
        return found
    if parser.on_no_action == "finish":
        return Parsed(answer=text.strip())
    return Parsed(error="the reply has no action and no final answer")
