"""Dynamic LoRA loading into vLLM, tested against a fake HTTP transport (no server, no vllm)."""

import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from coevo.training.checkpoint import Checkpoint
from coevo.training.vllm_sync import (
    VLLMStepSync,
    VLLMSyncError,
    load_lora_adapter,
    publish_checkpoint,
    unload_lora_adapter,
)


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


def test_publish_checkpoint_returns_the_hosted_vllm_reference():
    client, calls = recording_client()
    ckpt = Checkpoint(id="ckpt-42", base_model="smollm2-135m", adapter_path="/runs/ckpt-42/adapter")
    assert publish_checkpoint(ckpt, "http://gpu:8000", client=client) == "litellm:hosted_vllm/coevo-ckpt-42"
    assert calls[0][2] == {"lora_name": "coevo-ckpt-42", "lora_path": "/runs/ckpt-42/adapter"}
    with pytest.raises(ValueError, match="no adapter_path"):
        publish_checkpoint(Checkpoint(id="b", base_model="m"), "http://gpu:8000", client=client)


def test_step_sync_loads_each_steps_adapter_once_and_unloads_the_previous(tmp_path):
    client, calls = recording_client()
    saved = []
    model = SimpleNamespace(save_pretrained=lambda path: saved.append(path))
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), model=model,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    sync = VLLMStepSync("http://gpu:8000", tmp_path, prefix="run1", client=client)
    first = sync(trainer)
    assert sync(trainer) is first and len(calls) == 1  # same step: no reload
    trainer.state.global_step = 1
    second = sync(trainer)
    assert first.model == "hosted_vllm/run1-step0" and second.model == "hosted_vllm/run1-step1"
    assert second.api_base == "http://gpu:8000/v1" and second.request_tokens is True
    assert saved == [str(tmp_path / "step-0"), str(tmp_path / "step-1")]
    assert [(c[1].rsplit("/", 1)[-1], c[2]["lora_name"]) for c in calls] == [
        ("load_lora_adapter", "run1-step0"), ("load_lora_adapter", "run1-step1"), ("unload_lora_adapter", "run1-step0")]
