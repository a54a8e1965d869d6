"""The local engine's decoding loop (docs/design.md, Models): one batch of requests decoded together.

What ``model.generate`` does for a left-padded batch, with each row's own sampler and stop rule
(``coevo.models.sampling``), and two differences that leave every row's distribution unchanged:

- **shared prefix, prefilled once.** Rows with the same prompt (the K rollouts of a GRPO group)
  prefill it once and copy its KV cache; the longest prompt prefix that the distinct prompts share
  (a harness's system prompt and demonstrations are the same across a step's tasks) is run through
  the model once, its KV cache repeated to every distinct prompt, and each prefills only the rest.
  The layout is ``[prefix | padding | suffix]`` with the padding masked and positions counted over
  unmasked tokens, so each row sees exactly the positions and attention a left-padded prefill gives
  it (logits equal up to floating-point summation order).
- **finished rows leave the batch.** A row that hit EOS, a stop string or its ``max_tokens`` is
  dropped from the cache and from later forward passes, instead of decoding padding until the
  batch's longest row ends.

The model is called through its public forward (``input_ids``, ``attention_mask``,
``position_ids``, a ``DynamicCache``, ``logits_to_keep``); PEFT's ``adapter_names`` route each row to
its LoRA adapter (mixed-adapter batches share no prefix). Logits processors (a JSON-schema mask,
``coevo.models.constrained``) run before the row sampler and see the batch as ``generate`` shows it:
every row in its original place, the left-padded prompts plus the tokens so far, a finished row
extended with padding.
"""

from __future__ import annotations

import inspect
import random
from functools import lru_cache
from typing import Any, Callable, Sequence

import torch
from transformers import DynamicCache

from coevo.models.loading import base_model
from coevo.models.sampling import GenerationRequest, RowSampler, RowStop

MIN_SHARED_PREFIX = 16
"""Shortest common prompt prefix (tokens) worth a separate prefill."""


def shared_prefix_length(prompts: Sequence[Sequence[int]], minimum: int = MIN_SHARED_PREFIX) -> int:
    """Tokens at the start of every prompt in ``prompts`` that all share, capped so that each
    prompt keeps at least one token of its own (the prefill must end on each row's last prompt
    token); 0 when that is under ``minimum`` tokens or there are fewer than two prompts."""
    if len(prompts) < 2:
        return 0
    n = min(len(p) for p in prompts) - 1
    first = prompts[0]
    for p in prompts[1:]:
        n = next((i for i in range(n) if p[i] != first[i]), n)
    return n if n >= minimum else 0


