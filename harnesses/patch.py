"""Edits: RFC 6902 JSON Patches (``jsonpatch``) that turn a parent spec into a child spec.

A patch that is not a list of RFC 6902 operations or names a malformed JSON Pointer (no leading
``/``, a bad ``~`` escape: ``POINTER_RULE``), a patch that does not apply, a result that does not
validate, a hook naming an unregistered condition/action, a tool view naming a tool the env lacks,
or an edit of a user agent's harness outside its declared params (``check_agent_edit``) all raise
``HarnessError`` carrying every problem found — an editor's malformed edit becomes a rejected
candidate with its reasons, never an exception that ends a run. ``apply_edit`` (what editors' edits
go through) also rejects a no-op: a patch whose child is its parent (``NOOP``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

import jsonpatch
import jsonpointer

from coevo.harnesses.agent import editable, load_agent
from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.spec import HarnessSpec, validate_spec

PROMPT_FIELDS: tuple[str, ...] = ("/prompt",)
"""The system and user prompt fields (slots and rules): what the prompt-only controls may edit
(WHALE §5's FST control; PACE's prompt phase)."""

CONTROL_FIELDS: tuple[str, ...] = ("/hooks", "/parser", "/budget", "/tool_view", "/context")
"""PACE's control logic: hooks, parser, budget, tool view and context policy."""


def apply_patch(parent: HarnessSpec, patch: list[dict[str, Any]] | str,
                tools: Iterable[str] | None = None, allowed: Sequence[str] | None = None) -> HarnessSpec:
    """Apply RFC 6902 ``patch`` (a list of operations or its JSON text) to ``parent``.

    The child's ``parents`` is ``[parent.id]``. With ``tools`` (the env's tool names) the child's
    tool view is checked against them too; with ``allowed`` (JSON Pointer prefixes such as
    ``PROMPT_FIELDS``) every field the child changes must lie under one of them (``check_fields``);
    a user agent's harness is checked by ``check_agent_edit``. A BPE spec's empty ``progress_schema``
    (left out of its JSON) is patched as ``[]``, so ``/bpe/progress_schema`` can be replaced or appended to;
    likewise ``/decoding/stop`` (``[]``) and ``/decoding/constrain`` (``"none"``).
    Raises ``HarnessError`` with every problem: each malformed operation (unknown op, a ``path`` or
    ``from`` that is no JSON Pointer: ``_operations``), else each operation that does not apply (path
    missing, test failed, the whole harness replaced by a non-object), then every
    validation/registry/tool/field problem of the result.
    """
    ops = _operations(patch)
    doc = parent.model_dump(mode="json")
    # left out of the JSON at their defaults (ids kept), yet fields an edit may replace
    doc["decoding"].setdefault("stop", [])
    doc["decoding"].setdefault("constrain", "none")
    if parent.bpe is not None:
        doc["bpe"].setdefault("progress_schema", [])
    problems: list[Problem] = []
    for i, op in enumerate(ops):  # one at a time, so that every operation that does not apply is reported
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError, IndexError, TypeError,
                ValueError) as err:
            problems.append(Problem(op.get("path", ""),
                                    f"operation {i} ({op.get('op')}) does not apply: {_short(err)}"))
        if not isinstance(doc, dict):  # the root ("") replaced by a value that is no harness
            raise HarnessError([Problem("", f"operation {i} ({op.get('op')}) replaces the whole harness with "
                                            f"{json.dumps(doc)[:40]}; an edit changes fields, e.g. /prompt/system")],
                               "patch")
    if problems:
        raise HarnessError(problems, "patch")
    doc["parents"] = [parent.id]
    child = validate_spec(doc, "patched harness")
    if tools is not None:
        check_tools(child, tools)
    if allowed is not None:
        check_fields(parent, child, allowed)
    check_agent_edit(parent, child)
    return child


POINTER_RULE = ("a JSON Pointer (RFC 6901) is '' for the whole harness or starts with '/', each step a field name "
                "with '~' written '~0' and '/' written '~1', e.g. /prompt/system")
