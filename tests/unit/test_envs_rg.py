"""The reasoning_gym suite: offline tasks, the family verifier, content-disjoint splits, baselines,
tools, and the rule that the policy never sees the gold answer."""

import asyncio

import pytest

from coevo.envs.base import SPLITS, Env
from coevo.envs.redact import redact_for_meta
from coevo.envs.registry import get_env
from coevo.envs.sandbox import isolation
from coevo.records import Trajectory

REF = "reasoning_gym:families=word_sorting,size=40,seed=0"


@pytest.fixture(scope="module")
def env():
    return get_env(REF)


def test_is_an_env_with_content_disjoint_splits(env):
    assert isinstance(env, Env)
    splits = {s: env.tasks(s) for s in SPLITS}
    assert [len(splits[s]) for s in SPLITS] == [24, 8, 8]
    questions = {s: {t.prompt for t in splits[s]} for s in SPLITS}
    assert not questions["train"] & questions["val"]
    assert not questions["train"] & questions["test"]
    assert not questions["val"] & questions["test"]
    assert all(t.split == s for s in SPLITS for t in splits[s])


def test_splits_and_ids_are_deterministic(env):
    again = get_env(REF)
    for s in SPLITS:
        assert [t.id for t in env.tasks(s)] == [t.id for t in again.tasks(s)]
    assert len({t.id for s in SPLITS for t in env.tasks(s)}) == 40
    assert env.tasks("train", 3) == env.tasks("train")[:3]


def test_task_ids_follow_content_and_name_their_env_config():
    # seed 1 shifts reasoning-gym's item stream by one: the shared questions are other tasks there (a split
    # boundary moves by one item, so a train question of one config is a val question of the other), and
    # carry other ids; the same config gives the same ids in a second instance.
    a, b = get_env("reasoning_gym:size=20,seed=0"), get_env("reasoning_gym:size=20,seed=1")
    ids_a = {t.prompt: t.id for s in SPLITS for t in a.tasks(s)}
    ids_b = {t.prompt: t.id for s in SPLITS for t in b.tasks(s)}
    shared = set(ids_a) & set(ids_b)
    assert len(shared) >= 15 and not any(ids_a[q] == ids_b[q] for q in shared)
    split_a = {t.prompt: s for s in SPLITS for t in a.tasks(s)}
    split_b = {t.prompt: s for s in SPLITS for t in b.tasks(s)}
    assert any(split_a[q] != split_b[q] for q in shared)
    again = get_env("reasoning_gym:size=20,seed=0,reward=partial")  # the reward mode makes no other task
    assert {t.prompt: t.id for s in SPLITS for t in again.tasks(s)} == ids_a


def test_gold_answer_scores_one_and_a_wrong_one_less(env):
    task = env.tasks("train", 1)[0]
    gold = env.reveal(task)
    ep = env.episode(task)
    good = env.score(task, gold, ep)
    assert good.reward == 1.0 and good.passed and good.detail["expected"] == gold
    bad = env.score(task, "zebra, apple", ep)
    assert bad.reward < 1.0 and not bad.passed
    assert env.score(task, None, ep).reward == 0.0


def test_a_pickled_copy_scores_as_the_env_does(env):
    """What the Ray executor ships to its workers (``RayExecutor._source``: pickled once into the object store)."""
    import pickle

    copy = pickle.loads(pickle.dumps(env))
    task = env.tasks("val", 1)[0]
    assert copy.tasks("val", 1) == [task]
    for answer in (env.reveal(task), "zebra, apple", None):
        assert copy.score(task, answer, copy.episode(task)) == env.score(task, answer, env.episode(task))


def test_a_raising_verifier_scores_zero_with_the_reason(env, monkeypatch):
    task = env.tasks("train", 1)[0]
    ds = env._datasets["word_sorting"]

    def boom(answer, entry):
        raise ValueError("cannot parse")

    monkeypatch.setattr(ds, "score_answer", boom)
    score = env.score(task, "x", env.episode(task))
    assert score.reward == 0.0 and not score.passed
    assert score.detail["public"]["verifier_error"] == "ValueError" and "cannot parse" in score.detail["error"]


def test_gold_never_in_task_and_val_detail_redacted(env):
    for s in SPLITS:
        for task in env.tasks(s):
            assert env.reveal(task) not in task.model_dump_json()
    task = env.tasks("val", 1)[0]
    score = env.score(task, "wrong", env.episode(task))
    assert env.reveal(task) not in str(redact_for_meta(task, score).detail)


def test_policy_prompt_never_contains_the_gold_answer(env):
    from coevo.harnesses.runtime import arun_rollout
    from coevo.harnesses.spec import HarnessSpec
    from coevo.models.fake import ScriptedChatModel

    task = env.tasks("test", 1)[0]
    gold = env.reveal(task)
    model = ScriptedChatModel(script=["Final answer: " + gold])
    traj = asyncio.run(arun_rollout(HarnessSpec(), model, env, task))
    assert traj.reward == 1.0
    seen = "\n".join(str(m.content) for call in model.calls for m in call)
    assert task.prompt.strip()[:40] in seen and gold not in seen


def test_trivial_baseline_exposes_constant_prone_families(env):
    default = env.trivial_baseline("train")
    assert default["empty"] == 0.0 and default["best_constant"][1] < 0.2
    coin = get_env("reasoning_gym:families=coin_flip,size=40").trivial_baseline("train")
    assert coin["best_constant"][0] == "0" and coin["best_constant"][1] > 0.5


