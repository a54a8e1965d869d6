"""``HarnessSpec``: the harness as a versioned, content-addressed JSON document (its components, one
strict model each, are in ``coevo.harnesses.components`` and importable from here too).

Components follow docs/design.md and Harness-S Table 8 (prompt, skills, context, memory, hooks,
tool view, parser, budget, decoding), plus EvoHarness-RL's optional BPE state (``bpe``; left out
of the JSON, and so of the id, when unset). A spec is pure data: code components (hook conditions and
actions) are named from ``coevo.harnesses.registry`` and checked when the spec validates.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from coevo.harnesses.components import (
    AGENT_REF,
    BPE,
    CHARS_PER_TOKEN,
    SCHEMA_VERSION,
    SLOTS,
    ActionCosts,
    Budget,
    Context,
    Decoding,
    Hook,
    Memory,
    Parser,
    Prompt,
    Rule,
    Skill,
    Slot,
    Strict,
    ToolView,
)
from coevo.harnesses.errors import HarnessError, Problem, problems_from_validation
from coevo.harnesses.registry import ACTIONS, EVENTS, parameter_problems

__all__ = ["AGENT_REF", "ActionCosts", "BPE", "Budget", "CHARS_PER_TOKEN", "Context", "Decoding", "HarnessSpec",
           "Hook", "Memory", "Parser", "Prompt", "Rule", "SCHEMA_VERSION", "SLOTS", "Skill", "Slot", "Strict",
           "ToolView", "harness_warnings", "hook_problems", "load_harness", "validate_spec"]


class HarnessSpec(Strict):
    """A harness: everything around the model that decides what it sees and how its output
    becomes actions (docs/design.md, HarnessSpec).

    ``id`` is the sha256 of the canonical JSON of the spec without ``parents`` (same content,
    same id; ``bpe`` unset is left out, so specs without it keep their ids). ``agent`` names a
    user's LangGraph agent factory (``package.module:make_agent``) that runs in place of coevo's
    harness graph, handed the spec's declared fields as its params (``coevo.harnesses.agent``);
    unset (the default, left out of the JSON) the spec runs on coevo's own harness graph. Raises pydantic
    ``ValidationError`` on bad fields; hooks naming unregistered conditions/actions or wrong
    parameters fail validation.
    """

    schema_version: int = SCHEMA_VERSION
    name: str = "harness"
    description: str = ""
    parents: list[str] = Field(default_factory=list)
    prompt: Prompt = Field(default_factory=Prompt)
    skills: dict[str, Skill] = Field(default_factory=dict)
    context: Context = Field(default_factory=Context)
    memory: Memory = Field(default_factory=Memory)
    hooks: dict[str, Hook] = Field(default_factory=dict)
    tool_view: ToolView = Field(default_factory=ToolView)
    parser: Parser = Field(default_factory=Parser)
    budget: Budget = Field(default_factory=Budget)
    decoding: Decoding = Field(default_factory=Decoding)
    bpe: BPE | None = Field(default=None, exclude_if=lambda v: v is None)
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None, pattern=AGENT_REF)

    @model_validator(mode="after")
    def _registered_hooks(self) -> "HarnessSpec":
        if self.schema_version > SCHEMA_VERSION:
            raise ValueError(f"schema_version {self.schema_version} is newer than this coevo ({SCHEMA_VERSION}); "
                             "upgrade coevo")
        if problems := hook_problems(self.hooks):
            raise ValueError("; ".join(str(p) for p in problems))
        if self.decoding.constrain != "none" and (self.agent is not None or self.parser.mode != "json"):
            raise ValueError(f"decoding.constrain={self.decoding.constrain!r} needs parser.mode 'json' (here "
                             f"{self.parser.mode!r}) and no agent (an agent's graph makes its own model calls; here "
                             f"{self.agent!r}): set parser.mode to 'json', or decoding.constrain to 'none'")
        return self

    def canonical_json(self) -> str:
        """Canonical JSON of the content (sorted keys, no whitespace, ``parents`` excluded)."""
        return json.dumps(self.model_dump(mode="json", exclude={"parents"}), sort_keys=True, separators=(",", ":"))

    @property
    def id(self) -> str:
        """Content address: hex sha256 of ``canonical_json()`` (64 chars)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    @property
    def short_id(self) -> str:
        """The first 12 hex characters of ``id``, for display."""
        return self.id[:12]


