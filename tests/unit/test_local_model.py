"""LocalChatModel on a tiny randomly initialised llama (built here, nothing downloaded)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from training_kit import torch_threads
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from coevo.envs.base import Tool
from coevo.models.base import TOKENS_KEY, record_call
from coevo.models.local import LocalChatModel
from coevo.models.local_engine import LocalEngine
from coevo.models.messages import messages_to_chat, parse_tool_calls
from coevo.models.sampling import GenerationRequest

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if tools %}<|im_start|>tools\n{% for t in tools %}{{ t['function']['name'] }};{% endfor %}<|im_end|>\n"
            "{% endif %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: 256 byte tokens + <|im_start|>, <|im_end|> (EOS), <|pad|>."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|pad|>")
    fast.chat_template = TEMPLATE
    return fast


def tiny_llama(tokenizer, seed: int = 0, positions: int = 512) -> LlamaForCausalLM:
    """2-layer llama with a large init range so greedy argmaxes are far from ties; a context of
    ``positions`` tokens."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
                         initializer_range=0.5, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture()
def chat(tokenizer):
    model = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=12, batch_window_s=0.05)
    yield model
    model.engine.close()


PROMPTS = ["hi", "what is two plus two, please?", "a much longer prompt so that the batch needs left padding", "x"]


def teacher_forced_logprobs(model, prompt: list[int], completion: list[int], temperature: float = 1.0) -> list[float]:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1: -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0].tolist()


def test_reply_carries_prompt_ids_completion_ids_and_logprobs(chat):
    msgs = [SystemMessage("be brief"), HumanMessage("hello")]
    reply = chat.invoke(msgs)
    tokens = reply.response_metadata[TOKENS_KEY]
    assert tokens["prompt_token_ids"] == chat.engine.render(msgs)
    assert len(tokens["completion_token_ids"]) == 12 == len(tokens["logprobs"])
    assert reply.usage_metadata["output_tokens"] == 12
    assert reply.usage_metadata["input_tokens"] == len(tokens["prompt_token_ids"])
    assert reply.response_metadata["finish_reason"] == "length"
    expected = teacher_forced_logprobs(chat.engine.model, tokens["prompt_token_ids"], tokens["completion_token_ids"])
    assert tokens["logprobs"] == pytest.approx(expected, abs=1e-4)
    call = record_call(msgs, reply)
    assert call.completion_token_ids == tokens["completion_token_ids"]


def test_greedy_picks_the_argmax_each_step(chat):
    reply = chat.invoke([HumanMessage("hello")])
    tokens = reply.response_metadata[TOKENS_KEY]
    ids = torch.tensor([tokens["prompt_token_ids"] + tokens["completion_token_ids"]])
    with torch.no_grad():
        logits = chat.engine.model(ids).logits[0]
    p = len(tokens["prompt_token_ids"])
    assert logits[p - 1:-1].argmax(-1).tolist() == tokens["completion_token_ids"]


async def test_concurrent_requests_share_one_generate_call_and_match_unbatched_greedy(chat):
    unbatched = [chat.invoke([HumanMessage(p)]) for p in PROMPTS]
    assert chat.engine.batch_sizes == [1, 1, 1, 1]
    chat.engine.batch_sizes.clear()
    batched = await asyncio.gather(*(chat.ainvoke([HumanMessage(p)]) for p in PROMPTS))
    assert chat.engine.batch_sizes == [len(PROMPTS)]
    for one, many in zip(unbatched, batched):
        a, b = one.response_metadata[TOKENS_KEY], many.response_metadata[TOKENS_KEY]
        assert a["completion_token_ids"] == b["completion_token_ids"]
        assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-4)
        assert one.content == many.content


async def test_max_batch_splits_a_burst(tokenizer):
    chat = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=3, max_batch=2, batch_window_s=0.05)
    await asyncio.gather(*(chat.ainvoke([HumanMessage(p)]) for p in PROMPTS + ["y"]))
    chat.engine.close()
    assert max(chat.engine.batch_sizes) == 2 and sum(chat.engine.batch_sizes) == 5


