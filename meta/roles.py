"""The meta roles' protocols and what they return (the curator, editor, proposer, inheritor,
profiler, voter and summariser of ``MetaContext``): the loop's side of each role, which ``coevo.roles`` implements
(offline rules or an LLM) and the nodes call. Every answer carries the LLM calls it made, for the archive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from pydantic import BaseModel, Field

from coevo.envs.base import Task
from coevo.harnesses.spec import BPE, HarnessSpec
from coevo.meta.inheritance import ArchiveSummary, BaseChoice, ModelProposal
from coevo.meta.pool import Ballot, Profile
from coevo.meta.search import SearchEntry
from coevo.meta.state import Candidate, Direction, EvalSummary
from coevo.models.trajectory import Trajectory
from coevo.records import LLMCallRecord


class Curation(BaseModel):
    """A curator's answer: the directions (largest support first), why there are none when the
    reply was rejected (``reason``), and the LLM calls it made (for the archive)."""

    directions: list[Direction] = Field(default_factory=list)
    reason: str = ""
    calls: list[LLMCallRecord] = Field(default_factory=list)


class Curator(Protocol):
    """Groups failed train trajectories by root cause into repair directions (Harness-S §3.2)."""

    def curate(self, trajectories: Sequence[Trajectory], spec: HarnessSpec, tasks: dict[str, Task]) -> Curation:
        """The repair directions of the train failures among ``trajectories`` (``tasks``: train tasks by id)."""


class Proposal(BaseModel):
    """An editor's answer: the candidate (status ``proposed``, or ``rejected`` with the reason) and
    the LLM calls it made (for the archive)."""

    candidate: Candidate
    calls: list[LLMCallRecord] = Field(default_factory=list)


class Editor(Protocol):
    """Proposes a JSON-Patch edit of ``spec`` for a direction (and at most one revision)."""

    def propose(self, direction: Direction, spec: HarnessSpec, tasks: dict[str, Task],
                solved: Sequence[Trajectory] = (), *, round: int = 0, sample: int = 0,
                allowed: Sequence[str] | None = None) -> Proposal:
        """Candidate ``sample`` (0, 1, ...) of an edit of ``spec`` for ``direction`` in ``round``, inside
        the ``allowed`` JSON Pointer prefixes when given; ``solved``: solved train trajectories
        (demonstrations). Samples of one direction and round should differ."""

    def revise(self, direction: Direction, spec: HarnessSpec, candidate: Candidate, feedback: str,
               tasks: dict[str, Task]) -> Proposal:
        """The one revision of ``candidate`` after its check failed with ``feedback``."""


@dataclass
class SearchView:
    """What a proposer reads: the search archive's ``entries``, each archived harness's ``spec(id)``
    and train ``trajectories(id)`` (train split only), the train ``tasks`` by id, and the fields
    this phase ``allowed`` (None: any)."""

    entries: list[SearchEntry]
    spec: Callable[[str], HarnessSpec]
    trajectories: Callable[[str], list[Trajectory]]
    tasks: dict[str, Task] = field(default_factory=dict)
    allowed: list[str] | None = None


class Proposer(Protocol):
    """Proposes up to ``m`` candidate edits of archived harnesses."""

    def propose(self, view: SearchView, m: int, iteration: int) -> list[Proposal]:
        """Up to ``m`` proposals (``Candidate.parent_id``: the archived harness each patch applies to)."""


class Inheritance(BaseModel):
    """An inheritor's answer: the base choice or the model proposals, and the LLM calls made."""

    choice: BaseChoice | None = None
    proposals: list[ModelProposal] = Field(default_factory=list)
    calls: list[LLMCallRecord] = Field(default_factory=list)


class Inheritor(Protocol):
    """Chooses a base harness per brief and model initialisations per offspring harness."""

    def choose_base(self, direction: Direction, summary: ArchiveSummary) -> Inheritance:
        """The archived harness the editor of ``direction`` builds on (``Inheritance.choice``)."""

    def propose_models(self, harness_id: str, base_id: str, summary: ArchiveSummary, prefix: str) -> Inheritance:
        """Model initialisations for offspring ``harness_id`` (edited from ``base_id``), ids ``<prefix>-<n>``."""


class Profiled(BaseModel):
    """A profiler's answer: the profile and the LLM calls it made (for the archive)."""

    profile: Profile
    calls: list[LLMCallRecord] = Field(default_factory=list)


class Profiler(Protocol):
    """Profile(E_i, E_0): a sibling's val evaluation against H0's on the same tasks and seeds."""

    def profile(self, sibling: EvalSummary, h0: EvalSummary, tasks: dict[str, Task],
                trajectories: dict[str, Trajectory]) -> Profiled:
        """The sibling's profile (``tasks``: val tasks by id; ``trajectories``: their val rollouts by id)."""


class Voter(Protocol):
    """One voter of the router: a ranked ballot for ``task`` over ``candidates`` (in the shuffled
    order it is shown them), given the profiles by harness id and the val tasks by id."""

    name: str

    def vote(self, task: Task, candidates: Sequence[str], profiles: Mapping[str, Profile],
             val_tasks: Mapping[str, Task], ballot: int) -> tuple[Ballot, list[LLMCallRecord]]:
        """The ballot (at most ``ballot`` ids) and the LLM calls made."""


class Summarised(BaseModel):
    """A summariser's answer: a harness lineage's ``lessons`` after consolidation (oldest first, at
    most ``BPE.max_experience``), how many input lessons were ``merged`` into others (for an LLM's
    summary, which does not say: the input lessons less the kept ones), who made them
    (``source``: ``offline`` or ``llm``), why an LLM reply was rejected (``reason``; empty when none
    was) and the LLM calls made (for the archive)."""

    lessons: list[str] = Field(default_factory=list)
    merged: int = 0
    source: str = "offline"
    reason: str = ""
    calls: list[LLMCallRecord] = Field(default_factory=list)


class Summariser(Protocol):
    """Experience summarisation at consolidation (EvoHarness-RL's harness evolution)."""

    def summarise(self, existing: Sequence[str], new: Sequence[str], settings: BPE) -> Summarised:
        """The lineage's lessons after merging its ``existing`` ones with this round's ``new`` ones,
        within ``settings``' caps (``max_experience`` lessons, ``max_chars`` each)."""
