"""Baseline: the archive as coevo's schema version 2 created it (the last release before Alembic).

Frozen here, independent of ``coevo.storage.tables``: later revisions change the tables from this
state. An archive written before Alembic (a ``schema_version`` table, no ``alembic_version``) is
stamped at this revision after its version-1 step (``coevo.storage.migrate``), never re-created.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

S, N, F, B, J, T = sa.String, sa.Integer, sa.Float, sa.Boolean, sa.JSON, sa.Text
NULLABLE = {"run_id", "child_id", "adapter_path", "evaluation_id", "final_answer"}

TABLES: dict[str, tuple[tuple[str, type], ...]] = {
    "schema_version": (("id", N), ("version", N)),
    "runs": (("id", S), ("strategy", S), ("config", J), ("status", S), ("created_at", F), ("updated_at", F)),
    "harnesses": (("id", S), ("spec", J), ("parents", J), ("origin", S), ("run_id", S), ("created_at", F)),
    "edits": (("id", S), ("run_id", S), ("round", N), ("parent_id", S), ("child_id", S), ("patch", J),
              ("rationale", S), ("direction", S), ("status", S), ("reason", S), ("created_at", F)),
    "policy_checkpoints": (("id", S), ("base_model", S), ("adapter_path", S), ("parents", J), ("config", J),
                           ("metrics", J), ("run_id", S), ("created_at", F)),
    "tasks": (("id", S), ("env", S), ("split", S), ("prompt", S), ("task_metadata", J)),
    "evaluations": (("id", S), ("run_id", S), ("harness_id", S), ("checkpoint_id", S), ("env", S), ("split", S),
                    ("seeds", J), ("k", N), ("task_ids", J), ("aggregates", J), ("status", S), ("created_at", F)),
    "trajectories": (("id", S), ("evaluation_id", S), ("run_id", S), ("task_id", S), ("env", S), ("split", S),
                     ("harness_id", S), ("checkpoint_id", S), ("seed", N), ("final_answer", S), ("stop_reason", S),
                     ("interface_violations", N), ("violation_turns", N), ("model_turns", N), ("env_actions", N),
                     ("reward", F), ("passed", B), ("latency_s", F), ("input_tokens", N), ("output_tokens", N),
                     ("cost_usd", F), ("body", T), ("created_at", F)),
    "gate_decisions": (("id", S), ("run_id", S), ("round", N), ("incumbent_id", S), ("candidate_id", S), ("b", F),
                       ("c", F), ("accepted", B), ("reason", S), ("pairs", J), ("created_at", F)),
    "profiles": (("id", S), ("run_id", S), ("round", N), ("harness_id", S), ("checkpoint_id", S), ("profile", J),
                 ("created_at", F)),
    "llm_calls": (("id", S), ("run_id", S), ("role", S), ("model", S), ("input_tokens", N), ("output_tokens", N),
                  ("cost_usd", F), ("latency_s", F), ("request", J), ("response", J), ("created_at", F)),
}
"""Table -> its columns (name, type) in order; ``id`` is the primary key, ``NULLABLE`` names may be NULL."""

INDEXES = {"runs": (), "schema_version": (), "tasks": ("env",), "harnesses": ("run_id",),
           "edits": ("parent_id", "run_id"), "policy_checkpoints": ("run_id",),
           "evaluations": ("harness_id", "run_id"), "gate_decisions": ("run_id",),
           "profiles": ("harness_id", "run_id"), "llm_calls": ("run_id",),
           "trajectories": ("evaluation_id", "harness_id", "run_id", "task_id")}
"""Table -> its indexed columns (index ``ix_<table>_<column>``)."""


def upgrade() -> None:
    """Create the schema-version-2 tables and indexes."""
    for table, columns in TABLES.items():
        op.create_table(table, *(sa.Column(name, kind(), nullable=name in NULLABLE) for name, kind in columns),
                        sa.PrimaryKeyConstraint("id"))
        for column in INDEXES[table]:
            op.create_index(f"ix_{table}_{column}", table, [column], unique=False)


def downgrade() -> None:
    """Drop every table of the baseline (and so everything stored)."""
    for table in reversed(TABLES):
        op.drop_table(table)