def harness_warnings(spec: HarnessSpec) -> list[Problem]:
    """What is valid in ``spec`` but works against its use, each with its JSON path and the fix
    (``coevo harness validate`` prints them, the ``check`` node records them): a fixed
    ``decoding.seed``, with which the k rollouts of a task in an evaluation sample
    one random stream, and which a GRPO group would share (no reward contrast) had training not
    replaced it by a seed per rollout."""
    seed = spec.decoding.seed
    if seed is None:
        return []
    return [Problem("/decoding/seed", f"fixed at {seed}: every rollout samples with the same seeds (an "
                                      "evaluation's k rollouts of a task repeat one another; training ignores it "
                                      "and seeds each rollout itself); set it to null unless a single replayable "
                                      "rollout is what you want")]


def hook_problems(hooks: Mapping[str, Any]) -> list[Problem]:
    """Registry problems of hook entries by name, each with its JSON path (``/hooks/<name>/condition``):
    unknown condition, action or event, condition parameters that do not fit (``parameter_problems``).

    Entries are ``Hook``s or raw dicts: ``HarnessSpec``'s validator checks its hooks with it, and
    ``validate_spec`` checks the raw document with it too, because a hook that fails field validation
    never reaches the model validator and its registry problems must still be reported.
    """
    problems = []
    for name, hook in hooks.items():
        hook = hook.model_dump() if isinstance(hook, Hook) else hook
        if not isinstance(hook, dict):
            continue
        if "condition" in hook:
            problems += [Problem(f"/hooks/{name}/condition", m)
                         for m in parameter_problems(str(hook["condition"]), hook.get("parameters") or {})]
        if "action" in hook and hook["action"] not in ACTIONS:
            problems.append(Problem(f"/hooks/{name}/action",
                                    f"unknown hook action {hook['action']!r}; registered: {sorted(ACTIONS)}"))
        if hook.get("event") not in EVENTS:
            problems.append(Problem(f"/hooks/{name}/event",
                                    f"unknown event {hook.get('event')!r}; one of {list(EVENTS)}"))
    return problems


def validate_spec(data: dict[str, Any], source: str = "harness") -> HarnessSpec:
    """Validate a spec document, collecting every problem with its JSON path.

    Raises ``HarnessError`` listing all problems (schema errors and registry errors).
    """
    if not isinstance(data, dict):
        raise HarnessError([Problem("", f"a harness spec is a JSON object, got {type(data).__name__}")], source)
    try:
        return HarnessSpec.model_validate(data)
    except ValidationError as err:
        hooks = data.get("hooks")
        problems = ([p for p in problems_from_validation(err) if p.path != ""]
                    + hook_problems(hooks if isinstance(hooks, dict) else {}))
        unique = {str(p): p for p in problems or problems_from_validation(err)}  # in first-seen order
        raise HarnessError(list(unique.values()), source) from None


def load_harness(source: str | Path | dict[str, Any] | HarnessSpec) -> HarnessSpec:
    """Load a spec from a ``HarnessSpec``, a dict, a JSON file path, a JSON string, or the name of a
    shipped base harness (``reasoning_gym``, ``bfcl``, ... under ``harnesses/base/``).

    Raises ``HarnessError`` when the file is missing, is not JSON, or does not validate.
    """
    if isinstance(source, HarnessSpec):
        return source
    if isinstance(source, dict):
        return validate_spec(source)
    text, name = _read_source(str(source))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise HarnessError([Problem("", f"not JSON (line {err.lineno}, column {err.colno}: {err.msg}); "
                                        "a harness file is a JSON object")], name) from None
    return validate_spec(data, name)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a name no file can have (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a folder; False for a name no folder can have."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _read_source(source: str) -> tuple[str, str]:
    """``(text, name)`` of a harness source that is not a dict: JSON text as it is, else the file at
    ``source`` or the shipped base harness of that name. Raises ``HarnessError`` for a folder, a name
    that is neither a file nor a base harness, or a file that cannot be read as text."""
    if source.lstrip().startswith("{"):
        return source, "harness"
    path = Path(source)
    if not _is_file(path):
        shipped = Path(__file__).parent / "base" / f"{source}.json"
        if source and "/" not in source and _is_file(shipped):
            path = shipped
        else:
            what = (f"{source!r} is a folder" if source and _is_dir(path) else f"no file {source!r}" if source
                    else "an empty name")
            raise HarnessError([Problem("", f"{what}; pass a JSON file path, JSON text or a shipped base harness "
                                            "name")], source or "harness")
    try:
        return path.read_text(), str(path)
    except (OSError, UnicodeDecodeError) as err:
        raise HarnessError([Problem("", f"cannot read {source!r} as text ({getattr(err, 'strerror', None) or err}); "
                                        "a harness file is JSON text")], source) from None