async def test_each_row_keeps_its_own_max_tokens_in_a_batch(chat):
    short, long = await asyncio.gather(chat.ainvoke([HumanMessage("a")], max_tokens=3),
                                       chat.ainvoke([HumanMessage("b")], max_tokens=9))
    assert len(short.response_metadata[TOKENS_KEY]["completion_token_ids"]) == 3
    assert len(long.response_metadata[TOKENS_KEY]["completion_token_ids"]) == 9


async def test_seeded_sampling_is_independent_of_batch_company(chat):
    msgs = [HumanMessage("sample me")]
    alone = await chat.ainvoke(msgs, temperature=1.0, seed=7)
    together = await asyncio.gather(chat.ainvoke(msgs, temperature=1.0, seed=7),
                                    chat.ainvoke([HumanMessage("other")], temperature=0.7, seed=1),
                                    chat.ainvoke(msgs, temperature=0.0))
    other_seed = await chat.ainvoke(msgs, temperature=1.0, seed=8)
    ids = lambda r: r.response_metadata[TOKENS_KEY]["completion_token_ids"]  # noqa: E731
    assert ids(alone) == ids(together[0])
    assert ids(alone) != ids(other_seed)


def test_sampled_logprobs_are_under_the_temperature_scaled_distribution(chat):
    reply = chat.invoke([HumanMessage("warm")], temperature=0.5, seed=3)
    tokens = reply.response_metadata[TOKENS_KEY]
    expected = teacher_forced_logprobs(chat.engine.model, tokens["prompt_token_ids"], tokens["completion_token_ids"],
                                       temperature=0.5)
    assert tokens["logprobs"] == pytest.approx(expected, abs=1e-4)


def test_top_p_restricts_sampling_to_the_nucleus(chat):
    tiny_p = chat.invoke([HumanMessage("nucleus")], temperature=1.0, top_p=1e-6, seed=5)
    greedy = chat.invoke([HumanMessage("nucleus")], temperature=0.0)
    a, b = tiny_p.response_metadata[TOKENS_KEY], greedy.response_metadata[TOKENS_KEY]
    assert a["completion_token_ids"] == b["completion_token_ids"]
    assert a["logprobs"] == pytest.approx([0.0] * len(a["logprobs"]), abs=1e-6)  # the nucleus is one token


def test_stop_string_ends_the_reply_and_is_cut_from_the_text(chat, tokenizer):
    full = chat.invoke([HumanMessage("stop test")], max_tokens=12)
    ids = full.response_metadata[TOKENS_KEY]["completion_token_ids"]
    k = next(i for i in range(2, len(ids)) if tokenizer.decode([ids[i]]).isprintable() and tokenizer.decode([ids[i]])
             and tokenizer.decode([ids[i]]) not in tokenizer.decode(ids[:i]))
    stop = tokenizer.decode([ids[k]])
    cut = chat.invoke([HumanMessage("stop test")], max_tokens=12, stop=[stop])
    assert cut.response_metadata[TOKENS_KEY]["completion_token_ids"] == ids[: k + 1]
    assert cut.content == tokenizer.decode(ids[:k])
    assert cut.response_metadata["finish_reason"] == "stop"


def test_eos_ends_the_reply_and_is_kept_in_the_token_ids_only(chat):
    full = chat.invoke([HumanMessage("eos test")])
    ids = full.response_metadata[TOKENS_KEY]["completion_token_ids"]
    chat.engine.eos_ids = {ids[4]}  # pretend the 5th sampled token is the end of turn
    cut = chat.invoke([HumanMessage("eos test")])
    first = ids.index(ids[4])
    assert cut.response_metadata[TOKENS_KEY]["completion_token_ids"] == ids[: first + 1]
    assert cut.content == chat.engine.tokenizer.decode(ids[:first])
    assert cut.response_metadata["finish_reason"] == "stop"


