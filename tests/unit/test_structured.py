"""The meta roles' one LLM path (coevo.models.structured): the reply model's schema goes to the chat
model as ``response_format``, replies are parsed and validated with one repair turn, failures are
reasons (never exceptions), and tokens, cost and traces come from the chat-model layer."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402

import litellm  # noqa: E402
import pytest  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from coevo.models.fake import ScriptedChatModel  # noqa: E402
from coevo.models.litellm_model import LiteLLMChatModel  # noqa: E402
from coevo.models.structured import ask_structured, parse_reply, response_format, schema_of  # noqa: E402
from coevo.roles.llm import JsonRole  # noqa: E402


class Pick(BaseModel):
    index: int
    reason: str


def test_the_schema_reaches_litellm_as_response_format_and_cost_and_tokens_are_recorded(monkeypatch):
    real, sent = litellm.completion, []

    def spy(**kwargs):
        sent.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(litellm, "completion", spy)
    model = LiteLLMChatModel(model="openai/gpt-4o-mini", model_kwargs={"mock_response": '{"index": 2, "reason": "r"}'})
    reply = ask_structured(model, "sys", "user", Pick, role="inheritor", temperature=0.0)
    assert reply.value == Pick(index=2, reason="r") and reply.reason == ""
    assert sent[0]["response_format"] == response_format(Pick) and sent[0]["temperature"] == 0.0
    assert schema_of(sent[0]["response_format"]) == Pick.model_json_schema()
    (call,) = reply.calls
    assert call.cost_usd > 0 and call.input_tokens > 0 and call.output_tokens > 0 and call.latency_s > 0
    assert [m["type"] for m in call.input] == ["system", "human"]


def test_a_fenced_reply_parses_and_a_bad_one_gets_one_repair_quoting_the_error():
    fenced = ScriptedChatModel(script=['Here:\n```json\n{"index": 1, "reason": "ok"}\n```'])
    assert ask_structured(fenced, "s", "u", Pick).value == Pick(index=1, reason="ok")
    repaired = ScriptedChatModel(script=['{"index": "one"}', '{"index": 1, "reason": "fixed"}'])
    reply = ask_structured(repaired, "s", "u", Pick)
    assert reply.value == Pick(index=1, reason="fixed") and len(reply.calls) == 2
    second = repaired.calls[1]
    assert second[2].content == '{"index": "one"}' and "Your reply was invalid" in second[3].content
    assert "reason" in second[3].content  # the validation error names the missing field
    never = ScriptedChatModel(script=["no json here"])
    reply = ask_structured(never, "s", "u", Pick)
    assert reply.value is None and len(reply.calls) == 2 and len(never.calls) == 2
    assert reply.reason.startswith("invalid reply after one repair: attempt 2:") and "not JSON" in reply.reason


def test_the_semantic_check_is_repaired_like_a_schema_error():
    model = ScriptedChatModel(script=['{"index": 9, "reason": "far"}', '{"index": 0, "reason": "near"}'])

    def check(p: Pick) -> None:
        if p.index > 3:
            raise ValueError(f"index {p.index} is not in the archive (0..3)")

    reply = ask_structured(model, "s", "u", Pick, check)
    assert reply.value.index == 0 and "not in the archive" in model.calls[1][3].content
    stubborn = ScriptedChatModel(script=['{"index": 9, "reason": "far"}'])
    reply = ask_structured(stubborn, "s", "u", Pick, check, repairs=0)
    assert reply.value is None and len(reply.calls) == 1 and "not in the archive" in reply.reason


def test_a_call_that_fails_for_good_is_a_reason_not_an_exception():
    def boom(messages):
        raise ConnectionError("server gone")

    reply = ask_structured(ScriptedChatModel(script=[boom]), "s", "u", Pick)
    assert reply.value is None and reply.calls == [] and reply.reason == "ConnectionError: server gone"


def test_calls_are_traced_under_the_role_and_stored_as_llm_call_records():
    seen = []

    class Spy(BaseCallbackHandler):
        def on_chat_model_start(self, serialized, messages, *, run_id, tags=None, metadata=None, **kw):
            seen.append((kw.get("name"), tags, (metadata or {}).get("schema")))

    model = ScriptedChatModel(script=[AIMessage('{"index": 0, "reason": "r"}',
                                                usage_metadata={"input_tokens": 7, "output_tokens": 3,
                                                                "total_tokens": 10},
                                                response_metadata={"cost_usd": 0.25})], callbacks=[Spy()])

    class Role(JsonRole):
        role = "voter"

    reply = Role(model).ask("s", "u", Pick)
    assert seen == [("coevo.meta.voter", ["coevo-meta", "voter"], "Pick")]
    (record,) = reply.calls
    assert (record.role, record.model, record.input_tokens, record.output_tokens, record.cost_usd) == (
        "voter", "coevo-scripted", 7, 3, 0.25)
    assert record.request["schema"] == "Pick" and record.response["content"] == json.dumps({"index": 0, "reason": "r"})


def test_parse_reply_and_schema_of_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="not JSON"):
        parse_reply("{'index': 1}", Pick)
    assert schema_of(None) is None and schema_of({"type": "json_object"}) == {"type": "object"}
    with pytest.raises(ValueError, match="OpenAI's shape"):
        schema_of({"schema": {}})


def test_a_local_model_takes_the_same_path_and_its_free_text_is_a_reason(tmp_path):
    from test_local_model import tiny_llama, tiny_tokenizer

    from coevo.models.local import LocalChatModel

    tokenizer = tiny_tokenizer()
    chat = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=8)
    try:
        reply = JsonRole(chat, temperature=0.0).ask("s", "u", Pick)
    finally:
        chat.engine.close()
    assert reply.value is None and reply.reason.startswith("invalid reply after one repair")
    assert len(reply.calls) == 2 and all(c.output_tokens == 8 and c.input_tokens > 0 for c in reply.calls)
    assert reply.calls[0].model == "local"


def test_roles_send_schemas_narrowed_to_what_their_checks_accept(monkeypatch):
    from coevo.envs.base import Task
    from coevo.harnesses.patch import PROMPT_FIELDS
    from coevo.harnesses.patch_schema import patch_schema
    from coevo.harnesses.spec import HarnessSpec
    from coevo.models.trajectory import Trajectory
    from coevo.roles.curator import LLMCurator
    from coevo.roles.voter import LLMVoter

    real, sent = litellm.completion, []
    monkeypatch.setattr(litellm, "completion", lambda **kw: sent.append(kw) or real(**kw))
    failed = [Trajectory(task_id=t, split="train", final_answer="x") for t in ("b", "a")]
    LLMCurator("openai/gpt-4o-mini", 2, mock_response='{"directions": []}').curate(failed, HarnessSpec(), {})
    direction = sent[-1]["response_format"]["json_schema"]["schema"]["$defs"]["DirectionReply"]["properties"]
    assert direction["task_ids"]["items"] == {"enum": ["a", "b"]} and direction["task_ids"]["minItems"] == 2
    assert direction["task_ids"]["maxItems"] == 2  # no more ids than failed tasks (a small model repeated one 8 times)
    LLMVoter("openai/gpt-4o-mini", mock_response='{"ranking": ["h1"]}').vote(
        Task(id="t", env="e", split="test", prompt="p"), ["h1", "h2"], {}, {}, 1)
    ranking = sent[-1]["response_format"]["json_schema"]["schema"]["properties"]["ranking"]
    assert ranking["items"] == {"enum": ["h1", "h2"]} and ranking["maxItems"] == 1
    ops = patch_schema(HarnessSpec(), allowed=PROMPT_FIELDS)["properties"]["patch"]["items"]["anyOf"]
    paths = [json.dumps(op["properties"]["path"]) for op in ops]
    assert paths and all("/prompt/" in p for p in paths) and not any("/budget" in p for p in paths)
    with pytest.raises(ValueError, match="allowed prefixes"):
        patch_schema(HarnessSpec(), allowed=["/nothing"])
