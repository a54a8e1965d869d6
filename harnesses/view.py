"""Reading harnesses: ``render`` (the prompt a model sees for a task) and ``diff`` (per component).

``render`` is also what the harness graph uses to build its first messages, so what people read
is exactly what the model gets.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterable

from coevo.envs.base import Tool
from coevo.harnesses.spec import HarnessSpec, Skill

COMPONENTS = ("prompt", "skills", "context", "memory", "hooks", "tool_view", "parser", "budget", "decoding", "bpe")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


def skill_applies(skill: Skill, task: str) -> bool:
    """Whether ``skill`` goes into the prompt for ``task`` (always-on, keyword hit, or Jaccard
    word overlap ≥ ``min_overlap``)."""
    if skill.mode == "always":
        return True
    low = task.lower()
    if any(k.lower() in low for k in skill.keywords):
        return True
    a, b = _words(skill.text), _words(task)
    return bool(a and b) and len(a & b) / len(a | b) >= skill.min_overlap


def _slot(spec: HarnessSpec, slot: str) -> str:
    base = getattr(spec.prompt, slot)
    rules = [r.text for r in (r for _, r in sorted(spec.prompt.rules.items())) if r.slot == slot]
    return "\n".join(t for t in [base, *rules] if t)


def tools_text(tools: Iterable[dict[str, Any]]) -> str:
    """Tool schemas as text for parsers that read actions from text (json, python_call)."""
    return "\n".join(json.dumps(t["function"], sort_keys=True) for t in tools)


def render_system(spec: HarnessSpec, task: str, tools: Iterable[dict[str, Any]] = ()) -> str:
    """The system message for ``task``: system slot, action guidance, tools (text parsers only),
    output format, skills (always-on and retrieved), lessons. Sections are separated by blank lines."""
    parts = [_slot(spec, "system"), _slot(spec, "action_guidance")]
    tools = list(tools)
    if tools and spec.parser.mode in ("json", "python_call"):
        parts.append("Available tools:\n" + tools_text(tools))
    parts.append(_slot(spec, "output_format"))
    skills = [(n, s) for n, s in sorted(spec.skills.items()) if skill_applies(s, task) and not s.is_chat_turn]
    for kind, title in (("procedure", "Procedures"), ("demonstration", "Examples")):
        chosen = [s.text for _, s in skills if s.kind == kind]
        if chosen:
            parts.append(f"{title}:\n" + "\n\n".join(chosen))
    if spec.memory.lessons:
        parts.append("Lessons from earlier episodes:\n" + "\n".join(f"- {x}" for x in spec.memory.lessons))
    return "\n\n".join(p for p in parts if p)


def render_task(spec: HarnessSpec, task: str) -> str:
    """The first user message: ``task_framing`` with the task text in place of ``{task}``, plus
    the task_framing rules."""
    framing = spec.prompt.task_framing.replace("{task}", task)
    rules = [r.text for r in (r for _, r in sorted(spec.prompt.rules.items())) if r.slot == "task_framing"]
    return "\n".join([framing, *rules])


def chat_turns(spec: HarnessSpec, task: str) -> list[tuple[str, str]]:
    """The (user, assistant) few-shot turns for ``task``: applicable demonstrations given as
    ``input``/``output`` pairs, in name order, each input framed like the task."""
    return [(render_task(spec, s.input or ""), s.output or "") for _, s in sorted(spec.skills.items())
            if s.is_chat_turn and skill_applies(s, task)]


def render_messages(spec: HarnessSpec, task: str, tools: Iterable[dict[str, Any]] = ()) -> list[tuple[str, str]]:
    """The opening messages as ``(role, text)``: system, the few-shot turns, then the task."""
    turns = [m for user, ai in chat_turns(spec, task) for m in (("user", user), ("assistant", ai))]
    return [("system", render_system(spec, task, tools)), *turns, ("user", render_task(spec, task))]


def render(spec: HarnessSpec, task: str = "<the task text>", tools: Iterable[Tool] = ()) -> str:
    """The full prompt text a model sees at its first call for ``task`` (system, few-shot turns,
    user), readable."""
    schemas = [t.schema() for t in tools]
    return "\n\n".join(f"### {role}\n{text}" for role, text in render_messages(spec, task, schemas)) + "\n"


def diff(a: HarnessSpec, b: HarnessSpec) -> str:
    """A readable per-component diff of two specs (unified diff of each changed component's JSON).

    Returns ``""`` when the specs have the same content.
    """
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    out = []
    for comp in COMPONENTS:
        ja, jb = (json.dumps(d.get(comp), indent=2, sort_keys=True).splitlines() for d in (da, db))
        if ja != jb:
            lines = difflib.unified_diff(ja, jb, f"{a.short_id}/{comp}", f"{b.short_id}/{comp}", lineterm="", n=2)
            out.append(f"== {comp} ==\n" + "\n".join(lines))
    return "\n\n".join(out)
