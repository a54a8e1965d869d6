"""Failures masked, not learned (issue 29, item 7), with rollout-function fakes.

Pins: a rollout that raised or carries no sampled tokens is recorded and counted, but no member of
its group: Eq. 6 runs over the others, it gets no row, and a group left with fewer than two members
is dropped with a count — in GRPO's initial groups, Harness-S rescue groups and dynamic-sampling
draws, and in RSFT's samples; the counts reach the stage metrics.
"""

from types import SimpleNamespace

import pytest
import torch
from training_kit import LookupEnv, sampled, tiny_llama_checkpoint

from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import MISSING_TOKENS_KEY, MissingTokensError, ModelCall, Trajectory
from coevo.training.grpo.advantages import group_advantages
from coevo.training.grpo.rollout import HarnessRollout, sibling_rescue
from coevo.training.grpo.stage import stage_metrics


def trainer(k=4, step=0):
    return SimpleNamespace(num_generations=k, state=SimpleNamespace(global_step=step), model=torch.nn.Linear(1, 1))


def scripted(plan):
    """A rollout function: the ``n``-th rollout of task ``lookup-<key>`` under harness ``name`` does what
    ``plan[(name, key)][n]`` says (``1``/``0``: a sampled rollout with that reward, ``"raise"``: raises,
    ``"tokenless"``: a scored rollout with reward 1 and no sampled token); records what ran."""
    ran = []

    async def rollout(spec, policy, env, task, seed=0, checkpoint_id=""):
        key = (spec.name, task.metadata["key"])
        n = sum(k == key for k, _ in ran)
        ran.append((key, seed))
        what = plan[key][n]
        if what == "raise":
            raise ConnectionError("sandbox lost")
        if what == "tokenless":
            return Trajectory(task_id=task.id, harness_id=spec.id, seed=seed, reward=1.0, passed=True,
                              stop_reason="final_answer")
        return sampled(task, spec, seed, bool(what), checkpoint_id)

    rollout.ran = ran
    return rollout


H0 = HarnessSpec(name="h0")


def run(plan, keys=("a", "b"), **options):
    env = LookupEnv(keys=keys)
    fn = scripted(plan)
    rollout = HarnessRollout(H0, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=fn, **options)
    out = rollout([f"lookup-{k}" for k in keys for _ in range(4)], trainer())
    return rollout, out


def test_a_raised_rollout_is_left_out_of_its_group_s_advantages_and_loss():
    rollout, out = run({("h0", "a"): [1, "raise", 0, 0], ("h0", "b"): [1, 0, 1, 0]})
    assert len(rollout.trajectories) == 8 and rollout.trajectories[1].stop_reason == "error:ConnectionError"
    expected = group_advantages([1.0, 0.0, 0.0]) + group_advantages([1.0, 0.0, 1.0, 0.0])
    assert out["advantages"] == pytest.approx(expected)  # Eq. 6 over the three that ran, not a reward 0
    assert out["task_index"] == [0] * 3 + [1] * 4 and out["num_tasks"] == 2  # and no row for it
    m = out["metrics"]
    assert m["failed_rollouts"] == 1.0 and m["dropped_groups"] == 0.0 and m["reward"] == pytest.approx(3 / 7)


def test_a_correct_sibling_gains_nothing_from_a_failure_alone():
    _, out = run({("h0", "a"): ["raise", 1, 1, 1], ("h0", "b"): [1, 0, 1, 0]})
    assert out["advantages"][:3] == [0.0, 0.0, 0.0]  # before: +0.577 each, from the failure alone


def test_a_tokenless_rollout_is_counted_and_left_out_of_its_group():
    rollout, out = run({("h0", "a"): [0, "tokenless", 0, 0], ("h0", "b"): [1, 0, 1, 0]})
    assert rollout.trajectories[1].reward == 1.0  # recorded as it was scored
    assert out["advantages"][:3] == [0.0, 0.0, 0.0]  # its reward 1 gives its siblings no -0.577
    assert out["task_index"] == [0] * 3 + [1] * 4
    m = out["metrics"]
    assert m["tokenless_rollouts"] == 1.0 and m["failed_rollouts"] == 0.0 and m["reward"] == pytest.approx(2 / 7)
    totals = stage_metrics([], [m, m], 1.0)
    assert totals["tokenless_rollouts"] == 2 and totals["history"][0]["tokenless_rollouts"] == 1.0


def test_a_group_left_with_fewer_than_two_rollouts_is_dropped_and_counted():
    _, out = run({("h0", "a"): ["raise", "tokenless", "raise", 1], ("h0", "b"): [1, 0, 1, 0]})
    assert out["num_tasks"] == 1 and out["task_index"] == [0] * 4  # b renumbered to 0
    assert out["advantages"] == pytest.approx(group_advantages([1.0, 0.0, 1.0, 0.0]))
    m = out["metrics"]
    assert m["dropped_groups"] == 1.0 and m["failed_rollouts"] == 2.0 and m["tokenless_rollouts"] == 1.0
    assert stage_metrics([], [m], 1.0)["dropped_groups"] == 1


