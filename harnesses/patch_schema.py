"""The JSON schema of an edit that applies: RFC 6902 operations on one harness spec, field by field.

An LLM editor is asked for ``{"rationale", "patch"}``. Sent as the reply's ``response_format``,
``patch_schema(spec)`` says which operations can apply to *this* spec, so a model that follows it
(an API model told the schema, or a local model decoding under it: ``coevo.models.constrained``)
writes a patch whose paths exist and whose values have the field's type:

- ``replace`` a field that holds a value (``/prompt/system``, ``/parser/strip_code_fences``,
  ``/budget/max_model_calls``, ...) with a value of that field's JSON schema (grouped: one variant
  per value schema, its paths an enum);
- ``add`` a new named entry to a map (``/prompt/rules/<key>``, ``/skills/<key>``,
  ``/hooks/<key>``, ...), the key a short identifier, the value the entry's schema (hook conditions
  and actions named from the registries);
- ``remove`` an existing map entry;
- ``add`` an optional component the spec lacks (``/bpe``) whole; once set, its fields are replaced
  like any other.

The reply is still validated after decoding (``EditReply`` and ``apply_patch``): the schema guides
the model, it is not the check (e.g. a hook's ``parameters`` depend on its condition).
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any, Sequence

from coevo.harnesses.agent import narrow
from coevo.harnesses.registry import ACTIONS, CONDITIONS, EVENTS
from coevo.harnesses.spec import HarnessSpec

IDENTITY = ("schema_version", "name", "description", "parents", "agent", "/parser/final_answer_pattern")
"""Fields an edit is not offered: the spec's identity and lineage, the user agent it runs (the app's
code, ``coevo.harnesses.agent``), and the answer regex (a model
that cannot be held to a valid regex with a capture group would only break the parser)."""
KEY_PATTERN = "[a-z][a-z0-9_]{0,23}"
"""A new map entry's key: a short lower-case identifier."""
LITERAL = {"type": "string", "pattern": "^[A-Za-z0-9 _:,.-]{1,40}$"}
"""A hook's ``pattern`` parameter: plain words, always a valid regex (that matches itself)."""
TEXT = {"type": "string", "minLength": 1}
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _hook_schema() -> dict[str, Any]:
    """A hook: one variant per registered condition, its parameters typed from the condition's
    keyword-only signature (required when they have no default), an action from the registry and a
    non-empty message: the registry checks of ``HarnessSpec`` hold by construction."""
    variants = []
    for name, fn in sorted(CONDITIONS.items()):
        try:
            params = inspect.signature(fn, eval_str=True).parameters.values()
        except (NameError, TypeError, SyntaxError):
            params = inspect.signature(fn).parameters.values()
        keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        props = {p.name: LITERAL if p.name == "pattern" else {"type": _JSON_TYPES.get(p.annotation, "string")}
                 for p in keyword}
        required = [p.name for p in keyword if p.default is inspect.Parameter.empty]
        variants.append(_object({"event": {"enum": list(EVENTS)}, "condition": {"const": name},
                                 "parameters": _object(props, required), "action": {"enum": sorted(ACTIONS)},
                                 "message": TEXT}))
    return {"anyOf": variants}


def _object(properties: dict[str, Any], required: Sequence[str] | None = None) -> dict[str, Any]:
    """A closed JSON object schema (every property required unless ``required`` says otherwise)."""
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(properties) if required is None else list(required)}


SKILL = {"anyOf": [_object({"kind": {"const": "procedure"}, "text": TEXT}),
                   _object({"kind": {"const": "demonstration"}, "input": TEXT, "output": TEXT}),
                   _object({"kind": {"const": "demonstration"}, "text": TEXT})]}
"""A new skill: a procedure's text, or a demonstration as an input/output pair or as text (the
content rules of ``Skill``)."""
TASK_FRAMING = {"type": "string", "pattern": "^[^{}]{0,160}\\{task\\}[^{}]{0,160}$"}
"""The task framing keeps its one ``{task}`` placeholder and no other brace."""


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return defs[ref.rsplit("/", 1)[1]] if isinstance(ref, str) else schema


