"""The verifiers adapter (coevo.envs.verifiers_adapter) on verifiers v1 taskset packages written with the
library's own classes (tests/vf_reverse.py: single-turn; tests/vf_guess.py: a multi-turn game with its own
Env; tests/vf_tools.py: a task with a tool server): tasks and splits, the gold answer and ``info`` kept out,
the task's rewards and the env's own as the score, the game's answers as user turns, a game cut short,
a tool server's tools as the episode's, the refusals. Through the harness graph and the CLI:
tests/unit/test_env_verifiers_loop.py."""

import pytest

vf = pytest.importorskip("verifiers.v1")

from coevo.envs.interaction import next_user_turn  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402
from coevo.envs.verifiers_adapter import VerifiersEnv, prompt_text  # noqa: E402

REVERSE = "verifiers:vf_reverse"


def test_prompt_text_joins_the_system_prompt_and_labels_few_shot_turns():
    assert prompt_text(None, "just text") == "just text"
    assert prompt_text("Be brief.", [vf.UserMessage(content="2+2?")]) == "Be brief.\n\n2+2?"
    shots = [vf.UserMessage(content="1+1?"), vf.AssistantMessage(content="2"),
             {"role": "user", "content": [{"type": "text", "text": "2+2?"}, {"type": "image_url", "image_url": {}}]}]
    assert prompt_text(None, shots) == "[user]\n1+1?\n\n[assistant]\n2\n\n[user]\n2+2?"


def test_train_tasks_come_from_the_taskset_and_val_test_from_its_eval_split_without_the_answer():
    env = get_env(f"{REVERSE},size=8,eval_split=test")
    train, val, test = (env.tasks(s) for s in ("train", "val", "test"))
    assert [t.metadata["vf_dataset"] for t in train] == ["train"] * 4
    # the held-out "apple" repeats a train word: dropped, and val/test stay on the held-out rows
    assert [t.prompt.rsplit(" ", 1)[-1] for t in val + test] == ["grape", "melon", "peach", "cherry"]
    assert {t.metadata["vf_dataset"] for t in val + test} == {"eval"}
    assert train[0].prompt == "Put your answer in <reversed> tags.\n\nReverse the word: plum"
    for task in train + val + test:
        assert env.key(task).data.answer not in task.prompt  # the gold reversal stays in the adapter
        assert set(task.metadata) == {"vf_taskset", "vf_dataset", "vf_idx", "vf_name"}  # no answer, no info
    assert get_env(f"{REVERSE},size=8,eval_split=test").tasks("val") == val


def test_without_an_eval_split_the_splits_are_cut_from_the_taskset_in_order():
    env = get_env(f"{REVERSE},size=8")
    assert [len(env.tasks(s)) for s in ("train", "val", "test")] == [4, 2, 2]
    assert env.tasks("test")[-1].prompt.endswith("lime")


def test_the_tasks_rewards_score_a_single_turn_reply_through_the_conversation_hook_and_directly():
    env = get_env(f"{REVERSE},size=8")
    task = env.tasks("train")[0]  # plum
    episode = env.episode(task)
    assert next_user_turn(episode, "<reversed>mulp</reversed>") is None  # one turn: the reply is final
    score = env.score(task, "<reversed>mulp</reversed>", episode)
    assert score.passed and score.reward == 1.0
    assert score.detail["public"]["rewards"] == {"lcs": 1.0} and score.detail["public"]["turns"] == 1
    assert score.detail["public"]["metrics"] == {"reply_chars": 25.0}
    wrong = env.episode(task)
    assert not env.score(task, "<reversed>plum</reversed>", wrong).passed  # recorded first, then scored
    assert env.trivial_baseline("val")["empty"] == 0.0


def test_success_and_reward_modes_read_the_reward():
    partial = get_env(f"{REVERSE},size=8,reward=partial")
    task = partial.tasks("train")[0]  # plum: "mul" has LCS ratio 6/7
    near = partial.score(task, "<reversed>mul</reversed>", partial.episode(task))
    assert near.reward == pytest.approx(6 / 7) and near.passed
    strict = get_env(f"{REVERSE},size=8,success=0.9")
    own = strict.tasks("train")[0]  # the same word; a task id names its config, so each env scores its own
    assert own.prompt == task.prompt and own.id != task.id
    assert strict.score(own, "<reversed>mul</reversed>", strict.episode(own)).reward == 0.0


