"""Per-row decoding for the local backend's batches (docs/design.md, Models).

A ``GenerationRequest`` is one completion to decode and a ``GenerationResult`` what came back.
Rows decoded together (``coevo.models.decode``) keep their own settings: ``RowSampler`` picks
every row's next token itself (argmax when ``temperature == 0``, else sampling from
``softmax(logits / T)``, restricted to the top-p nucleus when ``top_p < 1``, with a per-row
``torch.Generator`` seeded with the request's seed) and records the token's logprob under that
row's sampling distribution. ``RowStop`` ends each row at EOS, a stop string or its own
``max_tokens``. So a row's output does not depend on what it was batched with, and batched greedy
equals unbatched greedy (up to floating-point summation order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch


@dataclass
class GenerationRequest:
    """One completion to decode. ``prompt_ids``: the templated prompt's token ids (unpadded);
    ``temperature == 0`` means greedy; ``seed`` ``None`` means a fresh random seed; ``stop``:
    strings that end the completion (excluded from the text, kept in the token ids); ``adapter`` a
    name from ``LocalEngine.add_adapter`` (``None``: the engine's active adapter); ``json_schema`` a
    JSON schema the completion is decoded under (``coevo.models.constrained``; ``None``: free)."""

    prompt_ids: list[int]
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    adapter: str | None = None
    json_schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("GenerationRequest.prompt_ids is empty: the rendered prompt has no tokens")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class GenerationResult:
    """A decoded completion: ``completion_token_ids`` (including a final EOS or stop-string
    tokens when generated), ``logprobs`` (same length, natural log, under the row's sampling
    distribution), ``text`` (EOS and stop string removed), ``finish_reason`` ``"stop"`` or
    ``"length"``."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


class RowSampler:
    """Choose each row's next token with that row's own settings and record it with its logprob.

    Greedy rows (temperature 0) take the argmax of the raw logits and record its logprob under
    ``softmax(logits)``; sampling rows draw from ``softmax(logits / T)`` (restricted to the top-p
    nucleus and renormalised when ``top_p < 1``) with their own ``torch.Generator``. A row with
    ``top_p == 1`` samples from the full softmax: no sort, and no float-rounding cut of the
    distribution's tail (a cumulative sum that reaches 1.0 early dropped up to ~1e-4 of its mass).

    Args: ``requests`` one per batch row, in row order; ``device`` where the logits live; ``rng``
    seeds the generator of a sampling row whose request has no ``seed``. ``tokens[r]`` and
    ``logprobs[r]`` hold row ``r``'s picks so far.
    """

    def __init__(self, requests: Sequence[GenerationRequest], device: torch.device, rng: random.Random):
        self.temps = [r.temperature for r in requests]
        self.top_p = [r.top_p for r in requests]
        self.generators: list[torch.Generator | None] = []
        for r in requests:
            if r.temperature > 0:
                g = torch.Generator(device=device)
                g.manual_seed(r.seed if r.seed is not None else rng.getrandbits(63))
                self.generators.append(g)
            else:
                self.generators.append(None)
        self.tokens: list[list[int]] = [[] for _ in requests]
        self.logprobs: list[list[float]] = [[] for _ in requests]

    def pick(self, scores: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """One decoding step for batch rows ``rows`` (original row indices, in the order of
        ``scores``' rows): ``scores`` ``(b, V)`` next-token logits -> ``(b,)`` chosen token ids,
        also appended with their logprobs (natural log, under the row's sampling distribution)
        to ``tokens``/``logprobs``."""
        scores = scores.float()
        chosen = scores.argmax(dim=-1)
        logp = torch.log_softmax(scores, dim=-1)
        sampled = [i for i, r in enumerate(rows) if self.generators[r] is not None]
        if sampled:
            index = torch.tensor(sampled, device=scores.device)
            temps = torch.tensor([self.temps[rows[i]] for i in sampled], dtype=torch.float32, device=scores.device)
            warped = scores[index] / temps[:, None]
            top_p = torch.tensor([self.top_p[rows[i]] for i in sampled], dtype=torch.float32, device=scores.device)
            if bool((top_p < 1).any()):
                warped = torch.where((top_p < 1)[:, None], _nucleus(warped, top_p), warped)
            warped_logp = torch.log_softmax(warped, dim=-1)
            for j, i in enumerate(sampled):
                chosen[i] = torch.multinomial(warped_logp[j].exp(), 1, generator=self.generators[rows[i]])[0]
                logp[i] = warped_logp[j]
        picked = logp.gather(-1, chosen[:, None])[:, 0].tolist()
        for r, token, lp in zip(rows, chosen.tolist(), picked):
            self.tokens[r].append(token)
            self.logprobs[r].append(lp)
        return chosen


def _nucleus(warped: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """``warped`` ``(b, V)`` with every token outside each row's top-p nucleus set to ``-inf`` (the
    smallest set of most likely tokens whose probability reaches ``top_p``; always >= 1 token)."""
    sorted_logits, order = warped.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    outside = (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
    sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
    return torch.full_like(warped, float("-inf")).scatter(-1, order, sorted_logits)


class RowStop:
    """Per-row end: EOS, a stop string completed in the row's text, or its own ``max_tokens``.

    ``check(row, tokens)`` after each step says whether row ``row`` (its generated ``tokens`` so
    far) has ended and records why in ``reasons`` (``"stop"`` or ``"length"``). ``eos_ids`` the
    end-of-sequence token ids; ``tokenizer`` decodes the tail of a row to look for its stop strings.
    """

    def __init__(self, requests: Sequence[GenerationRequest], eos_ids: set[int], tokenizer: Any):
        self.requests = list(requests)
        self.eos_ids = eos_ids
        self.tokenizer = tokenizer
        self.reasons: list[str] = ["length"] * len(requests)

    def check(self, row: int, tokens: list[int]) -> bool:
        """True when row ``row`` has ended with ``tokens`` generated (its reason recorded)."""
        req = self.requests[row]
        if tokens and tokens[-1] in self.eos_ids or req.stop and self._hit_stop(tokens, req.stop):
            self.reasons[row] = "stop"
            return True
        return len(tokens) >= req.max_tokens

    def _hit_stop(self, generated: list[int], stops: list[str]) -> bool:
        window = max(len(s) for s in stops) + 2  # every token decodes to >= 1 character
        tail = self.tokenizer.decode(generated[-window:], skip_special_tokens=False)
        return any(s in tail for s in stops)
