"""Prompt operators: output-format instructions and rules (``/prompt/rules``, ``/prompt/system``), a
procedure retrieved for one task category (``/skills``), and a lesson (``/memory/lessons``).

The wording of an output-format rule follows the spec's parser (``answer_line``): a rule never asks
for a marker the parser does not read.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from coevo.harnesses.spec import HarnessSpec
from coevo.roles.diagnosis import CAUSES, addresses, task_category
from coevo.roles.operators.base import Edit, Material, operator

RULE_HINTS: list[tuple[str, str]] = [
    (r"positional|keyword", "Pass every argument by keyword, e.g. [func(a=1, b='x')]; never positionally."),
    (r"func(tion)?_?name|wrong_func|function name",
     "Call exactly the function whose name appears in the given list; never invent or copy another name."),
    (r"missing|required|optional_param",
     "Include every required parameter of the function; add optional ones only when the task asks."),
    (r"type|value_error|wrong_value|unexpected",
     "Use the exact values and types the task states (numbers as numbers, strings in quotes)."),
    (r"count|parallel|multiple", "Make exactly as many calls as the task needs, all inside one list."),
    (r"decode|parse|syntax|unparse",
     "Reply with only the call list, e.g. [func(a=1)], with no code fences, no prose and no definitions."),
]
"""Verifier error types (regexes on the cause, e.g. BFCL's checker errors) -> an instruction that addresses them."""

FORMAT_CAUSES = ("format:", "truncated:", "loop:", "place:", "form:", "no_answer")


def answer_line(spec: HarnessSpec) -> str | None:
    """How the spec's parser wants the answer written (``Final answer: <answer>``, an ``<answer>``
    tag, ``\\boxed{}``), or None when it reads no marker (the whole reply is the answer)."""
    pattern = (spec.parser.final_answer_pattern or "").lower()
    if "final answer" in pattern:
        return "Final answer: <answer>"
    if "answer>" in pattern:
        return "<answer>...</answer>"
    if "boxed" in pattern:
        return "\\boxed{<answer>}"
    if '"answer"' in pattern or "answer\\" in pattern:
        return '{"answer": <answer>}'
    return None


def fill(line: str, answer: str) -> str:
    """``answer`` written in the answer ``line`` that ``answer_line`` gave."""
    return f"<answer>{answer}</answer>" if line == "<answer>...</answer>" else line.replace("<answer>", answer)


def _rule(name: str, slot: str, text: str) -> dict:
    return {"op": "add", "path": f"/prompt/rules/{name}", "value": {"slot": slot, "text": text}}


@operator("answer_format_rule", "prompt", FORMAT_CAUSES, ("/prompt/rules",), weight=2.0)
def answer_format_rule(m: Material, rng: random.Random) -> Edit | None:
    """An output-format rule for replies the parser misreads (no marker, truncated, repeated, the
    answer elsewhere or wrapped in text): one of several wordings, in the output-format or
    task-framing slot."""
    line = answer_line(m.spec)
    if line:
        texts = [f"Reply with exactly one line: '{line}'. Do not explain.",
                 f"Think in at most two short sentences, then write the line '{line}' and stop.",
                 f"Start your reply with '{line}' on its own line; nothing else is needed.",
                 f"Always finish with '{line}', where <answer> is only the value asked for."]
    else:
        texts = ["Reply with only the answer, nothing else.",
                 "Your whole reply is read as the answer: write just the answer, no sentence around it."]
    text = rng.choice(texts)
    slot = rng.choice(["output_format", "output_format", "task_framing"])
    name = f"answer_format_{slot}"
    if name in m.spec.prompt.rules and m.spec.prompt.rules[name].text == text:
        return None
    return Edit([_rule(name, slot, text)], f"output-format rule ({slot}): {text}")


@operator("exact_value_rule", "prompt", ("form:", "value:", "place:", "wrong_answer"), ("/prompt/rules",))
def exact_value_rule(m: Material, rng: random.Random) -> Edit | None:
    """A rule on the answer's form and value: only the value asked for, or a check of sign and
    operands for arithmetic slips (chosen by the direction's causes)."""
    texts = ["The answer is only the value the task asks for: no units, no words, no restated question."]
    if any(addresses(k, ("value:",)) for k in m.kinds):
        texts += ["Before answering, check the sign of the result and that each number of the task is used once.",
                  "Do not answer with a number copied from the task: compute the result.",
                  "Work the arithmetic out step by step, then check it once before the final answer."]
    text = rng.choice(texts)
    return Edit([_rule("exact_value", "action_guidance", text)], f"value rule: {text}")


@operator("verifier_hint_rule", "prompt", tuple(f"re:{p}" for p, _ in RULE_HINTS), ("/prompt/rules",), weight=2.0)
def verifier_hint_rule(m: Material, rng: random.Random) -> Edit | None:
    """The instruction ``RULE_HINTS`` pairs with a verifier's own error type (BFCL's checker errors)."""
    for pattern, text in RULE_HINTS:
        if any(re.search(pattern, k.lower()) for k in m.kinds):
            name = "rule_" + re.sub(r"[^a-z]+", "_", pattern)[:24].strip("_")
            if name not in m.spec.prompt.rules:
                return Edit([_rule(name, "output_format", text)], f"verifier-error rule: {text}")
    return None


@operator("concise_system", "prompt", ("truncated:", "loop:", "format:no_marker"), ("/prompt/system",),
          weight=0.7)
def concise_system(m: Material, rng: random.Random) -> Edit | None:
    """A system prompt asking for brevity (replies that run out of tokens or loop)."""
    text = rng.choice(["You are a careful problem solver who answers briefly.",
                       "You are a precise assistant. Keep replies under three sentences.",
                       "You solve small tasks exactly and never repeat yourself."])
    if m.spec.prompt.system == text:
        return None
    return Edit([{"op": "replace", "path": "/prompt/system", "value": text}], f"system prompt: {text}")


def category_keywords(m: Material, k: int = 3) -> list[str]:
    """Words that mark the direction's category among the train prompts: in most of its prompts and
    in few of the others' (at most ``k``, most typical first); ``[]`` without a category."""
    if not m.category:
        return []
    word = re.compile(r"[a-z][a-z_]{3,}")
    mine = [set(word.findall(t.prompt.lower())) for t in m.category_tasks()]
    others = [set(word.findall(t.prompt.lower())) for t in m.tasks.values()
              if t.split == "train" and task_category(t) != m.category]
    if not mine:
        return []
    inside, outside = Counter(w for s in mine for w in s), Counter(w for s in others for w in s)
    scored = [(inside[w] / len(mine) - (outside[w] / len(others) if others else 0.0), w) for w in inside]
    return [w for s, w in sorted(scored, key=lambda x: (-x[0], x[1])) if s >= 0.5][:k]


ADVICE = {"format": "end with the answer line the output format asks for",
          "truncated": "keep the reply short so the answer fits",
          "loop": "never repeat a sentence",
          "form": "give the bare value only",
          "place": "put the answer in the answer line, not earlier in the text",
          "value": "compute carefully and check the sign and the operands",
          "tool": "call tools only with the arguments their schema names",
          "no_answer": "always give a final answer"}


@operator("category_procedure", "skills", ("*",), ("/skills",))
def category_procedure(m: Material, rng: random.Random) -> Edit | None:
    """A procedure retrieved only for the direction's category (keywords typical of its train
    prompts): the advice for its causes. None without a category or keywords."""
    keywords = category_keywords(m)
    if not keywords:
        return None
    tips = [ADVICE[f] for f in dict.fromkeys(k.split(":")[0] for k in m.kinds) if f in ADVICE]
    if not tips:
        return None
    text = f"For {m.category.replace('_', ' ')} tasks: " + "; ".join(tips) + "."
    name = f"procedure_{re.sub(r'[^a-z0-9]+', '_', m.category.lower())[:24]}"
    skill = {"kind": "procedure", "text": text, "mode": "retrieved", "keywords": keywords}
    return Edit([{"op": "add", "path": f"/skills/{name}", "value": skill}],
                f"procedure for {m.category} (keywords {keywords}): {text}")


@operator("lesson", "memory", ("*",), ("/memory/lessons",), weight=0.5)
def lesson(m: Material, rng: random.Random) -> Edit | None:
    """A cross-episode lesson naming the failure (``/memory/lessons``)."""
    described = [CAUSES.get(k) or CAUSES.get(k.split(":")[0]) for k in m.kinds]
    what = next((d for d in described if d), None)
    if what is None:
        return None
    scope = f" on {m.category.replace('_', ' ')} tasks" if m.category else ""
    text = f"Earlier{scope}, {what}: avoid that."
    if text in m.spec.memory.lessons:
        return None
    return Edit([{"op": "add", "path": "/memory/lessons/-", "value": text}], f"lesson: {text}")
