"""Sealing: which train tasks a harness answers (docs/design.md, Principles;
docs/concepts/sealing.md).

A gold answer reaches a meta role only inside a demonstration the role builds, and a task whose
answer is written into any accepted or pending harness leaves later weight stages, checks and
search scoring: its score would measure copying, and training on it would teach copying. Roles
cannot be trusted to say which tasks their edits answer (an LLM may copy an answer into a rule, or
work it out), so the loop finds them itself: ``demonstrated`` compares every train task's gold
answer, normalised (``answer_tokens``: case, punctuation, spacing and number formatting dropped),
with the text an edit added to the run's start harness, whatever its length.

Which harnesses count is the state's ``sealed`` map (harness id -> the tasks its spec answers,
reducer ``seal``): a node adds a harness when it becomes pending (an edit applied, a search
proposal) or joins a pool, and removes it (``None``) when it is rejected (check, gate, not adopted,
not kept by a search phase), so a rejected candidate's tasks return to the train set unless a live
harness answers them too. Accepted harnesses stay.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Mapping

from pydantic import BaseModel, Field

from coevo.harnesses.spec import HarnessSpec

_TOKEN = re.compile(r"(?<![0-9A-Za-z_.])-?\d+(?:\.\d+)?|[^\W\d_]+", re.UNICODE)


class Sealed(BaseModel):
    """A live harness's entry in ``sealed``: the train tasks whose gold answers its spec carries."""

    tasks: list[str] = Field(default_factory=list)


Update = Mapping[str, "Sealed | None"]
"""A ``sealed`` update: harness id -> its entry, or None to remove the harness."""


def seal(current: dict[str, Sealed] | None, update: Update) -> dict[str, Sealed]:
    """Reducer for ``sealed``: merge ``update`` into ``current``; a value ``None`` removes that harness."""
    out = dict(current or {})
    for harness_id, entry in update.items():
        if entry is None:
            out.pop(harness_id, None)
        else:
            out[harness_id] = entry
    return out


def live(tasks: Iterable[str]) -> Sealed:
    """The ``sealed`` entry of a live harness answering ``tasks`` (each once, in order)."""
    return Sealed(tasks=list(dict.fromkeys(tasks)))


def sealed_tasks(state: Mapping[str, Any]) -> set[str]:
    """The train tasks no weight stage, check or search score may use in ``state``: those a live
    harness answers (``state["sealed"]``) and, for runs stored before ``sealed`` existed, the
    accumulated ``demo_tasks``."""
    entries = (state.get("sealed") or {}).values()
    return {t for e in entries for t in e.tasks} | set(state.get("demo_tasks") or [])


def _number(token: str) -> str:
    value = float(token)
    return str(int(value)) if value.is_integer() else repr(value)


def answer_tokens(text: str) -> list[str]:
    """``text`` as the tokens answers are compared by: words lower-cased and numbers canonical
    (``"07"``, ``"7.0"`` -> ``"7"``; a minus sign counts only in front of a number, not inside a
    word), every other character a separator. ``"[g(a=1)]"`` and ``"g (a = 1)"`` give the same tokens."""
    tokens = []
    for token in _TOKEN.findall(text):
        tokens.append(_number(token) if token[-1].isdigit() else token.lower())
    return tokens


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def added_text(spec: HarnessSpec, start: HarnessSpec | None = None) -> list[str]:
    """The string values of ``spec`` (its content, not its lineage) that ``start`` does not hold:
    what the run's edits wrote into the harness."""
    base = set(_strings(start.model_dump(mode="json", exclude={"parents"}))) if start is not None else set()
    return [s for s in _strings(spec.model_dump(mode="json", exclude={"parents"})) if s not in base]


def demonstrated(spec: HarnessSpec, answers: Mapping[str, str], start: HarnessSpec | None = None) -> list[str]:
    """The ids of ``answers`` (task id -> its gold answer) whose answer occurs in ``spec``'s
    ``added_text`` (``carried``)."""
    return carried(added_text(spec, start), answers)


def carried(texts: Iterable[str], answers: Mapping[str, str]) -> list[str]:
    """The ids of ``answers`` (task id -> its gold answer) whose answer occurs in any of ``texts`` as a
    run of ``answer_tokens`` — any length, any formatting (a command list's commands in order, whatever
    punctuation joins them). A one-token answer ("7") matches any occurrence of that token, so short
    answers mark more tasks than strictly copied: sealing errs towards leaving a task out. Answers with
    no token are skipped. What every text a harness or a lesson may carry is checked with."""
    texts = ["\x1f" + "\x1f".join(answer_tokens(s)) + "\x1f" for s in texts]
    found = []
    for task_id, answer in answers.items():
        tokens = answer_tokens(answer)
        needle = "\x1f" + "\x1f".join(tokens) + "\x1f"
        if tokens and any(needle in text for text in texts):
            found.append(task_id)
    return found


def accepted_harnesses(state: Mapping[str, Any]) -> list[str]:
    """Every harness the run has accepted so far, oldest first: H0, then each round's incumbent
    (``history``) and the current one. A candidate a gate or check rejected is never among them."""
    ids = [state.get("start_harness", ""), *(h.incumbent for h in state.get("history") or []),
           state.get("incumbent", "")]
    return [h for h in dict.fromkeys(ids) if h]


def unseal(rejected: Iterable[str], state: Mapping[str, Any]) -> dict[str, Sealed | None]:
    """The ``sealed`` update removing the ``rejected`` harnesses, except any the run has accepted
    (``accepted_harnesses``: a rejected edit can reproduce an accepted spec)."""
    kept = set(accepted_harnesses(state))
    return {h: None for h in rejected if h and h not in kept}
