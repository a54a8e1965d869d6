"""The loss of an RSFT step (WHALE §3.1; ``coevo.training.rsft``): the token-normalised NLL of the policy tokens
of a minibatch of rows, each prompt's forward run once for the rows that share it and only the positions that
predict a policy token projected onto the vocabulary. EvoHarness-RL's harness SFT, Harness-R1's engineer SFT and
CoEvo-RSI's adaptation train on it through ``coevo.training.rsft.sft_epochs``."""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any, Sequence

import torch

from coevo.models.loading import base_model
from coevo.training.grpo.samples import Row


def sft_loss(model: Any, rows: Sequence[Row], tokens: int | None = None) -> torch.Tensor:
    """Token-normalised NLL of the policy tokens of ``rows``: ``-sum(log p) / tokens`` (default: the
    rows' own ``policy_tokens``; a micro-step of a split minibatch passes the whole minibatch's, so its
    micro-steps' losses and gradients add up to the minibatch's) over the rows (prompt and masked
    completion positions carry no loss; ``env_mask`` holds 1 for a policy token, 0 otherwise). Raises
    ``ValueError`` when the rows hold no policy token.

    Two savings, each with the same loss and gradients up to float rounding:

    - Only the positions that predict a policy token are projected onto the vocabulary (transformers'
      ``logits_to_keep`` as a boolean mask; a model without it projects every position and drops the
      rest): no prompt's logits (rows x tokens x vocabulary x 4 bytes, for SmolLM2-135M 0.9 GB a
      minibatch of 8 rows of 600 tokens, several times over in log-softmax and backward), and not their
      share of the compute (the vocabulary projection is about a fifth of SmolLM2-135M's forward).
    - Rows that share a prompt (a task's rollouts) run its forward once (``shares_prompts``): its KV
      cache is repeated to their completions, and the gradient through the repetition sums theirs.

    On SmolLM2-135M with LoRA, a step of 4 rows of 280 prompt and 16 policy tokens from 2 tasks took 10.6 s
    and peaked at 2.59 GB RSS, against 15.0-16.0 s and 3.85 GB with each row its own forward and 22.1-22.7 s
    and 4.69 GB projecting every position, as before (``benchmarks/sft_step.py``, CPU, one thread, beside
    other work)."""
    n = sum(1 for r in rows for m in r.env_mask if m)
    if n == 0:
        raise ValueError("sft_loss: the minibatch has no policy tokens")
    logp = _shared_prompt_logp(model, rows) if shares_prompts(model, rows) else _row_logp(model, rows)
    return -logp / (tokens or n)


def _row_logp(model: Any, rows: Sequence[Row]) -> torch.Tensor:
    """The summed log-prob of the policy tokens of ``rows``, each row its own right-padded sequence."""
    device = next(model.parameters()).device
    seqs = [r.prompt_ids + r.completion_ids for r in rows]
    width = max(map(len, seqs))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels_mask = torch.zeros_like(ids, dtype=torch.bool)
    for i, (r, s) in enumerate(zip(rows, seqs)):
        ids[i, :len(s)] = torch.tensor(s)
        attn[i, :len(s)] = 1
        labels_mask[i, len(r.prompt_ids):len(s)] = torch.tensor(r.env_mask, dtype=torch.bool)
    ids, attn, labels_mask = ids.to(device), attn.to(device), labels_mask.to(device)
    predicts = torch.zeros_like(labels_mask)  # position t predicts token t + 1
    predicts[:, :-1] = labels_mask[:, 1:]
    if keeps_logits(model):
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False, logits_to_keep=predicts).logits
    else:
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[predicts]
    targets = ids[:, 1:][labels_mask[:, 1:]]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).sum()


def _shared_prompt_logp(model: Any, rows: Sequence[Row]) -> torch.Tensor:
    """``_row_logp`` with each distinct prompt's forward run once: its last position's logits predict
    every member's first completion token, and its KV cache, repeated to the members, carries their
    right-padded completions."""
    from transformers import DynamicCache

    from coevo.models.decode import cache_keyword

    device = next(model.parameters()).device
    base = base_model(model)
    groups: dict[tuple[int, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault(tuple(r.prompt_ids), []).append(r)
    total = torch.zeros((), device=device)
    for prompt, group in groups.items():
        width = max(len(r.completion_ids) for r in group)
        if not width:  # only empty completions: nothing to predict
            continue
        cache = DynamicCache(config=base.config)
        keyword = {cache_keyword(type(base)): cache}
        first = model(input_ids=torch.tensor([prompt], device=device), use_cache=True, logits_to_keep=1,
                      **keyword).logits[0, -1]
        cache.batch_repeat_interleave(len(group))
        ids = torch.zeros((len(group), width), dtype=torch.long)
        attn = torch.zeros((len(group), len(prompt) + width), dtype=torch.long)
        attn[:, :len(prompt)] = 1
        mask = torch.zeros((len(group), width), dtype=torch.bool)
        for i, r in enumerate(group):
            ids[i, :len(r.completion_ids)] = torch.tensor(r.completion_ids)
            attn[i, len(prompt):len(prompt) + len(r.completion_ids)] = 1
            mask[i, :len(r.completion_ids)] = torch.tensor(r.env_mask, dtype=torch.bool)
        ids, attn, mask = ids.to(device), attn.to(device), mask.to(device)
        total = total + torch.log_softmax(first.float(), dim=-1)[ids[:, 0][mask[:, 0]]].sum()
        predicts = torch.zeros_like(mask)
        predicts[:, :-1] = mask[:, 1:]
        if not predicts.any():  # every policy token is a first token: the prompt's logits were all it took
            continue
        positions = torch.arange(len(prompt), len(prompt) + width, device=device).expand(len(group), width)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True,
                       logits_to_keep=predicts, **keyword).logits
        total = total + torch.log_softmax(logits.float(), dim=-1).gather(
            -1, ids[:, 1:][mask[:, 1:]].unsqueeze(-1)).sum()
    return total


def shares_prompts(model: Any, rows: Sequence[Row]) -> bool:
    """Whether ``sft_loss`` runs a shared prompt's forward once for its rows: some prompt repeats, none is
    empty, the model's forward takes ``logits_to_keep`` and a KV cache, and in training mode neither
    activation checkpointing (under which transformers' layers keep no cache, so the completions would lose
    their prompt) nor any dropout is on (a dropout module or a ``*dropout``/``*pdrop`` rate in the model's
    config: a shared forward would share its mask between the rows)."""
    from coevo.models.decode import cache_keyword

    prompts = [tuple(r.prompt_ids) for r in rows]
    if len(set(prompts)) == len(prompts) or not all(prompts) or not keeps_logits(model):
        return False
    base = base_model(model)
    if not _forward_takes(type(base), cache_keyword(type(base))):
        return False
    if not model.training:
        return True
    rates = getattr(base, "config", None)
    rates = rates.to_dict() if rates is not None else {}
    if any(isinstance(v, float) and v > 0 for k, v in rates.items() if k.endswith(("dropout", "pdrop"))):
        return False
    return not any(getattr(m, "gradient_checkpointing", False) is True
                   or isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def keeps_logits(model: Any) -> bool:
    """Whether ``model``'s forward (under a PEFT wrapper, its base model's) takes ``logits_to_keep``."""
    base = base_model(model)
    return _forward_takes(type(base), "logits_to_keep")


@lru_cache(maxsize=None)
def _forward_takes(model_class: type, name: str) -> bool:
    return name in inspect.signature(model_class.forward).parameters
