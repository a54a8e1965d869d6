"""Harness-S's weight stages (``coevo.graphs.harness_s`` picks them): GRPO whose Eq. 5 rescue group runs
under the siblings a router chose for each task (``Routed``, Eq. 10; the H0 and random rescue controls
route too) and GRPO whose every group mixes harnesses by position (``Mixture``, App. 8's fixed
mixed-harness control). Under ``train.algorithm = "rsft"`` a routed stage is plain RSFT (``routed``)
and a mixed one is refused (RSFT forms no groups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from coevo.config import TrainConfig
from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.models.checkpoint import Checkpoint
from coevo.models.trajectory import Trajectory
from coevo.training.kinds import GRPO, RSFT, Room, Route, training_spec


@dataclass(frozen=True)
class Routed(GRPO):
    """GRPO whose every all-fail group is re-rolled under the siblings ``route(task, k)`` names for
    that task (Harness-S Alg. 1, Eq. 5 with Eq. 10's top-K; H0 excluded), whatever ``train.rescue``
    says; ids ``route`` names outside ``siblings`` are passed over."""

    route: Route | None = None

    def rescues(self, train: TrainConfig) -> bool:
        """Whether the stage can rescue: it has siblings and a route."""
        return bool(self.siblings) and self.route is not None

    def rescue(self, room: Room, variants: dict[str, HarnessSpec], placed: Any, seed: int) -> Any:
        """The Eq. 5 hook under the router's per-task choice among the siblings' training ``variants``."""
        route = self.route
        if route is None or not variants:
            return None
        from coevo.training.grpo.rollout import sibling_rescue

        async def choose(task: Task, k: int) -> list[HarnessSpec]:
            return [variants[h] for h in await route(task, k) if h in variants]

        return sibling_rescue(choose, room.env, rollout_fn=placed, seed=seed)


def routed(train: TrainConfig, siblings: Sequence[HarnessSpec], route: Route) -> Routed | GRPO | RSFT:
    """Harness-S's weight stage as ``train.algorithm`` runs it: ``Routed`` over ``siblings`` by
    ``route`` under GRPO (plain ``GRPO`` when there is no sibling), ``RSFT`` otherwise."""
    if train.algorithm == "rsft":
        return RSFT()
    return Routed(siblings=tuple(siblings), route=route) if siblings else GRPO()


@dataclass(frozen=True)
class Mixture(GRPO):
    """GRPO whose group position j runs under ``positions[j % len(positions)]`` (Harness-S App. 8's
    fixed mixed-harness GRPO), with no rescue. Raises ``ValueError`` when run under
    ``train.algorithm = "rsft"``."""

    positions: tuple[HarnessSpec, ...] = ()

    def harnesses(self) -> list[HarnessSpec]:
        """The harnesses of the group positions."""
        return [*self.siblings, *self.positions]

    def group_options(self, room: Room) -> dict[str, Any]:
        """``mixture``: the positions' training variants."""
        return {"mixture": [training_spec(s, room.train) for s in self.positions]} if self.positions else {}

    def run(self, room: Room) -> tuple[Checkpoint, list[Trajectory]]:
        """The GRPO stage with mixed groups; refused under RSFT."""
        if room.train.algorithm == "rsft":
            raise ValueError("a mixed-harness stage mixes harnesses within GRPO groups (Harness-S App. 8), which "
                             "RSFT does not form; set train.algorithm = \"grpo\"")
        return super().run(room)
