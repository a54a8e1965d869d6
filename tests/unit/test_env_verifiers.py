"""The verifiers adapter (coevo.envs.verifiers_adapter) on small verifiers environments made here from
in-memory datasets: tasks and splits, the gold answer kept out, the rubric as the score, multi-turn
environment responses as user turns, the refusals. The shipped environments (ReasoningGymEnv,
GymEnv) run in tests/integration/test_env_adapters.py."""

import signal
import sys
import types

import pytest

vf = pytest.importorskip("verifiers")

from datasets import Dataset  # noqa: E402

from coevo.envs.interaction import next_user_turn  # noqa: E402
from coevo.envs.registry import get_env  # noqa: E402
from coevo.envs.verifiers_adapter import VerifiersEnv, prompt_text  # noqa: E402


def exact(completion, answer, **_):
    return 1.0 if completion[-1]["content"].strip() == answer else 0.0


def last_guess(completion, answer, **_):
    guesses = [m["content"] for m in completion if m["role"] == "assistant"]
    return 1.0 if guesses and guesses[-1].strip() == answer else 0.0


def half_credit(completion, answer, **_):
    return 0.5 if answer in completion[-1]["content"] else 0.0


class Guess(vf.MultiTurnEnv):
    """Guess a number: the environment says higher or lower; a right guess ends the game with a final
    response. Rubric: 1 for a right last guess. ``released`` counts cleanup calls (a cut-short game too)."""

    released = 0

    async def env_response(self, messages, state, **kwargs):
        guess, target = int(messages[-1]["content"]), int(state["answer"])
        if guess == target:
            state["final_env_response"] = [{"role": "user", "content": "right!"}]
            return state["final_env_response"]
        return [{"role": "user", "content": "higher" if guess < target else "lower"}]

    @vf.cleanup
    async def release(self, state):
        Guess.released += 1


def questions(n, offset=0):
    return Dataset.from_list([{"question": f"What is {i} + {i}?", "answer": str(2 * i)}
                              for i in range(offset, offset + n)])


@pytest.fixture
def vf_envs(monkeypatch):
    """A module ``vf_fake`` whose ``load_environment`` makes the environments these tests name."""
    module = types.ModuleType("vf_fake")

    def load_environment(kind="single", n=12, held=4, weight=1.0, group=False, held_from=100):
        rubric = vf.Rubric(funcs=[exact], weights=[weight])
        if group:
            async def spread(completions, **_):
                return [0.0 for _ in completions]
            rubric = vf.Rubric(funcs=[spread])
        if kind == "single":
            return vf.SingleTurnEnv(dataset=questions(n), eval_dataset=questions(held, held_from) if held else None,
                                    system_prompt="Answer with the number only.", rubric=rubric)
        if kind == "partial":
            return vf.SingleTurnEnv(dataset=questions(n), rubric=vf.Rubric(funcs=[half_credit]))
        if kind == "tools":
            def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b
            return vf.ToolEnv(dataset=questions(n), tools=[add], rubric=rubric)
        if kind == "guess":
            data = Dataset.from_list([{"question": f"Guess my number ({i}).", "answer": str(10 + i)} for i in range(n)])
            return Guess(dataset=data, max_turns=6, rubric=vf.Rubric(funcs=[last_guess]))
        if kind == "broken":  # a user's factory with a bug of its own
            raise KeyError("question_column")
        return "not an environment"

    module.load_environment = load_environment
    monkeypatch.setitem(sys.modules, "vf_fake", module)
    return module


def test_prompt_text_joins_a_plain_prompt_and_labels_few_shot_turns():
    assert prompt_text("just text") == "just text"
    plain = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert prompt_text(plain) == "Be brief.\n\n2+2?"
    shots = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"},
             {"role": "user", "content": [{"type": "text", "text": "2+2?"}, {"type": "image_url", "image_url": {}}]}]
    assert prompt_text(shots) == "[user]\n1+1?\n\n[assistant]\n2\n\n[user]\n2+2?"


