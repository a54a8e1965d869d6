"""Sampling with the LoRA adapter merged into the base weights (``coevo.models.merged``,
``LocalEngine.merged``; issue 24), on a tiny random llama (nothing downloaded).

Pins: a fresh adapter (B = 0) samples bit-identical tokens and log-probs merged and unmerged; a
trained adapter samples the same tokens with log-probs equal up to float rounding; after the block
every base weight is the very tensor it was (no merge/unmerge drift) and the adapter path acts again;
a batch with a row on another adapter decodes unmerged; the merge is computed once per block and
again in the next block, after the weights changed; a DoRA adapter is left unmerged.
"""

from __future__ import annotations

import pytest
import torch
from langchain_core.messages import HumanMessage, SystemMessage
from peft import LoraConfig, get_peft_model
from test_local_model import tiny_llama, tiny_tokenizer  # noqa: E402

from coevo.models.local_engine import LocalEngine
from coevo.models.merged import MergedLora
from coevo.models.sampling import GenerationRequest

TASKS = ["what is 2 + 3?", "what is 9 - 4?", "name a colour", "x"]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def peft_model(tokenizer, trained: bool, **lora):
    model = get_peft_model(tiny_llama(tokenizer), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", **lora))
    if trained:
        torch.manual_seed(3)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.data.normal_(0, 0.05)
    return model


def requests(engine, temperature):
    prompts = [engine.render([SystemMessage("Answer briefly."), HumanMessage(t)]) for t in TASKS for _ in range(2)]
    return [GenerationRequest(prompt_ids=p, max_tokens=12, temperature=temperature, seed=5 + i)
            for i, p in enumerate(prompts)]


def decoded(engine, reqs, merged):
    if merged:
        with engine.merged():
            results = engine.generate_batch(reqs)
    else:
        results = engine.generate_batch(reqs)
    return [r.completion_token_ids for r in results], [r.logprobs for r in results]


def base_weights(model):
    return {n: p for n, p in model.named_parameters() if "base_layer.weight" in n}


def test_a_fresh_adapter_samples_bit_identical_tokens_merged(tokenizer):
    engine = LocalEngine(peft_model(tokenizer, trained=False), tokenizer)
    reqs = requests(engine, 0.9)
    assert decoded(engine, reqs, merged=True) == decoded(engine, reqs, merged=False)


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_a_trained_adapter_samples_the_same_tokens_merged_and_is_restored_after(tokenizer, temperature):
    model = peft_model(tokenizer, trained=True)
    engine = LocalEngine(model, tokenizer)
    reqs = requests(engine, temperature)
    before = {n: (p.data_ptr(), p.detach().clone()) for n, p in base_weights(model).items()}
    tokens, logprobs = decoded(engine, reqs, merged=False)
    merged_tokens, merged_logprobs = decoded(engine, reqs, merged=True)
    assert merged_tokens == tokens
    assert max(abs(a - b) for x, y in zip(logprobs, merged_logprobs) for a, b in zip(x, y)) < 1e-4
    base_only = get_peft_model(tiny_llama(tokenizer), LoraConfig(r=4, target_modules="all-linear"))  # B = 0
    assert decoded(LocalEngine(base_only, tokenizer), reqs, merged=False)[0] != tokens  # the adapter acts
    after = base_weights(model)
    for name, (ptr, value) in before.items():  # the same tensors, bit for bit: no merge/unmerge drift
        assert after[name].data_ptr() == ptr and torch.equal(after[name], value)
    assert not any(layer.merged for layer in MergedLora(model).layers)
    assert decoded(engine, reqs, merged=False) == (tokens, logprobs)  # the unmerged path is back


def test_the_merge_runs_once_per_block_and_sees_new_weights_in_the_next(tokenizer, monkeypatch):
    model = peft_model(tokenizer, trained=True)
    engine = LocalEngine(model, tokenizer)
    reqs = requests(engine, 0.0)[:2]
    refreshes = []
    original = MergedLora.refresh
    monkeypatch.setattr(MergedLora, "refresh", lambda self: (refreshes.append(1), original(self))[1])
    with engine.merged():
        first = engine.generate_batch(reqs)
        assert engine.generate_batch(reqs)[0].completion_token_ids == first[0].completion_token_ids
    assert len(refreshes) == 1
    with torch.no_grad():  # an optimiser step between two blocks
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.mul_(-3.0)
    unmerged = decoded(engine, reqs, merged=False)
    assert unmerged[0] != [r.completion_token_ids for r in first]
    assert decoded(engine, reqs, merged=True)[0] == unmerged[0]
    assert len(refreshes) == 2


def test_a_batch_with_a_row_on_another_adapter_decodes_unmerged(tokenizer, monkeypatch):
    model = peft_model(tokenizer, trained=True)
    model.add_adapter("other", LoraConfig(r=4, target_modules="all-linear"))
    model.set_adapter("default")
    engine = LocalEngine(model, tokenizer)
    swaps = []
    original = MergedLora.swapped
    monkeypatch.setattr(MergedLora, "swapped", lambda self: (swaps.append(1), original(self))[1])
    reqs = requests(engine, 0.0)[:2]
    mixed = [reqs[0], GenerationRequest(prompt_ids=reqs[1].prompt_ids, max_tokens=12, adapter="other")]
    alone = engine.generate_batch(mixed)
    with engine.merged():
        engine.generate_batch(reqs)
        together = engine.generate_batch(mixed)
    assert swaps == [1]  # the mixed batch ran through PEFT's per-row routing, unmerged
    assert [r.completion_token_ids for r in together] == [r.completion_token_ids for r in alone]


def test_a_plain_model_or_a_dora_adapter_is_left_unmerged(tokenizer):
    assert not MergedLora(tiny_llama(tokenizer)).supported
    dora = peft_model(tokenizer, trained=True, use_dora=True)
    assert not MergedLora(dora).supported
    engine = LocalEngine(dora, tokenizer)
    reqs = requests(engine, 0.0)[:2]
    assert decoded(engine, reqs, merged=True) == decoded(engine, reqs, merged=False)


def test_a_batch_all_on_one_other_adapter_runs_it_as_the_active_one(tokenizer, monkeypatch):
    """A whole batch on an adapter that is not PEFT's active one (an evaluation under the newest checkpoint
    while an older one is active) switches the active adapter instead of PEFT's per-row routing (about
    3x slower on CPU), with the tokens that routing gives; the next batch naming no adapter gets the
    engine's own active adapter back."""
    model = peft_model(tokenizer, trained=True)
    model.add_adapter("other", LoraConfig(r=4, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B.other" in name:
                p.normal_(0, 0.05)
    model.set_adapter("default")
    engine = LocalEngine(model, tokenizer)
    reqs = requests(engine, 0.0)[:2]
    on_other = [GenerationRequest(prompt_ids=r.prompt_ids, max_tokens=12, adapter="other") for r in reqs]
    routed = engine.generate_batch([reqs[0], on_other[0]])  # mixed: per-row routing
    seen = []
    import coevo.models.local_engine as local_engine
    original = local_engine.decode
    monkeypatch.setattr(local_engine, "decode", lambda *a, **k: (seen.append(k["adapter_names"]), original(*a, **k))[1])
    alone = engine.generate_batch(on_other)
    assert seen == [None] and model.active_adapter == "other"
    assert alone[0].completion_token_ids == routed[1].completion_token_ids
    default = engine.generate_batch(reqs)
    assert seen[-1] is None and model.active_adapter == "default"
    assert default[0].completion_token_ids == routed[0].completion_token_ids
    assert default[0].completion_token_ids != alone[0].completion_token_ids  # the two adapters differ
