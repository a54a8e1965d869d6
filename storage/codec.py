"""A compact, lossless JSON encoding of a ``Trajectory`` for the archive's ``trajectories.body``.

A rollout's model calls form a prefix chain: call i's input messages usually start with call
i-1's input plus its reply, and its prompt token ids with call i-1's prompt plus completion ids
(the same chain ``Trajectory.segments`` relies on). Stored naively a trajectory of n turns holds
O(n²) messages and token ids; here each call stores only its new tail plus the length of the
prefix it shares with the previous call, so storage is O(n). A call whose context was rewritten
(history window, truncation) is stored in full. ``decode(encode(t)) == t`` for every trajectory.

The reply's copy of its own token ids (``response_metadata[TOKENS_KEY]`` in the output message)
is replaced by a marker and restored from the call's fields, and the trajectory's ``messages``
share their prefix with the last call's input and reply. Encoded call keys: every ``ModelCall``
field, except that ``input`` becomes ``input_ref`` (length of the shared prefix) + ``input`` (the
tail), and ``prompt_token_ids`` becomes ``prompt_ref`` + ``prompt_token_ids`` (the tail, or null).
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

from coevo.models.base import TOKENS_KEY
from coevo.models.trajectory import ModelCall, Trajectory
from coevo.storage.errors import CorruptArchiveError

_CALL_FIELDS = tuple(ModelCall.model_fields)
_OTHER_FIELDS = tuple(name for name in Trajectory.model_fields if name != "calls")


def _shared(items: list[Any], candidates: list[list[Any]]) -> int:
    """Length of the first candidate that is a prefix of ``items`` (0 when none is)."""
    for prefix in candidates:
        if prefix and len(prefix) <= len(items) and items[: len(prefix)] == prefix:
            return len(prefix)
    return 0


def _fallback(value: Any) -> Any:
    """JSON stand-in for values pydantic cannot serialise (numpy scalars -> Python numbers)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


_MARK = "@call"


def _tokens_of(call: ModelCall) -> dict[str, Any]:
    return {"prompt_token_ids": call.prompt_token_ids, "completion_token_ids": call.completion_token_ids,
            "logprobs": call.logprobs}


def _strip_tokens(output: dict[str, Any], call: ModelCall) -> dict[str, Any]:
    """``output`` with its ``response_metadata[TOKENS_KEY]`` replaced by a marker when that entry
    repeats the call's own token fields (restored exactly by ``_restore_tokens``)."""
    meta = (output.get("data") or {}).get("response_metadata")
    if not isinstance(meta, dict) or meta.get(TOKENS_KEY) != _tokens_of(call):
        return output
    return {**output, "data": {**output["data"], "response_metadata": {**meta, TOKENS_KEY: _MARK}}}


def _restore_tokens(output: dict[str, Any], call: dict[str, Any]) -> None:
    meta = (output.get("data") or {}).get("response_metadata")
    if isinstance(meta, dict) and meta.get(TOKENS_KEY) == _MARK:
        meta[TOKENS_KEY] = {name: call[name] for name in ("prompt_token_ids", "completion_token_ids", "logprobs")}


def encode(traj: Trajectory) -> str:
    """The trajectory as a JSON string with prefix-shared calls (see module docstring)."""
    body: dict[str, Any] = {name: getattr(traj, name) for name in _OTHER_FIELDS}
    calls: list[dict[str, Any]] = []
    prev: ModelCall | None = None
    for call in traj.calls:
        item = {name: getattr(call, name) for name in _CALL_FIELDS}
        input_ref = prompt_ref = 0
        if prev is not None:
            input_ref = _shared(call.input, [prev.input + [prev.output], prev.input])
            ids, prev_ids = call.prompt_token_ids, prev.prompt_token_ids
            if ids is not None and prev_ids is not None:
                prompt_ref = _shared(ids, [prev_ids + (prev.completion_token_ids or []), prev_ids])
        item["input_ref"], item["input"] = input_ref, call.input[input_ref:]
        item["output"] = _strip_tokens(call.output, call)
        if prompt_ref:
            item["prompt_ref"], item["prompt_token_ids"] = prompt_ref, call.prompt_token_ids[prompt_ref:]  # type: ignore[index]
        calls.append(item)
        prev = call
    if prev is not None:
        messages_ref = _shared(traj.messages, [prev.input + [prev.output]])
        body["messages_ref"], body["messages"] = messages_ref, traj.messages[messages_ref:]
    body["calls"] = calls
    return pydantic_core.to_json(body, inf_nan_mode="constants", fallback=_fallback).decode()


def decode(text: str | bytes) -> Trajectory:
    """Rebuild the ``Trajectory`` from ``encode``'s JSON. Raises ``ValueError`` on corrupt input."""
    body = json.loads(text)
    calls: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for item in body.get("calls", []):
        input_ref = item.pop("input_ref", 0)
        prompt_ref = item.pop("prompt_ref", 0)
        if (input_ref or prompt_ref) and prev is None:
            raise CorruptArchiveError("corrupt trajectory body: the first call references a previous call")
        if prompt_ref:
            chain = prev["prompt_token_ids"] + (prev.get("completion_token_ids") or [])  # type: ignore[index]
            item["prompt_token_ids"] = chain[:prompt_ref] + item["prompt_token_ids"]
        if input_ref:
            item["input"] = (prev["input"] + [prev["output"]])[:input_ref] + item["input"]  # type: ignore[index]
        _restore_tokens(item["output"], item)
        calls.append(item)
        prev = item
    messages_ref = body.pop("messages_ref", 0)
    if messages_ref:
        if prev is None:
            raise CorruptArchiveError("corrupt trajectory body: messages reference a call but there are none")
        body["messages"] = (prev["input"] + [prev["output"]])[:messages_ref] + body["messages"]
    body["calls"] = calls
    return Trajectory.model_validate(body)
