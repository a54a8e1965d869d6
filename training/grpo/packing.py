"""Prefix-shared scoring of a GRPO micro-batch: every shared prompt token runs through the model once.

The rows of a generation batch share most of their tokens: the K rows of a group have the same
prompt, and all rows the harness's system prompt and demonstrations. A token's hidden state
depends only on the tokens before it in its own row (causal attention), so the rows are packed into
one sequence (``pack``): a trie of the rows' prompts without each prompt's last token (every shared
token once), then each row's own tail (its last prompt token and its completion but the final
token, the positions whose next token is scored). Each packed token attends to its ancestors in the
trie and its row's tail (a 4D attention mask) at its position in its row (position ids), so every
row's hidden states, log-probs, entropies and gradients are those of the row run alone, up to
floating-point summation order; a batch whose rows share a 100-token prompt costs 100 tokens, not
100 per row. Tree attention over a shared prefix as in Medusa (Cai et al. 2024, §2.1.2) and
SpecInfer (Miao et al. 2024, §4); used here for the policy-gradient forward and backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from coevo.models.loading import base_model


@dataclass
class Packed:
    """A packed micro-batch: ``ids``, ``positions`` and ``labels`` ``(1, N)`` (label ``-100`` where
    nothing is scored), ``parents`` ``(N,)`` (each token's predecessor in its row, ``-1`` for a row's
    first), and ``index`` ``(B, C)``: the packed position scoring each completion token (``-1`` for
    padding)."""

    ids: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    parents: torch.Tensor
    index: torch.Tensor

    def attention_mask(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The ``(1, 1, N, N)`` mask: token ``i`` attends to ``j`` iff ``j`` is ``i`` or one of its
        ancestors. Boolean (True = attend) by default; with a float ``dtype``, additive (0 or the
        dtype's minimum), as eager attention wants it."""
        n = self.ids.size(1)
        allowed = torch.zeros((n, n), dtype=torch.bool)
        for i, parent in enumerate(self.parents.tolist()):
            if parent >= 0:
                allowed[i] = allowed[parent]
            allowed[i, i] = True
        if dtype is None or dtype == torch.bool:
            return allowed[None, None]
        return torch.zeros((n, n), dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_length: int) -> Packed:
    """Pack rows ``input_ids`` ``(B, P + C)`` (prompts left-padded to ``P``, completions of width
    ``C = completion_length`` right-padded; ``attention_mask`` 1 on real tokens) as the module
    docstring says. Rows whose prompts share a prefix share its tokens; nothing else is shared."""
    width = input_ids.size(1) - completion_length
    rows = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids.cpu(), attention_mask.cpu())]
    prompt_lengths = attention_mask[:, :width].sum(1).tolist()
    ids: list[int] = []
    positions: list[int] = []
    parents: list[int] = []
    labels: list[int] = []
    trie: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
    index = torch.full((len(rows), completion_length), -1, dtype=torch.long)

    def add(token: int, position: int, parent: int, label: int) -> int:
        ids.append(token)
        positions.append(position)
        parents.append(parent)
        labels.append(label)
        return len(ids) - 1

    for r, (row, p) in enumerate(zip(rows, prompt_lengths)):
        node = -1
        for k in range(max(0, p - 1)):  # the shared part: the prompt without its last token
            key = (node, row[k])
            if key not in trie:
                trie[key] = add(row[k], k, node, -100)
            node = trie[key]
        for j, k in enumerate(range(max(0, p - 1), len(row) - 1)):  # the row's own tail
            node = add(row[k], k, node, row[k + 1])
            index[r, j] = node
    as_row = lambda values: torch.tensor([values], dtype=torch.long)  # noqa: E731
    return Packed(ids=as_row(ids), positions=as_row(positions), labels=as_row(labels),
                  parents=torch.tensor(parents, dtype=torch.long), index=index)


def packed_logps(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_length: int,
                 compute_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) ``(B, C)`` of the completion tokens of ``input_ids``
    (laid out as ``pack`` says), from one forward of the packed rows through ``model``, a causal LM
    with TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``: ``fused_lm_head=True`` and
    ``shift_labels`` give temperature-scaled log-probs per position). Padding positions get 0, as
    in TRL's own ``_get_per_token_logps_and_entropies``. Differentiable."""
    packed = pack(input_ids, attention_mask, completion_length)
    device = input_ids.device
    base = base_model(model)
    eager = getattr(base.config, "_attn_implementation", "sdpa") == "eager"
    mask = packed.attention_mask(next(model.parameters()).dtype if eager else None).to(device)
    out = model(input_ids=packed.ids.to(device), attention_mask=mask, position_ids=packed.positions.to(device),
                shift_labels=packed.labels.to(device), fused_lm_head=True, use_cache=False)
    index = packed.index.to(device)
    real = index >= 0

    def unpack(values: torch.Tensor) -> torch.Tensor:
        return torch.where(real, values[0][index.clamp(min=0)], torch.zeros((), dtype=values.dtype, device=device))

    entropy = unpack(out.entropy) if compute_entropy and out.entropy is not None else None
    return unpack(out.log_probs), entropy
