"""CoEvo-RSI's inheritance role (docs/papers.md, §Harness Inheritance, §Model Inheritance and
Selection): for each brief, the base harness an editor builds on (an index into the archive A<t,
any archived harness, not only the incumbent); for each offspring harness, its model
initialisations (one-hot selection of an archived checkpoint, or a TIES merge with coefficients
alpha).

Two implementations side by side. ``OfflineInheritor`` (deterministic, no key): the base whose
per-cause evidence (``with_cause_evidence``: its train rollouts' failures by root cause) shows the
brief's causes least, ties to the best score, then lowest TIMR, under the current checkpoint
(``ArchiveSummary.best_base``: the survey's probe of every harness on the same train tasks, else the
pooled train outcomes); the best archived checkpoint
under the offspring (else its base) as a selection, plus an equal-weight TIES merge of the two best
archived adapters. ``LLMInheritor`` asks an LLM with the structured archive summary
(``ArchiveSummary.for_prompt``: train outcomes only) and a JSON-schema reply, repaired once; a reply
that never validates falls back to the offline choice and says so in the reason.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Literal, Mapping, Sequence

from pydantic import BaseModel, Field

from coevo.config import RunConfig
from coevo.envs.base import Env, Task
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.inheritance import ArchiveEntry, ArchiveSummary, BaseChoice, ModelProposal
from coevo.meta.roles import Inheritance, Inheritor
from coevo.meta.state import Direction
from coevo.models.trajectory import Trajectory
from coevo.roles.diagnosis import addresses, cause_counts, split_cause
from coevo.roles.llm import JsonRole, narrowed


def _select(prefix: str, n: int, harness_id: str, checkpoint: str, why: str) -> ModelProposal:
    return ModelProposal(id=f"{prefix}-{n}", harness_id=harness_id, kind="select", sources=[checkpoint], alpha=[1.0],
                         reason=why)


def _merge(prefix: str, n: int, harness_id: str, sources: list[str], alpha: list[float], why: str) -> ModelProposal:
    total = sum(alpha)
    return ModelProposal(id=f"{prefix}-{n}", harness_id=harness_id, kind="merge", sources=sources,
                         alpha=[a / total for a in alpha], reason=why)


def with_cause_evidence(summary: ArchiveSummary, trajectories: Sequence[Trajectory],
                        spec: Callable[[str], HarnessSpec], tasks: Mapping[str, Task],
                        alias: Mapping[str, str] | None = None) -> ArchiveSummary:
    """``summary`` with each entry's per-cause evidence (``ArchiveEntry.failures`` and ``rollouts``):
    its train rollouts among ``trajectories`` (a sampling variant counted as the harness ``alias``
    maps it to; train split only), failures grouped by ``coevo.roles.diagnosis.diagnose`` under the
    harness's own ``spec``."""
    alias = alias or {}
    mine: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        if t.split == "train":
            mine.setdefault(alias.get(t.harness_id, t.harness_id), []).append(t)
    entries = [e.model_copy(update={"failures": cause_counts(mine.get(e.harness_id, []), spec(e.harness_id), tasks),
                                    "rollouts": len(mine.get(e.harness_id, []))}) for e in summary.entries]
    return summary.model_copy(update={"entries": entries})


def cause_rate(entry: ArchiveEntry, kinds: Sequence[str]) -> float:
    """The smoothed rate at which ``entry``'s train rollouts failed with any of the cause ``kinds``:
    (failures + 1) / (rollouts + 2) (Laplace), so a harness seen on few rollouts is not taken for a
    cure."""
    hits = sum(n for k, n in entry.failures.items() if addresses(k, kinds))
    return (hits + 1) / (entry.rollouts + 2)


class OfflineInheritor:
    """Deterministic inheritance (module doc); ``merge`` turns the TIES proposal off."""

    def __init__(self, merge: bool = True) -> None:
        self.merge = merge

    def choose_base(self, direction: Direction, summary: ArchiveSummary) -> Inheritance:
        """The base whose per-cause evidence shows the direction's causes least (``cause_rate``), ties
        to the best under the current checkpoint (``ArchiveSummary.best_base``'s order); without any
        per-cause evidence in the summary, ``best_base``."""
        kinds, _ = split_cause(direction.cause)
        if any(e.rollouts for e in summary.entries):
            order = {e.harness_id: i for i, e in enumerate(summary.ranked())}
            best = min(summary.entries, key=lambda e: (cause_rate(e, kinds), order[e.harness_id]))
            why = (f"fewest failures of {'/'.join(kinds)} in its train rollouts: "
                   f"{sum(n for k, n in best.failures.items() if addresses(k, kinds))} of {best.rollouts}")
        else:
            best = summary.best_base()
            stats = summary.outcome(best)
            where = "probe" if best.probe is not None and stats is best.probe else "train outcome"
            why = (f"best {where} under {summary.checkpoint}: score {stats.score:.3f}, TIMR {stats.timr:.3f}"
                   if stats else "no archived harness ran under the current checkpoint; the incumbent")
        return Inheritance(choice=BaseChoice(direction=direction.id, index=best.index, base_id=best.harness_id,
                                             reason=why))

    def propose_models(self, harness_id: str, base_id: str, summary: ArchiveSummary, prefix: str) -> Inheritance:
        """Select the best archived checkpoint under ``harness_id`` (else ``base_id``); merge the two
        best adapters (TIES, alpha 0.5 / 0.5) when there are two."""
        ranked = summary.ranked_checkpoints([harness_id, base_id])
        proposals = [_select(prefix, 0, harness_id, ranked[0], "best archived checkpoint under this harness "
                                                                 "(else its base)")]
        adapters = [c for c in ranked if c in summary.adapters][:2]
        if self.merge and len(adapters) == 2:
            proposals.append(_merge(prefix, 1, harness_id, adapters, [0.5, 0.5], "TIES merge of the two best "
                                                                                 "archived adapters"))
        return Inheritance(proposals=proposals)