@lru_cache(maxsize=16)
def cache_keyword(model_class: type) -> str:
    """The forward keyword of a model's KV cache: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


class _Forward:
    """The model's forward over some rows with a cache: last-position logits ``(b, V)``."""

    def __init__(self, model: Any, adapter_names: list[str] | None) -> None:
        self.model = model
        base = base_model(model)
        self.cache = DynamicCache(config=base.config)
        self.keyword = cache_keyword(type(base))
        self.adapter_names = adapter_names

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                 rows: Sequence[int]) -> torch.Tensor:
        extra = {"adapter_names": [self.adapter_names[r] for r in rows]} if self.adapter_names else {}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         logits_to_keep=1, **{self.keyword: self.cache}, **extra)
        return out.logits[:, -1, :]


Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""A ``transformers`` logits processor: ``(input_ids (B, T), scores (B, V)) -> scores (B, V)``."""


def decode(model: Any, requests: Sequence[GenerationRequest], *, pad_id: int, eos_ids: set[int], tokenizer: Any,
           rng: random.Random, adapter_names: list[str] | None = None, share_prefix: bool = True,
           processors: Sequence[Processor] = ()) -> tuple[RowSampler, RowStop]:
    """Decode ``requests`` together on ``model`` (eval mode, without autograd; see module docstring).

    ``adapter_names`` (one PEFT adapter name per row, ``"__base__"`` for the base weights) routes rows of a
    mixed-adapter batch; ``share_prefix`` prefills a common prompt prefix once; ``processors`` change each
    step's scores before the row sampler picks (in order, over the whole batch). Returns the
    ``RowSampler`` (each row's ``tokens`` and ``logprobs``, its final EOS or stop-string tokens
    included) and the ``RowStop`` (each row's ``reasons``: ``"stop"`` or ``"length"``).
    """
    device = next(model.parameters()).device
    sampler = RowSampler(requests, device, rng)
    stop = RowStop(requests, eos_ids, tokenizer)
    forward = _Forward(model, adapter_names)
    prompts = [r.prompt_ids for r in requests]
    rows = list(range(len(requests)))
    # rows with the same prompt (a GRPO group's K rollouts) prefill once; their caches are copied after
    unique, inverse = _unique_rows(prompts, adapter_names) if share_prefix else (rows, rows)
    firsts = [prompts[r] for r in unique]
    p = shared_prefix_length(firsts) if share_prefix and not adapter_names else 0
    if p:
        prefix = torch.tensor([firsts[0][:p]], dtype=torch.long, device=device)
        forward(prefix, torch.ones_like(prefix), torch.arange(p, device=device)[None], unique[:1])
        forward.cache.batch_repeat_interleave(len(unique))
    width = max(len(q) - p for q in firsts)
    ids = torch.full((len(unique), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(unique), p + width), dtype=torch.long)
    mask[:, :p] = 1
    for row, q in enumerate(firsts):
        ids[row, width - len(q) + p:] = torch.tensor(q[p:], dtype=torch.long)
        mask[row, p + width - len(q) + p:] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = forward(ids, mask, positions[:, p:], unique)
    if len(unique) < len(rows):
        index = torch.tensor(inverse, device=device)
        forward.cache.batch_select_indices(index)
        logits, mask, positions = logits[index], mask[index], positions[index]
    last = positions[:, -1]
    history = _left_padded(prompts, pad_id).to(device) if processors else None
    while True:
        if history is not None:
            logits = _processed(processors, history, logits, rows)
        chosen = sampler.pick(logits, rows)
        if history is not None:
            step = torch.full((len(requests), 1), pad_id, dtype=torch.long, device=device)
            step[rows, 0] = chosen
            history = torch.cat([history, step], dim=1)
        keep = [i for i, r in enumerate(rows) if not stop.check(r, sampler.tokens[r])]
        if not keep:
            return sampler, stop
        if len(keep) < len(rows):
            index = torch.tensor(keep, device=device)
            forward.cache.batch_select_indices(index)
            rows, chosen, mask, last = [rows[i] for i in keep], chosen[index], mask[index], last[index]
        mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
        last = last + 1
        logits = forward(chosen[:, None], mask, last[:, None], rows)


def _unique_rows(prompts: Sequence[Sequence[int]], adapter_names: list[str] | None) -> tuple[list[int], list[int]]:
    """``(unique, inverse)``: the first row of each distinct (prompt, adapter) and, for every row, the
    position in ``unique`` of its first occurrence."""
    first: dict[tuple, int] = {}
    inverse = [first.setdefault((tuple(q), adapter_names[r] if adapter_names else None), len(first))
               for r, q in enumerate(prompts)]
    unique = [0] * len(first)
    for r, u in reversed(list(enumerate(inverse))):
        unique[u] = r
    return unique, inverse


def _left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """``prompts`` as one ``(B, T)`` tensor, left-padded with ``pad_id`` (how ``generate`` holds them)."""
    width = max(len(q) for q in prompts)
    out = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    for row, q in enumerate(prompts):
        out[row, width - len(q):] = torch.tensor(q, dtype=torch.long)
    return out


def _processed(processors: Sequence[Processor], history: torch.Tensor, logits: torch.Tensor,
               rows: Sequence[int]) -> torch.Tensor:
    """``logits`` ``(b, V)`` of the live ``rows`` after ``processors``, which see the whole batch:
    ``history`` ``(B, T)`` and scores ``(B, V)`` (0 for rows that have ended)."""
    index = torch.tensor(list(rows), device=logits.device)
    scores = logits.new_zeros((history.size(0), logits.size(1))).index_copy(0, index, logits)
    for processor in processors:
        scores = processor(history, scores)
    return scores[index]
