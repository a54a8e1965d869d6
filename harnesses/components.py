"""The components of a ``HarnessSpec`` (``coevo.harnesses.spec``), one strict model each: prompt and
rules, skills, context, memory, hooks, tool view, parser, budget, decoding, action costs and
EvoHarness-RL's BPE state (docs/design.md and Harness-S Table 8). ``Strict`` is their base: unknown
keys and NUL characters are errors."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from coevo.config.base import Section

SCHEMA_VERSION = 1
Slot = Literal["system", "task_framing", "action_guidance", "output_format"]
SLOTS: tuple[str, ...] = ("system", "task_framing", "action_guidance", "output_format")


class Strict(Section):
    """Base for spec components: unknown keys are errors (a config ``Section``), so a typo in an edit
    is caught, and no text (a value or a map's key, at any depth) may hold a NUL character: no
    tokenizer, terminal or C string carries it faithfully, so it would reach the model as something
    other than the spec says."""

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if _holds_nul(value):
            raise ValueError("holds a NUL character (\\x00); remove it (no model or tokenizer reads it as text)")
        return value


def _holds_nul(value: Any) -> bool:
    """True when ``value`` (a string, or a list, tuple or dict of them, keys included; not a nested
    spec component, which checks its own fields) holds ``\\x00``."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(v) for v in value)
    return False


class Rule(Strict):
    """A named instruction placed in one prompt slot (Table 7, case 2)."""

    slot: Slot = "action_guidance"
    text: str


class Prompt(Strict):
    """Prompt slots. ``task_framing`` must contain ``{task}`` (where the task text goes)."""

    system: str = "You are a helpful agent."
    task_framing: str = "{task}"
    action_guidance: str = ""
    output_format: str = ""
    rules: dict[str, Rule] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_task_placeholder(self) -> "Prompt":
        if "{task}" not in self.task_framing:
            raise ValueError("task_framing must contain the placeholder {task}")
        return self


class Skill(Strict):
    """A named text the agent can use: a ``procedure`` or a ``demonstration``.

    A demonstration is either ``text`` in the system prompt or an ``input``/``output`` pair shown
    as a prior user/assistant exchange (few-shot chat turns, framed like the task), which small
    instruct models follow far better.

    ``mode="always"`` puts it in every prompt; ``"retrieved"`` only when one of ``keywords``
    occurs in the task (case-insensitive) or the word overlap (Jaccard) between ``text`` and the
    task reaches ``min_overlap``.
    """

    kind: Literal["procedure", "demonstration"] = "procedure"
    text: str = ""
    input: str | None = None
    output: str | None = None
    mode: Literal["always", "retrieved"] = "always"
    keywords: list[str] = Field(default_factory=list)
    min_overlap: float = Field(default=0.2, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _has_content(self) -> "Skill":
        pair = self.input is not None and self.output is not None
        if (self.input is None) != (self.output is None):
            raise ValueError("a demonstration pair needs both input and output")
        if pair and self.kind != "demonstration":
            raise ValueError("input/output pairs are demonstrations: set kind to 'demonstration'")
        if not self.text and not pair:
            raise ValueError("a skill needs text, or (for a demonstration) an input/output pair")
        return self

    @property
    def is_chat_turn(self) -> bool:
        """A demonstration given as an ``input``/``output`` pair: shown as a prior user/assistant turn."""
        return self.input is not None and self.output is not None


class Context(Strict):
    """Context policy: keep the last ``history_turns`` model turns (``None`` = all) and cut each tool
    output to ``tool_output_chars`` characters (``None`` = no cut)."""

    history_turns: int | None = Field(default=None, ge=1)
    tool_output_chars: int | None = Field(default=None, ge=16)


class Memory(Strict):
    """``scratchpad``: expose a ``note`` tool whose notes are shown in every later context;
    ``lessons``: cross-episode lessons shown in the system prompt."""

    scratchpad: bool = False
    lessons: list[str] = Field(default_factory=list)


class Hook(Strict):
    """Event × registered condition (with parameters) → registered action with a message."""

    event: Literal["before_model", "after_model", "after_tool", "on_tool_error", "before_finish"]
    condition: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    action: str
    message: str = ""


class ToolView(Strict):
    """Which env tools the model sees and how: ``exposed`` (env names; ``None`` = all), ``renames``
    (env name → shown name), ``descriptions`` (env name → description override), ``output_format``
    (``raw`` text or ``json`` pretty-printed when the output parses as JSON)."""

    exposed: list[str] | None = None
    renames: dict[str, str] = Field(default_factory=dict)
    descriptions: dict[str, str] = Field(default_factory=dict)
    output_format: Literal["raw", "json"] = "raw"


class Parser(Strict):
    """How a reply becomes actions: ``native`` tool calls, a ``json`` action object in text, a
    python-call list ``[f(a=1)]``, or ``text`` (no actions). ``final_answer_pattern`` is a regex whose
    group 1 (else the whole match) is the answer, taken from its LAST complete match in the reply
    (``coevo.harnesses.parse.last_answer_match``); ``on_no_action``: ``finish`` takes the whole reply
    as the answer, ``violation`` counts an interface violation and asks again with
    ``violation_message``. ``strip_code_fences`` replaces each ``` fenced block (with or without a
    language tag) by its inside before parsing: a harness choice, since verifiers score the answer
    exactly as the harness submits it (BFCL's decoder fails a ```python fence). ``choice_action`` ``TOOL.ARG``
    (unset: left out of the JSON and the id): a reply with no action that starts with an option number
    ("3", "3.", "option 3": ``coevo.envs.common.leading_choice``) is the call ``TOOL(ARG="3")``."""

    mode: Literal["native", "json", "python_call", "text"] = "native"
    final_answer_pattern: str | None = r"(?is)final answer\s*:\s*(.+)"
    on_no_action: Literal["finish", "violation"] = "finish"
    violation_message: str = "Your reply could not be parsed. Follow the output format exactly."
    strip_code_fences: bool = False
    choice_action: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                      pattern=r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$")

    @field_validator("final_answer_pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"not a valid regex ({err}); fix the pattern or set it to null") from None
        return pattern


AGENT_REF = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
"""What ``HarnessSpec.agent`` looks like: ``package.module:attribute``."""

CHARS_PER_TOKEN = 4
"""How the engine estimates tokens from text (``Budget.max_context_tokens``; ``coevo.harnesses.fit``)."""


class Budget(Strict):
    """Per-episode limits (defaults: Harness-S Table 8): model calls, env actions, context tokens
    (the smaller of this and the policy's own context, counted with a local policy's tokenizer, else as
    characters / 4: ``coevo.harnesses.fit``), output tokens per model call."""

    max_model_calls: int = Field(default=32, ge=1)
    max_env_actions: int = Field(default=30, ge=0)
    max_context_tokens: int = Field(default=65_532, ge=64)
    max_output_tokens: int = Field(default=8_192, ge=1)


class Decoding(Strict):
    """Sampling settings passed to the policy: temperature (0 = greedy), top_p, seed (``None`` = the
    rollout's seed; a fixed seed makes every rollout sample alike, so ``harness_warnings`` flags it and
    training ignores it), ``stop`` sequences (a reply ends before the first one it would contain).

    ``constrain`` (``json`` parser mode only; not for an ``agent`` harness) decodes every reply under the
    JSON schema of the actions allowed at that moment (``coevo.harnesses.constrain``): ``actions``, a call
    ``{"tool": NAME, "arguments": {...}}`` of one exposed tool with the arguments it accepts now
    (``Tool.accepted``: e.g. TextWorld's ``act`` takes one admissible command); ``actions_or_answer`` also
    ``{"final_answer": "..."}``; ``none`` (the default) decodes freely. It is sent as ``response_format``:
    the local engine masks the logits (``coevo.models.constrained``), so a reply parses unless
    ``max_output_tokens`` cuts it (free strings are capped at 200 characters), and the log-probs recorded
    are the masked ones (``train.importance_correction``'s weights fall below 1 on forced tokens);
    LiteLLM passes it on (some providers refuse a root ``anyOf``: several tools, or ``actions_or_answer``);
    a scripted fake ignores it.

    An empty ``stop`` and ``constrain = "none"`` are left out of the serialised spec, so a spec without
    them keeps the id it had before the fields existed."""

    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list, max_length=4)
    constrain: Literal["none", "actions", "actions_or_answer"] = "none"

    @field_validator("stop")
    @classmethod
    def _non_empty(cls, stop: list[str]) -> list[str]:
        if any(not s for s in stop):
            raise ValueError("a stop sequence must not be empty; remove it")
        return stop

    @model_serializer(mode="wrap")
    def _without_empty_stop(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if not self.stop:
            data.pop("stop", None)
        if self.constrain == "none":
            data.pop("constrain", None)
        return data


class ActionCosts(Strict):
    """The declared cost of each BPE harness action (EvoHarness-RL, cost-aware GRPO: reward = task
    reward - lambda x the episode's summed action cost). Unitless, >= 0; defaults are coevo's choice,
    not the paper's (the abstract gives none)."""

    read: float = Field(default=0.05, ge=0.0)
    update_belief: float = Field(default=0.1, ge=0.0)
    update_progress: float = Field(default=0.1, ge=0.0)
    consolidate: float = Field(default=0.1, ge=0.0)


class BPE(Strict):
    """EvoHarness-RL's policy-facing harness state (first abstract of
    arXiv:2608.05446): Belief (hypotheses about the world state),
    Progress (subgoals done and pending) and Experience (lessons that persist across episodes of a
    harness lineage), read and written through the harness actions ``bpe_read``, ``bpe_update_belief``,
    ``bpe_update_progress`` and ``bpe_consolidate`` (``coevo.harnesses.bpe``), each costing ``costs``.

    ``render``: ``on_read`` puts the state into context only as the output of ``bpe_read``
    (selective access); ``always`` shows it after every turn, as the scratchpad is. Caps:
    ``max_belief`` hypotheses (the oldest dropped), ``max_progress`` subgoals, ``max_experience``
    lessons (consolidation keeps the newest distinct ones), ``max_chars`` characters per entry.
    ``progress_schema``: subgoals every episode starts with as pending (refined by evoharness_rl's
    ``refine_progress``; at most ``max_progress``, distinct up to case and whitespace, each at most
    ``max_chars``; left out of the JSON when empty, so older BPE specs keep their ids).
    """

    render: Literal["on_read", "always"] = "on_read"
    costs: ActionCosts = Field(default_factory=ActionCosts)
    max_belief: int = Field(default=8, ge=1)
    max_progress: int = Field(default=16, ge=1)
    max_experience: int = Field(default=16, ge=1)
    max_chars: int = Field(default=200, ge=8)
    progress_schema: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _schema_fits(self) -> "BPE":
        keys = [" ".join(s.split()).casefold() for s in self.progress_schema]
        longest = max(map(len, keys), default=0)
        if "" in keys or len(set(keys)) < len(keys) or len(keys) > self.max_progress or longest > self.max_chars:
            raise ValueError(f"progress_schema: at most max_progress = {self.max_progress} distinct, non-blank "
                             f"subgoals of <= max_chars = {self.max_chars} characters; got {self.progress_schema!r}")
        return self
