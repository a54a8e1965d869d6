"""A user's LangGraph agent as the harness (issue 28): the factory's params evolve as a spec, its graph
runs unchanged, its model calls are recorded with a policy-only loss mask, and a bad factory gets a
clear error before anything is stored."""

import asyncio
import json
import os
import re

import pytest
from harness_kit import ToyEnv, call
from langchain_core.messages import AIMessage

from coevo import load_params
from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.envs.registry import get_env
from coevo.examples.react_agent import ReactParams, make_agent
from coevo.harnesses import HarnessError, HarnessSpec, load_harness
from coevo.harnesses.agent import AgentError, agent_harness, editable, load_agent, narrow, start_harness
from coevo.harnesses.agent_run import arun_agent_rollout, dry_run
from coevo.harnesses.patch import apply_patch
from coevo.harnesses.runtime import arun_rollout
from coevo.models.fake import ScriptedChatModel, char_tokens

EXAMPLE = "coevo.examples.react_agent:make_agent"
CHAIN_SUM = "reasoning_gym:families=chain_sum,size=20,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1"


def example_spec() -> HarnessSpec:
    return start_harness(EXAMPLE, "reasoning_gym")


def test_an_agent_reference_starts_from_the_env_base_with_the_params_defaults():
    spec = example_spec()
    base = load_harness("reasoning_gym")
    assert spec.agent == EXAMPLE and spec.name == "agent:make_agent"
    assert spec.prompt == ReactParams().prompt and spec.tool_view == ReactParams().tool_view
    assert spec.budget == base.budget and spec.parser == base.parser  # undeclared: the env's base harness
    assert editable(spec) == ("/prompt", "/skills", "/tool_view", "/decoding")
    assert editable(base) is None and narrow(None, base) is None
    assert narrow(["/prompt/rules", "/hooks"], spec) == ("/prompt/rules",)
    assert "agent" not in base.model_dump(mode="json")  # specs without an agent keep their ids


def test_an_edit_outside_the_declared_params_is_rejected_and_one_inside_applies():
    spec = example_spec()
    child = apply_patch(spec, [{"op": "replace", "path": "/prompt/system", "value": "Be brief."}])
    assert child.prompt.system == "Be brief." and child.agent == EXAMPLE
    with pytest.raises(HarnessError, match="/hooks"):
        apply_patch(spec, [{"op": "add", "path": "/hooks/h", "value": {
            "event": "after_tool", "condition": "always", "action": "warn", "message": "x"}}])
    with pytest.raises(HarnessError, match="agent factory is the app's code"):
        apply_patch(spec, [{"op": "replace", "path": "/agent", "value": "agent_kit:make_tool_agent"}])
    with pytest.raises(HarnessError, match="agent factory is the app's code"):  # nor slip one into a plain harness
        apply_patch(load_harness("reasoning_gym"), [{"op": "add", "path": "/agent", "value": EXAMPLE}])
    from coevo.harnesses.patch_schema import patch_schema

    assert "/agent" not in json.dumps(patch_schema(load_harness("reasoning_gym")))
    paths = re.findall(r'"(/[a-z_]+)[/"]', json.dumps(patch_schema(spec)))
    assert paths and set(paths) <= {"/prompt", "/skills", "/tool_view", "/decoding"}


def test_params_that_fail_the_users_validation_reject_the_edit():
    spec = agent_harness("agent_kit:make_tool_agent", HarnessSpec())
    with pytest.raises(HarnessError, match="must name Acme"):
        apply_patch(spec, [{"op": "replace", "path": "/prompt/system", "value": "You are a pirate."}])


