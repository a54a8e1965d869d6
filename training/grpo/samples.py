"""Trajectories -> training rows: ``prompt_ids | completion_ids`` with a policy-token mask.

A row is one ``Segment`` of a trajectory (``Trajectory.segments``: a prefix-preserving chain of
model calls) cut at its first policy token: everything before it is the row's prompt, the rest
its completion, and ``env_mask`` marks which completion tokens the policy sampled (1) versus tool
observations, hook injections and chat-template glue (0). That is the shape of TRL's
``rollout_func`` output (``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask``).
A trajectory whose context was rewritten yields several rows; each keeps the trajectory's
advantage and its task index (Harness-S §7: each token keeps its generating context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from coevo.models.trajectory import Segment, Trajectory


@dataclass
class Row:
    """One training sequence. ``completion_ids``, ``env_mask`` and ``logprobs`` share a length;
    ``logprobs`` holds the sampler's log-prob on policy tokens (0.0 elsewhere)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    advantage: float
    task_index: int

    @property
    def policy_tokens(self) -> int:
        """Number of completion positions that carry loss."""
        return sum(self.env_mask)


def segment_row(segment: Segment, advantage: float, task_index: int, max_len: int | None = None) -> Row | None:
    """Cut ``segment`` at its first policy token into a ``Row``; ``None`` when it has no policy token.

    ``max_len`` (tokens, prompt + completion) drops the tail beyond it; a segment whose prompt alone
    reaches ``max_len`` gives ``None``.
    """
    try:
        start = segment.loss_mask.index(1)
    except ValueError:
        return None
    ids, mask, lps = segment.input_ids, segment.loss_mask, segment.logprobs
    end = len(ids) if max_len is None else min(len(ids), max_len)
    if end <= start:
        return None
    return Row(
        prompt_ids=list(ids[:start]),
        completion_ids=list(ids[start:end]),
        env_mask=list(mask[start:end]),
        logprobs=list(lps[start:end]),
        advantage=advantage,
        task_index=task_index,
    )


def trajectory_rows(
    trajectory: Trajectory, advantage: float, task_index: int, max_len: int | None = None,
    turns: Collection[int] | None = None,
) -> list[Row]:
    """All rows of one trajectory (one per segment with policy tokens), each with ``advantage``;
    with ``turns`` (1-based model-call numbers) only those calls' tokens carry loss
    (``Trajectory.segments``).

    Raises ``MissingTokensError`` (``Trajectory.require_tokens``) when its model calls came from a
    server that could not return the sampled token ids: such a trajectory cannot be trained on."""
    trajectory.require_tokens()
    rows = (segment_row(s, advantage, task_index, max_len) for s in trajectory.segments(turns))
    return [r for r in rows if r is not None]


def rollout_output(rows: list[Row]) -> dict[str, list]:
    """Rows as TRL's ``rollout_func`` output dict plus coevo's per-row ``advantages`` and ``task_index``."""
    return {
        "prompt_ids": [r.prompt_ids for r in rows],
        "completion_ids": [r.completion_ids for r in rows],
        "logprobs": [r.logprobs for r in rows],
        "env_mask": [r.env_mask for r in rows],
        "advantages": [r.advantage for r in rows],
        "task_index": [r.task_index for r in rows],
    }