"""What an operation's ``path`` and ``from`` must look like: the fix a malformed pointer's reason names."""


def _operations(patch: list[dict[str, Any]] | str) -> list[dict[str, Any]]:
    """``patch`` as a list of well-formed RFC 6902 operations (each ``op`` known, each ``path`` and ``from``
    a JSON Pointer). Raises ``HarnessError``: one problem when ``patch`` is not a list of operations, else
    one per malformed operation, naming its index, what is wrong and the fix (``POINTER_RULE`` for a pointer
    without its leading ``/``, a bad ``~`` escape or a non-string path)."""
    try:
        raw = json.loads(patch) if isinstance(patch, str) else patch
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
            raise ValueError("Document is expected to be sequence of operations")
        raw = list(raw)
    except (ValueError, TypeError) as err:
        raise HarnessError([Problem("", f"not a JSON Patch: {err}; a patch is a list of RFC 6902 operations")],
                           "patch") from None
    problems: list[Problem] = []
    for i, op in enumerate(raw):
        reason = ""
        try:
            jsonpatch.JsonPatch([op])  # checks op and path without applying (not from)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, ValueError, TypeError) as err:
            reason = _short(err)
        if isinstance(op, Mapping) and op.get("op") in ("move", "copy") and "from" not in op:
            reason = reason or f"a {op['op']} names its source in 'from'"
        fix = _pointer_fix(op)
        if reason or fix:
            problems.append(Problem(_path_of(op), f"not a JSON Patch: operation {i} is malformed: "
                                                  f"{reason or 'a pointer is malformed'}{fix}; "
                                                  "a patch is a list of RFC 6902 operations"))
    if problems:
        raise HarnessError(problems, "patch")
    return raw


def _path_of(op: Any) -> str:
    """An operation's ``path`` when it is a string (for the problem's location), else ``""``."""
    path = op.get("path") if isinstance(op, Mapping) else None
    return path if isinstance(path, str) else ""


def _pointer_fix(op: Any) -> str:
    """The fix for each malformed pointer of ``op`` (``path``, ``from``): ``POINTER_RULE``, and the
    pointer it probably meant when only the leading ``/`` is missing or a URI fragment's ``#`` added."""
    if not isinstance(op, Mapping):
        return ""
    fixes = []
    for member in ("path", "from") if op.get("op") in ("move", "copy") else ("path",):
        value = op.get(member)
        if member not in op or (isinstance(value, str) and _is_pointer(value)):
            continue
        meant = ("/" + value.lstrip("#/")) if isinstance(value, str) and value.lstrip("#/") else ""
        fixes.append(f"{member} {value!r} is not a JSON Pointer" + (f" (did you mean {meant!r}?)"
                                                                     if meant and _is_pointer(meant) else ""))
    return f" ({'; '.join(fixes)}: {POINTER_RULE})" if fixes else ""


def _is_pointer(text: str) -> bool:
    try:
        jsonpointer.JsonPointer(text)
    except jsonpointer.JsonPointerException:
        return False
    return True


NOOP = "no-op: the patch leaves the harness unchanged"
"""Why ``apply_edit`` rejects a patch whose child has its parent's spec id (e.g. ``replace`` with the
value already there, or ``add`` then ``remove``): there is nothing to check, gate or reward."""


def apply_edit(parent: HarnessSpec, patch: list[dict[str, Any]] | str,
               tools: Iterable[str] | None = None, allowed: Sequence[str] | None = None) -> HarnessSpec:
    """An editor's edit of ``parent``: ``apply_patch`` (same arguments), and a ``HarnessError``
    whose one problem is ``NOOP`` when the child is the parent itself (same spec id; only ``parents``
    differs) or, for a user agent's harness, when the factory would receive the same params (a field
    its params model does not read, e.g. ``/prompt/rules`` under a prompt type with only ``system``),
    so a no-op is a rejected candidate with that reason, never a child stored as its own parent or
    evaluated as a change. Raises ``HarnessError`` as ``apply_patch`` does, and for a no-op."""
    child = apply_patch(parent, patch, tools=tools, allowed=allowed)
    if child.id == parent.id or (parent.agent is not None
                                 and (agent := load_agent(parent.agent)).params(child) == agent.params(parent)):
        raise HarnessError([Problem("", NOOP)], "patch")
    return child


