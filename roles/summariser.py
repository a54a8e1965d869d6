"""The summariser: experience summarisation at consolidation, EvoHarness-RL's harness evolution
("Learning Runtime Harness Coordination for Self-Evolving Agents", arXiv:2608.05446: "experience
consolidation refine[s] the harness into a compact, task-adaptive state substrate"; the abstract gives no
algorithm, the two below are coevo's).

Two implementations side by side. ``OfflineSummariser`` (no key, the default): exact duplicates
kept once, near duplicates (word-set Jaccard >= ``NEAR_DUPLICATE``) merged into the newer wording,
the newest ``max_experience`` kept (``coevo.harnesses.bpe_evolution.summarise_lessons``).
``LLMSummariser`` asks the run's meta model, in one call (plus the one repair turn every JSON role
has), for at most ``max_experience`` lessons rewording and joining the given ones; a reply that is
malformed, too long (more lessons than the cap, or a lesson over ``max_chars``), empty, or holds a
lesson not made of the given lessons' words (``grounded``) is rejected with its reason and the
offline summary is used: a bad reply never crashes the run.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel

from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.harnesses.bpe import entry_key, merge_lessons
from coevo.harnesses.bpe_evolution import grounded, summarise_lessons
from coevo.harnesses.spec import BPE
from coevo.meta.roles import Summarised, Summariser
from coevo.roles.llm import JsonRole, narrowed


class OfflineSummariser:
    """Offline experience summarisation (module doc); ``threshold``: the Jaccard similarity at which
    two lessons are one (``coevo.harnesses.bpe_evolution.NEAR_DUPLICATE`` by default)."""

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = threshold

    def summarise(self, existing: Sequence[str], new: Sequence[str], settings: BPE) -> Summarised:
        """``existing`` then ``new`` lessons summarised within ``settings.max_experience``."""
        extra = {} if self.threshold is None else {"threshold": self.threshold}
        lessons, merged = summarise_lessons(existing, new, settings.max_experience, **extra)
        return Summarised(lessons=lessons, merged=merged)


class SummaryReply(BaseModel):
    """The LLM summariser's reply: the lineage's lessons, most useful last (the newest are kept)."""

    lessons: list[str]


class LLMSummariser(JsonRole):
    """Experience summarisation by an LLM (module doc); falls back to ``OfflineSummariser``."""

    role = "summariser"

    def __init__(self, model: str | BaseChatModel, threshold: float | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.offline = OfflineSummariser(threshold)

    def summarise(self, existing: Sequence[str], new: Sequence[str], settings: BPE) -> Summarised:
        """The model's summary of the distinct ``existing`` and ``new`` lessons (no call with fewer
        than two: nothing to summarise), checked as the module doc says; else the offline one, with
        the rejection's reason."""
        given = [x for x in [*existing, *new] if entry_key(x)]
        distinct = merge_lessons([], given, max(len(given), 1))
        offline = self.offline.summarise(existing, new, settings)
        if len(distinct) < 2:
            return offline
        cap, chars = settings.max_experience, settings.max_chars

        def check(reply: SummaryReply) -> None:
            lessons = [x for x in reply.lessons if entry_key(x)]
            if not lessons:
                raise ValueError("the reply has no lesson; keep what the given lessons teach")
            if len(reply.lessons) > cap or any(len(x) > chars for x in reply.lessons):
                raise ValueError(f"at most {cap} lessons of at most {chars} characters each")
            if invented := [x for x in lessons if not grounded(x, distinct)]:
                raise ValueError(f"lessons not made of the given lessons' words: {invented[:3]}")

        system = ("You consolidate an agent's experience: lessons it saved in earlier episodes. Merge lessons that "
                  "say the same thing into one, drop ones that only fit a single task, keep the wording close to the "
                  f"given lessons, and return at most {cap} lessons of at most {chars} characters, most useful last. "
                  "Reply with JSON {\"lessons\": [str]}.")
        user = f"Lessons, oldest first:\n{json.dumps(distinct, indent=1)}"
        fmt = narrowed(SummaryReply, lessons={"maxItems": cap, "minItems": 1, "items": {"type": "string",
                                                                                          "maxLength": chars}})
        reply = self.ask(system, user, SummaryReply, check, fmt)
        if reply.value is None:
            return offline.model_copy(update={"reason": f"LLM reply rejected ({reply.reason[:200]}); offline summary",
                                              "calls": reply.calls})
        lessons = merge_lessons([], reply.value.lessons, cap)
        return Summarised(lessons=lessons, merged=max(0, len(given) - len(lessons)), source="llm", calls=reply.calls)


def summariser_for(config: RunConfig, env: Env) -> Summariser:
    """The run's summariser: ``OfflineSummariser`` when ``meta.model == "offline"``, else ``LLMSummariser``."""
    if config.meta.model == "offline":
        return OfflineSummariser()
    return LLMSummariser(config.meta.model, temperature=config.meta.temperature)
