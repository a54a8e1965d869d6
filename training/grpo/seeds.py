"""Sampling seeds of training rollouts, owned by training, so a GRPO group's
rollouts differ even under a harness that fixes ``decoding.seed``.

GRPO learns from the reward contrast inside a group (Harness-S Eq. 6), so the K rollouts of a task
must sample independently of one another, and a step's groups independently of each other. Training
therefore picks every rollout's seed itself: ``rollout_seed`` hashes (stage seed, step, purpose,
group, task, rollout index), so no two rollouts of a run's stage share a seed — within a group,
across a step's tasks, in dynamic-sampling draws, Harness-S rescue groups and RSFT rounds — and
model call ``i`` of a rollout samples with ``call_seed(seed, i)`` (``coevo.harnesses.engine``;
the local engine seeds each row of a batched ``generate`` call with its own request's seed). The
seed a trajectory records is the one it sampled with (each ``ModelCall`` records its own).

A harness's fixed ``decoding.seed`` would make every rollout sample one random stream (no reward
contrast at all): training removes it (``without_fixed_seed``), and ``coevo harness validate`` and
the ``check`` node warn about it (``coevo.harnesses.spec.harness_warnings``).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, TypeVar

log = logging.getLogger(__name__)
S = TypeVar("S")


def rollout_seed(base: int, *parts: object) -> int:
    """The sampling seed of one training rollout: a hash of ``base`` (the stage's seed) and ``parts``
    (e.g. step, purpose, group, task id, rollout index), in [0, 2**31). Pure: a rerun of the stage
    samples the same seeds; different parts give independent-looking seeds."""
    key = "/".join(str(p) for p in (base, *parts))
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") >> 1


def without_fixed_seed(spec: S) -> S:
    """``spec`` with ``decoding.seed`` cleared (a new spec id), so each training rollout samples
    with its own seed; ``spec`` itself when it fixes none (or has no ``decoding``). Logs a warning
    when it clears one."""
    decoding: Any = getattr(spec, "decoding", None)
    if getattr(decoding, "seed", None) is None:
        return spec
    log.warning("harness %s fixes decoding.seed=%s: training ignores it and samples each rollout with its own "
                "seed (a fixed seed would make every rollout of a group sample alike)",
                str(getattr(spec, "id", ""))[:12], decoding.seed)
    return spec.model_copy(update={"decoding": decoding.model_copy(update={"seed": None})})  # type: ignore[attr-defined]
