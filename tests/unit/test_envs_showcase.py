"""The showcase suite (issue 38): price look-ups from a seed, exact 1/0 scoring, disjoint splits of the
sizes the default job needs, low trivial baselines, no gold hint in a task, and no task equal to a
demonstration its base harness shows."""

import pytest

from coevo.envs.registry import get_env
from coevo.harnesses import load_harness


def test_splits_are_disjoint_sized_and_differ_by_seed():
    env = get_env("showcase:size=1500,seed=0,items=5")
    splits = {s: env.tasks(s) for s in ("train", "val", "test")}
    assert {s: len(t) for s, t in splits.items()} == {"train": 900, "val": 300, "test": 300}
    prompts = [t.prompt for ts in splits.values() for t in ts]
    assert len(set(prompts)) == len(prompts)
    other = get_env("showcase:size=1500,seed=1,items=5")
    assert not {t.prompt for t in other.tasks("test")} & {t.prompt for t in splits["test"]}
    assert [t.id for t in get_env("showcase:size=1500,seed=0,items=5").tasks("val")] == [t.id for t in splits["val"]]


def test_the_answer_is_the_asked_price_exactly_and_no_task_carries_a_hint():
    env = get_env("showcase:size=60,seed=3,items=4")
    for task in env.tasks("train"):
        gold = env.reveal(task)
        item = task.prompt.rsplit("the ", 1)[1].split(" cost")[0]
        assert f"{item} {gold}," in task.prompt or f"{item} {gold}." in task.prompt
        ep = env.episode(task)
        assert env.score(task, f" {gold} ", ep).passed and not env.score(task, f"{gold}.", ep).passed
        assert env.score(task, "The answer is " + gold, ep).reward == 0.0 and not ep.tools
        assert set(task.metadata) == {"family"}  # nothing that points at the answer


def test_trivial_baselines_stay_low_and_the_base_demonstrations_are_no_task():
    demos = {s.input for s in load_harness("showcase").skills.values()}
    for seed in range(3):
        env = get_env(f"showcase:size=1500,seed={seed},items=5")
        assert env.trivial_baseline("val")["best_constant"][1] <= 0.05
        positional = env.positional_baseline("test")
        assert 0.1 < positional["first"] < 0.3 and 0.1 < positional["last"] < 0.3
        assert not demos & {t.prompt for s in ("train", "val", "test") for t in env.tasks(s)}


def test_bad_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="items=2 to 16"):
        get_env("showcase:items=40")
    with pytest.raises(ValueError, match="size=3 or more"):
        get_env("showcase:size=1")