def test_tasks_come_from_the_dataset_and_val_test_from_its_eval_dataset_without_the_answer(vf_envs):
    env = get_env("verifiers:vf_fake,size=8")
    train, val, test = (env.tasks(s) for s in ("train", "val", "test"))
    assert (len(train), len(val), len(test)) == (4, 2, 2)
    assert [t.metadata["vf_dataset"] for t in train + val + test] == ["train"] * 4 + ["eval"] * 4
    assert train[1].prompt == "Answer with the number only.\n\nWhat is 1 + 1?"
    assert val[0].prompt.endswith("What is 100 + 100?") and test[1].prompt.endswith("What is 103 + 103?")
    for task in train + val + test:
        gold = env.key(task)["answer"]
        assert gold not in task.prompt.replace(f"{int(gold) // 2} + {int(gold) // 2}", "")
        assert set(task.metadata) == {"vf_env", "vf_dataset", "vf_row", "vf_task"}  # no answer, no info
    assert env.tasks("train") == train and get_env("verifiers:vf_fake,size=8").tasks("val") == val


def test_val_and_test_stay_on_the_eval_rows_when_rows_repeat_or_a_dataset_is_short(vf_envs):
    # eval rows 2, 3 repeat train rows (dropped as duplicates): val must not slide onto train rows
    overlap = get_env("verifiers:vf_fake,n=12,held=4,held_from=2,size=8")
    assert [t.metadata["vf_dataset"] for t in overlap.tasks("train")] == ["train"] * 4
    assert {t.metadata["vf_dataset"] for t in overlap.tasks("val") + overlap.tasks("test")} == {"eval"}
    assert len(overlap.tasks("val")) == 1 and len(overlap.tasks("test")) == 1
    # a train dataset shorter than its share: the held-out eval rows are never trained on
    short = get_env("verifiers:vf_fake,n=1,held=10,size=8")
    assert [t.metadata["vf_dataset"] for t in short.tasks("train")] == ["train"]
    assert [len(short.tasks(s)) for s in ("val", "test")] == [2, 2]
    assert {t.metadata["vf_dataset"] for t in short.tasks("val") + short.tasks("test")} == {"eval"}


def test_an_environment_without_rows_is_refused_naming_it(vf_envs):
    with pytest.raises(ValueError, match="'vf_fake' has no dataset rows"):
        get_env("verifiers:vf_fake,n=0,held=0").tasks("train")


def test_without_an_eval_dataset_the_splits_are_cut_from_the_train_rows(vf_envs):
    env = get_env("verifiers:vf_fake,size=8,held=0")
    assert [len(env.tasks(s)) for s in ("train", "val", "test")] == [4, 2, 2]
    assert env.tasks("test")[-1].prompt.endswith("What is 7 + 7?")


def test_the_rubric_scores_a_single_turn_reply_through_the_conversation_hook_and_directly(vf_envs):
    env = get_env("verifiers:vf_fake,size=8")
    task = env.tasks("train")[3]
    episode = env.episode(task)
    assert next_user_turn(episode, "6") is None  # one turn: the reply is final
    score = env.score(task, "6", episode)
    assert score.passed and score.reward == 1.0
    assert score.detail["public"]["metrics"] == {"exact": 1.0, "num_turns": 1.0}
    assert score.detail["public"]["stop_condition"] == "max_turns_reached"
    wrong = env.episode(task)
    assert not env.score(task, "7", wrong).passed  # scored without the hook: the answer is recorded first
    assert env.trivial_baseline("val")["empty"] == 0.0


