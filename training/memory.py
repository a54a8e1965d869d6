"""A weight stage's memory budget: the micro-batch and the sequence cap it trains with, derived from
``train.max_memory_gb`` (default: ``DEFAULT_SHARE`` of the device's memory), or a clear refusal before
the first step instead of a process killed for memory half-way through a stage. GRPO stages plan with
``plan_memory`` (a step of ``tasks_per_step x num_generations`` rows), RSFT stages (WHALE's, and
EvoHarness-RL's harness SFT) with ``plan_sft_memory`` (an SFT step of ``minibatch_size`` rows, without
activation checkpointing, which RSFT does not use).

The estimate (``stage_gb``) is deliberately simple and conservative, in bytes:

- the base weights: parameters x their dtype's bytes;
- the LoRA adapter being trained: its parameters x 16 (fp32 weight, gradient and Adam's two moments),
  its size estimated from ``lora_r`` and the model's shape (every linear layer of every block);
- one micro-step's activations: rows x tokens x (hidden x layers x 2 with activation checkpointing, x 16
  without) x the dtype's bytes, plus its logits in fp32 three times over (logits, log-softmax, gradient):
  rows x tokens x vocabulary x 12;
- plus ``OVERHEAD_GB`` (the runtime, the tokenizer, the sampler's caches) and 10 %.

The estimate takes every row at ``max_len`` tokens, a worst case; so under the default budget
(``train.max_memory_gb`` unset) a stage is only refused when one row of ``MIN_LEN`` tokens does not fit,
and a plan that would reshape it is logged at DEBUG instead (a worst case that real rows rarely reach: the
default job's rows are ~300 of 4096 tokens, so it is kept off the run's console and log file).
With ``train.max_memory_gb`` set, the plan keeps the configured micro-batch and
``max_len`` when they fit; otherwise it first splits
the step into more gradient-accumulation micro-steps (a divisor of the step's rows; the update is the
same up to float rounding), then halves ``max_len`` down to ``MIN_LEN`` (longer rows lose their tail, as
``max_len`` always cuts them), and raises ``MemoryBudgetError`` when one row of ``MIN_LEN`` tokens does
not fit either.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import os
import traceback
from dataclasses import dataclass
from typing import Any, Callable, ParamSpec, TypeVar

from coevo.errors import CoevoError

log = logging.getLogger(__name__)

DEFAULT_SHARE = 0.6
"""The share of the device's memory (GPU memory on CUDA, else the machine's RAM) a stage may plan for
when ``train.max_memory_gb`` is unset: well under the machine, room for the sampler and the rest."""
MIN_LEN = 256
"""The shortest sequence cap the plan lowers ``max_len`` to before it refuses."""
OVERHEAD_GB = 0.5
"""What a stage holds beside the model and its batch (runtime, tokenizer, caches), in GB."""
GB = 1024**3


class MemoryBudgetError(CoevoError, ValueError):
    """A weight stage that cannot fit its memory budget even at one row of ``MIN_LEN`` tokens; the
    message names the estimate, the budget and the settings that fix it."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a model: its parameter count, bytes per parameter, hidden size,
    intermediate (MLP) size, layers and vocabulary."""

    params: int
    dtype_bytes: int
    hidden: int
    intermediate: int
    layers: int
    vocab: int

    @classmethod
    def of(cls, model: Any) -> "ModelShape":
        """The shape of a transformers causal LM (its ``config`` and parameters)."""
        config = model.config
        first = next(model.parameters())
        hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0))
        return cls(params=sum(p.numel() for p in model.parameters()), dtype_bytes=first.element_size(),
                   hidden=hidden, intermediate=int(getattr(config, "intermediate_size", 0) or 4 * hidden),
                   layers=int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0)),
                   vocab=int(getattr(config, "vocab_size", 0)))


@dataclass(frozen=True)
class MemoryPlan:
    """What a stage trains with: ``micro_batches`` (gradient-accumulation micro-steps per step; None:
    as configured), ``max_len`` (tokens per row), the estimate and the budget in GB, and ``changed``:
    the settings the plan lowered or raised to fit (empty: the configuration fits)."""

    micro_batches: int | None
    max_len: int
    estimate_gb: float
    budget_gb: float
    changed: tuple[str, ...] = ()


def device_memory_gb() -> float:
    """The memory of the device a stage trains on, in GB: the first CUDA device's, else the machine's RAM."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GB
    except ImportError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB


