"""Constrained actions (``decoding.constrain``): each policy call carries the JSON schema of the actions
allowed at that moment (TextWorld: an ``act`` call with one currently admissible command), and a local
model decoding under it always plays an admissible command, whatever its weights prefer."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError
from test_local_model import tiny_llama, tokenizer  # noqa: F401  (tokenizer: the shared fixture)

from coevo.envs.base import Tool
from coevo.envs.registry import get_env
from coevo.harnesses.constrain import action_format
from coevo.harnesses.errors import HarnessError
from coevo.harnesses.patch import apply_edit
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import HarnessSpec, load_harness
from coevo.models.fake import ScriptedChatModel
from coevo.models.local import LocalChatModel
from coevo.models.structured import schema_of


def _game():
    pytest.importorskip("textworld")
    env = get_env("textworld:challenge=tw-simple,size=3,admissible=true")
    return env, env.tasks("train", 1)[0]


def _admissible_before(env, task, commands):
    """Replay ``commands`` in a fresh episode of ``task``: the admissible commands before each one."""
    ep = env.episode(task)
    act, before = {t.name: t for t in ep.tools}["act"], []
    for command in commands:
        before.append(list(ep.state["choices"]))
        act.fn(command=command)
    ep.close()
    return before


def test_constrain_off_keeps_every_harness_id_and_needs_the_json_parser():
    spec = load_harness("textworld_numbered")
    assert "constrain" not in spec.canonical_json()
    on = spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"constrain": "actions"})})
    assert '"constrain":"actions"' in on.canonical_json() and on.id != spec.id
    data = json.loads(on.canonical_json())
    data["parser"]["mode"] = "native"
    with pytest.raises(ValidationError, match="parser.mode"):
        HarnessSpec.model_validate(data)


def test_an_edit_can_turn_the_constraint_on_and_a_bad_combination_is_a_rejected_proposal():
    spec = load_harness("textworld")  # constrain and stop are left out of its JSON, yet replaceable
    on = apply_edit(spec, [{"op": "replace", "path": "/decoding/constrain", "value": "actions"},
                           {"op": "replace", "path": "/decoding/stop", "value": ["\n\n"]}])
    assert on.decoding.constrain == "actions" and on.decoding.stop == ["\n\n"] and on.parents == [spec.id]
    with pytest.raises(HarnessError, match="parser.mode"):
        apply_edit(on, [{"op": "replace", "path": "/parser/mode", "value": "native"}])
    data = json.loads(on.canonical_json())
    data["agent"] = "my_pkg.agent:make_agent"
    with pytest.raises(ValidationError, match="own model calls"):
        HarnessSpec.model_validate(data)


def test_action_format_offers_each_tool_with_the_arguments_it_accepts_now():
    now = ["go east"]
    act = Tool("act", "play", {"type": "object", "properties": {"command": {"type": "string"}}}, lambda command: "",
               accepts=lambda: {"type": "object", "properties": {"command": {"enum": list(now)}}})
    look = Tool("look", "look", {"type": "object", "properties": {}}, lambda: "")
    schema = schema_of(action_format({"act": act, "look": look}, answer=False))
    acts = {o["properties"]["tool"]["const"]: o["properties"]["arguments"] for o in schema["anyOf"]}
    assert acts["act"]["properties"]["command"]["enum"] == ["go east"] and acts["look"] == look.parameters
    now[:] = ["take coin", "go west"]  # asked again at each call
    again = schema_of(action_format({"act": act}, answer=True))["anyOf"]
    assert again[0]["properties"]["arguments"]["properties"]["command"]["enum"] == ["take coin", "go west"]
    assert again[1]["required"] == ["final_answer"]
    assert schema_of(action_format({"act": act}, answer=False))["properties"]["tool"] == {"const": "act"}


def test_each_call_gets_the_commands_admissible_at_that_moment():
    env, task = _game()
    moves = [json.dumps({"tool": "act", "arguments": {"command": c}}) for c in env._gold[task.id]]
    model = ScriptedChatModel(script=moves + ["never read"])
    traj = asyncio.run(arun_rollout(load_harness("textworld_choice"), model, env, task))
    assert traj.reward == 1.0 and traj.stop_reason == "hook:game_over"
    before = _admissible_before(env, task, env._gold[task.id])  # what each call was allowed
    for kwargs, command, allowed in zip(model.call_kwargs, env._gold[task.id], before, strict=True):
        schema = schema_of(kwargs["response_format"])
        assert schema["properties"]["arguments"]["properties"]["command"]["enum"] == allowed
        assert command in allowed
    assert len(model.call_kwargs) == len(moves)


def test_plain_harness_calls_carry_no_response_format():
    env, task = _game()
    model = ScriptedChatModel(script=['{"final_answer": "done"}'])
    asyncio.run(arun_rollout(load_harness("textworld"), model, env, task))
    assert "response_format" not in model.call_kwargs[0]


def test_random_weights_under_the_constraint_only_ever_play_admissible_commands(tokenizer):  # noqa: F811
    env, task = _game()
    spec = load_harness("textworld_choice")
    budget = spec.budget.model_copy(update={"max_model_calls": 4, "max_env_actions": 4, "max_output_tokens": 160})
    spec = spec.model_copy(update={"budget": budget, "decoding": spec.decoding.model_copy(update={"temperature": 1.0})})
    model = tiny_llama(tokenizer, positions=8192)  # byte tokens: the game's prompt is ~2k of them
    chat = LocalChatModel.from_model(model, tokenizer, max_tokens=160, batch_window_s=0.05)
    try:
        traj = asyncio.run(arun_rollout(spec, chat, env, task, seed=3))
    finally:
        chat.engine.close()
    assert traj.interface_violations == 0 and traj.env_actions == len(traj.calls) >= 1
    played = traj.score_detail["got"]
    assert all(c in allowed for c, allowed in zip(played, _admissible_before(env, task, played), strict=True))


def test_once_the_env_action_budget_is_spent_the_schema_asks_for_the_answer():
    env = get_env("reasoning_gym:families=chain_sum,size=20,seed=0,tools=calculator")
    task = env.tasks("train", 1)[0]
    spec = apply_edit(load_harness("reasoning_gym"), [
        {"op": "replace", "path": "/parser/mode", "value": "json"},
        {"op": "replace", "path": "/decoding/constrain", "value": "actions_or_answer"},
        {"op": "replace", "path": "/budget/max_env_actions", "value": 1}])
    expression = task.prompt.rsplit(":", 1)[1].strip(" =")
    model = ScriptedChatModel(script=[json.dumps({"tool": "calculator", "arguments": {"expression": expression}}),
                                      json.dumps({"final_answer": env.reveal(task)})])
    traj = asyncio.run(arun_rollout(spec, model, env, task))
    assert traj.passed and len(model.call_kwargs) == 2
    first, second = (json.dumps(kw["response_format"]) for kw in model.call_kwargs)
    assert '"const": "calculator"' in first and "final_answer" in first
    assert "calculator" not in second and "final_answer" in second  # the one action is spent: answer now


def test_under_actions_only_a_spent_budget_still_leaves_the_answer():
    from coevo.harnesses.constrain import constrained_format

    spec = apply_edit(load_harness("reasoning_gym"), [
        {"op": "replace", "path": "/parser/mode", "value": "json"},
        {"op": "replace", "path": "/decoding/constrain", "value": "actions"}])
    note = Tool("note", "a note", {"type": "object", "properties": {"text": {"type": "string"}}}, lambda text: "ok")
    assert "final_answer" not in json.dumps(constrained_format(spec, {"note": note}))
    assert "final_answer" in json.dumps(constrained_format(spec, {"note": note}, answer=True))