def _value_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A field's schema as an operation's ``value`` (without its title and default)."""
    return {k: v for k, v in schema.items() if k not in ("title", "default", "description")}


def _walk(schema: dict[str, Any], value: Any, pointer: str, defs: dict[str, Any],
          replace: dict[str, list[str]], adds: dict[str, dict[str, Any]], removes: list[str]) -> None:
    resolved = _resolve(schema, defs)
    if "properties" in resolved:  # a struct: every field
        for name, field in resolved["properties"].items():
            child = f"{pointer}/{_escape(name)}"
            if (pointer or name not in IDENTITY) and child not in IDENTITY:
                _walk(field, (value or {}).get(name), child, defs, replace, adds, removes)
    elif resolved.get("type") == "object" and isinstance(resolved.get("additionalProperties"), dict):  # a map
        entry = resolved["additionalProperties"]
        adds[pointer] = {"type": "object", "additionalProperties": False, "required": ["op", "path", "value"],
                         "properties": {"op": {"const": "add"},
                                        "path": {"type": "string", "pattern": f"^{pointer}/{KEY_PATTERN}$"},
                                        "value": _value_schema(entry)}}
        removes.extend(f"{pointer}/{_escape(k)}" for k in sorted(value or {}))
    elif (part := _optional_component(resolved, defs)) is not None:  # bpe: walked when set, else added whole
        if value is None:
            adds[pointer] = {"type": "object", "additionalProperties": False, "required": ["op", "path", "value"],
                             "properties": {"op": {"const": "add"}, "path": {"const": pointer},
                                            "value": _value_schema(defs[part])}}
        else:
            _walk({"$ref": f"#/$defs/{part}"}, value, pointer, defs, replace, adds, removes)
    else:  # a value
        replace.setdefault(json.dumps(_value_schema(schema), sort_keys=True), []).append(pointer)


def _optional_component(schema: dict[str, Any], defs: dict[str, Any]) -> str | None:
    """The ``$defs`` name of an optional struct component (``X | None``, e.g. ``bpe``), else None."""
    options = schema.get("anyOf") or []
    refs = [o["$ref"].rsplit("/", 1)[1] for o in options if isinstance(o.get("$ref"), str)]
    if len(options) == 2 and len(refs) == 1 and {"type": "null"} in options and "properties" in defs[refs[0]]:
        return refs[0]
    return None


def _under(pointer: str, allowed: Sequence[str]) -> bool:
    return any(pointer == a or pointer.startswith(a.rstrip("/") + "/") for a in allowed)


def patch_schema(spec: HarnessSpec, allowed: Sequence[str] | None = None, max_ops: int = 4) -> dict[str, Any]:
    """The JSON schema of an editor's reply ``{"rationale": str, "patch": [1..max_ops operations]}``
    whose operations apply to ``spec`` (module doc). ``allowed``: JSON Pointer prefixes the edit may
    touch (a phase's fields, e.g. ``PROMPT_FIELDS``; None: any field but the spec's identity), narrowed
    to the fields a user agent's params declare when ``spec`` names one (``coevo.harnesses.agent.narrow``).
    Raises ``ValueError`` when ``allowed`` leaves no operation."""
    allowed = narrow(allowed, spec)
    root = HarnessSpec.model_json_schema()
    defs = copy.deepcopy(root.pop("$defs"))
    defs["Hook"], defs["Skill"] = _hook_schema(), SKILL
    defs["Prompt"]["properties"]["task_framing"] = TASK_FRAMING
    replace: dict[str, list[str]] = {}
    adds: dict[str, dict[str, Any]] = {}  # map pointer -> its add variant
    removes: list[str] = []
    _walk(root, spec.model_dump(mode="json"), "", defs, replace, adds, removes)
    variants = []
    for value, pointers in replace.items():
        pointers = [p for p in pointers if allowed is None or _under(p, allowed)]
        if pointers:
            variants.append({"type": "object", "additionalProperties": False, "required": ["op", "path", "value"],
                             "properties": {"op": {"const": "replace"}, "path": {"enum": pointers},
                                            "value": json.loads(value)}})
    variants += [add for pointer, add in adds.items() if allowed is None or _under(pointer, allowed)]
    removes = [p for p in removes if allowed is None or _under(p, allowed)]
    if removes:
        variants.append({"type": "object", "additionalProperties": False, "required": ["op", "path"],
                         "properties": {"op": {"const": "remove"}, "path": {"enum": removes}}})
    if not variants:
        raise ValueError(f"no field of the harness lies under the allowed prefixes {list(allowed or [])}")
    return {"type": "object", "additionalProperties": False, "required": ["rationale", "patch"], "$defs": defs,
            "properties": {"rationale": {"type": "string"},
                           "patch": {"type": "array", "minItems": 1, "maxItems": max_ops,
                                     "items": {"anyOf": variants}}}}