def release_freed_memory() -> bool:
    """Hand the memory a finished weight stage freed back to the operating system: a full garbage
    collection, then ``trim_freed_memory``. Returns True when the trim ran, False where the C library has
    no ``malloc_trim`` (macOS, musl).

    Why: glibc keeps a freed heap for reuse, and a stage's tensors are freed by the sampler's and the
    trainer's threads into different arenas, so a process that runs stage after stage (``coevo compare``, a
    table, a long run) held 5.6-6.6 GB between SmolLM2-135M RSFT stages and read up to 14.8 GB in a stage,
    against 0.5 GB held after a trim (``benchmarks/stage_rss.py``; ``docs/benchmarks/papers.md``, "Memory of
    a long table process"). The price: the next stage faults its memory in again (system CPU, a few
    seconds a stage on CPU)."""
    gc.collect()
    return trim_freed_memory()


P = ParamSpec("P")
R = TypeVar("R")


def releasing(stage: Callable[P, R]) -> Callable[P, R]:
    """``stage`` (a function that trains a weight stage and returns its result) wrapped so that when it returns or
    fails, the memory it freed goes back to the operating system (``release_freed_memory``, after its frame and
    its model are gone); a failure keeps its message and lines but not the stage's local variables (the
    model, the batches), which a kept traceback would hold until the error is dropped. Used by the stage
    trainer (``coevo.training.stage``) and by the stages a family trains outside it (Harness-R1's engineer)."""

    @functools.wraps(stage)
    def released(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return stage(*args, **kwargs)
        except BaseException as error:
            traceback.clear_frames(error.__traceback__)  # the failed stage's locals go now
            raise
        finally:
            release_freed_memory()

    return released


def trim_freed_memory() -> bool:
    """glibc's ``malloc_trim(0)``: the free pages of every malloc arena back to the operating system (the
    memory stays usable; the next use faults it in again). True when it ran, False where the C library has
    no ``malloc_trim`` (macOS, musl)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    trim(0)
    return True


def budget_gb(max_memory_gb: float | None) -> float:
    """``max_memory_gb`` when set, else ``DEFAULT_SHARE`` of ``device_memory_gb()``."""
    return max_memory_gb if max_memory_gb is not None else DEFAULT_SHARE * device_memory_gb()


def stage_gb(shape: ModelShape, rows: int, tokens: int, lora_r: int, checkpointing: bool) -> float:
    """The estimated peak of a stage training ``shape`` with ``rows`` rows of ``tokens`` tokens per
    micro-step and a rank-``lora_r`` adapter, in GB (module doc)."""
    weights = shape.params * shape.dtype_bytes
    lora = lora_r * shape.layers * (8 * shape.hidden + 3 * (shape.hidden + shape.intermediate)) * 16
    per_token = shape.hidden * shape.layers * (2 if checkpointing else 16) * shape.dtype_bytes + shape.vocab * 12
    return 1.1 * (weights + lora + rows * tokens * per_token) / GB + OVERHEAD_GB


def plan_memory(settings: Any, shape: ModelShape) -> MemoryPlan:
    """The micro-batch and sequence cap a GRPO stage with ``settings`` (a ``StageSettings``: ``tasks_per_step``,
    ``num_generations``, ``accumulation_steps``, ``max_len``, ``lora_r``, ``activation_checkpointing``,
    ``max_memory_gb``) trains ``shape`` with under its budget (module doc): the step's rows are
    ``tasks_per_step x num_generations``. Raises ``MemoryBudgetError`` when one row of ``min(max_len, MIN_LEN)``
    tokens does not fit."""
    steps, length, need, budget, changed = _fit(
        shape, settings, settings.tasks_per_step * settings.num_generations, settings.accumulation_steps,
        settings.activation_checkpointing, "micro_batches", "GRPO stage")
    if not changed:
        return MemoryPlan(micro_batches=settings.micro_batches, max_len=settings.max_len, estimate_gb=need,
                          budget_gb=budget)
    return MemoryPlan(micro_batches=steps if steps != settings.accumulation_steps else settings.micro_batches,
                      max_len=length, estimate_gb=need, budget_gb=budget, changed=changed)


def plan_sft_memory(settings: Any, shape: ModelShape) -> MemoryPlan:
    """The plan of an RSFT stage (WHALE's, and EvoHarness-RL's harness SFT, both ``coevo.training.rsft``) with
    ``settings`` (``minibatch_size``, ``max_len``, ``lora_r``, ``max_memory_gb``): the same estimate and
    order as ``plan_memory`` over one SFT step of ``minibatch_size`` rows, which RSFT runs without activation
    checkpointing; ``micro_batches`` is the number of gradient-accumulation micro-steps that step is split into
    (1: the whole minibatch at once, as configured; the loss is normalised over the whole minibatch, so the
    update is the same up to float rounding). Raises ``MemoryBudgetError`` as ``plan_memory``."""
    steps, length, need, budget, changed = _fit(shape, settings, settings.minibatch_size, 1, False,
                                                "minibatch micro-steps", "RSFT stage")
    return MemoryPlan(micro_batches=steps, max_len=length, estimate_gb=need, budget_gb=budget, changed=changed)


def _fit(shape: ModelShape, settings: Any, rows: int, configured: int, checkpointing: bool, split_name: str,
         stage: str) -> tuple[int, int, float, float, tuple[str, ...]]:
    """(micro-steps, max_len, estimate, budget, changes) of a step of ``rows`` rows configured in ``configured``
    micro-steps at ``settings.max_len`` (module doc): as configured when it fits or when ``max_memory_gb`` is
    unset (a reshape it would need is logged at DEBUG), else more micro-steps (divisors of ``rows``), then a
    halved ``max_len`` down to ``MIN_LEN``. Raises ``MemoryBudgetError`` naming ``stage``."""
    budget = budget_gb(settings.max_memory_gb)
    steps, length = configured, settings.max_len

    def estimate(micro: int, tokens: int) -> float:
        return stage_gb(shape, rows // micro, tokens, settings.lora_r, checkpointing)

    changed: list[str] = []
    splits = [d for d in range(steps, rows + 1) if rows % d == 0]
    while estimate(steps, length) > budget and splits[-1] > steps:
        steps = next(d for d in splits if d > steps)
    if steps != configured:
        changed.append(f"{split_name} {configured} -> {steps}")
    floor = min(settings.max_len, MIN_LEN)
    while estimate(steps, length) > budget and length > floor:
        length = max(floor, length // 2)
    if length != settings.max_len:
        changed.append(f"max_len {settings.max_len} -> {length}")
    need = estimate(steps, length)
    if need > budget:
        raise MemoryBudgetError(
            f"the {stage} needs about {need:.2f} GB even at one row of {length} tokens per micro-step, but its "
            f"budget is {budget:.2f} GB (train.max_memory_gb"
            + (f" = {settings.max_memory_gb}" if settings.max_memory_gb is not None
               else f" unset: {DEFAULT_SHARE:.0%} of this device's {device_memory_gb():.1f} GB")
            + f"; model {shape.params / 1e6:.2f} M parameters, vocabulary {shape.vocab}): raise train.max_memory_gb "
            "if the device has the room, or lower train.lora_r, or train a smaller model; nothing was trained")
    if changed and settings.max_memory_gb is None:  # the default budget reshapes nothing: it only refuses
        log.debug("%s: its worst-case estimate (%d rows of %d tokens per micro-step) is over %.2f GB "
                  "(%.0f %% of this device); set train.max_memory_gb to have it %s", stage,
                  rows // configured, settings.max_len, budget, 100 * DEFAULT_SHARE, ", ".join(changed))
        return configured, settings.max_len, estimate(configured, settings.max_len), budget, ()
    if changed:
        log.warning("%s: %s to fit train.max_memory_gb (%.2f GB; estimate %.2f GB)", stage, ", ".join(changed),
                    budget, need)
    return steps, length, need, budget, tuple(changed)


def fitted(settings: Any, model: Any) -> Any:
    """``settings`` (a ``StageConfig``) with the micro-batch and ``max_len`` of ``plan_memory`` for
    ``model``; the same object when they fit as configured. Raises ``MemoryBudgetError``."""
    plan = plan_memory(settings, ModelShape.of(model))
    if not plan.changed:
        return settings
    return settings.model_copy(update={"micro_batches": plan.micro_batches, "max_len": plan.max_len})
