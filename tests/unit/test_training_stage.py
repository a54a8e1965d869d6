"""StageTrainer: the run's ``[train]`` section picks the algorithm, sets the rollouts' sampling and
builds each round's stage config; the checkpoint goes in and comes out through the archive as is."""

import asyncio

import pytest
from training_kit import LookupEnv

from coevo.config import RunConfig
from coevo.harnesses.spec import HarnessSpec
from coevo.models.trajectory import Trajectory
from coevo.storage import Archive
from coevo.training import grpo, rsft
from coevo.training.checkpoint import Checkpoint
from coevo.training.stage import StageTrainer


@pytest.mark.parametrize("algorithm, module, name", [("grpo", grpo, "train_grpo"), ("rsft", rsft, "train_rsft")])
def test_stage_trainer_runs_the_configured_algorithm_with_the_rounds_stage_config(tmp_path, monkeypatch, algorithm,
                                                                                   module, name):
    calls = []

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None):
        calls.append((checkpoint, spec, tasks, config))
        new = Checkpoint(id="ck-new", base_model=checkpoint.base_model, parents=[checkpoint.id], run_id=run_id)
        archive.add_checkpoint(new)
        return new, [Trajectory(task_id=tasks[0].id)]

    monkeypatch.setattr(module, name, stage)
    config = RunConfig(seed=3, out_dir=str(tmp_path), train={"algorithm": algorithm, "temperature": 0.7,
                                                             "max_new_tokens": 12, "steps": 5})
    env, spec = LookupEnv(), HarnessSpec()
    with Archive(tmp_path / "a.db") as archive:
        base = Checkpoint(id="ck0", base_model="base", metrics={"loss": 1.0})
        archive.add_checkpoint(base)
        trainer = StageTrainer(config, env, archive, "r1")
        new_id, trajs = asyncio.run(trainer("ck0", spec, env.tasks(), 2))
        assert archive.get_checkpoint(new_id).run_id == "r1" and archive.get_checkpoint(new_id).parents == ["ck0"]
        with pytest.raises(KeyError, match="ck-missing"):
            asyncio.run(trainer("ck-missing", spec, env.tasks(), 2))
    ((checkpoint, used, tasks, stage_config),) = calls
    assert new_id == "ck-new" and [t.task_id for t in trajs] == ["lookup-a"] and tasks == env.tasks()
    assert checkpoint == base
    assert (used.decoding.temperature, used.budget.max_output_tokens) == (0.7, 12) and used.prompt == spec.prompt
    assert (spec.decoding.temperature, spec.budget.max_output_tokens) != (0.7, 12)
    assert stage_config == config.train.stage(2, 3, tmp_path) and (stage_config.seed, stage_config.steps) == (2003, 5)


@pytest.mark.parametrize("rescue", [True, False])
def test_stage_trainer_rescues_under_the_siblings_and_records_the_size_of_the_change(tmp_path, monkeypatch, rescue):
    from training_kit import random_adapter, tiny_llama_checkpoint

    seen = {}
    base = tiny_llama_checkpoint(tmp_path / "base")
    trained = random_adapter(base, tmp_path / "a", seed=1)

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, rescue=None):
        seen["rescue"] = rescue
        new = trained.model_copy(update={"id": "ck-new", "parents": [checkpoint.id], "config": {"harness_id": spec.id}})
        archive.add_checkpoint(new)
        return new, []

    monkeypatch.setattr(grpo, "train_grpo", stage)
    config = RunConfig(out_dir=str(tmp_path), train={"rescue": rescue, "temperature": 0.5})
    env, spec = LookupEnv(), HarnessSpec()
    sibling = HarnessSpec(prompt={"system": "another harness"})
    with Archive(tmp_path / "a.db") as archive:
        archive.add_checkpoint(base)
        new_id, _ = asyncio.run(StageTrainer(config, env, archive, "r1")(base.id, spec, env.tasks(), 0, [sibling]))
        record = archive.get_checkpoint(new_id)
    assert callable(seen["rescue"]) == rescue
    if rescue:  # one fresh attempt per failed rollout, under the sibling sampled like the incumbent
        from coevo.models.fake import ScriptedChatModel
        from coevo.training.stage import training_spec

        task = env.tasks()[0]
        group = asyncio.run(seen["rescue"](task, [Trajectory(task_id=task.id)] * 2,
                                           policy=ScriptedChatModel(script=["Final answer: x"])))
        assert [t.harness_id for t in group] == [training_spec(sibling, config.train).id] * 2
    assert record.config["incumbent_id"] == spec.id and record.config["harness_id"] != spec.id  # the training variant
    assert record.metrics["delta_norm"] == record.metrics["total_delta_norm"] > 0  # trained from the base model
