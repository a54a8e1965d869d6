"""coevo.records: every persisted domain model, declared once (docs/design.md, Storage).

Plain pydantic models with UTC-aware timestamps (``coevo.timestamps.UTCTime``) and no SQL: the meta
state, the roles and the reports use them as they are, and ``coevo.storage`` derives one table from
each through its registry (``coevo.storage.tables.TABLES``; ``storage/README.md`` says how to add
one). ``Checkpoint`` and ``Trajectory`` live in ``coevo.models``, ``Task`` in ``coevo.envs.base``;
they are re-exported here so one import names every persisted kind.
"""

from coevo.envs.base import Task
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.records.decompose import Decomposition
from coevo.records.experience import ExperienceRecord
from coevo.records.export import ExportRecord
from coevo.records.gate import GateDecision, GatePair
from coevo.records.harness_s import Ballot, PoolMember, Profile, ProfileEntry
from coevo.records.inheritance import BaseChoice, ModelProposal, PairScore, Promotion
from coevo.records.phases import Phase
from coevo.records.run import (
           BudgetRecord,
           EditRecord,
           EvaluationRecord,
           HarnessRecord,
           LLMCallRecord,
           RunHarness,
           RunHeartbeat,
           RunRecord,
)

__all__ = ["Ballot", "BaseChoice", "BudgetRecord", "Checkpoint", "Decomposition", "EditRecord", "EvaluationRecord",
           "ExperienceRecord", "ExportRecord", "GateDecision", "GatePair", "HarnessRecord", "LLMCallRecord",
           "ModelProposal", "PairScore", "Phase", "PoolMember", "Profile", "ProfileEntry", "Promotion", "RunHarness",
           "RunHeartbeat", "RunRecord", "Task", "Trajectory"]