def test_tools_are_fresh_per_episode_and_cannot_see_the_answer():
    env = get_env("reasoning_gym:size=10,tools=python+calculator")
    task = env.tasks("train", 1)[0]
    gold = env.reveal(task)
    ep = env.episode(task)
    tools = {t.name: t for t in ep.tools}
    assert set(tools) == {"python", "calculator"}
    assert tools["calculator"].fn(expression="2+3") == "5"
    probe = (
        "import os, glob\n"
        "print(dict(os.environ))\n"
        "print(os.listdir('.'), glob.glob('/tmp/coevo*'))\n"
        "pp = os.getppid()\n"
        "for f in ('environ', 'maps', 'mem'):\n"
        "    try:\n"
        "        print(open(f'/proc/{pp}/{f}', 'rb').read(200000))\n"
        "    except Exception as e:\n"
        "        print(f, type(e).__name__)\n")
    obs = tools["python"].fn(code=probe)
    if isolation()["parent"] in ("no-capabilities", "user-namespace"):  # the kernel refuses the parent's memory
        assert "PermissionError" in obs  # (in a PID namespace the parent is not in the child's /proc at all)
    assert gold not in obs


def test_bad_config_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown reasoning-gym families"):
        get_env("reasoning_gym:families=nope")
    with pytest.raises(ValueError, match="unknown tools"):
        get_env("reasoning_gym:tools=shell")
    with pytest.raises(ValueError, match="<family>.<option>"):
        get_env("reasoning_gym:max_words=3")


# --- issue 17: the answer span scored, and correctness as the default reward --------------------


def test_the_last_final_answer_is_the_span_scored_and_stored(tmp_path):
    from coevo.evaluation.engine import evaluate
    from coevo.harnesses.spec import load_harness
    from coevo.models.fake import ScriptedChatModel
    from coevo.storage import Archive

    env = get_env("reasoning_gym:families=word_sorting,size=40,seed=0,reward=partial")  # partial: the span shows
    task = env.tasks("train", 1)[0]
    gold = env.reveal(task)
    archive = Archive(tmp_path / "a.db")
    for reply, span, reward in [(f"Final answer: {gold}\nFinal answer: foo, bar", "foo, bar", 0.0),
                                (f"Final answer: foo, bar\nFinal answer: {gold}", gold, 1.0)]:
        result = asyncio.run(evaluate(load_harness("reasoning_gym"), "ck", env, "train", tasks=[task],
                                      model=ScriptedChatModel(script=[reply]), archive=archive, run_id=reply[-8:]))
        (stored,) = archive.list(Trajectory, evaluation_id=result.evaluation_id)
        assert stored.final_answer == span and stored.score_detail["got"] == span
        assert stored.reward == reward and result.mean_reward == reward and result.reward_mode == "partial"


def test_substring_credit_is_no_reward_unless_the_config_opts_in():
    entry = {"question": "1 + 999 =", "answer": "1000", "metadata": {}}
    correct = get_env("reasoning_gym:families=chain_sum,size=5")
    partial = get_env("reasoning_gym:families=chain_sum,size=5,reward=partial")
    strict = correct.score_entry("chain_sum", entry, "10000")
    assert (strict.reward, strict.passed) == (0.0, False)
    assert strict.detail["public"] == {"family": "chain_sum", "verifier_error": None, "credit": 0.8,
                                       "reward_mode": "correct"}
    assert partial.score_entry("chain_sum", entry, "10000").reward == 0.8
    assert correct.score_entry("chain_sum", entry, "1,000").reward == 1.0  # the checker's own normalisation stays
    assert correct.config["reward"] == "correct" and partial.reward_mode == "partial"


def test_grpo_groups_get_the_reward_of_the_configured_mode():
    from types import SimpleNamespace

    import torch

    from coevo.harnesses.spec import load_harness
    from coevo.models.fake import ScriptedChatModel
    from coevo.training.grpo.advantages import group_advantages
    from coevo.training.grpo.rollout import HarnessRollout

    trainer = SimpleNamespace(num_generations=4, state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))
    for mode in ("correct", "partial"):
        env = get_env(f"reasoning_gym:families=chain_sum,size=5,reward={mode}")
        task = env.tasks("train", 1)[0]
        gold = env.reveal(task)
        replies = [f"Final answer: {gold}", f"Final answer: {gold}0"] * 2  # right, and right with a digit too many
        rollout = HarnessRollout(load_harness("reasoning_gym"), env, [task], max_concurrency=1,
                                 policy_factory=lambda tr: ScriptedChatModel(script=replies, with_tokens=True))
        out = rollout([task.id] * 4, trainer)
        rewards = [t.reward for t in rollout.trajectories]
        near_miss = 0.0 if mode == "correct" else pytest.approx(len(gold) / (len(gold) + 1))
        assert rewards == [1.0, near_miss, 1.0, near_miss]
        assert out["metrics"]["reward"] == pytest.approx(sum(rewards) / 4)
        if mode == "correct":
            assert group_advantages(rewards) == pytest.approx([1.0, -1.0, 1.0, -1.0])


def test_a_bad_reward_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="reward=correct"):
        get_env("reasoning_gym:reward=exact")
