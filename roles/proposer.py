"""The Meta-Harness proposer (WHALE §3.2; Lee et al., 2026): reads the search's archive — every
harness's spec, aggregate train score, per-task outcomes and trajectory excerpts (train only) — and
proposes M candidate harnesses, each a JSON Patch of *any* archived harness (so a proposal may
refine an older design, i.e. revert to it and go on from there).

Two implementations side by side. ``OfflineProposer`` (deterministic, no key): recombines archived
edits (the best harness plus the rules, demonstrations and hooks of the runner-up), drops an edit
that regressed tasks against its parent, and mutates the best harness with the offline
curator/editor on its failed train trajectories (several sampled operator edits per direction,
``coevo.roles.operators``, each inside the phase's allowed fields). ``LLMProposer`` asks an
LLM with a JSON-schema reply that may first name harnesses whose details it wants (full spec and
failed trajectory excerpts), then proposes; a malformed reply after one repair is a rejected
candidate.

Both may be given the fields a phase allows (FST, PACE); they aim inside them, but the patch
checker (``coevo.harnesses.patch.check_fields`` via ``coevo.nodes.refine.realise``) enforces it.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from pydantic import BaseModel, Field

from coevo.config import RunConfig
from coevo.envs.base import Env
from coevo.harnesses.errors import HarnessError, Problem
from coevo.harnesses.patch import apply_edit
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.roles import Proposal, Proposer, SearchView
from coevo.meta.search import SearchEntry
from coevo.meta.state import Candidate
from coevo.roles.curator import Curator, OfflineCurator, excerpt
from coevo.roles.editor import Editor, OfflineEditor
from coevo.roles.llm import JsonRole, narrowed
from coevo.roles.operators import assignments

COMPONENTS = ("/prompt/rules", "/skills", "/hooks")
"""Named components a recombination carries over from one harness to another."""

CONTROL_MENU: tuple[tuple[str, dict[str, Any]], ...] = (
    ("/parser/strip_code_fences", {"op": "replace", "path": "/parser/strip_code_fences", "value": True}),
    ("/hooks/finish_before_budget", {"op": "add", "path": "/hooks/finish_before_budget", "value": {
        "event": "after_model", "condition": "remaining_steps_lte", "parameters": {"threshold": 2}, "action": "warn",
        "message": "Few steps remain: give your final answer now."}}),
)
"""Offline control-logic edits for a control-only phase (PACE) with no failure-specific one: each
proposed once, when the best harness lacks it; the validation gate decides."""


def ranked(entries: Sequence[SearchEntry]) -> list[SearchEntry]:
    """Archive entries best first: higher train score, then fewer model calls, then older (WHALE §3.2's
    arg max over the archive, with the issue's tie-breaks)."""
    return sorted(entries, key=lambda e: (-e.score, e.model_calls, e.order))


def _under(path: str, allowed: Sequence[str]) -> bool:
    return any(path == a or path.startswith(a.rstrip("/") + "/") for a in allowed)


def within(ops: list[dict[str, Any]], allowed: Sequence[str] | None) -> list[dict[str, Any]]:
    """The operations of ``ops`` whose path lies under a prefix of ``allowed`` (all when None). When
    the prompt is allowed but skills are not (FST, PACE's prompt phase), an added demonstration
    becomes a prompt rule carrying the same example (a few-shot line in the system prompt)."""
    if allowed is None:
        return ops
    out = []
    for op in ops:
        value = op.get("value")
        if (not _under(op["path"], allowed) and op["path"].startswith("/skills/") and op.get("op") == "add"
                and isinstance(value, dict) and value.get("input") and _under("/prompt/rules", allowed)):
            text = f"Example. Task: {value['input']} Answer: {value['output']}"
            op = {"op": "add", "path": "/prompt/rules/" + op["path"].rsplit("/", 1)[1],
                  "value": {"slot": "system", "text": text}}
        if _under(op["path"], allowed):
            out.append(op)
    return out


def _candidate(parent: HarnessSpec, kind: str, ops: list[dict[str, Any]], why: str, iteration: int, i: int,
               demo_tasks: Sequence[str] = ()) -> Candidate:
    return Candidate(id=f"i{iteration}-{i}-{kind}-{parent.short_id}", direction=kind, parent_id=parent.id, patch=ops,
                     rationale=why, demo_tasks=list(demo_tasks))


class OfflineProposer:
    """Deterministic proposals (module doc): recombination of the two best distinct harnesses,
    removal of an edit that regressed tasks, then mutations of the best one by ``curator``/``editor``."""

    def __init__(self, curator: Curator | None = None, editor: Editor | None = None) -> None:
        self.curator, self.editor = curator or OfflineCurator(2), editor or OfflineEditor()

    def recombine(self, view: SearchView, a: SearchEntry, b: SearchEntry) -> list[dict[str, Any]]:
        """Ops adding to ``a`` the rules, skills and hooks of ``b`` that ``a`` lacks (the union of two parents)."""
        sa, sb = view.spec(a.harness_id).model_dump(mode="json"), view.spec(b.harness_id).model_dump(mode="json")
        ops = []
        for path in COMPONENTS:
            keys = path.strip("/").split("/")
            ca, cb = sa, sb
            for k in keys:
                ca, cb = ca[k], cb[k]
            ops += [{"op": "add", "path": f"{path}/{name}", "value": value} for name, value in cb.items()
                    if name not in ca]
        return ops

    def ablate(self, view: SearchView, entry: SearchEntry) -> list[dict[str, Any]]:
        """Ops removing from ``entry`` one component its own edit added, when it regressed a task its
        parent solved better (one rollout each, same seeds); [] otherwise."""
        parents = {e.harness_id: e for e in view.entries}
        parent = parents.get(entry.parent_id or "")
        if parent is None:
            return []
        regressed = [t for t, o in entry.per_task.items() if t in parent.per_task
                     and o.mean_reward < parent.per_task[t].mean_reward]
        added = [op["path"] for op in entry.patch if op.get("op") == "add"
                 and any(op["path"].startswith(c + "/") for c in COMPONENTS)]
        return [{"op": "remove", "path": added[-1]}] if regressed and added else []

    def propose(self, view: SearchView, m: int, iteration: int) -> list[Proposal]:
        """Up to ``m`` proposals: recombine, ablate, then mutate (see class doc), each inside ``view.allowed``."""
        best = ranked(view.entries)
        out: list[Proposal] = []
        spec = view.spec(best[0].harness_id)
        distinct = [e for e in best[1:] if e.harness_id != best[0].harness_id]
        if distinct and (ops := within(self.recombine(view, best[0], distinct[0]), view.allowed)):
            why = f"union of {best[0].harness_id[:12]} and {distinct[0].harness_id[:12]}'s rules, demos and hooks"
            out.append(Proposal(candidate=_candidate(spec, "recombine", ops, why, iteration, len(out))))
        for entry in best:
            if len(out) < m and (ops := within(self.ablate(view, entry), view.allowed)):
                why = f"drop {ops[0]['path']}: {entry.harness_id[:12]} regressed tasks its parent solved"
                out.append(Proposal(candidate=_candidate(view.spec(entry.harness_id), "ablate", ops, why, iteration,
                                                         len(out))))
                break
        trajectories = view.trajectories(best[0].harness_id)
        solved = [t for t in trajectories if t.passed]
        directions = self.curator.curate(trajectories, spec, view.tasks).directions
        seen = {json.dumps(p.candidate.patch, sort_keys=True) for p in out}
        # a demonstration becomes a prompt example where only the prompt may change (``within``)
        aim = view.allowed + ["/skills"] if view.allowed and _under("/prompt/rules", view.allowed) else view.allowed
        for direction, sample in assignments(directions, m + 2):
            if len(out) >= m:
                break
            cand = self.editor.propose(direction, spec, view.tasks, solved, round=iteration, sample=sample,
                                       allowed=aim).candidate
            ops = within(cand.patch, view.allowed)
            key = json.dumps(ops, sort_keys=True)
            if ops and cand.status != "rejected" and key not in seen:
                seen.add(key)
                out.append(Proposal(candidate=_candidate(spec, "mutate", ops, cand.rationale, iteration, len(out),
                                                         cand.demo_tasks)))
        if view.allowed is not None and not _under("/prompt", view.allowed):
            doc = spec.model_dump(mode="json")
            for path, op in CONTROL_MENU:
                if len(out) < m and _under(path, view.allowed) and _lookup(doc, path) in (None, False):
                    out.append(Proposal(candidate=_candidate(spec, "control", [op], f"offline control edit {path}",
                                                             iteration, len(out))))
        return out[:m]


def _lookup(doc: dict[str, Any], path: str) -> Any:
    for key in path.strip("/").split("/"):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


class ProposedEdit(BaseModel):
    """One proposed candidate: the archived harness it patches (id or unique prefix), the RFC 6902
    patch and why it should score higher on the train tasks."""

    parent: str
    rationale: str
    patch: list[dict[str, Any]] = Field(min_length=1)


class ProposerReply(BaseModel):
    """The LLM proposer's reply: harness ids whose details it wants to read first (``inspect``), or
    its ``candidates``."""

    inspect: list[str] = Field(default_factory=list)
    candidates: list[ProposedEdit] = Field(default_factory=list)


class LLMProposer(JsonRole):
    """The proposer as an LLM (module doc): a summary of the archive, at most one request
    for details of up to three harnesses, then candidates whose patches must apply inside the
    allowed fields (checked, repaired once)."""

    role = "proposer"

    def _summary(self, view: SearchView) -> str:
        rows = [{"id": e.harness_id[:12], "parent": (e.parent_id or "")[:12], "iteration": e.iteration,
                 "train_score": round(e.score, 4), "model_calls": e.model_calls, "rationale": e.rationale[:200],
                 "patch_from_parent": e.patch, "solved": sorted(t for t, o in e.per_task.items() if any(o.passed)),
                 "failed": sorted(t for t, o in e.per_task.items() if not any(o.passed))}
                for e in ranked(view.entries)]
        return json.dumps(rows, indent=1)

    def _details(self, view: SearchView, ids: Sequence[str]) -> str:
        parts = []
        for e in [self._find(view, i) for i in ids[:3]]:
            fails = [excerpt(t).model_dump() for t in view.trajectories(e.harness_id) if not t.passed][:4]
            parts.append(f"Harness {e.harness_id[:12]}:\n{view.spec(e.harness_id).model_dump_json(indent=1)}\n"
                         f"Failed train trajectories:\n{json.dumps(fails, indent=1, default=str)}")
        return "\n\n".join(parts)

    @staticmethod
    def _find(view: SearchView, prefix: str) -> SearchEntry:
        hits = {e.harness_id: e for e in view.entries if e.harness_id.startswith(prefix.strip())}
        if len(hits) != 1:
            raise ValueError(f"{prefix!r} names {len(hits)} archived harnesses; use an id from the archive")
        return next(iter(hits.values()))

    def propose(self, view: SearchView, m: int, iteration: int) -> list[Proposal]:
        """Up to ``m`` proposals; one rejected candidate carrying the reason when the reply never validates."""
        fields = "any field" if view.allowed is None else f"only fields under {view.allowed}"
        system = ("You search over agent harness specs (JSON). Each candidate is an RFC 6902 JSON Patch of any "
                  f"archived harness (refine the best, or go back to an older one). Edit {fields}. Reply with "
                  'JSON {"inspect": [ids], "candidates": [{"parent": id, "rationale": str, "patch": [ops]}]}: '
                  f"either inspect up to 3 harnesses first, or give up to {m} candidates.")
        user = f"Archive (best first):\n{self._summary(view)}"

        def check(reply: ProposerReply) -> None:
            for c in reply.candidates:
                try:
                    apply_edit(view.spec(self._find(view, c.parent).harness_id), c.patch, allowed=view.allowed)
                except ValueError as err:
                    raise HarnessError([Problem("", f"candidate of {c.parent}: {err}")], "proposal") from None
            for i in reply.inspect:
                self._find(view, i)

        ids = [e.harness_id[:12] for e in ranked(view.entries)]
        fmt = narrowed(ProposerReply, inspect={"items": {"enum": ids}, "maxItems": 3},
                       ProposedEdit__parent={"enum": ids}, candidates={"maxItems": m})
        first = self.ask(system, user, ProposerReply, check, fmt)
        calls = list(first.calls)
        reply = first.value
        if reply is not None and reply.inspect and not reply.candidates:
            user += f"\n\nDetails you asked for:\n{self._details(view, reply.inspect)}\n\nNow give the candidates."
            second = self.ask(system, user, ProposerReply, check, fmt)
            calls += second.calls
            reply = second.value if second.value is not None else None
            first = second
        if reply is None or not reply.candidates:
            best = view.spec(ranked(view.entries)[0].harness_id)
            cand = _candidate(best, "llm", [], "", iteration, 0)
            cand.status, cand.reason = "rejected", f"proposer reply rejected: {first.reason or 'no candidates'}"
            return [Proposal(candidate=cand, calls=calls)]
        out = []
        for i, c in enumerate(reply.candidates[:m]):
            parent = view.spec(self._find(view, c.parent).harness_id)
            out.append(Proposal(candidate=_candidate(parent, "llm", c.patch, c.rationale, iteration, i),
                                calls=calls if i == 0 else []))
        return out


def proposer_for(config: RunConfig, env: Env) -> Proposer:
    """The run's proposer: ``OfflineProposer`` (the offline curator and editor for mutations) when
    ``meta.model == "offline"``, else ``LLMProposer``."""
    if config.meta.model == "offline":
        from coevo.roles.curator import curator_for
        from coevo.roles.editor import editor_for

        return OfflineProposer(curator_for(config, env), editor_for(config, env))
    return LLMProposer(config.meta.model, temperature=config.meta.temperature)