def check_agent_edit(parent: HarnessSpec, child: HarnessSpec) -> None:
    """Check an edit of a user-agent harness (``coevo.harnesses.agent``): the ``agent`` unchanged,
    only the fields its params declare changed, and the child's params valid under the params model.
    An edit never adds or changes an agent. Raises ``HarnessError`` with the reason (a rejected candidate)."""
    if child.agent != parent.agent:
        raise HarnessError([Problem("/agent", "the agent factory is the app's code: an edit may not change it")],
                           "patch (agent)")
    if parent.agent is None:
        return
    check_fields(parent, child, editable(parent) or ())
    load_agent(child.agent).params(child)


def check_fields(parent: HarnessSpec, child: HarnessSpec, allowed: Sequence[str]) -> None:
    """Check that ``child`` differs from ``parent`` only under the JSON Pointer prefixes ``allowed``.

    The difference is measured on the specs (``make_patch``), not on the operations, so a ``move``
    or ``copy`` cannot smuggle a change into another field. Raises ``HarnessError`` naming each
    changed path outside ``allowed`` and the fields this search may edit.
    """
    prefixes = [a.rstrip("/") for a in allowed]
    outside = sorted({op["path"] for op in make_patch(parent, child)
                      if not any(op["path"] == p or op["path"].startswith(p + "/") for p in prefixes)})
    if outside:
        raise HarnessError([Problem(path, f"this search may edit only {', '.join(prefixes) or 'nothing'}; "
                                          "the change to this field is not allowed") for path in outside],
                           "patch (field restriction)")


def _short(err: Exception) -> str:
    """An exception's text without the whole document that jsonpointer appends (``... in {...}``)."""
    text = str(err).split(" in {", 1)[0]
    return text if len(text) <= 200 else text[:200] + "..."


def check_tools(spec: HarnessSpec, tools: Iterable[str]) -> None:
    """Check that the tool view names only tools the env has.

    Raises ``HarnessError`` listing each unknown name in ``tool_view.exposed``, ``renames`` and
    ``descriptions``, renames that collide, and a ``parser.choice_action`` whose tool is not one the
    model is shown (its shown name, after ``exposed`` and ``renames``): every numbered reply would
    otherwise be an unknown-tool violation.
    """
    known = set(tools)
    view = spec.tool_view
    problems = [Problem(f"/tool_view/exposed/{i}", f"unknown tool {n!r}; the env has {sorted(known)}")
                for i, n in enumerate(view.exposed or []) if n not in known]
    for field in ("renames", "descriptions"):
        problems += [Problem(f"/tool_view/{field}/{n}", f"unknown tool {n!r}; the env has {sorted(known)}")
                     for n in getattr(view, field) if n not in known]
    shown = [view.renames.get(n, n) for n in (view.exposed if view.exposed is not None else known)]
    problems += [Problem("/tool_view/renames", f"two tools would be shown as {n!r}")
                 for n in sorted({n for n in shown if shown.count(n) > 1})]
    if (choice := spec.parser.choice_action) and choice.split(".")[0] not in shown:
        problems.append(Problem("/parser/choice_action", f"{choice!r} calls a tool the model is not shown; "
                                                         f"name one of {sorted(set(shown))} (TOOL.ARG)"))
    if problems:
        raise HarnessError(problems, "tool view")


def make_patch(parent: HarnessSpec, child: HarnessSpec) -> list[dict[str, Any]]:
    """The RFC 6902 patch that turns ``parent`` into ``child`` (``parents`` ignored)."""
    a = parent.model_dump(mode="json", exclude={"parents"})
    b = child.model_dump(mode="json", exclude={"parents"})
    return list(jsonpatch.make_patch(a, b))
