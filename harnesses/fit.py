"""Does a harness's prompt fit its context budget? Checked before any rollout runs, so
an overlong prompt fails at once instead of truncating silently.

The engine shows the model the prompt (system message, few-shot turns, the task) plus as many recent
turns as fit ``budget.max_context_tokens``, counting ``CHARS_PER_TOKEN`` characters a token
(``coevo.harnesses.engine.visible``); when the prompt alone does not fit, no model call is made and
the rollout ends ``budget:context_tokens`` after 0 turns. ``prompt_fit`` measures the rendered prompt
of each task the same way, so ``coevo harness validate``, the ``check`` node, a run's preflight and
``coevo eval`` refuse such a harness (or say loudly how many tasks it cannot serve) before spending
a rollout on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.spec import CHARS_PER_TOKEN, HarnessSpec
from coevo.harnesses.view import render_messages

PATH = "/budget/max_context_tokens"
"""The field a prompt that does not fit is reported against."""


def prompt_tokens(spec: HarnessSpec, task: str = "", tools: Iterable[dict[str, Any]] = ()) -> int:
    """The engine's token count (characters / ``CHARS_PER_TOKEN``, rounded up) of the opening prompt
    for ``task`` with the tool schemas ``tools``: system message, few-shot turns and the task."""
    chars = sum(len(text) for _, text in render_messages(spec, task, tools))
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class PromptFit:
    """How the prompts of ``checked`` tasks compare with the context ``budget`` (tokens): ``largest``
    the biggest prompt (tokens), ``over`` how many do not fit (their rollouts could make no model call)."""

    budget: int
    largest: int
    over: int
    checked: int

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
        return (f"{which} ({size} tokens at {CHARS_PER_TOKEN} characters a token) {verb} the context budget of "
                f"{self.budget:,} tokens"
                + (": a rollout of such a task ends budget:context_tokens before any model call; shorten the "
                   "prompt (system text, rules, skills, demonstrations) or raise budget.max_context_tokens"
                   if self.over else ""))

    def problem(self) -> Problem:
        """The finding as a ``Problem`` at ``/budget/max_context_tokens``."""
        return Problem(PATH, self.text())


def prompt_fit(spec: HarnessSpec, tasks: Sequence[str] = ("",), tools: Iterable[dict[str, Any]] = ()) -> PromptFit:
    """Measure the opening prompt of each task text in ``tasks`` (default: one empty task, the
    harness's own text) against ``spec.budget.max_context_tokens``. The harness's own text (system,
    rules, always-on skills) is measured once first: when it alone is over, every task is."""
    budget, schemas = spec.budget.max_context_tokens, list(tools)
    own = prompt_tokens(spec, "", schemas)
    if own > budget or not tasks:
        return PromptFit(budget, own, len(tasks) if own > budget else 0, len(tasks))
    sizes = [prompt_tokens(spec, task, schemas) for task in tasks]
    return PromptFit(budget, max(sizes), sum(size > budget for size in sizes), len(sizes))


def check_prompt_fits(spec: HarnessSpec, tasks: Sequence[str] = ("",), source: str = "harness",
                      tools: Iterable[dict[str, Any]] = ()) -> PromptFit:
    """``prompt_fit``, raising ``HarnessError`` (one problem at ``/budget/max_context_tokens``, named
    ``source``) when no prompt fits; returns the fit otherwise (``over`` > 0: some tasks cannot be served)."""
    fit = prompt_fit(spec, tasks, tools)
    if fit.none_fit:
        raise HarnessError([fit.problem()], source)
    return fit