def test_a_rescue_group_is_masked_by_the_same_rule():
    sibling = HarnessSpec(name="s1")
    plan = {("h0", "a"): [0, 0, 0, 0], ("h0", "b"): [1, 0, 1, 0], ("s1", "a"): [1, "raise", 0, "tokenless"]}
    env = LookupEnv(keys=("a", "b"))
    fn = scripted(plan)
    rollout = HarnessRollout(H0, env, env.tasks(), rescue=sibling_rescue([sibling], env, rollout_fn=fn),
                             policy_factory=lambda tr: None, rollout_fn=fn)
    out = rollout(["lookup-a"] * 4 + ["lookup-b"] * 4, trainer())
    assert out["metrics"]["rescued_groups"] == 1.0 and len(rollout.trajectories) == 12
    assert out["advantages"][:2] == pytest.approx(group_advantages([1.0, 0.0]))  # the rescue group's two members
    assert out["metrics"]["failed_rollouts"] == 1.0 and out["metrics"]["tokenless_rollouts"] == 1.0


def test_a_group_with_no_rollout_to_learn_from_is_not_rescued_but_dropped():
    sibling = HarnessSpec(name="s1")
    plan = {("h0", "a"): ["raise"] * 4, ("h0", "b"): [1, 0, 1, 0], ("s1", "a"): [1, 1, 1, 1]}
    env = LookupEnv(keys=("a", "b"))
    fn = scripted(plan)
    rollout = HarnessRollout(H0, env, env.tasks(), rescue=sibling_rescue([sibling], env, rollout_fn=fn),
                             policy_factory=lambda tr: None, rollout_fn=fn)
    out = rollout(["lookup-a"] * 4 + ["lookup-b"] * 4, trainer())
    assert out["metrics"]["rescued_groups"] == 0.0 and out["metrics"]["dropped_groups"] == 1.0
    assert all(name == "h0" for (name, _), _ in fn.ran)  # an infrastructure failure is no all-fail group


def test_dynamic_sampling_judges_contrast_on_the_members_only():
    env, fn = LookupEnv(keys=("a", "b")), scripted({("h0", "a"): [1, "raise", 1, 1], ("h0", "b"): [1, 0, 0, 0]})
    rollout = HarnessRollout(H0, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=fn, resample=1)
    out = rollout(["lookup-a"] * 4, trainer())
    # a's group has no contrast once its failure is masked: b's drawn group (contrast) replaces it
    assert out["metrics"]["resampled_groups"] == 1.0 and out["metrics"]["resampled_retained"] == 1.0


def test_a_rollout_whose_server_cannot_return_tokens_still_stops_the_step_with_the_fix():
    def marked(spec, task, seed):
        call = ModelCall(input=[], output={"data": {"response_metadata": {MISSING_TOKENS_KEY: "server X"}}})
        return Trajectory(task_id=task.id, harness_id=spec.id, seed=seed, calls=[call], reward=1.0, passed=True)

    async def fn(spec, policy, env, task, seed=0, checkpoint_id=""):
        return marked(spec, task, seed)

    env = LookupEnv(keys=("a",))
    rollout = HarnessRollout(H0, env, env.tasks(), policy_factory=lambda tr: None, rollout_fn=fn)
    with pytest.raises(MissingTokensError, match="server X"):
        rollout(["lookup-a"] * 4, trainer())


def test_rsft_leaves_raised_and_tokenless_rollouts_out_of_its_samples_and_accepts_neither(tmp_path):
    from coevo.training.rsft import train_rsft

    fn = scripted({("h0", "a"): [1, "raise", "tokenless", 0], ("h0", "b"): [0, 0, 0, 1]})
    env = LookupEnv(keys=("a", "b"))
    cfg = {"steps": 1, "tasks_per_step": 2, "num_generations": 4, "minibatch_size": 4, "output_dir": str(tmp_path)}
    new, trajs = train_rsft(tiny_llama_checkpoint(tmp_path / "base"), H0, env, env.tasks(), cfg,
                            policy_factory=lambda model, tok: None, rollout_fn=fn)
    h = new.metrics["history"][0]
    assert len(trajs) == 8 and (h["failed_rollouts"], h["tokenless_rollouts"]) == (1, 1)
    assert h["kept"] == 2 and h["kept_rate"] == pytest.approx(2 / 6) and h["reward"] == pytest.approx(2 / 6)
    assert h["tokens"] == 4  # two accepted rollouts of two policy tokens each: the tokenless pass is not accepted
