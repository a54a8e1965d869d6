"""Per-row decoding for the local backend's batches (DESIGN.md, Models).

A ``GenerationRequest`` is one completion to decode and a ``GenerationResult`` what came back.
Rows batched into one left-padded ``generate`` call keep their own settings: ``RowSampler`` (a
``LogitsProcessor``) picks every row's next token itself (argmax when ``temperature == 0``, else
temperature + top-p sampling from a per-row ``torch.Generator`` seeded with the request's seed)
and records the token's logprob under that row's sampling distribution; ``generate`` then follows
the pick. ``RowStop`` ends each row at EOS, a stop string or its own ``max_tokens``. So a row's
output does not depend on what it was batched with, and batched greedy equals unbatched greedy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from transformers import LogitsProcessor, StoppingCriteria


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


class RowSampler(LogitsProcessor):
    """Choose each row's next token with that row's own settings and record its logprob.

    Greedy rows (temperature 0) take the argmax of the raw logits and record its logprob under
    ``softmax(logits)``; sampling rows draw from ``softmax(logits / T)`` restricted to the top-p
    nucleus (renormalised), from their own ``torch.Generator``. Returns scores that are ``-inf``
    everywhere but the chosen token, so ``generate``'s argmax follows the choice.

    Args: ``requests`` one per batch row, in row order; ``device`` where the logits live; ``rng``
    seeds the generator of a sampling row whose request has no ``seed``. After ``generate``,
    ``tokens`` and ``logprobs`` hold one ``(B,)`` tensor per decoding step.
    """

    def __init__(self, requests: Sequence[GenerationRequest], device: torch.device, rng: random.Random):
        self.temps = torch.tensor([r.temperature for r in requests], dtype=torch.float32, device=device)
        self.top_p = torch.tensor([r.top_p for r in requests], dtype=torch.float32, device=device)
        self.sampled = [r.temperature > 0 for r in requests]
        self.generators: list[torch.Generator | None] = []
        for r in requests:
            if r.temperature > 0:
                g = torch.Generator(device=device)
                g.manual_seed(r.seed if r.seed is not None else rng.getrandbits(63))
                self.generators.append(g)
            else:
                self.generators.append(None)
        self.tokens: list[torch.Tensor] = []  # one (B,) tensor per step
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """One decoding step: ``scores`` ``(B, V)`` next-token logits -> ``(B, V)`` scores that are 0
        at each row's chosen token and ``-inf`` elsewhere; appends the chosen ids and their logprobs
        (natural log, under the row's sampling distribution) to ``tokens``/``logprobs``.
        ``input_ids`` ``(B, T)`` is unused."""
        scores = scores.float()
        chosen = scores.argmax(dim=-1)
        logp = torch.log_softmax(scores, dim=-1)
        if any(self.sampled):
            temps = torch.where(self.temps > 0, self.temps, torch.ones_like(self.temps))
            warped = scores / temps[:, None]
            sorted_logits, order = warped.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(dim=-1)
            outside = (probs.cumsum(dim=-1) - probs) >= self.top_p[:, None]  # keeps >= 1 token
            sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
            warped = torch.full_like(warped, float("-inf")).scatter(-1, order, sorted_logits)
            warped_logp = torch.log_softmax(warped, dim=-1)
            for row, generator in enumerate(self.generators):
                if generator is not None:
                    probs_row = warped_logp[row].exp()
                    chosen[row] = torch.multinomial(probs_row, 1, generator=generator)[0]
                    logp[row] = warped_logp[row]
        self.tokens.append(chosen.clone())
        self.logprobs.append(logp.gather(-1, chosen[:, None])[:, 0])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(-1, chosen[:, None], 0.0)


class RowStop(StoppingCriteria):
    """Per-row end: EOS, a stop string completed in the row's text, or its own ``max_tokens``.

    Records for each row the number of generated tokens it keeps (``ends``, ``None`` while it
    runs) and why (``reasons``: ``"stop"`` or ``"length"``). ``prompt_width`` is the padded prompt
    length in tokens; ``eos_ids`` the end-of-sequence token ids; ``tokenizer`` decodes the tail of
    a row to look for its stop strings.
    """

    def __init__(self, requests: Sequence[GenerationRequest], prompt_width: int, eos_ids: set[int], tokenizer: Any):
        self.requests = list(requests)
        self.width = prompt_width
        self.eos_ids = eos_ids
        self.tokenizer = tokenizer
        self.ends: list[int | None] = [None] * len(requests)
        self.reasons: list[str] = ["length"] * len(requests)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        """After a decoding step: ``input_ids`` ``(B, T)`` prompt plus generated tokens -> ``(B,)``
        booleans, True for each row that has ended (EOS, a stop string, or ``max_tokens``); records
        the row's kept length in ``ends`` and why in ``reasons`` the first time it ends."""
        n = input_ids.shape[1] - self.width
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        last = input_ids[:, -1].tolist()
        for row, req in enumerate(self.requests):
            if self.ends[row] is not None:
                done[row] = True
                continue
            if last[row] in self.eos_ids:
                self.ends[row], self.reasons[row] = n, "stop"
            elif req.stop and self._hit_stop(input_ids[row, self.width:], req.stop):
                self.ends[row], self.reasons[row] = n, "stop"
            elif n >= req.max_tokens:
                self.ends[row] = n
            done[row] = self.ends[row] is not None
        return done

    def _hit_stop(self, generated: torch.Tensor, stops: list[str]) -> bool:
        window = max(len(s) for s in stops) + 2  # every token decodes to >= 1 character
        tail = self.tokenizer.decode(generated[-window:].tolist(), skip_special_tokens=False)
        return any(s in tail for s in stops)
