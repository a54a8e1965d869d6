"""``ModelCall`` and ``Trajectory``: what one rollout of a harness produced (docs/design.md, Trajectory).

Every model call made through the harness graph is recorded with its input messages, its output
and, when the model provides them, the prompt token ids, the sampled completion token ids and
their logprobs. ``Trajectory.segments`` turns the calls into training sequences with a loss mask
over policy tokens only (Harness-S §7, Eq. 15: tool observations and harness-injected text are
excluded from the token loss).
"""

from __future__ import annotations

import uuid
from typing import Any, Collection

from pydantic import BaseModel, Field

from coevo.errors import CoevoError

MISSING_TOKENS_KEY = "coevo_tokens_missing"
"""``response_metadata`` key of a reply whose model could not return token ids/logprobs: the reason."""


class MissingTokensError(CoevoError, ValueError):
    """A trajectory without sampled token ids reached a path that trains on them (GRPO, RSFT)."""


class ModelCall(BaseModel):
    """One model call: the messages it saw, the reply it gave, and its tokens when known.

    ``prompt_token_ids`` is the full tokenised input (chat template applied);
    ``completion_token_ids`` the sampled tokens, ``logprobs`` the sampling logprob of each
    (same length, natural log). All three are ``None`` for models that do not expose them.
    ``seed`` is the sampling seed the call was made with (``None``: not recorded).
    """

    input: list[dict[str, Any]]
    output: dict[str, Any]
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    seed: int | None = None

    @property
    def missing_tokens(self) -> str | None:
        """Why this call has no token ids (the server could not return them), or None."""
        if self.completion_token_ids is not None:
            return None
        return ((self.output.get("data") or {}).get("response_metadata") or {}).get(MISSING_TOKENS_KEY)


class Segment(BaseModel):
    """A training sequence: ``input_ids`` (length L), ``loss_mask`` (L, 1 on policy tokens) and
    ``logprobs`` (L, the sampler's logprob on policy tokens, 0.0 elsewhere)."""

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]

    @property
    def policy_tokens(self) -> int:
        """Number of positions that carry loss."""
        return sum(self.loss_mask)


class Trajectory(BaseModel):
    """One rollout of a harness on a task (docs/design.md, Trajectory).

    ``messages`` is the episode's message history as plain dicts (LangChain ``message_to_dict``
    shape); ``calls`` the recorded model calls in order. ``reward``/``passed``/``score_detail``
    are filled by the env's verifier after the run. ``stop_reason`` is one of ``final_answer``,
    ``budget:<name>``, ``hook:stop`` or ``error:<type>``. ``interface_violations`` counts interface
    violations (unparseable reply, unexposed tool, missing required argument; one turn can make
    several); ``violation_turns`` counts the model turns with at least one: divided by
    ``model_turns`` it is TIMR (CoEvo-RSI, Harness-S). ``harness_actions`` are the BPE harness
    actions made (EvoHarness-RL; ``coevo.harnesses.bpe.action_record``: action, kind read|write,
    declared cost, turn, error) and ``harness_state`` the episode's final BPE state; both empty
    without BPE, and then left out of the JSON (a trajectory without BPE dumps as before).
    ``reward`` is always the task reward: the action cost is apart (``harness_cost``).
    """

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task_id: str
    env: str = ""
    split: str = "train"
    harness_id: str = ""
    checkpoint_id: str = ""
    seed: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list)
    final_answer: str | None = None
    stop_reason: str = ""
    hook_events: list[dict[str, Any]] = Field(default_factory=list)
    interface_violations: int = 0
    violation_turns: int = 0
    model_turns: int = 0
    env_actions: int = 0
    harness_actions: list[dict[str, Any]] = Field(default_factory=list, exclude_if=lambda v: not v)
    harness_state: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda v: not v)
    reward: float = 0.0
    passed: bool = False
    score_detail: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0

    @property
    def input_tokens(self) -> int:
        """Prompt tokens summed over model calls."""
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        """Completion tokens summed over model calls."""
        return sum(c.output_tokens for c in self.calls)

    @property
    def cost_usd(self) -> float:
        """Cost in US dollars summed over model calls (0 for local models)."""
        return sum(c.cost_usd for c in self.calls)

    @property
    def harness_cost(self) -> float:
        """The declared cost of the BPE harness actions summed (0 without them)."""
        return sum(float(a.get("cost", 0.0)) for a in self.harness_actions)

    @property
    def harness_reads(self) -> int:
        """BPE harness actions that read the state."""
        return sum(a.get("kind") == "read" for a in self.harness_actions)

    @property
    def harness_writes(self) -> int:
        """BPE harness actions that wrote the state (belief, progress, experience)."""
        return sum(a.get("kind") == "write" for a in self.harness_actions)

    @property
    def timr(self) -> float:
        """Turn-level interface-mismatch rate (CoEvo-RSI): the fraction of model turns with at least one
        interface violation, in [0, 1]; 0 with no turns."""
        return self.violation_turns / self.model_turns if self.model_turns else 0.0

    @property
    def missing_tokens(self) -> str | None:
        """The reason the first call without token ids gives (``ModelCall.missing_tokens``), or None
        when every call that could carry them does."""
        return next((reason for call in self.calls if (reason := call.missing_tokens)), None)

    def require_tokens(self) -> None:
        """Raise ``MissingTokensError`` when a model call of this trajectory came without token ids
        because its server could not return them (training needs the sampled tokens)."""
        reason = self.missing_tokens
        if reason:
            raise MissingTokensError(
                f"trajectory {self.id} (task {self.task_id}) has model calls without token ids: {reason}. GRPO and "
                "RSFT train on the sampled tokens: sample with a local: policy or a vLLM server "
                "(litellm:hosted_vllm/NAME asks for logprobs and token ids); servers such as `transformers serve` "
                "are for evaluation only")

    def segments(self, turns: Collection[int] | None = None) -> list[Segment]:
        """Training sequences with a policy-token loss mask.

        Consecutive calls are merged while each call's prompt extends the previous call's
        prompt + completion (a prefix-preserving chain): the tokens between (tool observations,
        hook injections, the next turn's template) get mask 0. When the harness rewrote the
        context (history window, truncation) the chain breaks and a new segment starts; every
        segment keeps the trajectory's advantage downstream. Calls without token ids are skipped.
        ``turns`` (1-based model-call numbers; None: every call) limits the loss mask to those calls'
        completions: the others' tokens stay in the sequence as context with mask 0.

        Returns: list of ``Segment``; empty when no call carries token ids.
        """
        segments: list[Segment] = []
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        for number, call in enumerate(self.calls, 1):
            if call.prompt_token_ids is None or call.completion_token_ids is None:
                continue
            prompt, completion = call.prompt_token_ids, call.completion_token_ids
            logprobs = call.logprobs if call.logprobs is not None else [0.0] * len(completion)
            if ids and prompt[: len(ids)] == ids:
                extra = prompt[len(ids):]
            else:
                if ids:
                    segments.append(Segment(input_ids=ids, loss_mask=mask, logprobs=lps))
                ids, mask, lps, extra = [], [], [], prompt
            ids = ids + list(extra) + list(completion)
            on = 1 if turns is None or number in turns else 0
            mask = mask + [0] * len(extra) + [on] * len(completion)
            lps = lps + [0.0] * len(extra) + list(logprobs)
        if ids:
            segments.append(Segment(input_ids=ids, loss_mask=mask, logprobs=lps))
        return segments
