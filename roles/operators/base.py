"""The operator library's contract: an ``Operator`` edits one harness component for the failure
causes it declares, from ``Material`` (the direction, the spec, train tasks and solved train
rollouts), with a seeded ``random.Random`` choosing among its variants; ``draw`` samples which
operator a candidate uses, so candidates of one direction differ.

An operator never sees a val or test task: ``Material.tasks`` holds train tasks, and a demonstration
names the train tasks whose answers it carries (``Edit.demo_tasks``), which then leave later weight
stages, checks and search scoring (docs/design.md, Principles).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, Sequence

from coevo.envs.base import Task
from coevo.harnesses.spec import HarnessSpec
from coevo.meta.state import Direction
from coevo.models.trajectory import Trajectory
from coevo.roles.diagnosis import addresses, split_cause, task_category

COMPONENTS = ("prompt", "skills", "context", "memory", "hooks", "tool_view", "parser", "budget", "decoding", "bpe")
"""The harness components (``coevo.harnesses.spec.HarnessSpec``) an operator may edit (``bpe``: only a
spec that has it, ``Operator.needs``)."""


def expected_answer(task: Task | None, detail: Mapping[str, Any]) -> str | None:
    """The expected answer stated in a train task's scoring diagnostics (``expected`` or ``gold``), if any."""
    for key in ("expected", "gold"):
        value = detail.get(key)
        if value not in (None, ""):
            return value if isinstance(value, str) else json.dumps(value)
    return None


@dataclass
class Material:
    """What an operator reads: the ``direction`` (its cause ``kinds`` and ``category``, from
    ``split_cause``), the ``spec`` it edits, the train ``tasks`` by id, the ``solved`` train
    rollouts, how to read a train task's expected answer (``demo_answer(task, diagnostics)``) and
    the most demonstrations one edit may add (``max_demos``) and the names of the tools the env
    offers (``env_tools``: what a tool-view edit may expose, whatever the spec shows now)."""

    direction: Direction
    spec: HarnessSpec
    tasks: Mapping[str, Task] = field(default_factory=dict)
    solved: Sequence[Trajectory] = ()
    demo_answer: Callable[[Task, dict[str, Any]], str | None] = expected_answer
    max_demos: int = 2
    env_tools: Sequence[str] = ()
    kinds: list[str] = field(init=False)
    category: str = field(init=False)

    def __post_init__(self) -> None:
        self.kinds, self.category = split_cause(self.direction.cause)

    def category_tasks(self) -> list[Task]:
        """The train tasks of the direction's category (all train tasks when it has none), by id."""
        tasks = [t for _, t in sorted(self.tasks.items()) if t.split == "train"]
        return [t for t in tasks if not self.category or task_category(t) == self.category]


@dataclass
class Edit:
    """An operator's edit: RFC 6902 ``ops`` on the spec, why (``why``), and the train tasks whose
    answers the ops carry (``demo_tasks``)."""

    ops: list[dict[str, Any]]
    why: str
    demo_tasks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Operator:
    """One harness edit mechanism: its ``name``, the ``component`` it edits, the cause prefixes it
    addresses (``causes``; ``"*"``: any), the JSON Pointer prefixes its ops touch (``paths``, for a
    phase's allowed fields), a sampling ``weight``, ``make(material, rng) -> Edit | None`` (None:
    nothing to do for this material) and ``needs(spec)``, whether it applies to a spec at all (None:
    every spec). An operator that does not fit a spec is left out before the draw's random order, so
    it changes no other operator's chance on specs it does not fit (``applicable``)."""

    name: str
    component: str
    causes: tuple[str, ...]
    paths: tuple[str, ...]
    make: Callable[[Material, random.Random], Edit | None]
    weight: float = 1.0
    needs: Callable[[HarnessSpec], bool] | None = None

    def fits(self, spec: HarnessSpec | None) -> bool:
        """Whether it applies to ``spec`` (``needs``; always when either is None)."""
        return spec is None or self.needs is None or self.needs(spec)

    def addresses(self, kinds: Sequence[str]) -> bool:
        """Whether this operator addresses any of the cause ``kinds``."""
        return any(addresses(k, self.causes) for k in kinds)

    def inside(self, allowed: Sequence[str] | None) -> bool:
        """Whether every path it touches lies under one of ``allowed`` (JSON Pointer prefixes; None: any)."""
        return allowed is None or all(any(p == a or p.startswith(a.rstrip("/") + "/") for a in allowed)
                                      for p in self.paths)


