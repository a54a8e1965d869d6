"""The Ray executor on a local Ray instance (2 CPUs): the same results as in process for the same
seeds, a worker killed mid-run costs nothing, a server policy is called from the workers, resumed
evaluations skip finished tasks. Needs coevo[ray]."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from executor_kit import BusyEnv, busy_policy, busy_spec
from server_kit import StubServer

from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import ExecutorError, RayExecutor, sampling_on
from coevo.models.refs import load_model
from coevo.records import Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration
ray = pytest.importorskip("ray", reason="pip install 'coevo[ray]'")
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance whose workers can import the test kits (tests/ on their PYTHONPATH)."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), old]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = old


def outcomes(archive: Archive, evaluation_id: str) -> dict:
    return {t.id: (t.task_id, t.seed, t.final_answer, t.reward, t.model_turns, t.env_actions,
                   [m["data"]["content"] for m in t.messages])
            for t in archive.list(Trajectory, evaluation_id=evaluation_id)}


async def test_ray_equals_in_process_and_survives_a_killed_worker(local_ray, tmp_path, caplog):
    spec, n = busy_spec(), 12
    here = await evaluate(spec, "fake", BusyEnv(n), "val", k=2, seeds=3, model=busy_policy(), run_id="r",
                          archive=Archive(str(tmp_path / "here.db")), concurrency=8)
    marker = tmp_path / "killed"
    runner = RayExecutor(workers=2, per_worker=4)
    try:
        with caplog.at_level(logging.WARNING, logger="coevo.evaluation.executors"):
            there = await evaluate(spec, "fake", BusyEnv(n, die_on="t5", marker=str(marker)), "val", k=2, seeds=3,
                                   model=busy_policy(), run_id="r", archive=Archive(str(tmp_path / "ray.db")),
                                   concurrency=8, executor=runner)
        assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker process died, not the driver
        assert runner.replaced >= 1 and any("died during task" in r.message for r in caplog.records)
        assert there.per_task == here.per_task and there.n_rollouts == 2 * n
        assert there.pass_at_k == here.pass_at_k == 0.5 and there.evaluation_id == here.evaluation_id
        assert outcomes(Archive(str(tmp_path / "ray.db")), there.evaluation_id) == \
            outcomes(Archive(str(tmp_path / "here.db")), here.evaluation_id)
        again = await evaluate(spec, "fake", BusyEnv(n), "val", k=2, seeds=3, model=busy_policy(), run_id="r",
                               archive=Archive(str(tmp_path / "ray.db")), executor=runner)
        assert again.resumed_tasks == n and again.per_task == here.per_task
    finally:
        runner.close()
    assert ray.is_initialized()  # the executor did not start Ray, so it leaves it running


def test_training_rollouts_sample_on_ray_workers(local_ray):
    import torch

    from coevo.training.grpo.rollout import HarnessRollout

    env, spec = BusyEnv(2, cpu_ms=1.0), busy_spec()
    tasks = env.tasks("train")
    trainer = SimpleNamespace(num_generations=2, state=SimpleNamespace(global_step=0), model=torch.nn.Linear(1, 1))
    ids = [t.id for t in tasks for _ in range(2)]
    policy = lambda tr: busy_policy(with_tokens=True)  # noqa: E731
    here = HarnessRollout(spec, env, tasks, policy_factory=policy)(ids, trainer)
    runner = RayExecutor(workers=2)
    try:
        rollout = HarnessRollout(spec, env, tasks, policy_factory=policy, rollout_fn=sampling_on(runner))
        there = rollout(ids, trainer)
        pids = set(runner.worker_pids())
    finally:
        runner.close()
    assert len(there["completion_ids"]) == 4 and there["metrics"]["failed_rollouts"] == 0
    for key in ("prompt_ids", "completion_ids", "env_mask", "logprobs", "advantages", "task_index"):
        assert there[key] == here[key], key
    assert [t.reward for t in rollout.trajectories] == [1.0, 1.0, 0.0, 0.0]
    assert runner.submitted == 4 and os.getpid() not in pids  # sampled by the workers, grouped by the driver


async def test_workers_call_a_server_policy_by_reference(local_ray, tmp_path):
    with StubServer(reply=lambda messages: "Final answer: done-0") as server:
        model = load_model(f"litellm:openai/stub?api_base={server.url}", max_retries=0)
        # one worker (each new one imports coevo and LiteLLM, seconds of the shared CPU); BusyEnv without tool steps:
        # the worker imports no task library
        runner = RayExecutor(workers=1)
        try:
            result = await evaluate(busy_spec(0), "stub", BusyEnv(6, steps=0), "val", n_tasks=6, model=model,
                                    archive=Archive(str(tmp_path / "s.db")), executor=runner)
        finally:
            runner.close()
    assert result.n_rollouts == 6 and server.requests == 6 and result.per_task["t0"].passed == [True]
    trajs = Archive(str(tmp_path / "s.db")).list(Trajectory, evaluation_id=result.evaluation_id)
    assert all(t.final_answer == "done-0" and t.calls[0].missing_tokens for t in trajs)


async def test_an_unshippable_policy_is_refused_with_the_fix(local_ray):
    import threading

    from coevo.models.fake import ScriptedChatModel

    model = ScriptedChatModel(script=["x"])
    object.__setattr__(model, "lock", threading.Lock())  # like a local engine: not picklable
    runner = RayExecutor(workers=1)
    try:
        with pytest.raises(ExecutorError, match="cannot be shipped to Ray workers.*load_model"):
            await evaluate(busy_spec(), "fake", BusyEnv(1), "val", model=model, executor=runner)
    finally:
        runner.close()
