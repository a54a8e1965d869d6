"""Demonstrations from train tasks (``/skills``): a solved train rollout's answer, or a failed train
task's expected answer from its scoring diagnostics, shown as a prior exchange (or as an example in
the system prompt, always or retrieved for the category). Every demonstration names its train task
in ``Edit.demo_tasks``: the task then leaves later weight stages, checks and search scoring
(docs/design.md, Principles); a task that is not a train task is never used.
"""

from __future__ import annotations

import random
import re

from coevo.roles.diagnosis import task_category
from coevo.roles.operators.base import Edit, Material, operator
from coevo.roles.operators.prompt import answer_line, category_keywords, fill


def sources(m: Material) -> list[tuple[str, str]]:
    """(train task id, answer) pairs a demonstration may show: solved train rollouts first, then the
    expected answers in the direction's train evidence; each task once, train tasks only."""
    pairs = [(t.task_id, t.final_answer or "") for t in m.solved if t.split == "train" and t.passed]
    for ev in m.direction.evidence:
        task = m.tasks.get(ev.task_id)
        expected = m.demo_answer(task, ev.diagnostics) if task and task.split == "train" else None
        if expected:
            pairs.append((ev.task_id, expected))
    seen, out = set(), []
    for task_id, answer in pairs:
        task = m.tasks.get(task_id)
        if task is not None and task.split == "train" and answer and task_id not in seen:
            seen.add(task_id)
            out.append((task_id, answer))
    return out


@operator("demonstrations", "skills", ("*",), ("/skills",), weight=1.5)
def demonstrations(m: Material, rng: random.Random) -> Edit | None:
    """1..``max_demos`` demonstrations, the direction's category first, in a sampled form: a prior
    exchange whose reply is the bare answer or the parser's answer line, or an example in the
    system prompt (always, or retrieved by the category's keywords)."""
    pool = [(i, a) for i, a in sources(m) if f"demo_{i[-8:]}" not in m.spec.skills]
    if not pool or m.max_demos < 1:
        return None
    rng.shuffle(pool)
    if m.category:
        pool.sort(key=lambda p: task_category(m.tasks[p[0]]) != m.category)  # stable: the category first
    chosen = pool[:rng.randint(1, min(m.max_demos, len(pool)))]
    line = answer_line(m.spec)
    form = rng.choice(["bare", "line", "text"] if line else ["bare", "text"])
    keywords = category_keywords(m)
    ops = []
    for task_id, answer in chosen:
        prompt = m.tasks[task_id].prompt
        reply = fill(line, answer) if form == "line" and line else answer
        if form == "text":
            skill = {"kind": "demonstration", "text": f"Task: {prompt}\nAnswer: {reply}"}
            if keywords and rng.random() < 0.5:
                skill.update(mode="retrieved", keywords=keywords)
        else:
            skill = {"kind": "demonstration", "input": prompt, "output": reply}
        ops.append({"op": "add", "path": f"/skills/demo_{task_id[-8:]}", "value": skill})
    used = [i for i, _ in chosen]
    return Edit(ops, f"{len(ops)} demonstration(s) ({form}) from train tasks", used)


def evidence_span(text: str, answer: str) -> str | None:
    """The clause of ``text`` that holds ``answer`` as a whole word (clauses end at ``, ; : . ? !`` or a
    line break), stripped; None when no clause or several different ones do (the evidence is ambiguous)."""
    clauses = {c.strip() for c in re.split(r"[,;:.?!\n]", text)
               if re.search(rf"(?<![\w.]){re.escape(answer)}(?![\w.])", c)}
    return clauses.pop() if len(clauses) == 1 else None


def answer_of(output: str, pattern: str | None) -> str | None:
    """The answer a demonstration's ``output`` gives under a final-answer ``pattern`` (its first group), or
    None when the output has no answer line (or the pattern is None)."""
    match = re.search(pattern, output) if pattern else None
    return match.group(1).strip() if match and match.groups() and match.group(1) else None


@operator("demo_quote_evidence", "skills", ("value:operand", "value:wrong", "wrong_answer", "place:"),
          ("/skills", "/budget/max_output_tokens"),
          needs=lambda spec: any(s.kind == "demonstration" and s.output for s in spec.skills.values()))
def demo_quote_evidence(m: Material, rng: random.Random) -> Edit | None:
    """Each demonstration first quotes the part of its task that holds its answer, then gives the answer
    line (``kiwi 64`` before ``Final answer: 64``): the model is shown where an answer comes from, for a
    value copied from the wrong place in the task. Only demonstrations whose answer sits in exactly one
    clause of their input change; the edit adds no text that was not in a demonstration already, so it
    carries no new task content. The output-token budget grows to fit the longer replies (about two
    characters a token, digits being one token each, plus a margin), so the quoted answer is never cut."""
    ops, longest = [], 0
    for name, skill in sorted(m.spec.skills.items()):
        if skill.kind != "demonstration" or not skill.input or not skill.output:
            continue
        answer = answer_of(skill.output, m.spec.parser.final_answer_pattern)
        span = evidence_span(skill.input, answer) if answer else None
        if span and not skill.output.startswith(span):
            ops.append({"op": "replace", "path": f"/skills/{name}/output", "value": f"{span}\n{skill.output}"})
            longest = max(longest, len(span) + 1 + len(skill.output))
    if not ops:
        return None
    why = f"{len(ops)} demonstration(s) quote the part of the task that holds the answer"
    if m.spec.budget.max_output_tokens < (needed := longest // 2 + 4):
        ops.append({"op": "replace", "path": "/budget/max_output_tokens", "value": needed})
        why += f"; output budget {m.spec.budget.max_output_tokens} -> {needed} tokens"
    return Edit(ops, why)
