"""Dynamic LoRA loading into vLLM, tested against a fake HTTP transport (no server, no vllm)."""

import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from coevo.models.checkpoint import Checkpoint
from coevo.training.vllm_sync import (
    VLLMStepSync,
    VLLMSyncError,
    adapter_digest,
    adapter_name,
    load_lora_adapter,
    publish_checkpoint,
    unload_lora_adapter,
)


def save_adapter(path: Path, weights: bytes, card: str = "model card") -> Path:
    """A stand-in PEFT adapter directory: config, weights and PEFT's README model card."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    (path / "adapter_model.safetensors").write_bytes(weights)
    (path / "README.md").write_text(card)
    return path


def recording_client(status=200, text="Success"):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.method, str(request.url), json.loads(request.content)))
        return httpx.Response(status, text=text)

    return httpx.Client(transport=httpx.MockTransport(handler)), calls


def test_load_and_unload_post_the_vllm_lora_endpoints():
    client, calls = recording_client()
    load_lora_adapter("http://gpu:8000/", "coevo-a", Path("/ckpt/adapter"), client=client)
    unload_lora_adapter("http://gpu:8000", "coevo-a", client=client)
    assert calls == [("POST", "http://gpu:8000/v1/load_lora_adapter",
                      {"lora_name": "coevo-a", "lora_path": "/ckpt/adapter"}),
                     ("POST", "http://gpu:8000/v1/unload_lora_adapter", {"lora_name": "coevo-a"})]


def test_server_refusal_raises_with_the_servers_message_and_a_hint():
    client, _ = recording_client(status=404, text="Not Found")
    with pytest.raises(VLLMSyncError, match="HTTP 404 Not Found.*VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
        load_lora_adapter("http://gpu:8000", "x", "/p", client=client)


def test_unreachable_server_raises_vllm_sync_error():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(VLLMSyncError, match="cannot reach"):
        load_lora_adapter("http://gpu:8000", "x", "/p", client=httpx.Client(transport=httpx.MockTransport(refuse)))


def test_publish_checkpoint_returns_the_hosted_vllm_reference(tmp_path):
    client, calls = recording_client()
    adapter = save_adapter(tmp_path / "ckpt-42" / "adapter", b"weights-1")
    ckpt = Checkpoint(id="ckpt-42", base_model="smollm2-135m", adapter_path=str(adapter))
    name = f"coevo-ckpt-42-{adapter_digest(adapter)}"
    assert publish_checkpoint(ckpt, "http://gpu:8000", client=client) == f"litellm:hosted_vllm/{name}"
    assert calls[0][2] == {"lora_name": name, "lora_path": str(adapter)}
    with pytest.raises(ValueError, match="no adapter_path"):
        publish_checkpoint(Checkpoint(id="b", base_model="m"), "http://gpu:8000", client=client)
    with pytest.raises(FileNotFoundError, match="no adapter_config.json"):
        publish_checkpoint(Checkpoint(id="c", base_model="m", adapter_path=str(tmp_path / "none")), "http://gpu:8000",
                           client=client)


def test_adapter_names_change_with_the_contents_saved_at_the_same_path(tmp_path):
    path = tmp_path / "adapter"
    ckpt = Checkpoint(id="ckpt-7", base_model="smollm2-135m", adapter_path=str(path))
    save_adapter(path, b"weights-1")
    first = adapter_name(ckpt)
    save_adapter(path, b"weights-2")  # re-saved in place: vLLM would serve the old weights under the old name
    second = adapter_name(ckpt)
    assert first != second and first.startswith("coevo-ckpt-7-") and len(first.rsplit("-", 1)[1]) == 12
    copy = save_adapter(tmp_path / "elsewhere", b"weights-2", card="another card")  # same contents, other path
    assert adapter_name(ckpt.model_copy(update={"adapter_path": str(copy)})) == second
    (path / "adapter_config.json").write_text(json.dumps({"r": 16, "peft_type": "LORA"}))
    assert adapter_name(ckpt) not in (first, second)  # the config is hashed too


def test_publishing_the_same_contents_again_is_a_no_op(tmp_path):
    def already(request: httpx.Request) -> httpx.Response:
        name = json.loads(request.content)["lora_name"]
        return httpx.Response(400, json={"message": f"The lora adapter '{name}' has already been loaded."})

    client = httpx.Client(transport=httpx.MockTransport(already))
    ckpt = Checkpoint(id="k", base_model="m", adapter_path=str(save_adapter(tmp_path / "a", b"w")))
    assert publish_checkpoint(ckpt, "http://gpu:8000", client=client) == f"litellm:hosted_vllm/{adapter_name(ckpt)}"
    with pytest.raises(VLLMSyncError, match="HTTP 400"):
        unload_lora_adapter("http://gpu:8000", "k", client=client)  # only a repeated load is benign


def test_step_sync_loads_each_steps_adapter_once_and_unloads_the_previous(tmp_path):
    client, calls = recording_client()
    saved = []

    def save_pretrained(path):
        saved.append(path)
        save_adapter(Path(path), b"weights-after-%d" % trainer.state.global_step)

    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0),
                              model=SimpleNamespace(save_pretrained=save_pretrained),
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    sync = VLLMStepSync("http://gpu:8000", tmp_path, prefix="run1", client=client)
    first = sync(trainer)
    assert sync(trainer) is first and len(calls) == 1  # same step: no reload
    trainer.state.global_step = 1
    second = sync(trainer)
    names = [f"run1-step{i}-{adapter_digest(tmp_path / f'step-{i}')}" for i in (0, 1)]
    assert first.model == f"hosted_vllm/{names[0]}" and second.model == f"hosted_vllm/{names[1]}"
    assert second.api_base == "http://gpu:8000/v1" and second.request_tokens is True
    assert saved == [str(tmp_path / "step-0"), str(tmp_path / "step-1")] and sync.loaded == names
    assert [(c[1].rsplit("/", 1)[-1], c[2]["lora_name"]) for c in calls] == [
        ("load_lora_adapter", names[0]), ("load_lora_adapter", names[1]), ("unload_lora_adapter", names[0])]


def test_step_sync_swaps_the_adapter_on_every_server_and_ships_by_reference(tmp_path):
    from coevo.evaluation.executors import RayExecutor
    from coevo.models.router import RouterChatModel

    client, calls = recording_client()
    waits = []
    main = SimpleNamespace(is_main_process=True, unwrap_model=lambda m: m, wait_for_everyone=lambda: waits.append(1))
    model = SimpleNamespace(save_pretrained=lambda path: save_adapter(Path(path), b"step weights"))
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=3), model=model, accelerator=main)
    sync = VLLMStepSync(["http://gpu0:8000", "http://gpu1:8000/"], tmp_path, prefix="s", client=client)
    policy = sync(trainer)
    name = f"s-step3-{adapter_digest(tmp_path / 'step-3')}"
    assert [(c[1], c[2]["lora_name"]) for c in calls] == [("http://gpu0:8000/v1/load_lora_adapter", name),
                                                          ("http://gpu1:8000/v1/load_lora_adapter", name)]
    assert isinstance(policy, RouterChatModel) and [s.model for s in policy.servers] == [f"hosted_vllm/{name}"] * 2
    assert [s.api_base for s in policy.servers] == ["http://gpu0:8000/v1", "http://gpu1:8000/v1"] and waits == [1]
    kind, _, (ref, settings) = RayExecutor()._source(policy)  # Ray workers rebuild it from its reference
    assert kind == "ref" and ref.startswith(f"litellm:hosted_vllm/{name}?api_base=") and settings["request_tokens"]

    other = SimpleNamespace(is_main_process=False, unwrap_model=lambda m: m, wait_for_everyone=lambda: waits.append(2))
    rank1 = VLLMStepSync(["http://gpu0:8000"], tmp_path, prefix="s", client=client)
    twin = rank1(SimpleNamespace(state=SimpleNamespace(global_step=3), model=None, accelerator=other))
    assert twin.model == f"hosted_vllm/{name}" and len(calls) == 2 and waits == [1, 2]  # no save, no request
