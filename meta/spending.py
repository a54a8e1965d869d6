"""How the meta-loop's services spend under a run's caps (``coevo.meta.budget``): the rollout cap's
reservations (``reserved``, ``_Reservation``; ``settle`` for a node that hit it), the updates cap
(``updates_left``), an adaptive weight phase cut to what is left (``fit``), whether an evaluation was
charged already (``charged``) and the accounting of each spend once (``account``).

``Spending`` is a mixin of ``coevo.meta.context.MetaContext`` (it reads ``config``, ``archive``,
``run_id``, ``budget_stop``, ``_reserved``, ``_running``, ``log`` and ``track``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from coevo.meta.budget import (
    MEASURE,
    BudgetExhausted,
    charged_key,
    current_phase,
    over_cap,
    over_updates,
    totals,
)
from coevo.records import BudgetRecord, Checkpoint
from coevo.training.kinds import StageKind, stage_rollouts

if TYPE_CHECKING:
    from coevo.config import RunConfig
    from coevo.storage import Archive


class Spending:
    """The cap-keeping half of ``MetaContext`` (module doc)."""

    config: "RunConfig"
    archive: "Archive"
    run_id: str
    budget_stop: str
    _reserved: int
    _running: set

    def spent(self) -> float:
        """The rollouts this run was charged so far (``totals`` of its budget rows: measurement apart)."""
        return totals(self.archive.list(BudgetRecord, run_id=self.run_id))["rollouts"]

    def updates_made(self) -> int:
        """The weight updates this run's stages made so far: the ``updates`` their checkpoints recorded."""
        return int(sum((c.metrics or {}).get("updates", 0) for c in self.archive.list(Checkpoint, run_id=self.run_id)))

    def updates_left(self, kind: StageKind, round: int) -> int:
        """The updates ``kind`` makes (``StageKind.updates``), checked against the run's updates cap
        (``config.updates``, 0: none). Raises ``BudgetExhausted`` — and sets ``budget_stop`` — when they
        would take the run past it (``over_updates``), or once the run is stopped."""
        updates, cap = kind.updates(self.config.train), self.config.updates
        if cap:
            if self.budget_stop:
                raise BudgetExhausted(self.budget_stop)
            made = self.updates_made()
            if made + updates > cap:
                self.budget_stop = over_updates(f"round {round}'s weight stage", updates, cap, made)
                raise BudgetExhausted(self.budget_stop)
        return updates

    def fit(self, kind: StageKind | None, round: int) -> StageKind | None:
        """``kind`` as it may run under the run's rollout cap (``StageKind.fitted``): an adaptive weight
        phase whose most rounds would overrun what is left is cut to fit (logged); any other stage is
        returned as it is (the reservation then refuses one that does not fit). Unchanged without a cap."""
        cap, train = self.config.budget, self.config.train
        if not cap or kind is None or self.budget_stop:
            return kind
        left = int(cap - self.spent() - self._reserved)
        fitted = kind.fitted(train, left)
        if fitted is None or fitted is kind:
            return kind
        self.log("train", f"round {round}: the adaptive weight phase is cut from {stage_rollouts(train, kind)} to "
                          f"{stage_rollouts(train, fitted)} rollouts, what is left of budget = {cap}")
        return fitted

    def charged(self, evaluation_id: str) -> bool:
        """Whether evaluation ``evaluation_id`` was charged to a deciding phase of this run already (a
        measuring phase's record does not count: ``coevo.meta.budget``, measurement is not charged)."""
        return self.archive.get(BudgetRecord, charged_key(self.run_id, evaluation_id)) is not None

    def reserved(self, rollouts: int, what: str) -> "_Reservation":
        """``async with ctx.reserved(n, what):`` around a spending call of declared size ``n``
        rollouts (``what`` names it): under the run's cap (``config.budget``, 0: none) it raises
        ``BudgetExhausted`` — and sets ``budget_stop`` — when the run's spend so far (the archive's
        ``totals``), plus what calls running now reserved, plus ``n`` would exceed the cap, or once the
        run is stopped. Measurement (``MEASURE`` phases) and 0-rollout calls are never refused."""
        return _Reservation(self, rollouts, what)

    async def settle(self) -> None:
        """Wait for the spending calls still running (other than the caller's): the node that hit the
        cap ends only when its siblings in a ``gather`` have finished and been accounted."""
        others = [t for t in self._running if t is not asyncio.current_task()]
        if others:
            await asyncio.gather(*others, return_exceptions=True)

    def account(self, record: BudgetRecord) -> None:
        """Store a phase's spend (``coevo.meta.budget``; once per id: what was paid for before is not
        counted again) and track the run's cumulative spend without test rollouts
        (``budget/rollouts``, ``budget/policy_tokens``, ``budget/policy_cost_usd``, ``budget/meta_tokens``,
        ``budget/meta_cost_usd``)."""
        if not self.archive.put_new(record):
            return
        spent = totals(self.archive.list(BudgetRecord, run_id=self.run_id))
        self.track({"budget/rollouts": spent["rollouts"],
                    "budget/policy_tokens": spent["policy_input_tokens"] + spent["policy_output_tokens"],
                    "budget/policy_cost_usd": spent["policy_cost_usd"],
                    "budget/meta_tokens": spent["meta_input_tokens"] + spent["meta_output_tokens"],
                    "budget/meta_cost_usd": spent["meta_cost_usd"]}, record.round)



class _Reservation:
    """One spending call's place under the run's rollout cap (``MetaContext.reserved``)."""

    def __init__(self, ctx: Spending, rollouts: int, what: str) -> None:
        self.ctx, self.rollouts, self.what, self.held = ctx, rollouts, what, 0

    async def __aenter__(self) -> None:
        ctx, cap = self.ctx, self.ctx.config.budget
        if cap and self.rollouts and current_phase().name not in MEASURE:
            spent = ctx.spent()
            if ctx.budget_stop:
                raise BudgetExhausted(ctx.budget_stop)
            if spent + ctx._reserved + self.rollouts > cap:
                ctx.budget_stop = over_cap(self.what, self.rollouts, cap, spent, ctx._reserved)
                raise BudgetExhausted(ctx.budget_stop)
            self.held = self.rollouts
            ctx._reserved += self.held
        task = asyncio.current_task()
        if task is not None:
            ctx._running.add(task)

    async def __aexit__(self, *exc: Any) -> None:
        self.ctx._reserved -= self.held
        self.ctx._running.discard(asyncio.current_task())