@pytest.mark.parametrize("ref, message", [
    ("agent_kit", "package.module:make_agent"),
    ("no_such_module_x:make_agent", "does not import"),
    ("agent_kit:missing", "has no 'missing'"),
    ("agent_kit:one_argument", "make_agent(params, model)"),
    ("agent_kit:unannotated", "annotate the first argument"),
    ("agent_kit:unknown_field", "persona"),
])
def test_a_bad_factory_reference_gets_an_error_naming_the_fix(ref, message):
    with pytest.raises(AgentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_agent(ref)


@pytest.mark.parametrize("ref, message", [
    ("agent_kit:raising_factory", "factory raised RuntimeError: no API key"),
    ("agent_kit:not_a_graph", "not a LangGraph graph"),
    ("agent_kit:raising_graph", "graph raised KeyError"),
])
def test_a_factory_or_graph_that_raises_fails_the_dry_run(ref, message):
    spec = agent_harness(ref, HarnessSpec())
    with pytest.raises(AgentError, match=message):
        asyncio.run(dry_run(spec, ToyEnv()))


def test_a_run_with_a_bad_factory_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("coevo.models.refs.load_model", lambda ref, **kw: ScriptedChatModel(script=["0"]))
    config = RunConfig(rounds=1, db=str(tmp_path / "run.db"), out_dir=str(tmp_path), strategy="harness_only",
                       policy="litellm:openai/policy?api_base=http://127.0.0.1:9/v1", harness="agent_kit:raising_graph",
                       env={"ref": CHAIN_SUM, "n_train": 2, "n_val": 2, "n_test": 0})
    try:
        asyncio.run(run_meta(config, run_id="bad-agent"))
    except HarnessError as err:
        assert "graph raised KeyError" in str(err)
    else:
        pytest.fail("the run started with a graph that raises")
    assert not os.path.exists(tmp_path / "run.db")


def test_the_example_rollout_records_tokens_and_masks_the_tool_output_and_the_reminder():
    env = get_env(CHAIN_SUM)
    task = env.tasks("train", 1)[0]
    model = ScriptedChatModel(with_tokens=True, script=[
        call("calculator", "Let me compute.", expression="0 - 4"), "It is -4.\nFinal answer: -4"])
    traj = asyncio.run(arun_rollout(example_spec(), model, env, task, seed=3))
    assert traj.stop_reason == "final_answer" and traj.final_answer == "-4" and traj.passed
    assert traj.model_turns == 2 and traj.env_actions == 1
    assert [m["type"] for m in traj.messages] == ["human", "ai", "tool", "ai"]
    assert all(c.completion_token_ids and c.logprobs for c in traj.calls)
    (segment,) = traj.segments()  # the second prompt extends the first call's prompt and reply
    ids, mask = segment.input_ids, segment.loss_mask
    policy = [t for t, m in zip(ids, mask) if m]
    assert policy == char_tokens("Let me compute.") + char_tokens("It is -4.\nFinal answer: -4")

    def masked(text: str) -> bool:
        tokens = char_tokens(text)
        starts = [i for i in range(len(ids)) if ids[i:i + len(tokens)] == tokens]
        return bool(starts) and all(not any(mask[s:s + len(tokens)]) for s in starts)

    assert masked("<|tool|>-4")  # the calculator's observation
    assert masked("Reminder: End your reply")  # the harness's injection after a tool result
    assert masked(ReactParams().prompt.system) and masked(task.prompt)


def test_the_episode_tools_reach_a_factory_that_takes_them_through_the_tool_view():
    doc = agent_harness("agent_kit:make_tool_agent", HarnessSpec()).model_dump(mode="json")
    doc["tool_view"] = {"exposed": ["lookup"], "renames": {"lookup": "find"}, "descriptions": {"lookup": "Find it."}}
    spec = load_harness(doc)
    seen = []

    model_tools = []

    class Spy(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(messages)
            model_tools[:] = kwargs["tools"]
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    model = Spy(script=[call("find", key="k"), "Final answer: 42"])
    traj = asyncio.run(arun_agent_rollout(spec, model, ToyEnv(), ToyEnv().tasks("train")[0]))
    assert traj.passed and traj.final_answer == "42"
    assert traj.messages[2]["data"]["content"] == "value of k"
    assert seen[0][0].content == "You are Acme's assistant."
    assert [t["function"]["description"] for t in model_tools] == ["Find it."]


def test_the_model_call_budget_ends_an_agent_that_never_answers():
    spec = agent_harness("agent_kit:make_tool_agent", load_harness({"budget": {"max_model_calls": 3}}))
    model = ScriptedChatModel(script=[call("echo", text="again")])
    traj = asyncio.run(arun_agent_rollout(spec, model, ToyEnv(), ToyEnv().tasks("train")[0]))
    assert traj.stop_reason == "budget:model_calls" and traj.final_answer is None and not traj.passed
    assert traj.model_turns == 3 and len(model.calls) == 3


def test_coevo_samples_the_users_model_with_the_harness_decoding_and_a_seed_per_call():
    spec = example_spec()
    seen = []

    class Spy(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            seen.append(kwargs)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    env = get_env(CHAIN_SUM)
    asyncio.run(arun_rollout(spec, Spy(script=[AIMessage("Final answer: 1")]), env, env.tasks("train", 1)[0], seed=5))
    (kwargs,) = seen
    assert kwargs["temperature"] == 0.0 and kwargs["max_tokens"] == spec.budget.max_output_tokens
    assert isinstance(kwargs["seed"], int) and kwargs["tools"][0]["function"]["name"] == "calculator"


def test_evolved_params_load_back_into_the_app(tmp_path):
    evolved = apply_patch(example_spec(), [{"op": "add", "path": "/prompt/rules/r1", "value": {
        "slot": "action_guidance", "text": "Check the sign of the result."}}])
    path = tmp_path / "evolved.json"
    path.write_text(evolved.model_dump_json())
    params = load_params(path, ReactParams)
    app = make_agent(params, ScriptedChatModel(script=["Final answer: 7"]))
    state = app.invoke({"messages": [("user", "3 + 4 =")]})
    assert state["messages"][-1].content == "Final answer: 7"
    assert params.prompt.rules["r1"].text == "Check the sign of the result."


def test_an_agent_rolled_out_inside_a_checkpointed_node_is_no_subgraph_of_that_run():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Outer(TypedDict, total=False):
        answer: str

    spec = agent_harness("agent_kit:make_tool_agent", HarnessSpec())

    async def validate(state: Outer) -> dict:
        traj = await arun_agent_rollout(spec, ScriptedChatModel(script=["Final answer: 42"]), ToyEnv(),
                                        ToyEnv().tasks("train")[0])
        return {"answer": traj.final_answer}

    saver = InMemorySaver()
    builder = StateGraph(Outer)
    builder.add_node("validate", validate)
    builder.add_edge(START, "validate")
    outer = builder.compile(checkpointer=saver)
    state = asyncio.run(outer.ainvoke({}, {"configurable": {"thread_id": "run"}}))
    assert state["answer"] == "42"
    namespaces = {c.config["configurable"].get("checkpoint_ns", "") for c in saver.list(None)}
    assert namespaces == {""}  # the meta run's own checkpoints only


def test_coevo_eval_takes_an_agent_factory_as_the_harness(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coevo.cli import eval as eval_cli
    from coevo.cli.app import app

    monkeypatch.setattr(eval_cli, "load_model", lambda ref, **kw: ScriptedChatModel(script=["Final answer: -4"]))
    db = str(tmp_path / "e.db")
    out = CliRunner().invoke(app, ["eval", "--env", CHAIN_SUM, "--harness", EXAMPLE, "--model", "fake:x",
                                   "--split", "train", "--n", "2", "--db", db])
    assert out.exit_code == 0, out.output
    assert "mean credit" in out.output and example_spec().id[:12] in out.output
