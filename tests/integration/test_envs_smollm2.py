"""Each suite's H0 with the real SmolLM2-135M policy (CPU, one or two short rollouts per suite):
the rollout ends, is scored by the real verifier in [0, 1], carries token ids, and the policy never
saw the gold answer. Scores themselves are not asserted (a 135M model mostly fails)."""

from __future__ import annotations

import asyncio

import pytest

from coevo.envs.registry import get_env
from coevo.harnesses.runtime import arun_rollout
from coevo.harnesses.spec import load_harness
from coevo.models.smollm2 import SmolLM2NotInstalledError, find_gguf

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model():
    try:
        find_gguf()
    except SmolLM2NotInstalledError as err:
        pytest.skip(str(err))
    from coevo.models.refs import load_model

    return load_model("local:smollm2-135m")


def _rollout(model, suite, env, task, **budget):
    spec = load_harness(suite)
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update=budget),
                                   "decoding": spec.decoding.model_copy(update={"temperature": 0.0})})
    return asyncio.run(arun_rollout(spec, model, env, task))


def _check(traj, gold):
    assert traj.stop_reason and 0.0 <= traj.reward <= 1.0
    assert traj.calls and traj.calls[0].completion_token_ids
    seen = "\n".join(str(m) for call in traj.calls for m in call.input)
    assert gold not in seen


def test_reasoning_gym_h0_with_smollm2(model):
    env = get_env("reasoning_gym:size=10")
    for task in env.tasks("val", 2):
        _check(_rollout(model, "reasoning_gym", env, task, max_model_calls=1, max_output_tokens=48), env.reveal(task))


def test_bfcl_h0_with_smollm2(model):
    pytest.importorskip("bfcl_eval")
    env = get_env("bfcl:categories=simple_python,size=20")
    task = env.tasks("val", 1)[0]
    traj = _rollout(model, "bfcl", env, task, max_model_calls=1, max_output_tokens=48)
    _check(traj, env.reveal(task))
    assert traj.score_detail["public"]["category"] == "simple_python"


def test_textworld_h0_with_smollm2(model):
    pytest.importorskip("textworld")
    env = get_env("textworld:challenge=tw-simple,size=3")
    task = env.tasks("val", 1)[0]
    traj = _rollout(model, "textworld", env, task, max_model_calls=3, max_output_tokens=32)
    _check(traj, env.reveal(task))
    assert "won" in traj.score_detail["public"]
