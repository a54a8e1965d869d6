"""The bfcl suite: AST tasks scored by BFCL's ast_checker, multi-turn tasks whose stateful tools run
during the episode and whose end state multi_turn_checker scores; splits; global cleanup."""

import pytest

pytest.importorskip("bfcl_eval")

from coevo.envs.base import SPLITS  # noqa: E402
from coevo.envs.interaction import next_user_turn  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402


@pytest.fixture(scope="module")
def ast_env():
    return get_env("bfcl:categories=simple_python+parallel,size=60")


@pytest.fixture(scope="module")
def mt_env():
    return get_env("bfcl:categories=multi_turn_base+multi_turn_miss_func,size=20")


def _executor_globals(env):
    return [k for k in vars(env.bfcl.executor_module) if k.startswith("coevo")]


def test_ast_gold_scores_one_and_wrong_scores_zero(ast_env):
    for task in ast_env.tasks("train", 6):
        gold = ast_env.reveal(task)
        assert gold not in task.prompt
        ep = ast_env.episode(task)
        assert ep.tools == []
        good = ast_env.score(task, gold, ep)
        assert good.reward == 1.0 and good.passed, (gold, good.detail)
        # BFCL's verdict on the reply as submitted: its decoder strips bare backticks but not a tag
        assert ast_env.score(task, f"```\n{gold}\n```", ep).passed
        fenced = ast_env.score(task, f"```python\n{gold}\n```", ep)
        assert not fenced.passed and fenced.detail["public"]["error_type"] == "ast_decoder:decoder_failed"
        wrong = gold.replace("(", "_x(", 1)
        bad = ast_env.score(task, wrong, ep)
        assert bad.reward == 0.0 and bad.detail["public"]["error_type"]
    garbage = ast_env.score(task, "I think you should call it", ep)
    assert garbage.reward == 0.0 and garbage.detail["public"]["error_type"].startswith("ast_decoder")


def test_splits_deterministic_and_disjoint_by_question(ast_env):
    again = get_env("bfcl:categories=simple_python+parallel,size=60")
    for s in SPLITS:
        assert [t.id for t in ast_env.tasks(s)] == [t.id for t in again.tasks(s)]
    questions = {s: {t.prompt.split("\n\nAvailable functions")[0] for t in ast_env.tasks(s)} for s in SPLITS}
    assert not (questions["train"] & questions["val"] or questions["train"] & questions["test"]
                or questions["val"] & questions["test"])
    assert sum(len(ast_env.tasks(s)) for s in SPLITS) == 120


def _play(env, task, episode, actions):
    for i, turn in enumerate(actions):
        if i:
            assert next_user_turn(episode, "done") is not None
        tools = {t.name: t for t in episode.tools}
        for name, kwargs in turn:
            tools[name].fn(**kwargs)


def test_multi_turn_gold_calls_score_one_and_clean_up(mt_env):
    task = next(t for t in mt_env.tasks("train") if t.metadata["category"] == "multi_turn_base")
    ep = mt_env.episode(task)
    actions = mt_env.gold_actions(task)
    _play(mt_env, task, ep, actions)
    assert next_user_turn(ep, "done") is None
    assert _executor_globals(mt_env)  # live instances during the episode
    ep.close()
    assert _executor_globals(mt_env) == []
    score = mt_env.score(task, "done", ep)
    assert score.reward == 1.0 and score.passed, score.detail
    assert _executor_globals(mt_env) == []


def test_multi_turn_wrong_or_missing_calls_score_zero(mt_env):
    task = next(t for t in mt_env.tasks("train") if t.metadata["category"] == "multi_turn_base")
    actions = mt_env.gold_actions(task)
    ep = mt_env.episode(task)
    _play(mt_env, task, ep, actions[:1])  # stops after the first turn
    ep.close()
    score = mt_env.score(task, "done", ep)
    assert score.reward == 0.0 and score.detail["public"]["error_type"].startswith("multi_turn")
    empty = mt_env.episode(task)
    empty.close()
    assert mt_env.score(task, "", empty).reward == 0.0


def test_tools_act_on_real_state(mt_env):
    task = next(t for t in mt_env.tasks("train") if "GorillaFileSystem" in t.metadata["involved_classes"])
    ep = mt_env.episode(task)
    tools = {t.name: t for t in ep.tools}
    before = tools["ls"].fn()
    tools["mkdir"].fn(dir_name="coevo_probe_dir")
    assert "coevo_probe_dir" in tools["ls"].fn() and "coevo_probe_dir" not in before
    assert tools["ls"].parameters["type"] == "object"
    ep.close()
    with pytest.raises(RuntimeError):
        tools["ls"].fn()


def test_miss_func_reveals_the_held_out_tool_at_its_turn(mt_env):
    task = next(t for s in SPLITS for t in mt_env.tasks(s) if t.metadata["category"] == "multi_turn_miss_func")
    cat, entry, _ = mt_env._entries[task.id]
    (turn, held), = entry["missed_function"].items()
    ep = mt_env.episode(task)
    names = lambda: {t.name for t in ep.tools}  # noqa: E731
    assert held[0]["name"] not in names()
    for _ in range(int(turn)):
        msg = next_user_turn(ep, "ok")
    assert held[0]["name"] in names() and "more functions" in msg
    ep.close()


def test_unsupported_category_is_a_clear_error():
    with pytest.raises(ValueError, match="unsupported bfcl categories"):
        get_env("bfcl:categories=web_search")


def test_import_side_effects_are_contained(ast_env):
    import os
    import sys

    from bfcl_eval.constants import eval_config

    from coevo.envs.bfcl_import import MODEL_CONFIG

    assert "site-packages" not in str(eval_config.PROJECT_ROOT)  # result/score dirs go to coevo's cache
    assert "BFCL_PROJECT_ROOT" not in os.environ  # set only while importing
    # the stand-in for bfcl's model registry (which imports every API SDK) was there only during the import
    module = sys.modules.get(MODEL_CONFIG)
    assert module is None or type(module.MODEL_CONFIG_MAPPING).__name__ != "_AnyModel"


def test_the_score_is_bfcls_verdict_on_the_answer_the_harness_submits():
    import asyncio

    from coevo.harnesses.runtime import arun_rollout
    from coevo.harnesses.spec import load_harness
    from coevo.models.fake import ScriptedChatModel

    env = get_env("bfcl:categories=simple_python")
    task = next(t for s in SPLITS for t in env.tasks(s) if t.metadata["bfcl_id"] == "simple_python_0")
    calls = "[calculate_triangle_area(base=10, height=5)]"
    reply = f"```python\n{calls}\n```"
    raw = env.score(task, reply, env.episode(task))
    assert (raw.reward, raw.passed, raw.detail["public"]["error_type"]) == (0.0, False, "ast_decoder:decoder_failed")

    h0 = load_harness("bfcl")
    assert h0.parser.strip_code_fences  # the base harness's own choice, in its spec
    traj = asyncio.run(arun_rollout(h0, ScriptedChatModel(script=[reply]), env, task))
    assert traj.final_answer == calls and traj.score_detail["got"] == calls and traj.reward == 1.0
    assert traj.messages[-1]["data"]["content"] == reply  # the trajectory keeps what the model said

    keep_fences = h0.model_copy(update={"parser": h0.parser.model_copy(update={"strip_code_fences": False})})
    traj = asyncio.run(arun_rollout(keep_fences, ScriptedChatModel(script=[reply]), env, task))
    assert traj.final_answer == reply and traj.reward == 0.0