OPERATORS: dict[str, Operator] = {}
"""The registered operators by name (filled by the modules of ``coevo.roles.operators``)."""


def operator(name: str, component: str, causes: Sequence[str], paths: Sequence[str] | None = None,
             weight: float = 1.0, needs: Callable[[HarnessSpec], bool] | None = None
             ) -> Callable[[Callable[[Material, random.Random], Edit | None]], Operator]:
    """Decorator: register ``fn(material, rng) -> Edit | None`` as operator ``name`` (see ``Operator``;
    ``paths`` default to ``/<component>``). Raises ``ValueError`` for an unknown component or a name
    already taken."""
    if component not in COMPONENTS:
        raise ValueError(f"operator {name!r}: unknown component {component!r}; one of {COMPONENTS}")
    if name in OPERATORS:
        raise ValueError(f"operator {name!r} is already registered")

    def deco(fn: Callable[[Material, random.Random], Edit | None]) -> Operator:
        op = Operator(name, component, tuple(causes), tuple(paths or (f"/{component}",)), fn, weight, needs)
        OPERATORS[name] = op
        return op

    return deco


def seed_of(*parts: Any) -> int:
    """A stable 63-bit seed from ``parts`` (e.g. run seed, round, direction id): the same parts give
    the same seed in every process (unlike ``hash``)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def applicable(kinds: Sequence[str], allowed: Sequence[str] | None = None,
               only: Collection[str] | None = None, spec: HarnessSpec | None = None) -> list[Operator]:
    """The registered operators addressing any of ``kinds`` whose paths lie inside ``allowed``
    (and whose name is in ``only``, when given) and that fit ``spec`` (``Operator.fits``), by name."""
    return [op for name, op in sorted(OPERATORS.items())
            if op.addresses(kinds) and op.inside(allowed) and (only is None or name in only) and op.fits(spec)]


def order(ops: Sequence[Operator], rng: random.Random) -> list[Operator]:
    """``ops`` in a weighted random order (Efraimidis & Spirakis 2006: key u^(1/w), largest first),
    so heavier operators tend to come first and every operator appears once."""
    return sorted(ops, key=lambda op: -(rng.random() ** (1.0 / op.weight)))


def specific(op: Operator, kinds: Sequence[str]) -> bool:
    """Whether ``op`` declares one of the cause ``kinds`` itself (``"value:operand"`` for a
    ``value:operand`` failure), not only its family (``"value:"``), a pattern or ``"*"``."""
    return any(kind in op.causes for kind in kinds)


def assignments(directions: Sequence[Direction], samples: int = 1) -> list[tuple[Direction, int]]:
    """The candidates asked of an editor, as (direction, sample index): ``samples`` per direction,
    every direction's first sample first (best supported first), then every second one, and so on."""
    return [(d, s) for s in range(samples) for d in directions]


def draw(material: Material, seed: int, sample: int = 0, allowed: Sequence[str] | None = None,
         only: Collection[str] | None = None) -> tuple[Operator, Edit] | None:
    """Candidate ``sample`` of a direction: the operators addressing its causes (inside ``allowed``,
    among ``only`` when given, fitting the material's spec), those that name one of the direction's
    cause kinds exactly first (``specific``: the fix written for this failure before the ones written
    for its family or for any failure), each tier in the weighted order ``seed`` gives; rotated by
    ``sample`` (so samples of one direction and seed use distinct operators while any are left), the
    first whose edit is non-empty. Each operator gets its own ``Random(seed_of(seed, sample, name))``
    for its variants. None when no operator has an edit."""
    ops, rng = applicable(material.kinds, allowed, only, material.spec), random.Random(seed)
    ranked = order(ops, rng)
    ranked = [op for op in ranked if specific(op, material.kinds)] + \
        [op for op in ranked if not specific(op, material.kinds)]
    if not ranked:
        return None
    start = sample % len(ranked)
    for op in ranked[start:] + ranked[:start]:
        edit = op.make(material, random.Random(seed_of(seed, sample, op.name)))
        if edit is not None and edit.ops:
            return op, edit
    return None
