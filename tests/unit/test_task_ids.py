"""Task ids name the env config they came from: two configs' same prompt are two tasks everywhere in the
archive (each with its own split), and a run whose stored ids its env no longer gives is not resumed."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from test_meta_loop import WordEnv, setup_run

from coevo.app.run import run_meta
from coevo.app.task_ids import StaleTaskIdsError, unknown_task_ids
from coevo.envs.base import Task
from coevo.envs.registry import get_env
from coevo.records import EvaluationRecord, RunRecord
from coevo.storage import Archive


def test_one_prompt_under_two_showcase_configs_is_two_tasks_with_their_own_splits(tmp_path):
    small, large = get_env("showcase:size=100,seed=0"), get_env("showcase:size=150,seed=0")
    split_of = {}
    for name, env in (("small", small), ("large", large)):
        for split in ("train", "val", "test"):
            for task in env.tasks(split):
                split_of.setdefault(task.prompt, {})[name] = (split, task)
    moved = [both for both in split_of.values() if len(both) == 2 and both["small"][0] != both["large"][0]]
    assert moved  # the larger size moves the split boundaries: a train prompt of one is a val prompt of the other
    (s_split, s_task), (l_split, l_task) = moved[0]["small"], moved[0]["large"]
    assert s_task.id != l_task.id and s_task.id.startswith("showcase-") and l_task.id.startswith("showcase-")
    archive = Archive(tmp_path / "a.db")
    archive.put(s_task)
    archive.put(l_task)  # before: the same id, so this row replaced the other config's split
    assert archive.get(Task, s_task.id).split == s_split and archive.get(Task, l_task.id).split == l_split
    with pytest.raises(KeyError, match="does not belong to this showcase config"):
        large.reveal(s_task)  # one config's task is not the other's
    assert [t.id for t in get_env("showcase:size=100,seed=0,reward=partial").tasks("val")] == \
        [t.id for t in small.tasks("val")]


class RenamedWordEnv(WordEnv):
    """WordEnv whose ids name a config (as a coevo whose ids carry the env config gives them)."""

    def tasks(self, split, n=None):
        return [t.model_copy(update={"id": f"words-cfg1-{t.id}"}) for t in super().tasks(split, n)]


def test_a_run_whose_stored_task_ids_its_env_no_longer_gives_is_not_resumed(tmp_path):
    config, ctx, archive = setup_run(tmp_path, "help", fail_once_at=1)  # stopped in round 1, ids without config
    with pytest.raises(RuntimeError, match="simulated crash"):
        asyncio.run(run_meta(config, run_id="run-1", context=ctx, archive=archive))
    stored = archive.list(EvaluationRecord, run_id="run-1")
    assert stored and unknown_task_ids(archive, "run-1", WordEnv()) == {}
    newer = dataclasses.replace(ctx, env=RenamedWordEnv())
    expected = (r"run run-1 cannot be resumed: its stored evaluations name tasks that env 'words' does not give now "
                r"\(4 val, 3 train task id\(s\), e.g. 'w-kiwi'\).*Finish it with the coevo that started it, or start "
                r"a new run")
    with pytest.raises(StaleTaskIdsError, match=expected):
        asyncio.run(run_meta(config, run_id="run-1", resume=True, context=newer, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "failed"  # nothing changed
    state = asyncio.run(run_meta(config, run_id="run-1", resume=True, context=ctx, archive=archive))
    assert archive.get(RunRecord, "run-1").status == "done" and state["test"]["final"].score == 1.0
