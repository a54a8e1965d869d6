"""Parser operators (``/parser``): final-answer pattern variants (one line after the marker, several
markers, the last number, a JSON field), code-fence stripping, and what a reply without an answer
means (``on_no_action``). A pattern the parser reads with ``coevo.harnesses.parse.last_answer_match``
(the last complete answer span)."""

from __future__ import annotations

import random

from coevo.roles.operators.base import Edit, Material, operator

MARKER_PATTERNS: dict[str, str] = {
    "marker_line": r"(?im)final answer\s*:\s*(.+?)[\s.]*$",
    "markers": r"(?is)(?:final answer\s*:|the answer is\s*:?|answer\s*:)\s*(.+?)(?:\.\s|\.?\s*$|\n)",
    "boxed": r"\\boxed\{([^{}]*)\}",
    "answer_tag": r"(?s)<answer>(.*?)</answer>",
}
"""Final-answer pattern variants that read a marker (group 1 is the answer)."""

LAST_NUMBER = r"(-?\d+(?:\.\d+)?)"
"""The last number in the reply (no marker: ``last_answer_match`` takes the last complete match)."""
MARKER_NUMBER = r"(?is)final answer\s*:\s*\D*?(-?\d+(?:\.\d+)?)"
"""The first number after the last "Final answer:" marker."""
JSON_FIELD = r'"(?:final_answer|answer)"\s*:\s*"?([^",}\n]+)"?'
"""The value of an ``answer`` field in a JSON object anywhere in the reply."""


def numeric(m: Material) -> bool:
    """Whether the direction's train tasks expect numbers: every evidence whose redacted diagnostics
    say what kind of answer it expects (``answer_kind``, ``coevo.envs.redact``; the gold itself never
    reaches a role) says ``number``, and at least one does. What makes the number-reading variants
    sensible."""
    kinds = [ev.diagnostics.get("answer_kind") for ev in m.direction.evidence]
    kinds = [k for k in kinds if k]
    return bool(kinds) and all(k == "number" for k in kinds)


def _pattern(m: Material, pattern: str, why: str) -> Edit | None:
    if m.spec.parser.final_answer_pattern == pattern:
        return None
    return Edit([{"op": "replace", "path": "/parser/final_answer_pattern", "value": pattern}], why)


@operator("parser_marker_variant", "parser", ("format:", "form:", "place:", "truncated:", "loop:"),
          ("/parser/final_answer_pattern",))
def parser_marker_variant(m: Material, rng: random.Random) -> Edit | None:
    """Another final-answer pattern that reads a marker: the marker's line only, several markers
    ("the answer is"), ``\\boxed{}``, an ``<answer>`` tag."""
    name = rng.choice(sorted(MARKER_PATTERNS))
    return _pattern(m, MARKER_PATTERNS[name], f"final-answer pattern {name!r}")


@operator("parser_number", "parser", ("format:", "form:", "place:", "truncated:", "loop:", "value:"),
          ("/parser/final_answer_pattern",), weight=1.5)
def parser_number(m: Material, rng: random.Random) -> Edit | None:
    """For numeric answers: read the last number in the reply, or the first number after the marker.
    None when the direction's expected answers are not numbers."""
    if not numeric(m):
        return None
    pattern, why = rng.choice([(LAST_NUMBER, "the last number in the reply"),
                               (MARKER_NUMBER, "the first number after the final-answer marker")])
    return _pattern(m, pattern, f"final-answer pattern: {why}")


@operator("parser_json_field", "parser", ("format:", "place:", "form:"),
          ("/parser/final_answer_pattern", "/prompt/rules"), weight=0.6)
def parser_json_field(m: Material, rng: random.Random) -> Edit | None:
    """Read the answer from a JSON ``answer`` field, with an output rule asking for it."""
    edit = _pattern(m, JSON_FIELD, "the answer from a JSON field")
    if edit is None:
        return None
    rule = {"slot": "output_format", "text": 'End your reply with a JSON object {"answer": "<answer>"}.'}
    edit.ops.append({"op": "add", "path": "/prompt/rules/answer_format_output_format", "value": rule})
    return edit


@operator("parser_strip_fences", "parser", ("format:", "no_answer", "decode", "parse", "syntax", "unparse"),
          ("/parser/strip_code_fences",), weight=0.7)
def parser_strip_fences(m: Material, rng: random.Random) -> Edit | None:
    """Strip code fences before parsing (replies wrapped in ```)."""
    if m.spec.parser.strip_code_fences:
        return None
    return Edit([{"op": "replace", "path": "/parser/strip_code_fences", "value": True}], "tolerate code fences")


@operator("parser_on_no_action", "parser", ("format:no_marker", "format:empty", "no_answer"),
          ("/parser/on_no_action", "/parser/violation_message", "/budget/max_model_calls"), weight=0.6)
def parser_on_no_action(m: Material, rng: random.Random) -> Edit | None:
    """A reply without a marker is an interface violation that asks again (``violation``; model
    calls capped at 2-3 so a model that never writes the marker stops early) instead of being taken
    whole as the answer, or back to ``finish``."""
    if m.spec.parser.on_no_action == "violation":
        return Edit([{"op": "replace", "path": "/parser/on_no_action", "value": "finish"}],
                    "take a reply without a marker as the answer")
    if not m.spec.parser.final_answer_pattern:
        return None
    message = rng.choice(["Your reply had no final answer line. Give it now.",
                          "Reply again and end with the final answer line."])
    calls = min(rng.choice([2, 3]), m.spec.budget.max_model_calls)
    return Edit([{"op": "replace", "path": "/parser/on_no_action", "value": "violation"},
                 {"op": "replace", "path": "/parser/violation_message", "value": message},
                 {"op": "replace", "path": "/budget/max_model_calls", "value": calls}],
                f"ask again (at most {calls} calls) when a reply has no final-answer marker")
