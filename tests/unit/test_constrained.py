"""JSON-schema-constrained decoding in the local engine (coevo.models.constrained, llguidance) on a
tiny random llama with a byte-level tokenizer: whatever the random weights prefer, a constrained
row's reply is JSON valid under the schema; free rows in the same batch are untouched."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field
from test_local_model import tiny_llama, tokenizer  # noqa: F401  (tokenizer: the shared fixture)

from coevo.harnesses import load_harness
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.patch_schema import patch_schema
from coevo.models.base import TOKENS_KEY
from coevo.models.constrained import bounded
from coevo.models.local import LocalChatModel
from coevo.models.structured import ask_structured, response_format
from coevo.roles.editor import EditReply
from coevo.roles.llm import JsonRole


class Verdict(BaseModel):
    kind: Literal["select", "merge"]
    index: int = Field(ge=0, le=9)
    ids: list[Literal["a1", "b2", "c3"]] = Field(min_length=1, max_length=3)
    ok: bool


@pytest.fixture()
def chat(tokenizer):  # noqa: F811
    model = LocalChatModel.from_model(tiny_llama(tokenizer), tokenizer, max_tokens=120, batch_window_s=0.05)
    yield model
    model.engine.close()


def test_unconstrained_the_random_model_writes_no_json(chat):
    text = chat.invoke([HumanMessage("verdict?")]).content
    with pytest.raises(ValueError):
        json.loads(text)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_constraint_forces_a_reply_valid_under_the_schema(chat, temperature):
    for seed in range(3):
        reply = chat.invoke([HumanMessage(f"verdict {seed}?")], response_format=response_format(Verdict),
                            temperature=temperature, seed=seed)
        verdict = Verdict.model_validate_json(reply.content)  # raises if the constraint failed
        assert reply.response_metadata["finish_reason"] == "stop"  # ended by EOS once the JSON closed
        tokens = reply.response_metadata[TOKENS_KEY]
        assert tokens["completion_token_ids"][-1] == chat.engine.tokenizer.eos_token_id
        assert len(tokens["logprobs"]) == len(tokens["completion_token_ids"]) and verdict.ids


async def test_free_rows_in_the_same_batch_decode_as_without_the_constraint(chat):
    alone = chat.invoke([HumanMessage("free")])
    chat.engine.batch_sizes.clear()
    free, held = await asyncio.gather(chat.ainvoke([HumanMessage("free")]),
                                      chat.ainvoke([HumanMessage("held")], response_format=response_format(Verdict)))
    assert chat.engine.batch_sizes == [2]
    assert free.content == alone.content
    Verdict.model_validate_json(held.content)


def test_structured_asks_of_a_local_model_parse_at_the_first_try(chat):
    reply = JsonRole(chat, temperature=0.0).ask("You judge.", "Give a verdict.", Verdict)
    assert reply.value is not None and reply.reason == "" and len(reply.calls) == 1
    narrowed = Verdict.model_json_schema()
    narrowed["properties"]["index"] = {"const": 7}
    reply = ask_structured(chat, "You judge.", "Give a verdict.", Verdict, json_schema=narrowed)
    assert reply.value.index == 7  # the narrower schema sent to the model is the one decoded under


def test_out_of_tokens_the_reply_is_cut_and_rejected_with_a_reason(chat):
    reply = JsonRole(chat, temperature=0.0, max_tokens=5).ask("s", "u", Verdict)
    assert reply.value is None and "not JSON" in reply.reason and len(reply.calls) == 2


def test_a_schema_the_engine_cannot_decode_under_fails_before_queueing(chat):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "minProperties": "no"}}}
    with pytest.raises(ValueError, match="JSON schema"):
        chat.invoke([HumanMessage("x")], response_format=bad)
    assert chat.engine.batch_sizes == []


def test_bounded_caps_free_strings_and_arrays_and_closes_objects():
    schema = {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "maxLength": 5}, "c": {"type": "string", "pattern": "x+"},
        "d": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        "e": {"enum": ["p", "q"]}}}
    out = bounded(schema, max_chars=50, max_items=4)
    props = out["properties"]
    assert props["a"]["maxLength"] == 50 and props["b"]["maxLength"] == 5 and "maxLength" not in props["c"]
    assert props["d"]["maxItems"] == 4 and props["d"]["items"]["anyOf"][0]["maxLength"] == 50
    assert props["e"] == {"enum": ["p", "q"]} and "maxLength" not in schema["properties"]["a"]  # a copy
    assert out["additionalProperties"] is False and "additionalProperties" not in schema
    assert bounded({"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}) == {
        "type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}


def test_every_patch_decoded_under_the_patch_schema_applies(chat):
    """The editor's reply format (``patch_schema``): whatever a model writes under it is a patch that
    applies to the spec and validates (paths that exist, typed values, registered hook conditions
    with typed parameters, skills with content, ``{task}`` kept)."""
    spec = load_harness("reasoning_gym")
    chat.engine.constraints.max_chars = 16  # the byte-level tiny model writes one token per character
    fmt = response_format(EditReply, patch_schema(spec))
    kinds = set()
    for seed in range(4):
        reply = chat.invoke([HumanMessage("edit")], response_format=fmt, temperature=1.0, seed=seed, max_tokens=1500)
        edit = EditReply.model_validate_json(reply.content)
        apply_patch(spec, edit.patch)  # raises HarnessError when an operation does not apply or validate
        kinds |= {(op["op"], op["path"].split("/")[1]) for op in edit.patch}
    assert len(kinds) >= 3, kinds  # the sampled edits differ: the schema is not one forced patch


def test_an_engine_keeps_only_the_newest_compiled_grammars(chat, monkeypatch):
    monkeypatch.setattr("coevo.models.constrained.MAX_GRAMMARS", 2)
    constraints = chat.engine.constraints
    schemas = [{"type": "object", "properties": {"command": {"enum": [f"go {d}"]}}} for d in ("east", "west", "north")]
    for schema in schemas:
        constraints.grammar(schema)
    kept = [json.loads(key) for key in constraints._grammars]
    assert kept == schemas[1:]
