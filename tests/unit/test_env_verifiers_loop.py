"""verifiers v1 tasksets end to end on scripted policies, offline: the single-turn reverse taskset, the
multi-turn guessing game and the tool-using product taskset (tests/vf_reverse.py, tests/vf_guess.py,
tests/vf_tools.py) played through coevo's harness graph under
the shipped ``verifiers`` base harness, through ``coevo eval``, and through a one-round ``coevo run``."""

import asyncio
import re

import pytest
from langchain_core.messages import AIMessage

pytest.importorskip("verifiers.v1")

from typer.testing import CliRunner  # noqa: E402

from coevo.cli import eval as eval_cli  # noqa: E402
from coevo.cli.app import app  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402
from coevo.harnesses import load_harness  # noqa: E402
from coevo.harnesses.runtime import arun_rollout  # noqa: E402
from coevo.models.fake import ScriptedChatModel  # noqa: E402
from coevo.records import EvaluationRecord, RunRecord  # noqa: E402
from coevo.storage import Archive  # noqa: E402

REVERSE = "verifiers:vf_reverse,size=8,eval_split=test"
GUESS = "verifiers:vf_guess,size=8"


def reverser(messages):
    """Reverses the asked word, inside the tags the task asks for."""
    word = re.findall(r"Reverse the word: (\w+)", str(messages[-1].content))[-1]
    return AIMessage(content=f"<reversed>{word[::-1]}</reversed>")


def bisector():
    """Plays the guessing game by bisection over 1..10, reading the last hint."""
    state = {"lo": 1, "hi": 10, "last": None}

    def reply(messages):
        said = str(messages[-1].content)
        if "guess my number" in said:
            state.update(lo=1, hi=10)
        elif said == "higher":
            state["lo"] = state["last"] + 1
        elif said == "lower":
            state["hi"] = state["last"] - 1
        state["last"] = (state["lo"] + state["hi"]) // 2
        return AIMessage(content=str(state["last"]))

    return reply


def test_a_single_turn_taskset_is_scored_by_its_own_reward_through_the_harness_graph():
    env = get_env(REVERSE)
    task = env.tasks("val")[0]  # grape
    right = asyncio.run(arun_rollout(load_harness("verifiers"), ScriptedChatModel(script=[reverser]), env, task))
    assert right.passed and right.reward == 1.0 and right.score_detail["public"]["rewards"] == {"lcs": 1.0}
    wrong = asyncio.run(arun_rollout(load_harness("verifiers"), ScriptedChatModel(script=["grape"]), env, task))
    assert not wrong.passed and wrong.reward == 0.0


def test_a_multi_turn_game_is_played_move_by_move_through_the_harness_graph():
    env = get_env(GUESS)
    task = env.tasks("test")[0]  # game 6: the number is 7
    traj = asyncio.run(arun_rollout(load_harness("verifiers"), ScriptedChatModel(script=[bisector()]), env, task))
    assert traj.passed and traj.score_detail["public"]["rewards"] == {"won": 1.0}
    assert traj.score_detail["public"]["turns"] == 4  # 5 (higher), 8 (lower), 6 (higher), 7
    stubborn = asyncio.run(arun_rollout(load_harness("verifiers"), ScriptedChatModel(script=["5"]), env, task))
    assert not stubborn.passed and stubborn.score_detail["public"]["turns"] == 5  # the game's own limit


def test_a_tool_using_taskset_is_played_with_its_tools_through_the_harness_graph():
    env = get_env("verifiers:vf_tools,size=4")
    task = env.tasks("train")[0]  # 17 * 23
    call = AIMessage(content="", tool_calls=[{"name": "calc_multiply", "args": {"a": 17, "b": 23}, "id": "c1"}])
    model = ScriptedChatModel(script=[call, "391"])
    traj = asyncio.run(arun_rollout(load_harness("verifiers"), model, env, task))
    assert traj.passed and traj.score_detail["public"]["metrics"] == {"tool_calls": 1.0}
    assert "391" in str(model.calls[-1][-1].content)  # the tool's result reached the model


@pytest.mark.parametrize("ref, policy, expected", [(REVERSE, reverser, "1.000"), (GUESS, bisector(), "1.000")])
def test_coevo_eval_runs_a_verifiers_taskset(tmp_path, monkeypatch, ref, policy, expected):
    monkeypatch.setattr(eval_cli, "load_model", lambda model, **kw: ScriptedChatModel(script=[policy]))
    db = str(tmp_path / "e.db")
    out = CliRunner().invoke(app, ["eval", "--env", ref, "--harness", "verifiers", "--model", "scripted:policy",
                                   "--split", "val", "--db", db])
    assert out.exit_code == 0, out.output
    assert re.search(rf"pass@1\s*│\s*{expected}", out.output), out.output
    (record,) = Archive(db).list(EvaluationRecord)
    assert len(record.task_ids) == 2 and record.env.startswith("verifiers") and record.status == "done"


@pytest.mark.parametrize("ref", [REVERSE, GUESS])
def test_one_round_of_coevo_run_on_a_verifiers_taskset(tmp_path, monkeypatch, ref):
    policy = reverser if "reverse" in ref else bisector()
    monkeypatch.setattr("coevo.models.refs.load_model", lambda model, **kw: ScriptedChatModel(script=[policy]))
    db = str(tmp_path / "run.db")
    out = CliRunner().invoke(app, ["run", "--strategy", "harness_only", "--env", ref, "--harness", "verifiers",
                                   "--db", db, "--no-report", "--set", "rounds=1", "--set", f"out_dir={tmp_path}",
                                   "--set", "policy=litellm:openai/policy?api_base=http://127.0.0.1:9/v1",
                                   "--set", "env.n_train=2", "--set", "env.n_val=2", "--set", "env.n_test=2"])
    assert out.exit_code == 0, out.output
    (run,) = [r for r in Archive(db).list(RunRecord) if r.strategy == "harness_only"]
    assert run.status == "done"
    assert "start 1.000 -> final 1.000" in out.output.replace("\u2192", "->"), out.output
