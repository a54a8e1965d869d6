"""Experience in the archive (issue 26 item 2): a lineage's lessons persist across episodes, rounds,
processes and runs (``ArchiveExperience`` over ``ExperienceRecord``), are consolidated (dedup, cap,
one version per consolidation), reach val/test evaluations and the executor's workers, and
migration 0005 adds and removes their table."""

import asyncio

import pytest
from harness_kit import ToyEnv, call, make_task
from langchain_core.messages import AIMessage

from coevo.evaluation.engine import evaluate
from coevo.evaluation.executors import InProcessExecutor
from coevo.harnesses.bpe import ArchiveExperience, InMemoryExperience
from coevo.harnesses.spec import HarnessSpec, validate_spec
from coevo.models.fake import ScriptedChatModel
from coevo.records import ExperienceRecord
from coevo.storage import Archive

FINAL = AIMessage(content="Final answer: 42")


def test_archive_experience_persists_across_archives_opened_again_and_keeps_each_version(tmp_path):
    db = tmp_path / "a.db"
    with Archive(db) as archive:
        store = ArchiveExperience(archive, run_id="run-1")
        assert store.lessons("h0") == []
        assert store.consolidate("h0", ["read first", "Check  the units"], cap=3, round=0) == [
            "read first", "Check the units"]
        store.consolidate("h0", ["check the units", "a third", "a fourth"], cap=3, round=1)  # dup; cap 3
        store.consolidate("other", ["unrelated"], cap=3)
    with Archive(db) as archive:  # another process, another run: the same lineage's lessons
        store = ArchiveExperience(archive, run_id="run-2")
        assert store.lessons("h0") == ["check the units", "a third", "a fourth"]
        assert store.lessons("other") == ["unrelated"]
        history = store.history("h0")
        assert [(r.id, r.version, r.round, r.run_id) for r in history] == [("h0-v1", 1, 0, "run-1"),
                                                                         ("h0-v2", 2, 1, "run-1")]
        assert history[1].offered == ["check the units", "a third", "a fourth"]
        store.consolidate("h0", [], cap=3, round=0)
        assert archive.get(ExperienceRecord, "h0-v3").run_id == "run-2" and store.lessons("h0")[-1] == "a fourth"


@pytest.mark.parametrize("store", ["memory", "archive"])
def test_lessons_a_rollout_consolidates_reach_the_next_episode_through_either_store(tmp_path, store):
    spec, env = validate_spec({"bpe": {}}), ToyEnv()
    with Archive(tmp_path / "a.db") as archive:
        experience = InMemoryExperience() if store == "memory" else ArchiveExperience(archive)
        from coevo.harnesses.runtime import arun_rollout

        first = ScriptedChatModel(script=[call("bpe_consolidate", lesson="the answer is 42"), FINAL])
        traj = asyncio.run(arun_rollout(spec, first, env, make_task(), experience=experience.lessons("h0")))
        experience.consolidate("h0", traj.harness_state["consolidated"], spec.bpe.max_experience)
        second = ScriptedChatModel(script=[call("bpe_read", part="experience"), FINAL])
        asyncio.run(arun_rollout(spec, second, env, make_task(), experience=experience.lessons("h0")))
        assert "- the answer is 42" in str(second.calls[1][-1].content)


class RecordingExecutor(InProcessExecutor):
    """The in-process executor, recording the lessons each rollout was shipped with."""

    def __init__(self) -> None:
        self.shipped = []

    async def rollout(self, spec, model, env, task, seed=0, checkpoint_id="", split=None, experience=()):
        self.shipped.append(tuple(experience))
        return await super().rollout(spec, model, env, task, seed, checkpoint_id, split, experience)


def test_an_evaluation_starts_every_rollout_from_the_lineages_lessons_on_the_executor(tmp_path):
    spec, env, executor = validate_spec({"bpe": {}}), ToyEnv(), RecordingExecutor()
    model = ScriptedChatModel(script=[lambda m: FINAL if "lesson one" in str(m[-1].content)
                                      else call("bpe_read", part="experience")])
    with Archive(tmp_path / "a.db") as archive:
        with_lessons = asyncio.run(evaluate(spec, "ck0", env, "val", model=model, archive=archive, run_id="r",
                                            executor=executor, experience=["lesson one"]))
        model.cursor = 0
        without = asyncio.run(evaluate(spec, "ck0", env, "val", model=model, archive=archive, run_id="r",
                                       executor=executor))
    assert executor.shipped == [("lesson one",), ()]
    assert with_lessons.mean_reward == 1.0 and with_lessons.evaluation_id != without.evaluation_id


