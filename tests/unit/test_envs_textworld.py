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


def test_admissible_commands_reach_the_prompt_and_every_reply_and_the_walkthrough_is_the_teachers(env):
    listed = get_env(REF + ",admissible=true")
    plain, task = env.tasks("train", 1)[0], listed.tasks("train", 1)[0]
    assert task.id != plain.id and task.prompt.startswith(plain.prompt)
    first = env._gold[plain.id][0]
    assert "Admissible commands: " in task.prompt and first in task.prompt.split("Admissible commands: ")[1]
    act = {t.name: t for t in listed.episode(task).tools}["act"]
    reply = act.fn(command=first)
    assert "Admissible commands: " in reply and "look" in reply.split("Admissible commands: ")[1]
    assert "Admissible" not in {t.name: t for t in env.episode(plain).tools}["act"].fn(command=first)
    calls, answer = listed.walkthrough(task)
    assert calls[0] == ("act", {"command": first}) and answer == "done" and len(calls) == len(env._gold[plain.id])
    assert listed.config["admissible"] is True and "admissible" not in env.config


def test_numbered_commands_are_listed_and_act_takes_a_number_of_the_current_list(env):
    numbered, listed = get_env(REF + ",admissible=numbered"), get_env(REF + ",admissible=true")
    plain, task = env.tasks("train", 1)[0], numbered.tasks("train", 1)[0]
    assert len({plain.id, task.id, listed.tasks("train", 1)[0].id}) == 3 and task.prompt.startswith(plain.prompt)
    choices = task.prompt.split("(reply with the number of one):\n")[1].splitlines()
    assert choices[0].startswith("1. ") and choices == [f"{i}. {c}" for i, c in enumerate(sorted(
        c.split(". ", 1)[1] for c in choices), 1)]
    first = env._gold[plain.id][0]
    number = next(i for i, line in enumerate(choices, 1) if line == f"{i}. {first}")
    ep = numbered.episode(task)
    act = {t.name: t for t in ep.tools}["act"]
    assert "number" in {t.name: t for t in ep.tools}["act"].description
    bad = act.fn(command=str(len(choices) + 1))
    assert bad.startswith(f"There is no command {len(choices) + 1}") and "1. " in bad
    assert ep.state["moves"] == 0 and ep.state["commands"] == [] and ep.state["invalid"] == 1
    reply = act.fn(command=f"option {number}")
    assert ep.state["commands"] == [first] and "\n1. " in reply  # the list of the new state follows
    assert ep.state["choices"] == [ln.split(". ", 1)[1] for ln in reply.split("number of one):\n")[1].splitlines()]
    act.fn(command="look")  # a command still works
    assert ep.state["commands"][-1] == "look"
    ep.close()
    assert numbered.config["admissible"] == "numbered" and listed.config["admissible"] is True
    with pytest.raises(ValueError, match="admissible='sometimes'"):
        TextWorldEnv(admissible="sometimes")


def test_coin_collector_levels_are_validated_and_passed_to_tw_make():
    env = TextWorldEnv(challenge="tw-coin_collector", size=2, level=5)
    assert env._args(3, "train") == ["tw-coin_collector", "--level", "5", "--seed", "3"]
    with pytest.raises(ValueError, match="level=301 must be in 1..300"):
        TextWorldEnv(challenge="tw-coin_collector", level=301)
    for level in ("easy", "2.5", "0"):  # a clear error, not int()'s "invalid literal"
        with pytest.raises(ValueError, match=f"level={level} must be in 1..300"):
            TextWorldEnv(challenge="tw-coin_collector", level=level)


def test_the_choice_baselines_refuse_an_env_without_numbered_commands_and_always_first_never_takes_the_coin():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "textworld_random.py"
    spec = importlib.util.spec_from_file_location("textworld_random", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for ref in (REF, REF + ",admissible=true"):  # a number there is a game command, not a choice
        with pytest.raises(ValueError, match="admissible=numbered"):
            bench.random_play(ref, "train", 1, 1, 5)
    won, played = bench.random_play(REF + ",admissible=numbered", "train", 1, 2, 3)
    assert len(won) == len(played) == 2 and all(0 < p <= 3 for p in played)
    with pytest.raises(ValueError, match="policy='last'"):
        bench.random_play(REF + ",admissible=numbered", "train", 1, 1, 5, policy="last")
    coin = "textworld:challenge=tw-coin_collector,size=20,seed=0,level=1,admissible=numbered"
    first, moves = bench.random_play(coin, "train", 1, 1, 6, policy="first")  # option 1 is "examine coin"
    assert first == [0.0] and moves == [6]
    assert bench.random_play(coin, "train", 1, 1, 30)[0] == [1.0]
