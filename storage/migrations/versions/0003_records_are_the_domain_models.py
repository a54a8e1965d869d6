"""the archive stores the domain models: checkpoint serving fields, profiles and promotions as their
models' fields, ballot kinds

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 15:01:12.556082

Every row is kept and read back as the same model values (tests/unit/test_archive_fixture.py):

- ``policy_checkpoints``: ``model_ref`` and ``vllm`` (the checkpoint's serving details) move out of
  the free ``config`` JSON into typed columns; a checkpoint without them gets NULL and ``[]``.
- ``profiles``: the ``profile`` JSON (a ``Profile`` dumped whole) becomes one column per ``Profile``
  field (``prefer``, ``avoid``, ``val_success``, ``per_task``, ``categories``, ``source``,
  ``reason``); a key that is no ``Profile`` field is dropped (only hand-written archives had any),
  a missing one gets the field's default.
- ``promotions``: the ``pairs`` JSON (``incumbent``, ``best``, ``adapted``) becomes those three
  columns; a row without an incumbent pair gets the kept pair (``harness_id``, ``checkpoint_id``).
- ``votes``: a ``kind`` column (``rule``/``llm``), NULL on rows written before it was recorded.
- Float timestamps (budgets, phases, pool members, votes, CoEvo-RSI tables) stay FLOAT columns of Unix
  seconds, as every timestamp is: only the models now read them as UTC ``datetime``s.

Frozen, coevo-free code: the tables as this revision leaves them, never the live models.
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from coevo.storage.migrations import has_table

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

PROFILE_FIELDS = {"prefer": ([], sa.JSON()), "avoid": ([], sa.JSON()), "val_success": (0.0, sa.Float()),
                  "per_task": ({}, sa.JSON()), "categories": ({}, sa.JSON()), "source": ("offline", sa.String()),
                  "reason": ("", sa.String())}
"""The ``Profile`` fields that were keys of ``profiles.profile``: their defaults and column types."""
SERVING = ("model_ref", "vllm")
"""The checkpoint ``config`` keys that became columns."""


def _table(name: str, **columns: Any) -> sa.TableClause:
    return sa.table(name, sa.column("id", sa.String()), *(sa.column(c, kind) for c, kind in columns.items()))


def _rewrite(table: sa.TableClause, change: Any) -> None:
    """``change(row) -> values | None`` on every row of ``table`` (only the ``id`` and the columns
    ``table`` names are read), each non-None result written to its row."""
    bind = op.get_bind()
    for row in bind.execute(sa.select(*table.c)).mappings().all():
        values = change(dict(row))
        if values is not None:
            bind.execute(table.update().where(table.c.id == row["id"]).values(**values))


def _add(name: str, *columns: sa.Column) -> None:
    with op.batch_alter_table(name, schema=None) as batch_op:
        for column in columns:
            batch_op.add_column(column)


def _drop(name: str, *columns: str) -> None:
    with op.batch_alter_table(name, schema=None) as batch_op:
        for column in columns:
            batch_op.drop_column(column)


def _literal(default: Any) -> str:
    """A server default's SQL text for ``default``: JSON for a list or dict, else the value."""
    return json.dumps(default) if isinstance(default, (list, dict)) else str(default)


def _serving(row: dict[str, Any]) -> dict[str, Any] | None:
    config = dict(row["config"] or {})
    if not set(SERVING) & set(config):
        return None
    return {"model_ref": config.pop("model_ref", None), "vllm": list(config.pop("vllm", None) or []), "config": config}


def _profile(row: dict[str, Any]) -> dict[str, Any]:
    profile = row["profile"] if isinstance(row["profile"], dict) else {}
    return {name: profile.get(name, default) for name, (default, _) in PROFILE_FIELDS.items()}


def _pairs(row: dict[str, Any]) -> dict[str, Any]:
    pairs = row["pairs"] if isinstance(row["pairs"], dict) else {}
    kept = {"harness_id": row["harness_id"], "checkpoint_id": row["checkpoint_id"], "val": None, "timr": None}
    return {"incumbent": pairs.get("incumbent") or kept, "best": pairs.get("best"), "adapted": pairs.get("adapted")}


def upgrade() -> None:
    """The archive stores the domain models (see the module docstring). A table the archive lacks is
    left alone: ``create_all`` makes it in its new shape afterwards."""
    if has_table('policy_checkpoints'):
        _add('policy_checkpoints', sa.Column('model_ref', sa.String(), nullable=True),
             sa.Column('vllm', sa.JSON(), nullable=False, server_default='[]'))
        _rewrite(_table('policy_checkpoints', config=sa.JSON(), model_ref=sa.String(), vllm=sa.JSON()), _serving)
    if has_table('profiles'):
        _add('profiles', *(sa.Column(name, kind, nullable=False, server_default=_literal(default))
                           for name, (default, kind) in PROFILE_FIELDS.items()))
        _rewrite(_table('profiles', profile=sa.JSON(), **{name: kind for name, (_, kind) in PROFILE_FIELDS.items()}),
                 _profile)
        _drop('profiles', 'profile')
    if has_table('promotions'):
        _add('promotions', sa.Column('incumbent', sa.JSON(), nullable=False, server_default='{}'),
             sa.Column('best', sa.JSON(), nullable=True), sa.Column('adapted', sa.JSON(), nullable=True))
        _rewrite(_table('promotions', harness_id=sa.String(), checkpoint_id=sa.String(), pairs=sa.JSON(),
                        incumbent=sa.JSON(), best=sa.JSON(), adapted=sa.JSON()), _pairs)
        _drop('promotions', 'pairs')
    if has_table('votes'):
        _add('votes', sa.Column('kind', sa.String(), nullable=True))


def downgrade() -> None:
    """Undo ``upgrade``: the serving details back into ``config``, ``profile`` and ``pairs`` rebuilt
    from their columns (a profile's ``harness_id``/``checkpoint_id`` from the row's)."""
    _drop('votes', 'kind')

    _add('promotions', sa.Column('pairs', sa.JSON(), nullable=False, server_default='{}'))
    _rewrite(_table('promotions', pairs=sa.JSON(), incumbent=sa.JSON(), best=sa.JSON(), adapted=sa.JSON()),
             lambda row: {"pairs": {k: row[k] for k in ("incumbent", "best", "adapted")}})
    _drop('promotions', 'adapted', 'best', 'incumbent')

    _add('profiles', sa.Column('profile', sa.JSON(), nullable=False, server_default='{}'))
    _rewrite(_table('profiles', profile=sa.JSON(), harness_id=sa.String(), checkpoint_id=sa.String(),
                    **{name: kind for name, (_, kind) in PROFILE_FIELDS.items()}),
             lambda row: {"profile": {k: row[k] for k in ("harness_id", "checkpoint_id", *PROFILE_FIELDS)}})
    _drop('profiles', *reversed(PROFILE_FIELDS))

    _rewrite(_table('policy_checkpoints', config=sa.JSON(), model_ref=sa.String(), vllm=sa.JSON()),
             lambda row: {"config": {**(row["config"] or {}), **({"model_ref": row["model_ref"]} if row["model_ref"]
                                                                 else {}), **({"vllm": row["vllm"]} if row["vllm"]
                                                                              else {})}})
    _drop('policy_checkpoints', 'vllm', 'model_ref')