def test_success_and_reward_modes_read_the_rubric_reward(vf_envs):
    env = get_env("verifiers:vf_fake,kind=partial,size=4,reward=partial")
    task = env.tasks("train")[0]
    half = env.score(task, "the answer is 0", env.episode(task))
    assert half.reward == 0.5 and half.passed  # 0.5 >= the default success 0.5
    strict = get_env("verifiers:vf_fake,kind=partial,size=4,success=0.9")
    same = strict.tasks("train")[0]  # the same row under another success rule: another config's task
    assert same.prompt == task.prompt and same.id != task.id
    assert strict.score(same, "0", strict.episode(same)).reward == 0.0
    weighted = get_env("verifiers:vf_fake,size=4,held=0,weight=3.0,reward=partial")
    t = weighted.tasks("train")[1]
    assert weighted.score(t, "2", weighted.episode(t)).reward == 1.0  # 3.0 clipped to [0, 1]


def test_a_multi_turn_environment_answers_each_turn_until_its_stop_condition(vf_envs):
    env = get_env("verifiers:vf_fake,kind=guess,n=3,size=3,val_frac=0,test_frac=0")
    task = env.tasks("train")[1]  # the number is 11
    episode = env.episode(task)
    assert next_user_turn(episode, "5") == "higher"
    assert next_user_turn(episode, "20") == "lower"
    assert next_user_turn(episode, "11") is None  # the final env response ends the game
    score = env.score(task, "11", episode)
    assert score.passed and score.detail["public"]["turns"] == 3
    assert score.detail["public"]["metrics"]["num_turns"] == 3
    assert episode.state["vf_state"]["completion"][-1] == {"role": "user", "content": "right!"}


def test_a_game_cut_short_is_scored_on_what_was_played_and_still_released(vf_envs):
    env = get_env("verifiers:vf_fake,kind=guess,n=3,size=3,val_frac=0,test_frac=0")
    task = env.tasks("train")[0]
    before = Guess.released
    episode = env.episode(task)
    assert next_user_turn(episode, "3") == "higher"
    score = env.score(task, None, episode)  # the harness ran out of budget
    assert not score.passed and score.detail["public"]["turns"] == 1
    episode.close()
    episode.close()
    assert Guess.released == before + 1


def test_refusals_name_the_problem(vf_envs):
    with pytest.raises(ValueError, match="offers tools \\(add\\)"):
        get_env("verifiers:vf_fake,kind=tools")
    with pytest.raises(ValueError, match="not a verifiers Environment"):
        get_env("verifiers:vf_fake:load_environment,kind=other")
    with pytest.raises(ValueError, match="could not be made.*env_id"):
        get_env("verifiers:vf_fake,kind=other")  # through verifiers' own loader
    with pytest.raises(ValueError, match="could not be made.*question_column"):
        get_env("verifiers:vf_fake:load_environment,kind=broken")  # any error of a user's factory
    with pytest.raises(ValueError, match="cannot be imported"):
        VerifiersEnv("no_such_pkg.mod:make")
    with pytest.raises(ValueError, match="reward mode"):
        get_env("verifiers:vf_fake,reward=graded")
    grouped = get_env("verifiers:vf_fake,group=true,size=4")
    task = grouped.tasks("train")[0]
    with pytest.raises(ValueError, match="cannot score one rollout"):
        grouped.score(task, "0", grouped.episode(task))


def test_loading_an_environment_keeps_coevos_signal_handlers(vf_envs):
    def mine(*_):
        return None

    old = signal.signal(signal.SIGTERM, mine)
    try:
        get_env("verifiers:vf_fake,size=4")
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_an_env_releases_its_event_loop_thread_when_closed_or_collected(vf_envs):
    import gc
    import threading
    import time

    def threads():
        return sum(t.name == "coevo-verifiers" and t.is_alive() for t in threading.enumerate())

    before = threads()
    envs = [get_env("verifiers:vf_fake,size=4") for _ in range(3)]
    task = envs[0].tasks("train")[0]
    assert envs[0].score(task, "0", envs[0].episode(task)).reward in (0.0, 1.0)  # the loop plays
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
