"""A seeded Gymnasium env's tasks are its seeds: a game whose first observation hides what the seed
drew (a number to guess) keeps every seed as a task, while a deterministic start is still one task;
a run whose env splits cannot feed its stages and evaluations is refused before any model loads,
naming each split's size and the setting to change."""

from __future__ import annotations

import pytest
from test_meta_loop import setup_run

gym = pytest.importorskip("gymnasium")

from coevo.app.run import RunError, check_splits, preflight  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402
from coevo.strategies import get_strategy  # noqa: E402

GUESS = "coevo-test/Guess-v0"


class Guess(gym.Env):
    """Guess a number below a million drawn at the reset; the first observation never shows it."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Text(max_length=64)
        self.action_space = gym.spaces.Discrete(2)  # 0: guess lower, 1: higher (never played here)
        self.secret = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.secret = int(self.np_random.integers(10 ** 6))
        return "Guess my number (below a million).", {}

    def step(self, action):
        right = int(action) == self.secret
        return "right" if right else "wrong", float(right), right, False, {}


if GUESS not in gym.registry:
    gym.register(id=GUESS, entry_point=Guess)


def sizes(env) -> list[int]:
    return [len(env.tasks(split)) for split in ("train", "val", "test")]


def test_a_hidden_state_game_keeps_every_seed_as_a_task_with_its_own_id():
    env = get_env(f"gym:{GUESS},size=8")
    assert sizes(env) == [4, 2, 2]
    tasks = [t for split in ("train", "val", "test") for t in env.tasks(split)]
    assert len({t.id for t in tasks}) == 8 and len({t.prompt for t in tasks}) == 1
    assert len({env.key(t) for t in tasks}) == 8  # each task plays its own seed
    assert get_env(f"gym:{GUESS},size=8").tasks("test")[0].id == tasks[-2].id  # ids are stable


def test_a_deterministic_start_is_still_one_task():
    assert sizes(get_env("gym:FrozenLake-v1,size=4,is_slippery=false")) == [1, 0, 0]


def test_a_run_whose_splits_cannot_feed_it_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    from coevo.models import refs

    loaded = []
    monkeypatch.setattr(refs, "load_model", lambda ref, **kw: loaded.append(ref))
    config, _, _ = setup_run(tmp_path, "help")
    config.env.ref = "gym:FrozenLake-v1,size=8,is_slippery=false"
    with pytest.raises(RunError) as err:
        preflight(config, get_strategy("vace"))
    text = str(err.value)
    assert "gives train 1, val 0, test 0 tasks" in text and "train.tasks_per_step = 2" in text
    assert "val needs at least 1" in text and "test needs at least 1" in text and "size=N" in text
    assert "nothing was started" in text and loaded == []  # refused before the model
    config.env.ref = f"gym:{GUESS},size=40"
    assert check_splits(config, get_strategy("vace"), get_env(config.env.ref)) == {"train": 4, "val": 4, "test": 4}


def test_a_strategy_without_a_weight_stage_needs_one_train_task(tmp_path):
    config, _, _ = setup_run(tmp_path, "help")
    config.env.ref, config.env.n_test = f"gym:{GUESS},size=4,val_frac=0.25,test_frac=0.0", 0
    env = get_env(config.env.ref)
    assert check_splits(config, get_strategy("harness_only"), env) == {"train": 3, "val": 1, "test": 0}
    config.train.tasks_per_step = 4
    with pytest.raises(RunError, match="train needs train.tasks_per_step = 4 per weight step"):
        check_splits(config, get_strategy("vace"), env)
