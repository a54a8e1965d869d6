"""Does a harness's prompt fit its context budget? Checked before any rollout runs, so
an overlong prompt fails at once instead of truncating silently.

The engine shows the model the prompt (system message, few-shot turns, the task) plus as many recent
turns as fit the context budget (``coevo.harnesses.engine.visible``); when the prompt alone does not
fit, no model call is made and the rollout ends ``budget:context_tokens`` after 0 turns. The budget is
the smaller of the harness's ``budget.max_context_tokens`` and the policy's own context (less one
position for its reply), and a prompt is counted with the policy's tokenizer and chat template where
the policy is local (``TokenMeter``; elsewhere ``CHARS_PER_TOKEN`` characters a token, which undercounts
digits, emoji and non-Latin text). ``prompt_fit`` measures the rendered prompt of each task the same
way, so ``coevo harness validate``, the ``check`` node, a run's preflight and ``coevo eval`` refuse such
a harness (or say loudly how many tasks it cannot serve) before spending a rollout on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from coevo.compat import innermost
from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.spec import CHARS_PER_TOKEN, HarnessSpec
from coevo.harnesses.view import render_messages

PATH = "/budget/max_context_tokens"
"""The field a prompt that does not fit is reported against."""


@dataclass(frozen=True)
class TokenMeter:
    """How prompts are counted for one policy, and its own context.

    ``count``: the policy's token count of a message list (its tokenizer and chat template, tool schemas
    included: ``LocalChatModel.count_tokens``); None counts ``CHARS_PER_TOKEN`` characters a token (a
    server or fake policy, whose tokenizer is not here). ``context``: the policy's context window in
    tokens (``LocalChatModel.context_tokens``; None: unknown, only the harness's budget applies).
    ``meter_of(policy)`` builds one; ``TokenMeter()`` is the estimate alone."""

    count: Callable[[Sequence[BaseMessage]], int] | None = None
    context: int | None = None

    @property
    def counted(self) -> str:
        """How tokens are counted, in words (for messages)."""
        return "by the policy's tokenizer" if self.count else f"at {CHARS_PER_TOKEN} characters a token"

    def tokens(self, messages: Sequence[BaseMessage]) -> int:
        """The token count of ``messages`` (``count``, else characters / ``CHARS_PER_TOKEN`` rounded up)."""
        if self.count is not None:
            return int(self.count(messages))
        return -(-sum(len(str(m.content)) for m in messages) // CHARS_PER_TOKEN)

    def model_bound(self, spec: HarnessSpec) -> bool:
        """True when the policy's context, not ``spec.budget.max_context_tokens``, is the tighter bound."""
        return self.context is not None and self.context - 1 < spec.budget.max_context_tokens

    def budget(self, spec: HarnessSpec) -> int:
        """The prompt budget in tokens: the smaller of ``spec.budget.max_context_tokens`` and the
        policy's context less one position (a local policy refuses a prompt that fills its context)."""
        return self.context - 1 if self.model_bound(spec) else spec.budget.max_context_tokens


def meter_of(policy: Any) -> TokenMeter:
    """The ``TokenMeter`` of ``policy`` (a chat model, possibly wrapped by ``bind``): its
    ``count_tokens(messages)`` and ``context_tokens`` when it has them (a local policy), else the
    character estimate with no context of its own."""
    policy = innermost(policy)
    count, context = getattr(policy, "count_tokens", None), getattr(policy, "context_tokens", None)
    return TokenMeter(count if callable(count) else None, context if isinstance(context, int) else None)


_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def prompt_tokens(spec: HarnessSpec, task: str = "", tools: Iterable[dict[str, Any]] = (),
                  meter: TokenMeter | None = None) -> int:
    """The engine's token count of the opening prompt for ``task`` with the tool schemas ``tools``
    (system message, few-shot turns and the task), counted by ``meter`` (default: ``CHARS_PER_TOKEN``
    characters a token, rounded up)."""
    messages = [_ROLES[role](content=text) for role, text in render_messages(spec, task, tools)]
    return (meter or TokenMeter()).tokens(messages)


@dataclass(frozen=True)
class PromptFit:
    """How the prompts of ``checked`` tasks compare with the context ``budget`` (tokens): ``largest``
    the biggest prompt (tokens), ``over`` how many do not fit (their rollouts could make no model call);
    ``counted`` how tokens were counted (``TokenMeter.counted``); ``harness_budget`` the harness's
    ``max_context_tokens`` when the policy's smaller context set ``budget`` (else None)."""

    budget: int
    largest: int
    over: int
    checked: int
    counted: str = f"at {CHARS_PER_TOKEN} characters a token"
    harness_budget: int | None = None

    @property
    def fits(self) -> bool:
        """Every prompt checked fits."""
        return self.over == 0

    @property
    def none_fit(self) -> bool:
        """No prompt checked fits: every rollout would end before its first model call."""
        return self.checked > 0 and self.over == self.checked

    def text(self) -> str:
        """The numbers in words, with the fix."""
        if self.checked == 1:
            which, verb, size = "the prompt", "exceeds" if self.over else "fits", f"~{self.largest:,}"
        else:
            which = (f"all {self.checked} tasks' prompts" if self.none_fit else f"{self.over} of {self.checked} "
                     "tasks' prompts" if self.over else f"the {self.checked} tasks' prompts")
            verb, size = "exceed" if self.over else "fit", f"up to ~{self.largest:,}"
        whose = (f" (the policy's own context, smaller than the harness's budget.max_context_tokens of "
                 f"{self.harness_budget:,})" if self.harness_budget is not None else "")
        fix = ("use a policy with a longer context" if self.harness_budget is not None
               else "raise budget.max_context_tokens")
        return (f"{which} ({size} tokens {self.counted}) {verb} the context budget of {self.budget:,} tokens{whose}"
                + (": a rollout of such a task ends budget:context_tokens before any model call; shorten the "
                   f"prompt (system text, rules, skills, demonstrations) or {fix}" if self.over else ""))

    def problem(self) -> Problem:
        """The finding as a ``Problem`` at ``/budget/max_context_tokens``."""
        return Problem(PATH, self.text())


def prompt_fit(spec: HarnessSpec, tasks: Sequence[str] = ("",), tools: Iterable[dict[str, Any]] = (),
               meter: TokenMeter | None = None) -> PromptFit:
    """Measure the opening prompt of each task text in ``tasks`` (default: one empty task, the
    harness's own text) against the context budget: ``meter.budget(spec)``, the smaller of
    ``spec.budget.max_context_tokens`` and the policy's own context, counted by ``meter`` (default: the
    character estimate against the harness's budget alone). The harness's own text (system, rules,
    always-on skills) is measured once first: when it alone is over, every task is."""
    meter = meter or TokenMeter()
    budget, schemas = meter.budget(spec), list(tools)
    known = dict(counted=meter.counted,
                 harness_budget=spec.budget.max_context_tokens if meter.model_bound(spec) else None)
    own = prompt_tokens(spec, "", schemas, meter)
    if own > budget or not tasks:
        return PromptFit(budget, own, len(tasks) if own > budget else 0, len(tasks), **known)
    sizes = [prompt_tokens(spec, task, schemas, meter) for task in tasks]
    return PromptFit(budget, max(sizes), sum(size > budget for size in sizes), len(sizes), **known)


def check_prompt_fits(spec: HarnessSpec, tasks: Sequence[str] = ("",), source: str = "harness",
                      tools: Iterable[dict[str, Any]] = (), meter: TokenMeter | None = None) -> PromptFit:
    """``prompt_fit`` (same arguments), raising ``HarnessError`` (one problem at
    ``/budget/max_context_tokens``, named ``source``) when no prompt fits; returns the fit otherwise
    (``over`` > 0: some tasks cannot be served)."""
    fit = prompt_fit(spec, tasks, tools, meter)
    if fit.none_fit:
        raise HarnessError([fit.problem()], source)
    return fit