def test_a_multi_turn_env_answers_each_move_until_its_game_ends():
    env = get_env("verifiers:vf_guess,size=4")  # an infinite taskset, read up to size
    task = env.tasks("train")[1]  # game 1: the number is 2
    assert "guess my number" in task.prompt
    assert "secret" not in task.prompt and "info" not in task.metadata
    episode = env.episode(task)
    assert next_user_turn(episode, "5") == "lower"
    assert next_user_turn(episode, "1") == "higher"
    assert next_user_turn(episode, "2") is None  # right: the env's loop ends
    score = env.score(task, "2", episode)
    assert score.passed and score.detail["public"]["rewards"] == {"won": 1.0}
    assert score.detail["public"]["turns"] == 3
    assert [m.role for m in episode.state["vf_trace"].messages] == ["user", "assistant", "user", "assistant",
                                                                    "user", "assistant"]


def test_a_game_cut_short_is_scored_on_what_was_played_and_its_loop_ends():
    env = get_env("verifiers:vf_guess,size=4")
    task = env.tasks("train")[0]  # the number is 1
    episode = env.episode(task)
    assert next_user_turn(episode, "3") == "lower"
    score = env.score(task, None, episode)  # the harness ran out of budget
    assert not score.passed and score.detail["public"]["turns"] == 1
    assert episode.state["played"].done()
    episode.close()
    episode.close()


def test_a_tasks_tool_server_gives_the_episodes_tools_on_a_state_of_its_own():
    env = get_env("verifiers:vf_tools,size=4")
    task = env.tasks("train")[0]  # 17 * 23
    episode = env.episode(task)
    (tool,) = episode.tools
    assert tool.name == "calc_multiply" and tool.description == "Multiply two integers."
    assert tool.parameters["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert tool.fn(a=17, b=23) == "391"
    score = env.score(task, "391", episode)
    assert score.passed and score.detail["public"]["metrics"] == {"tool_calls": 1.0}
    assert [m.role for m in episode.state["vf_trace"].messages] == ["user", "assistant", "tool", "assistant"]
    fresh = env.episode(task)  # a new episode: fresh tool servers and state
    assert env.score(task, "391", fresh).detail["public"]["metrics"] == {"tool_calls": 0.0}


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="not a verifiers Taskset"):
        get_env("verifiers:vf_reverse:TRAIN_WORDS")
    with pytest.raises(ValueError, match="cannot be loaded"):
        VerifiersEnv("no_such_taskset_pkg")
    with pytest.raises(ValueError, match="bad arguments"):
        get_env(f"{REVERSE},colour=blue")
    with pytest.raises(ValueError, match="no split field"):
        get_env("verifiers:vf_guess,eval_split=test").tasks("val")
    with pytest.raises(ValueError, match="has no tasks"):
        get_env(f"{REVERSE},split=empty").tasks("train")
    with pytest.raises(ValueError, match="reward mode"):
        get_env(f"{REVERSE},reward=graded")


def test_an_env_releases_its_event_loop_thread_when_closed_or_collected():
    import gc
    import threading
    import time

    def threads():
        return sum(t.name == "coevo-verifiers" and t.is_alive() for t in threading.enumerate())

    gc.collect()
    before = threads()
    envs = [get_env(f"{REVERSE},size=8") for _ in range(3)]
    task = envs[0].tasks("train")[0]
    assert envs[0].score(task, "<reversed>mulp</reversed>", envs[0].episode(task)).passed  # the loop plays
    assert threads() == before + 3
    envs[0].close()
    envs[0].close()  # twice is fine
    assert threads() == before + 2
    del envs, task
    gc.collect()
    deadline = time.monotonic() + 5
    while threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threads() == before  # before: one daemon thread per env made, for the life of the process
