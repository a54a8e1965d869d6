"""Executors behind ``evaluate(executor=...)``: the in-process one equals no executor, the meta
context hands its executor to every evaluation, and the Ray executor ships models by reference."""

from __future__ import annotations

import asyncio
import logging

import pytest
from executor_kit import BusyEnv, busy_policy, busy_spec

from coevo.config import RunConfig, load_config
from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import InProcessExecutor, RayExecutor, is_live_local, make_executor, sampling_on
from coevo.meta.context import MetaContext
from coevo.models.refs import REF_KEY, load_model
from coevo.records import Checkpoint
from coevo.storage import Archive
from coevo.training.grpo.rollout import failed_trajectory


class CountingExecutor(InProcessExecutor):
    """In process, counting the rollouts it ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, int]] = []

    async def rollout(self, spec, model, env, task, seed=0, checkpoint_id="", split=None):
        self.ran.append((task.id, seed))
        return await super().rollout(spec, model, env, task, seed=seed, checkpoint_id=checkpoint_id, split=split)


async def test_an_executor_runs_every_rollout_and_changes_no_result(tmp_path):
    env, spec = BusyEnv(6, cpu_ms=0.0), busy_spec()
    plain = await evaluate(spec, "fake", env, "val", k=2, seeds=5, model=busy_policy(), run_id="r")
    runner = CountingExecutor()
    placed = await evaluate(spec, "fake", env, "val", k=2, seeds=5, model=busy_policy(), run_id="r",
                            archive=Archive(str(tmp_path / "a.db")), executor=runner)
    assert sorted(runner.ran) == sorted((f"t{i}", s) for i in range(6) for s in (5, 6))
    assert placed.per_task == plain.per_task and placed.pass_at_k == plain.pass_at_k == 0.5
    again = await evaluate(spec, "fake", env, "val", k=2, seeds=5, model=busy_policy(), run_id="r",
                           archive=Archive(str(tmp_path / "a.db")), executor=runner)
    assert again.resumed_tasks == 6 and len(runner.ran) == 12  # resumed: finished tasks never reach the executor


async def test_the_meta_context_evaluates_on_its_executor(tmp_path):
    runner = CountingExecutor()
    config = load_config(None, {"db": str(tmp_path / "m.db"), "env.n_val": 3})
    archive = Archive(config.db)
    spec = busy_spec()
    archive.add_harness(spec, None, "test", "r")
    ctx = MetaContext(config=config, env=BusyEnv(4, cpu_ms=0.0), archive=archive, policy=lambda ckpt: busy_policy(),
                      executor=runner, run_id="r")
    result = await ctx.evaluate(spec.id, "fake", "val")
    assert result.n_tasks == 3 and len(runner.ran) == 3


def test_executor_choice_in_the_config_and_by_name():
    assert RunConfig().executor == "inprocess" and load_config(None, {"executor": "ray"}).executor == "ray"
    with pytest.raises(ValueError, match="executor"):
        load_config(None, {"executor": "dask"})
    assert isinstance(make_executor("inprocess"), InProcessExecutor)
    with pytest.raises(ValueError, match=r"unknown executor 'dask'.*'inprocess', 'ray'"):
        make_executor("dask")


def test_ray_workers_get_models_by_reference():
    model = load_model("litellm:openai/m?api_base=http://h:1/v1", temperature=0.0)
    kind, key, (ref, settings) = RayExecutor()._source(model)
    assert (kind, ref, settings) == ("ref", "litellm:openai/m?api_base=http://h:1/v1", {"temperature": 0.0})
    rebuilt = load_model(ref, **settings)
    assert (rebuilt.api_base, rebuilt.temperature) == ("http://h:1/v1", 0.0)


def test_a_missing_ray_is_a_readable_cli_error(monkeypatch, tmp_path):
    import importlib.util

    from typer.testing import CliRunner

    from coevo.cli.app import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install 'coevo\[ray\]'"):
        make_executor("ray")
    out = CliRunner().invoke(app, ["run", "--executor", "ray", "--db", str(tmp_path / "x.db")])
    assert out.exit_code == 1 and "coevo[ray]" in out.output and "Traceback" not in out.output



async def test_training_samples_a_server_policy_on_the_executor_and_live_weights_here(caplog):
    from coevo.models.local import LocalChatModel

    env, spec = BusyEnv(2, cpu_ms=0.0), busy_spec()
    task = env.tasks("train")[0]
    here: list[tuple[str, int]] = []

    async def in_driver(spec, policy, env, task, seed=0, checkpoint_id=""):
        here.append((task.id, seed))
        return failed_trajectory(spec, task, seed, checkpoint_id, RuntimeError("sampled in the driver"))

    runner = CountingExecutor()
    run = sampling_on(runner, in_driver)
    served = await run(spec, busy_policy(), env, task, seed=4, checkpoint_id="ck")
    assert runner.ran == [(task.id, 4)] and here == [] and (served.checkpoint_id, served.seed) == ("ck", 4)
    assert served.final_answer == "done-0" and served.reward == 1.0
    live = LocalChatModel.model_construct(engine=None)  # the trainer's weights in this process (from_model)
    with caplog.at_level(logging.INFO, logger="coevo.evaluation.executors"):
        for seed in (5, 6):
            await run(spec, live, env, task, seed=seed)
    assert here == [(task.id, 5), (task.id, 6)] and runner.ran == [(task.id, 4)]
    assert sum("live weights in the driver" in r.message for r in caplog.records) == 1  # said once per executor
    replica = LocalChatModel.model_construct(engine=None, metadata={REF_KEY: "local:smollm2-135m"})
    assert is_live_local(live) and not is_live_local(replica) and not is_live_local(busy_policy())
    assert sampling_on(None, in_driver) is in_driver


def test_rsft_rounds_of_a_shippable_sampler_run_on_the_executor(tmp_path):
    from training_kit import LookupEnv, lookup_policy, tiny_llama_checkpoint

    from coevo.harnesses.spec import HarnessSpec
    from coevo.training.rsft import train_rsft

    env, spec = LookupEnv(), HarnessSpec(parser={"mode": "python_call"})
    base = tiny_llama_checkpoint(tmp_path / "base")
    cfg = {"steps": 2, "tasks_per_step": 2, "num_generations": 2, "output_dir": str(tmp_path / "runs")}

    def sample(executor):
        _, trajs = train_rsft(base, spec, env, env.tasks(), cfg, executor=executor,
                              policy_factory=lambda model, tok: lookup_policy(right_every=2))
        return [(t.task_id, t.seed, t.checkpoint_id, t.final_answer, t.reward) for t in trajs]

    runner = CountingExecutor()
    placed = sample(runner)
    assert placed == sample(None) and len(placed) == 8 and {r[4] for r in placed} == {0.0, 1.0}
    assert sorted(runner.ran) == sorted((task_id, seed) for task_id, seed, *_ in placed)


def test_a_runs_executor_reaches_its_weight_stage(tmp_path, monkeypatch):
    from training_kit import LookupEnv

    from coevo.app.services import make_context
    from coevo.harnesses.spec import HarnessSpec
    from coevo.training import rsft
    from coevo.training.stage import StageTrainer

    seen = {}

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, executor=None):
        seen["executor"] = executor
        return checkpoint.model_copy(update={"id": "ck-new"}), []

    monkeypatch.setattr(rsft, "train_rsft", stage)
    config = load_config(None, {"db": str(tmp_path / "m.db"), "out_dir": str(tmp_path), "executor": "ray",
                                "train.algorithm": "rsft"})
    with Archive(config.db) as archive:
        ctx = make_context(config, archive, "r", env=LookupEnv())
        assert isinstance(ctx.executor, RayExecutor) and ctx.trainer.executor is ctx.executor  # Ray not started yet
        archive.put(Checkpoint(id="ck0", base_model="base"))
        runner = CountingExecutor()
        trainer = StageTrainer(config, LookupEnv(), archive, "r", runner)
        new_id, _ = asyncio.run(trainer("ck0", HarnessSpec(), LookupEnv().tasks(), 0))
    assert new_id == "ck-new" and seen["executor"] is runner
