"""The local engine's decoding loop (``coevo.models.decode``) and batching of clients, on a tiny
random llama (nothing downloaded).

Pins: a prompt prefix shared by a batch's rows is prefilled once, and a prompt that several rows
have is prefilled once for them, changing no row's tokens or log-probs (greedy rows equal their
unshared and unbatched runs, seeded sampled rows equal their unshared runs, log-probs equal teacher
forcing); finished rows leave the batch; the sampler draws
from the full temperature-scaled softmax when ``top_p == 1``; rollouts that run as the engine's
clients share one ``generate`` call even when they submit further apart than the batch window.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import torch
from langchain_core.messages import HumanMessage, SystemMessage
from test_local_model import teacher_forced_logprobs, tiny_llama, tiny_tokenizer  # noqa: E402

from coevo.models.base import TOKENS_KEY
from coevo.models.decode import shared_prefix_length
from coevo.models.local import LocalChatModel
from coevo.models.sampling import GenerationRequest, RowSampler

SYSTEM = "You are a careful problem solver. End your reply with one line 'Final answer: <answer>'."
TASKS = ["what is 2 + 3?", "what is 9 - 4?", "what is 1 + 1?"]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def engine_model(tokenizer, **kwargs):
    return LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=10, **kwargs)


def requests(chat, temperature=0.0, max_tokens=10):
    prompts = [chat.engine.render([SystemMessage(SYSTEM), HumanMessage(t)]) for t in TASKS for _ in range(2)]
    return [GenerationRequest(prompt_ids=p, max_tokens=max_tokens, temperature=temperature, seed=11 + i)
            for i, p in enumerate(prompts)]


def forward_shapes(model):
    shapes = []
    original = model.forward

    def recording(*args, **kwargs):
        shapes.append(tuple(kwargs.get("input_ids", args[0] if args else None).shape))
        return original(*args, **kwargs)

    model.forward = recording
    return shapes


def test_shared_prefix_length_keeps_a_token_of_each_prompt_and_a_minimum():
    assert shared_prefix_length([[1] * 20 + [2], [1] * 20 + [3]]) == 20
    assert shared_prefix_length([[1] * 20, [1] * 20]) == 19  # identical prompts: the last token is each row's own
    assert shared_prefix_length([[1] * 10 + [2], [1] * 10 + [3]]) == 0  # under the minimum
    assert shared_prefix_length([[1] * 30]) == 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_shared_prefix_is_prefilled_once_and_changes_no_row(tokenizer, temperature):
    shared, unshared = engine_model(tokenizer), engine_model(tokenizer, share_prefix=False)
    batch = requests(shared, temperature)
    p = shared_prefix_length([r.prompt_ids for r in batch])
    assert p > 16
    shapes = forward_shapes(shared.engine.model)
    a = shared.engine.generate_batch(batch)
    b = unshared.engine.generate_batch(batch)
    distinct = len({tuple(r.prompt_ids) for r in batch})
    assert distinct == len(batch) // 2  # each prompt twice: a group's rows prefill their prompt once
    assert shapes[0] == (1, p) and shapes[1][0] == distinct and shapes[1][1] < len(batch[0].prompt_ids)
    assert shapes[2][0] == len(batch)  # the first decoding step runs every row
    for ra, rb in zip(a, b):
        assert ra.completion_token_ids == rb.completion_token_ids
        assert ra.logprobs == pytest.approx(rb.logprobs, abs=1e-4)
    for ra, req in zip(a, batch):
        expected = teacher_forced_logprobs(shared.engine.model, req.prompt_ids, ra.completion_token_ids,
                                           temperature or 1.0)
        assert ra.logprobs == pytest.approx(expected, abs=1e-4)
    if temperature == 0:
        alone = [shared.engine.generate_batch([req])[0] for req in batch]
        assert [r.completion_token_ids for r in alone] == [r.completion_token_ids for r in a]


def test_finished_rows_leave_the_batch(tokenizer):
    chat = engine_model(tokenizer)
    batch = [GenerationRequest(prompt_ids=r.prompt_ids, max_tokens=m) for r, m in zip(requests(chat), [2, 9, 2, 2])]
    shapes = forward_shapes(chat.engine.model)
    results = chat.engine.generate_batch(batch)
    assert [len(r.completion_token_ids) for r in results] == [2, 9, 2, 2]
    steps = [s[0] for s in shapes[2:]]  # after the prefix and the suffix prefill: one token per live row
    assert steps == [4] + [1] * 7


def test_top_p_one_samples_the_full_softmax():
    torch.manual_seed(0)
    logits = torch.randn(3, 500) * 4
    sampler = RowSampler([GenerationRequest(prompt_ids=[1], temperature=0.7, seed=5 + i) for i in range(3)],
                         torch.device("cpu"), random.Random(0))
    chosen = sampler.pick(logits, [0, 1, 2])
    logp = torch.log_softmax(logits / 0.7, -1)
    for i in range(3):
        g = torch.Generator().manual_seed(5 + i)
        assert chosen[i].item() == torch.multinomial(logp[i].exp(), 1, generator=g).item()
        assert sampler.logprobs[i][0] == pytest.approx(logp[i, chosen[i]].item(), abs=1e-6)


async def test_clients_share_one_generate_call_even_when_they_submit_late(tokenizer):
    chat = engine_model(tokenizer, batch_window_s=0.001)

    async def rollout(i: int, late: float):
        with chat.client():
            await asyncio.sleep(late)  # rendering, the harness graph, another turn's tools
            return await chat.ainvoke([HumanMessage(TASKS[i % 3])], max_tokens=3)

    replies = await asyncio.gather(*(rollout(i, 0.03 * i) for i in range(4)))
    assert chat.engine.batch_sizes == [4] and all(r.response_metadata[TOKENS_KEY]["completion_token_ids"]
                                                  for r in replies)
    chat.engine.batch_sizes.clear()

    async def plain(i: int, late: float):
        await asyncio.sleep(late)
        return await chat.ainvoke([HumanMessage(TASKS[i % 3])], max_tokens=3)

    await asyncio.gather(*(plain(i, 0.03 * i) for i in range(4)))  # not clients: the window alone decides
    chat.engine.close()
    assert len(chat.engine.batch_sizes) > 1


async def test_a_client_that_ends_without_a_request_does_not_hold_the_batch(tokenizer):
    chat = engine_model(tokenizer, batch_window_s=0.001, hold_s=30.0)

    async def scorer():  # a rollout that ends without another model call
        with chat.client():
            await asyncio.sleep(0.05)

    async def caller():
        with chat.client():
            return await chat.ainvoke([HumanMessage(TASKS[0])], max_tokens=2)

    started = time.monotonic()
    await asyncio.gather(scorer(), caller())
    assert time.monotonic() - started < 10 and chat.engine.batch_sizes == [1]
    chat.engine.close()