class BaseReply(BaseModel):
    """The LLM's base choice: an index into the archive summary and why."""

    index: int
    reason: str


class ProposalReply(BaseModel):
    """One model initialisation: ``select`` one checkpoint, or ``merge`` several with ``alpha``."""

    kind: Literal["select", "merge"]
    checkpoints: list[str] = Field(min_length=1)
    alpha: list[float] = Field(default_factory=list)


class ProposalsReply(BaseModel):
    """The LLM's model initialisations for one offspring harness (at most three)."""

    proposals: list[ProposalReply] = Field(min_length=1, max_length=3)
    reason: str = ""


class LLMInheritor(JsonRole):
    """The inheritance role as an LLM (module doc)."""

    role = "inheritor"

    def __init__(self, model: str, merge: bool = True, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.offline = OfflineInheritor(merge)

    def choose_base(self, direction: Direction, summary: ArchiveSummary) -> Inheritance:
        """The base index the model names for ``direction`` (checked to be in the summary)."""

        def check(reply: BaseReply) -> None:
            if not 0 <= reply.index < len(summary.entries):
                raise ValueError(f"index {reply.index} is not in the archive (0..{len(summary.entries) - 1})")

        system = ("You choose the base harness an editor will edit to repair one failure direction. Any archived "
                  "harness may be the base, not only the incumbent: pick the one whose train outcomes (score, TIMR "
                  "= fraction of model turns with an interface violation) under the current checkpoint suggest it "
                  "is most compatible. Reply with JSON {\"index\": int, \"reason\": str}.")
        user = (f"Current checkpoint: {summary.checkpoint}\nArchive:\n{json.dumps(summary.for_prompt(), indent=1)}\n\n"
                f"Direction:\n{direction.model_dump_json(indent=1)}")
        fmt = narrowed(BaseReply, index={"minimum": 0, "maximum": max(len(summary.entries) - 1, 0)})
        reply = self.ask(system, user, BaseReply, check, fmt)
        if reply.value is None:
            fallback = self.offline.choose_base(direction, summary)
            fallback.choice.reason = f"LLM reply rejected ({reply.reason[:200]}); offline: {fallback.choice.reason}"
            return fallback.model_copy(update={"calls": reply.calls})
        entry = summary.entries[reply.value.index]
        return Inheritance(choice=BaseChoice(direction=direction.id, index=entry.index, base_id=entry.harness_id,
                                             reason=reply.value.reason), calls=reply.calls)

    def propose_models(self, harness_id: str, base_id: str, summary: ArchiveSummary, prefix: str) -> Inheritance:
        """The model's initialisations for ``harness_id`` (checkpoints from the summary; merges over
        adapters only, alpha >= 0 and not all zero, normalised to sum 1)."""

        def check(reply: ProposalsReply) -> None:
            for p in reply.proposals:
                if unknown := [c for c in p.checkpoints if c not in summary.checkpoints]:
                    raise ValueError(f"checkpoints {unknown} are not archived; choose from {summary.checkpoints}")
                if p.kind == "select" and len(p.checkpoints) != 1:
                    raise ValueError("a select proposal names exactly one checkpoint")
                if p.kind == "merge" and ([c for c in p.checkpoints if c not in summary.adapters]
                                          or len(p.alpha) != len(p.checkpoints) or min(p.alpha) < 0
                                          or not any(p.alpha)):
                    raise ValueError(f"a merge names adapters from {summary.adapters} and one alpha >= 0 per "
                                     "checkpoint, not all zero")

        system = ("You initialise the model for a new agent harness from archived checkpoints: 'select' one, or "
                  "'merge' several adapters with TIES using coefficients alpha. Reply with JSON "
                  "{\"proposals\": [{\"kind\": \"select\"|\"merge\", \"checkpoints\": [ids], \"alpha\": [floats]}], "
                  "\"reason\": str}.")
        user = (f"Offspring harness {harness_id[:12]} (edited from {base_id[:12]}).\nCheckpoints: "
                f"{summary.checkpoints}\nAdapters (mergeable): {summary.adapters}\n"
                f"Archive:\n{json.dumps(summary.for_prompt(), indent=1)}")
        fmt = narrowed(ProposalsReply, ProposalReply__checkpoints={"items": {"enum": list(summary.checkpoints)}})
        reply = self.ask(system, user, ProposalsReply, check, fmt if summary.checkpoints else None)
        if reply.value is None:
            fallback = self.offline.propose_models(harness_id, base_id, summary, prefix)
            for p in fallback.proposals:
                p.reason = f"LLM reply rejected ({reply.reason[:200]}); offline: {p.reason}"
            return fallback.model_copy(update={"calls": reply.calls})
        why = reply.value.reason
        proposals = [_select(prefix, i, harness_id, p.checkpoints[0], why) if p.kind == "select" else
                     _merge(prefix, i, harness_id, p.checkpoints, p.alpha, why)
                     for i, p in enumerate(reply.value.proposals)]
        return Inheritance(proposals=proposals, calls=reply.calls)


def inheritor_for(config: RunConfig, env: Env) -> Inheritor:
    """The run's inheritor: ``OfflineInheritor`` when ``meta.model == "offline"``, else ``LLMInheritor``."""
    if config.meta.model == "offline":
        return OfflineInheritor(config.rsi.merge)
    return LLMInheritor(config.meta.model, config.rsi.merge, temperature=config.meta.temperature)
