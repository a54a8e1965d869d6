"""run_harnesses: the harnesses each run stored or reused

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 08:39:42.261337

A harness row is content-addressed and owned by the first run that stored it (``Archive.add_harness``), so
a second run starting from the same H0, or reaching the same edit's child, had no row of its own and its
report and views left those harnesses out. ``run_harnesses`` links a run to every harness it stores or
reuses, with the origin and parents it gave it (``coevo.records.RunHarness``; ``Archive.run_harnesses``
reads them).

An archive written before this revision gets one link per harness row a run owns (its ``run_id``, origin,
parents and time): what the views read before. The shared rows a second run reused before this revision
were never recorded, so they stay unlisted for that run.

Frozen, coevo-free code: the tables as this revision reads and leaves them, never the live models.
"""

import sqlalchemy as sa
from alembic import op

from coevo.storage.migrations import has_table

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

COLUMNS = (("run_id", sa.String()), ("origin", sa.String()), ("parents", sa.JSON()), ("created_at", sa.Float()))
"""The columns a link copies from its harness row (``harness_id`` is the row's ``id``)."""


def upgrade() -> None:
    """run_harnesses: the harnesses each run stored or reused (each owned row linked to its run)."""
    if has_table('run_harnesses'):
        return  # create_all made it (a database opened before this migration existed): every link is there
    op.create_table('run_harnesses',
                    sa.Column('id', sa.String(), nullable=False),
                    sa.Column('run_id', sa.String(), nullable=False),
                    sa.Column('harness_id', sa.String(), nullable=False),
                    sa.Column('origin', sa.String(), nullable=False),
                    sa.Column('parents', sa.JSON(), nullable=False),
                    sa.Column('created_at', sa.Float(), nullable=False),
                    sa.PrimaryKeyConstraint('id'))
    with op.batch_alter_table('run_harnesses', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_harnesses_harness_id'), ['harness_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_harnesses_run_id'), ['run_id'], unique=False)
    if not has_table('harnesses'):
        return
    harnesses = sa.table('harnesses', sa.column('id', sa.String()), *(sa.column(c, t) for c, t in COLUMNS))
    links = sa.table('run_harnesses', sa.column('id', sa.String()), sa.column('harness_id', sa.String()),
                     *(sa.column(c, t) for c, t in COLUMNS))
    owned = sa.select(harnesses.c.run_id + '/' + harnesses.c.id, harnesses.c.id,
                      *(harnesses.c[c] for c, _ in COLUMNS)).where(harnesses.c.run_id.is_not(None))
    op.execute(links.insert().from_select(['id', 'harness_id', *(c for c, _ in COLUMNS)], owned))


def downgrade() -> None:
    """Undo ``upgrade``."""
    with op.batch_alter_table('run_harnesses', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_harnesses_run_id'))
        batch_op.drop_index(batch_op.f('ix_run_harnesses_harness_id'))
    op.drop_table('run_harnesses')