def test_bind_tools_renders_schemas_into_the_template_and_shares_the_engine(chat):
    tool = Tool("add", "Add two integers.", {"type": "object", "properties": {"a": {"type": "integer"}}}, lambda a: a)
    bound = chat.bind_tools([tool])
    assert isinstance(bound, LocalChatModel) and bound.engine is chat.engine
    assert bound.tools[0]["function"]["name"] == "add"
    assert chat.engine.supports_tool_template
    reply = bound.invoke([HumanMessage("use a tool")])
    prompt = chat.engine.tokenizer.decode(reply.response_metadata[TOKENS_KEY]["prompt_token_ids"])
    assert "<|im_start|>tools\nadd;" in prompt
    plain = chat.invoke([HumanMessage("use a tool")])
    assert "add;" not in chat.engine.tokenizer.decode(plain.response_metadata[TOKENS_KEY]["prompt_token_ids"])


def test_hermes_tool_call_blocks_become_tool_calls():
    text = 'ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call> <tool_call>{bad}</tool_call>'
    calls = parse_tool_calls(text)
    assert [(c["name"], c["args"]) for c in calls] == [("add", {"a": 1})]


def test_messages_to_chat_maps_tool_calls_and_results():
    chat = messages_to_chat([HumanMessage("q"),
                             AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1"}]),
                             ToolMessage("2", tool_call_id="c1", name="add")])
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert chat[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 1}}
    assert chat[2]["tool_call_id"] == "c1"


def make_adapter(tokenizer, seed: int, path) -> None:
    """Save a LoRA adapter for ``tiny_llama`` with large random weights (so it changes outputs)."""
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(tiny_llama(tokenizer),
                                LoraConfig(r=4, lora_alpha=32, target_modules=["q_proj", "v_proj"],
                                           init_lora_weights=False))
    torch.manual_seed(seed)
    for name, p in peft_model.named_parameters():
        if "lora_" in name:
            p.data.normal_(0, 1.0)
    peft_model.save_pretrained(str(path))


def test_lora_adapter_changes_outputs_and_can_be_switched(tokenizer, tmp_path):
    make_adapter(tokenizer, 1, tmp_path / "a1")
    make_adapter(tokenizer, 2, tmp_path / "a2")
    chat = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=10)
    msgs = [HumanMessage("adapter")]
    ids = lambda r: r.response_metadata[TOKENS_KEY]["completion_token_ids"]  # noqa: E731
    base = ids(chat.invoke(msgs))
    chat.load_adapter(tmp_path / "a1")
    first = ids(chat.invoke(msgs))
    chat.load_adapter(tmp_path / "a2")
    second = ids(chat.invoke(msgs))
    assert chat.engine.adapter_path == str(tmp_path / "a2")
    assert len(chat.engine.model.peft_config) == 1  # the replaced adapter was deleted
    chat.load_adapter(tmp_path / "a1")
    assert ids(chat.invoke(msgs)) == first
    assert base != first and first != second
    chat.engine.close()


async def test_rows_on_different_adapters_share_one_generate_call(tokenizer, tmp_path):
    make_adapter(tokenizer, 1, tmp_path / "a1")
    make_adapter(tokenizer, 2, tmp_path / "a2")
    base = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=8, batch_window_s=0.05)
    models = [base, base.with_adapter(tmp_path / "a1"), base.with_adapter(tmp_path / "a2")]
    assert base.with_adapter(tmp_path / "a1").adapter == models[1].adapter  # loaded once
    msgs = [HumanMessage("mixed")]
    ids = lambda r: r.response_metadata[TOKENS_KEY]["completion_token_ids"]  # noqa: E731
    alone = [ids(m.invoke(msgs)) for m in models]
    base.engine.batch_sizes.clear()
    together = [ids(r) for r in await asyncio.gather(*(m.ainvoke(msgs) for m in models))]
    assert base.engine.batch_sizes == [3]
    assert together == alone and len({tuple(a) for a in alone}) == 3
    assert models[1].invoke(msgs).response_metadata["adapter"] == str((tmp_path / "a1").resolve())
    base.engine.close()


