"""Each suite's base harness H0 validates and runs end to end through the real harness graph and
the real verifier: a gold reply scores 1, a wrong one less (scripted fake policy)."""

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage

from coevo.envs.registry import get_env
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import load_harness
from coevo.models.fake import ScriptedChatModel


def _run(spec_name, env, task, script):
    return asyncio.run(arun_rollout(load_harness(spec_name), ScriptedChatModel(script=script), env, task))


def test_reasoning_gym_h0():
    env = get_env("reasoning_gym:size=10")
    task = env.tasks("train", 1)[0]
    good = _run("reasoning_gym", env, task, ["Sorting them.\nFinal answer: " + env.reveal(task)])
    assert good.reward == 1.0 and good.stop_reason == "final_answer"
    bad = _run("reasoning_gym", env, task, ["Final answer: nope"])
    assert bad.reward < 1.0


def test_bfcl_ast_h0():
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=simple_python,size=20")
    task = env.tasks("train", 1)[0]
    good = _run("bfcl", env, task, [f"```python\n{env.reveal(task)}\n```"])
    assert good.reward == 1.0 and good.passed, good.score_detail
    bad = _run("bfcl", env, task, ["I would call the function."])
    assert bad.reward == 0.0


def test_textworld_h0():
    pytest.importorskip("textworld")
    env = get_env("textworld:challenge=tw-simple,size=3")
    task = env.tasks("train", 1)[0]
    moves = [json.dumps({"tool": "act", "arguments": {"command": c}}) for c in env._gold[task.id]]
    good = _run("textworld", env, task, moves + ['{"final_answer": "done"}'])
    assert good.reward == 1.0 and good.passed and good.env_actions == len(moves)
    bad = _run("textworld", env, task, ['{"final_answer": "done"}'])
    assert bad.reward == 0.0


def _numbered_game():
    """A numbered tw-simple game, its first train task, and the number of each winning command in the
    list shown before it ("2.", ...)."""
    pytest.importorskip("textworld")
    env = get_env("textworld:challenge=tw-simple,size=3,admissible=numbered")
    task = env.tasks("train", 1)[0]
    ep, numbers = env.episode(task), []
    act = {t.name: t for t in ep.tools}["act"]
    for command in env._gold[task.id]:
        numbers.append(f"{ep.state['choices'].index(command) + 1}.")
        act.fn(command=command)
    ep.close()
    return env, task, numbers


def test_textworld_numbered_h0_plays_by_number_and_stops_when_the_game_ends():
    env, task, numbers = _numbered_game()
    first = json.dumps({"tool": "act", "arguments": {"command": env._gold[task.id][0]}})  # JSON actions parse too
    good = _run("textworld_numbered", env, task, ["Let me think.", first, *numbers[1:], "never read"])
    assert good.reward == 1.0 and good.passed and good.env_actions == len(numbers)
    assert good.stop_reason == "hook:game_over"
    bad = _run("textworld_numbered", env, task, ["99", "go somewhere"])
    assert bad.reward == 0.0 and bad.env_actions == 1


def test_textworld_numbered_retry_drops_an_off_format_reply_instead_of_keeping_it_for_the_model_to_copy():
    env, task, numbers = _numbered_game()
    script = ["You are now within the cellar.", *numbers, "never read"]
    kept, dropped = _run("textworld_numbered", env, task, script), _run("textworld_numbered_retry", env, task, script)
    for traj in (kept, dropped):
        assert traj.reward == 1.0 and traj.interface_violations == 1 and traj.stop_reason == "hook:game_over"
    assert any("within the cellar" in str(m) for m in kept.messages)  # H0 keeps it (and a violation message)
    assert not any("within the cellar" in str(m) for m in dropped.messages)
    assert len(dropped.messages) < len(kept.messages)


def test_bfcl_multi_turn_h0_plays_every_turn():
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=multi_turn_base,size=10")
    task = env.tasks("train", 1)[0]
    script = []
    for turn in env.gold_actions(task):
        for i, (name, args) in enumerate(turn):
            script.append(AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{len(script)}"}]))
        script.append("Done with this turn.")
    traj = _run("bfcl_multi_turn", env, task, script)
    assert traj.reward == 1.0, traj.score_detail.get("public")


def test_bfcl_multi_turn_h0_first_turn_runs_real_tools():
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=multi_turn_base,size=10")
    task = env.tasks("train", 1)[0]
    first = env.gold_actions(task)[0]
    script = [AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": f"c{i}"}])
              for i, (n, a) in enumerate(first)]
    traj = _run("bfcl_multi_turn", env, task, script + ["Done."])
    assert traj.env_actions == len(first) and traj.interface_violations == 0
    assert traj.score_detail["public"]["calls"] == len(first)
