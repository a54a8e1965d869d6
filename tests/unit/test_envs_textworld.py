"""The textworld suite: games built once from seeds into a cache, played through tools, scored by
won / normalised score. Few tests: the three tw-simple games are built once (~10 s each) and reused."""

import pytest

pytest.importorskip("textworld")

from coevo.envs.base import SPLITS  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402
from coevo.envs.textworld_suite import TextWorldEnv, clean_feedback  # noqa: E402

REF = "textworld:challenge=tw-simple,size=3,seed=0"


@pytest.fixture(scope="module")
def env():
    return get_env(REF)


def test_games_load_offline_with_deterministic_disjoint_splits(env):
    tasks = {s: env.tasks(s) for s in SPLITS}
    assert [len(tasks[s]) for s in SPLITS] == [1, 1, 1]
    again = get_env(REF)
    assert [t.id for s in SPLITS for t in again.tasks(s)] == [t.id for s in SPLITS for t in tasks[s]]
    assert len({t.prompt for s in SPLITS for t in tasks[s]}) == 3
    for s in SPLITS:
        task = tasks[s][0]
        assert "$$" not in task.prompt and env.reveal(task) not in task.prompt


def test_walkthrough_wins_and_a_wrong_play_scores_below_one(env):
    task = env.tasks("train", 1)[0]
    ep = env.episode(task)
    tools = {t.name: t for t in ep.tools}
    assert set(tools) == {"act", "look", "inventory"}
    assert "carrying" in tools["inventory"].fn().lower()
    for command in env._gold[task.id]:
        obs = tools["act"].fn(command=command)
    assert "you won" in obs
    assert "ended" in tools["act"].fn(command="go north")
    ep.close()
    won = env.score(task, None, ep)
    assert won.reward == 1.0 and won.passed and won.detail["public"]["won"]

    ep = env.episode(task)
    act = {t.name: t for t in ep.tools}["act"]
    act.fn(command=env._gold[task.id][0])  # one scoring step, then nothing useful
    act.fn(command="dance")
    ep.close()
    part = env.score(task, "I won", ep)
    assert part.reward == 0.0 and not part.passed  # reward=correct (the default): won or nothing
    assert 0.0 < part.detail["public"]["credit"] < 1.0
    partial = get_env(REF + ",reward=partial")
    part = partial.score(partial.tasks("train", 1)[0], "I won", ep)
    assert 0.0 < part.reward < 1.0 and not part.passed
    with pytest.raises(RuntimeError):
        act.fn(command="look")


def test_trivial_baseline_is_zero(env):
    assert env.trivial_baseline("test") == {"n": 1, "empty": 0.0, "best_constant": ("", 0.0), "constants": {"": 0.0}}


def test_cooking_games_come_from_textworlds_matching_split():
    env = TextWorldEnv(challenge="tw-cooking", size=5)
    assert env._args(7, "val")[-4:] == ["--split", "valid", "--seed", "7"]
    assert "--open" in env._args(7, "train") and "--cook" not in env._args(7, "train")
    with pytest.raises(ValueError, match="unknown tw-cooking options"):
        TextWorldEnv(challenge="tw-cooking", rewards="dense")


def test_clean_feedback_drops_banner_and_prompt():
    assert clean_feedback(" | $$  \\$$ >$$ |\n\nHello.\n>   -= Kitchen =-0/1") == "Hello."
