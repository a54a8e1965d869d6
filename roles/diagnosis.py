"""Reading a failed trajectory for its root cause (Harness-S §3.2's curator;
docs/papers.md).

``diagnose`` looks at the whole trajectory, not only the verifier's label: whether an answer was
parsed at all, whether the reply carries the harness's final-answer marker, whether the last model
call was cut at its token budget, repetition, tool errors, where the expected answer sits (inside
the submitted answer with extra text, elsewhere in the reply), and for numeric answers how the value
is wrong (sign, off by one, an operand copied from the task). Every cause is a string
``family:detail`` (the family before the first ``:`` is what Harness-S groups related causes by);
the task's category (reasoning-gym family, BFCL category, ...) rides beside it as ``@category``
(``with_category`` / ``split_cause``), so one kind of failure in two categories gives two directions.

The expected answer is read from the trajectory's own scoring diagnostics (``detail["expected"]``),
which only *train* trajectories may show a meta role (docs/design.md, Principles); without it (val
trajectories for a profiler) the gold-dependent causes are not diagnosed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable, Mapping

from coevo.envs.base import Task
from coevo.envs.redact import redact_detail
from coevo.harnesses.parse import last_answer_match
from coevo.harnesses.registry import repeats
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory

CAUSES: dict[str, str] = {
    "no_answer": "no answer was parsed (the episode ended without one)",
    "format:no_marker": "the reply lacks the final-answer marker, so the whole reply became the answer",
    "format:empty": "the submitted answer is empty",
    "format:violation": "replies broke the interface (unparsable actions)",
    "truncated:output_tokens": "the reply was cut at the output-token budget",
    "loop:repetition": "the reply repeats itself",
    "tool": "a tool call failed (error or unknown tool)",
    "form:extra_text": "the expected answer is inside the submitted answer, with extra text around it",
    "place:elsewhere": "the expected answer appears in the reply but not where the parser took the answer",
    "value:sign": "the value has the wrong sign",
    "value:off_by_one": "the value is off by one",
    "value:operand": "the value copies a number from the task",
    "value:wrong": "the value is wrong",
    "wrong_answer": "the answer is wrong",
}
"""Cause families and kinds ``diagnose`` gives, with what they mean (a verifier's own error type, e.g.
BFCL's ``simple_function_checker:wrong_func_name``, passes through unchanged)."""

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FALLBACK = "wrong_answer"


def task_category(task: Task | None) -> str:
    """A task's category: ``metadata["category"]``, else its family (reasoning-gym), challenge
    (TextWorld) or env name; ``""`` without a task."""
    if task is None:
        return ""
    meta = task.metadata or {}
    return str(meta.get("category") or meta.get("family") or meta.get("challenge") or task.env)


def with_category(kind: str, category: str) -> str:
    """``kind@category`` (just ``kind`` when ``category`` is empty)."""
    return f"{kind}@{category}" if category else kind


def split_cause(cause: str) -> tuple[list[str], str]:
    """The kinds and the category of a direction's cause: ``"a@x + b@x"`` (Harness-S merges related
    causes with `` + ``) gives ``(["a", "b"], "x")``; the category is ``""`` when the parts disagree."""
    kinds, cats = [], set()
    for part in cause.split(" + "):
        kind, _, cat = part.strip().partition("@")
        kinds.append(kind)
        cats.add(cat)
    return kinds, (cats.pop() if len(cats) == 1 else "")


def addresses(kind: str, prefixes: Iterable[str]) -> bool:
    """Whether cause ``kind`` falls under one of ``prefixes``: a family (``"value:"``), a kind (and
    the kinds below it), ``"*"`` (any), or ``"re:<regex>"`` searched in the lower-cased kind (a
    verifier's own error types, e.g. ``re:func(tion)?_?name``)."""
    low = kind.lower()
    return any(p == "*" or kind == p or kind.startswith(p if p.endswith(":") else p + ":")
               or (p.startswith("re:") and re.search(p[3:], low) is not None) for p in prefixes)


def replies(t: Trajectory) -> list[str]:
    """The text of every model reply of ``t``, in order."""
    return [str(m["data"].get("content", "")) for m in t.messages if m.get("type") == "ai"]


def _observations(t: Trajectory) -> list[tuple[str, str]]:
    """(tool name, text) of every tool output the trajectory saw."""
    out = []
    for m in t.messages:
        data = m.get("data", {})
        role = (data.get("additional_kwargs") or {}).get("coevo_role")
        if m.get("type") == "tool" or role == "observation":
            text = str(data.get("content", ""))
            name = data.get("name") or (re.match(r"\[(\S+) output\]", text) or [None, ""])[1]
            out.append((str(name or ""), text))
    return out


def failed_tool(t: Trajectory) -> str | None:
    """The name of the first tool whose call failed in ``t`` (``"unknown"`` when the output does
    not name it), or None when no tool call failed."""
    for name, text in _observations(t):
        body = text.split("\n", 1)[-1] if text.startswith("[") else text
        if body.startswith("Error:"):
            return name or "unknown"
    return None


def truncated(t: Trajectory, spec: HarnessSpec | None = None) -> bool:
    """Whether the last model call stopped at its output-token budget (the engine's ``finish_reason``
    ``length``; else its output tokens reached ``spec.budget.max_output_tokens``)."""
    ais = [m for m in t.messages if m.get("type") == "ai"]
    if ais:
        reason = (ais[-1]["data"].get("response_metadata") or {}).get("finish_reason")
        if reason in ("length", "max_tokens"):
            return True
        if reason:
            return False
    return bool(spec and t.calls and t.calls[-1].output_tokens >= spec.budget.max_output_tokens)


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _value_kind(answer: str, gold: str, prompt: str) -> str | None:
    """How a numeric ``answer`` misses a numeric ``gold`` (None when either is not a bare number)."""
    a, g = _number(answer), _number(gold)
    if a is None or g is None:
        return None
    if g != 0 and a == -g:
        return "value:sign"
    if abs(a - g) == 1:
        return "value:off_by_one"
    if any(_number(x) == a for x in NUMBER.findall(prompt)):
        return "value:operand"
    return "value:wrong"


def verifier_error(detail: Mapping[str, Any]) -> str | None:
    """The verifier's own error type in ``detail`` (``public.error_type``/``verifier_error``, then
    ``error_type``/``error``), cut to 80 characters; None when it names none."""
    public = detail.get("public") if isinstance(detail.get("public"), dict) else {}
    for value in (public.get("error_type"), public.get("verifier_error"), detail.get("error_type"),
                  detail.get("error")):
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.strip():
            return value.strip()[:80]
    return None


def contains(text: str, gold: str) -> bool:
    """Whether ``text`` holds ``gold``: as a whole number for a numeric gold (``4`` is not in ``-4``
    or ``14``), else as a substring."""
    if NUMBER.fullmatch(gold):
        return re.search(rf"(?<![\w.\-]){re.escape(gold)}(?!\w|\.\d)", text) is not None
    return gold in text


def diagnose(t: Trajectory, spec: HarnessSpec | None = None, task: Task | None = None) -> str:
    """The root cause of failed trajectory ``t`` (a kind from ``CAUSES`` or the verifier's own
    error type), without its category. Checked in order, the first that holds wins: no answer
    (``no_answer:<stop reason>``), the verifier's error type, a failed tool call (``tool:<name>``),
    repetition, truncation, an empty answer; then, with the expected answer of the train
    diagnostics: the expected answer inside the submitted one (``format:no_marker`` when the reply
    lacks ``spec``'s final-answer marker, so the whole reply was taken; else ``form:extra_text``),
    elsewhere in the reply (``place:elsewhere``), how a numeric value is wrong (the answer, or the
    last number of a reply without a marker: sign, off by one, an operand of ``task``'s prompt,
    else ``value:wrong``); then a missing marker, interface violations, else ``wrong_answer``. A
    reply of at most three words counts as a bare answer, not a missing marker. The gold answer is
    read only to pick the label; no label carries it (the verifier's error type is read from the
    redacted detail, ``coevo.envs.redact``)."""
    if t.final_answer is None:
        return f"no_answer:{t.stop_reason or 'unknown'}"
    detail = t.score_detail or {}
    if error := verifier_error(redact_detail(t.split, detail)):  # a checker's message may quote the gold answer
        return error
    if tool := failed_tool(t):
        return f"tool:{tool}"
    texts = replies(t)
    last = texts[-1] if texts else ""
    if repeats(last):
        return "loop:repetition"
    if truncated(t, spec):
        return "truncated:output_tokens"
    answer = t.final_answer.strip()
    if not answer:
        return "format:empty"
    pattern = spec.parser.final_answer_pattern if spec else None
    unmarked = bool(pattern) and len(last.split()) > 3 and last_answer_match(pattern, last) is None
    gold = detail.get("expected")
    gold = gold.strip() if isinstance(gold, str) else None
    if gold:
        if contains(answer, gold):
            return "format:no_marker" if unmarked else "form:extra_text"
        if any(contains(x, gold) for x in texts):
            return "place:elsewhere"
        numbers = NUMBER.findall(answer)
        value = answer if not unmarked or not numbers else numbers[-1]
        if kind := _value_kind(value, gold, task.prompt if task else ""):
            return kind
    if unmarked:
        return "format:no_marker"
    if t.interface_violations:
        return "format:violation"
    return _FALLBACK


def cause_counts(trajectories: Iterable[Trajectory], spec: HarnessSpec | None = None,
                 tasks: Mapping[str, Task] | None = None) -> dict[str, int]:
    """Per cause kind, how many of ``trajectories`` failed with it: a harness's per-cause evidence
    (CoEvo-RSI's base choice)."""
    counts = Counter(diagnose(t, spec, (tasks or {}).get(t.task_id)) for t in trajectories if not t.passed)
    return dict(sorted(counts.items()))