def test_meta_context_evaluates_a_bpe_harness_with_its_lineages_lessons(tmp_path):
    from coevo.config import RunConfig
    from coevo.meta.context import MetaContext

    env = ToyEnv()
    seen = []

    async def evaluator(spec, checkpoint, env, split, **kwargs):
        seen.append((spec.bpe is not None, kwargs.get("experience")))
        raise StopAsyncIteration

    with Archive(tmp_path / "a.db") as archive:
        h0 = archive.add_harness(HarnessSpec(), [], "base", "r1")
        bpe = archive.add_harness(HarnessSpec(bpe={}), [h0], "bpe", "r1")
        store = ArchiveExperience(archive, "r1")
        ctx = MetaContext(config=RunConfig(out_dir=str(tmp_path)), env=env, archive=archive, policy=lambda c: None,
                          evaluator=evaluator, run_id="r1", experience=store)
        store.consolidate(ctx.experience_lineage(h0), ["lesson one"], cap=5)  # the lineage on this env config
        for harness in (bpe, h0):
            with pytest.raises(StopAsyncIteration):
                asyncio.run(ctx.evaluate(harness, "ck0", "val", tasks=[make_task()]))
    assert seen == [(True, ["lesson one"]), (False, None)]


def test_a_stage_ships_the_lineages_lessons_with_rollouts_placed_on_the_executor(tmp_path, monkeypatch):
    from training_kit import LookupEnv

    from coevo.config import RunConfig
    from coevo.models.checkpoint import Checkpoint
    from coevo.training.grpo import stage as grpo
    from coevo.training.kinds import GRPO
    from coevo.training.stage import StageTrainer

    captured = {}

    def stage(checkpoint, spec, env, tasks, config, archive=None, *, run_id=None, rollout_fn=None, **kw):
        captured.update(kw, rollout_fn=rollout_fn)
        archive.put(Checkpoint(id="ck1", base_model="base", parents=[checkpoint.id], run_id=run_id))
        return Checkpoint(id="ck1", base_model="base", parents=[checkpoint.id]), []

    monkeypatch.setattr(grpo, "train_grpo", stage)
    executor, env = RecordingExecutor(), LookupEnv()
    with Archive(tmp_path / "a.db") as archive:
        archive.put(Checkpoint(id="ck0", base_model="base"))
        trainer = StageTrainer(RunConfig(out_dir=str(tmp_path)), env, archive, "r1", executor)
        asyncio.run(trainer("ck0", HarnessSpec(bpe={}), env.tasks(), 0, GRPO(experience=("lesson one",))))
    assert "executor" not in captured  # placement is inside the experience wrapper, not around it
    policy = ScriptedChatModel(script=["Final answer: VALUE-a"])  # a shippable (not live-weights) policy
    asyncio.run(captured["rollout_fn"](HarnessSpec(bpe={}), policy, env, env.tasks()[0], seed=0))
    assert executor.shipped == [("lesson one",)]


def test_migration_0005_adds_the_experience_table_and_its_downgrade_removes_it(db_url, tmp_path):
    from alembic import command
    from sqlalchemy import inspect

    from coevo.storage.connection import make_engine
    from coevo.storage.migrate import _config

    target = db_url
    with Archive(target) as archive:
        ArchiveExperience(archive).consolidate("h0", ["kept"], cap=2)
    engine = make_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.begin() as conn:
        command.downgrade(_config(conn), "0004")
        assert "experience" not in inspect(conn).get_table_names()
        assert "run_heartbeats" in inspect(conn).get_table_names()
        command.upgrade(_config(conn), "0005")
        assert {"ix_experience_lineage", "ix_experience_run_id"} <= {
            i["name"] for i in inspect(conn).get_indexes("experience")}
    engine.dispose()
    with Archive(target) as archive:
        assert ArchiveExperience(archive).lessons("h0") == []  # the downgrade dropped the rows with the table


def test_a_runs_context_keeps_experience_in_its_archive_under_its_run_id(tmp_path):
    from coevo.app.services import make_context
    from coevo.config import RunConfig

    config = RunConfig(strategy="evoharness_rl", out_dir=str(tmp_path), db=str(tmp_path / "a.db"),
                       train={"action_cost": 0.5})
    with Archive(config.db) as archive:
        ctx = make_context(config, archive, "run-7", env=ToyEnv())
        assert isinstance(ctx.experience, ArchiveExperience) and ctx.experience.archive is archive
        ctx.experience.consolidate("h0", ["kept across runs"], cap=4, round=2)
        assert archive.get(ExperienceRecord, "h0-v1").run_id == "run-7"
