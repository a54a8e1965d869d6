"""Executors behind ``evaluate(executor=...)``: the in-process one equals no executor, the meta
context hands its executor to every evaluation, and the Ray executor ships models by reference."""

from __future__ import annotations

import pytest
from executor_kit import BusyEnv, busy_policy, busy_spec

from coevo.config import RunConfig, load_config
from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import InProcessExecutor, RayExecutor, make_executor
from coevo.meta.context import MetaContext
from coevo.models.refs import load_model
from coevo.storage import Archive


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