def test_a_model_in_training_mode_is_restored_after_generation(tokenizer):
    model = tiny_llama(tokenizer).train()
    engine = LocalEngine(model, tokenizer)
    engine.generate_batch([GenerationRequest(prompt_ids=[1, 2, 3], max_tokens=2)])
    assert model.training


def test_bad_inputs_raise_clear_errors(chat, tmp_path):
    with pytest.raises(ValueError, match="temperature"):
        GenerationRequest(prompt_ids=[1], temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        GenerationRequest(prompt_ids=[1], top_p=0)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        chat.load_adapter(tmp_path)
    with pytest.raises(FileNotFoundError, match="config.json"):
        LocalChatModel.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="does not fit the context"):
        chat.invoke([HumanMessage("x" * 600)])
    with pytest.raises(TypeError, match="unsupported"):
        chat.invoke([HumanMessage("x")], frequency_penalty=1.0)


def test_submitting_does_not_wait_for_the_running_batch(chat):
    import threading

    chat.engine.close()
    submitted = threading.Event()
    with chat.engine._lock:  # what the worker holds while a batch is generating
        worker = threading.Thread(
            target=lambda: (chat.engine.submit(GenerationRequest(prompt_ids=[1, 2], max_tokens=1)), submitted.set()))
        worker.start()
        assert submitted.wait(timeout=5)
    worker.join()


async def test_a_retry_after_an_interface_violation_samples_a_fresh_reply(chat):
    """Issue 17 item 4: every call of a rollout used the rollout's seed, so a retry at temperature 1.0
    saw the same context with the same seed and repeated the reply it replaced. Each call now samples
    with its own seed (``call_seed``), and the rollout still replays exactly."""
    from coevo.envs.base import Episode, Task
    from coevo.harnesses import load_harness
    from coevo.harnesses.runtime import build_harness_graph

    spec = load_harness({"parser": {"mode": "text", "on_no_action": "violation"}, "decoding": {"temperature": 1.0},
                         "hooks": {"again": {"event": "after_model", "condition": "unparsed_reply", "action": "retry"}},
                         "budget": {"max_model_calls": 3, "max_output_tokens": 8}})
    task = Task(id="t", env="toy", split="train", prompt="sample me")

    async def replies() -> list[list[int]]:
        state = await build_harness_graph(spec, chat, Episode(task=task), seed=7).ainvoke({})
        assert state["violations"] == 3 and all(c["input"] == state["calls"][0]["input"] for c in state["calls"])
        return [c["completion_token_ids"] for c in state["calls"]]

    first = await replies()
    assert len({tuple(r) for r in first}) == 3, "each retry sees the same context and samples a different reply"
    assert await replies() == first


async def test_threads_apply_to_the_decoding_worker_only_and_keep_the_replies(tokenizer):
    """``threads`` sets torch's intra-op threads in the engine's worker (OpenMP's setting is per thread): the
    forward passes of queued requests run on one thread while the caller keeps its own, and greedy replies
    are those of the default engine."""
    seen: list[int] = []
    model = tiny_llama(tokenizer)
    model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    replies = {}
    with torch_threads(2):  # the caller's count must differ from the worker's 1
        caller = torch.get_num_threads()
        for threads in (None, 1):
            engine = LocalEngine(model, tokenizer, max_batch=4, batch_window_s=0.05, threads=threads)
            chat = LocalChatModel(engine=engine, max_tokens=5)
            seen.clear()
            out = await asyncio.gather(*(chat.ainvoke([HumanMessage(p)]) for p in PROMPTS))
            engine.close()
            replies[threads] = [r.content for r in out]
            assert seen and set(seen) == ({1} if threads == 1 else {caller})
        assert torch.get_num_threads() == caller
    assert replies[1] == replies[None]
    with pytest.raises(ValueError, match="threads must be >= 1"):
        LocalEngine(model, tokenizer, threads=0)
