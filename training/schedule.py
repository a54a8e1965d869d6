"""WHALE's phase bookkeeping (WHALE §3.1, §4, App. A.1): the persistent shuffled task sampler the
weight phases share, and the adaptive patience rule that ends a phase on its training signal.

Torch-free: the meta-loop nodes and the RSFT stage both import it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class PersistentSampler:
    """The task stream of every weight phase of a run (WHALE §3.1, "a persistent sampler"): epoch
    ``e`` visits the ``n`` train tasks once each, in the order ``random.Random(seed + e)`` shuffles
    them; a phase draws ``size`` tasks at a time from ``position`` (draws so far, in tasks) and the
    next phase continues where it stopped, so every task is seen once per epoch across cycles."""

    seed: int = 0

    def order(self, n: int, epoch: int) -> list[int]:
        """The visiting order (task indices 0..n-1) of epoch ``epoch``."""
        order = list(range(n))
        random.Random(self.seed + epoch).shuffle(order)
        return order

    def draw(self, items: Sequence[T], position: int, size: int) -> list[T]:
        """The ``size`` items drawn from ``position`` on (an epoch boundary may fall inside the draw).
        Raises ``ValueError`` when ``items`` is empty."""
        return self.take(items, position, size)[0]

    def take(self, items: Sequence[T], position: int, size: int,
             keep: Callable[[T], bool] | None = None) -> tuple[list[T], int]:
        """The next ``size`` items from ``position`` that ``keep`` accepts (default: all), and the
        position after them: items ``keep`` refuses (train tasks a demonstration now answers) are
        passed over, so each epoch still visits every kept item once. Raises ``ValueError`` when
        ``items`` is empty or a whole epoch's walk finds no kept item."""
        if not items:
            raise ValueError("the persistent sampler has no tasks to draw from")
        n, batch, misses = len(items), [], 0
        while len(batch) < size:
            item = items[self.order(n, position // n)[position % n]]
            position += 1
            if keep is None or keep(item):
                batch.append(item)
                misses = 0
            elif (misses := misses + 1) >= n:
                raise ValueError("the persistent sampler's filter keeps none of its tasks")
        return batch, position


def epochs_to_steps(epochs: float, n_tasks: int, tasks_per_step: int) -> int:
    """A length in epochs over ``n_tasks`` as whole RSFT steps of ``tasks_per_step`` tasks (at least 1)."""
    return max(1, math.ceil(epochs * n_tasks / tasks_per_step - 1e-9))


@dataclass(frozen=True)
class WeightPhase:
    """A weight phase's place in the run's persistent task stream and its length (WHALE §3.1, §4), as
    a stage trainer takes it: ``sampler`` over ``stream`` (every train task of the run) from
    ``position`` (tasks drawn so far), at most ``max_steps`` steps, and ``stop(rewards)`` the adaptive
    rule (None: the fixed length); ``resume_optimizer``: an RSFT phase continues the AdamW state the
    stage that made its start checkpoint saved (WHALE's phases: one online run), or starts a fresh
    optimiser (CoEvo-RSI's adaptation: each round's SFT is its own run)."""

    sampler: PersistentSampler
    stream: Sequence[Any]
    position: int
    max_steps: int
    stop: Callable[[list[float]], str | None] | None = None
    resume_optimizer: bool = True

    def options(self) -> dict[str, Any]:
        """The phase as ``train_rsft``'s keyword arguments."""
        return {"sampler": self.sampler, "stream": self.stream, "position": self.position,
                "max_steps": self.max_steps, "stop": self.stop, "resume": self.resume_optimizer}


@dataclass(frozen=True)
class Patience:
    """The adaptive stopping rule of WHALE §4 / App. A.1, in steps (weight phase) or iterations
    (harness phase): after at least ``minimum`` values, stop once the windowed signal — the mean of
    the last ``window`` values — has not reached a new best for ``patience`` values.

    Window means exist from the ``window``-th value on; the first full window is the first best.
    Paper settings: weight phase minimum = patience = window = 0.2 epochs (``epochs_to_steps``);
    harness phase minimum 6 iterations, patience 2, window 1 on the best train score so far.
    """

    minimum: int
    patience: int
    window: int = 1
    unit: str = "steps"

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.patience < 1 or self.window < 1:
            raise ValueError(f"patience rule needs minimum, patience and window >= 1, got {self}")

    def stop(self, values: Sequence[float]) -> str | None:
        """Why the phase stops after ``values`` (one per step, oldest first), or None to go on."""
        n = len(values)
        if n < max(self.minimum, self.window):
            return None
        means = [sum(values[i - self.window + 1:i + 1]) / self.window for i in range(self.window - 1, n)]
        best = max(range(len(means)), key=lambda i: (means[i], -i))  # first index of the best mean
        since = len(means) - 1 - best
        if since < self.patience:
            return None
        return (f"no new best windowed train signal for {since} {self.unit} (best {means[best]:.4f} after "
                f"{best + self.window}; window {self.window}, patience {self.patience}, minimum {self.minimum})")


@dataclass
class PhaseRun:
    """What ``run_phase`` did: the train reward of each step, why it stopped early ("" when it ran
    ``max_steps``) and the sampler position after it (where the next phase starts)."""

    rewards: list[float]
    stop_reason: str
    position: int


def run_phase(step: Callable[[int, list[T]], float], tasks: Sequence[T], tasks_per_step: int, max_steps: int,
              sampler: PersistentSampler | None = None, position: int = 0,
              stop: Callable[[list[float]], str | None] | None = None,
              keep: Callable[[T], bool] | None = None) -> PhaseRun:
    """The step loop of a weight phase (WHALE §3.1 online RSFT; §4 adaptive stop): for step
    ``i < max_steps`` draw ``tasks_per_step`` tasks (from ``sampler`` at ``position``, passing over
    those ``keep`` refuses; else in turn from the start of ``tasks``), call ``step(i, batch) -> mean
    train reward``, and end early when ``stop(rewards so far)`` gives a reason. Raises
    ``ValueError`` when ``tasks`` is empty."""
    if not tasks:
        raise ValueError("a weight phase needs at least one task")
    rewards: list[float] = []
    reason = ""
    for i in range(max_steps):
        if sampler is not None:
            batch, position = sampler.take(tasks, position, tasks_per_step, keep)
        else:
            batch = [tasks[(i * tasks_per_step + j) % len(tasks)] for j in range(tasks_per_step)]
        rewards.append(step(i, batch))
        if stop is not None and (reason := stop(rewards) or ""):
            break
    return PhaseRun(rewards, reason, position if sampler is not None else len(rewards) * tasks_per_step)
