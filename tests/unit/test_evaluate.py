"""The evaluator: aggregates, paired outcomes, bounded concurrency, persistence and resume."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from rich.console import Console

from coevo.envs.base import Episode, Score, Task, Tool
from coevo.evaluation import engine as evaluate_module
from coevo.evaluation.engine import evaluate, trajectory_id
from coevo.harnesses import HarnessSpec
from coevo.models.fake import ScriptedChatModel
from coevo.models.trajectory import Trajectory
from coevo.observe.progress import RichReporter
from coevo.records import Checkpoint, EvaluationRecord, HarnessRecord, RunRecord
from coevo.storage import Archive

ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}


class AdderEnv:
    """Task i asks for i + 2i; the ``add`` tool computes it. Exact answer: reward 1 (passed);
    a wrong number: 0.5 (partial credit); anything else: 0."""

    name = "adder"

    def __init__(self, size: int = 6) -> None:
        self.size = size
        self._gold: dict[str, int] = {}

    def tasks(self, split: str, n: int | None = None) -> list[Task]:
        out = []
        for i in range(self.size if n is None else min(n, self.size)):
            task = Task(id=f"{split}-{i}", env=self.name, split=split, prompt=f"Task {i}: what is {i} + {2 * i}?",
                        metadata={"odd": i % 2 == 1})
            self._gold[task.id] = 3 * i
            out.append(task)
        return out

    def episode(self, task: Task, seed: int = 0) -> Episode:
        return Episode(task=task, tools=[Tool("add", "Add two integers.", ADD, lambda a, b: str(a + b))])

    def score(self, task: Task, answer: str | None, episode: Episode) -> Score:
        gold = self._gold[task.id]
        if answer is not None and answer.strip() == str(gold):
            return Score(reward=1.0, passed=True)
        partial = answer is not None and answer.strip().lstrip("-").isdigit()
        return Score(reward=0.5 if partial else 0.0, passed=False, detail={"expected": gold})

    def trivial_baseline(self, split: str) -> dict[str, Any]:
        return {"n": self.size, "empty": 0.0, "best_constant": ("0", 1 / 6), "constants": {"": 0.0, "0": 1 / 6}}


def policy(messages: list[BaseMessage]) -> str | AIMessage:
    """Calls ``add`` on the task's numbers, then answers with the tool's result. On odd tasks its
    first reply is unparseable (an interface violation) and its final answer is off by one; with
    a system prompt saying "sloppy" every answer is off by one."""
    system = next(str(m.content) for m in messages if isinstance(m, SystemMessage))
    task = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
    index, a, b = (int(x) for x in re.findall(r"\d+", task)[:3])
    odd = index % 2 == 1
    if odd and not any(isinstance(m, AIMessage) for m in messages):
        return "hmm, let me think"
    if isinstance(messages[-1], ToolMessage):
        result = int(str(messages[-1].content))
        return f"Final answer: {result + 1 if odd or 'sloppy' in system else result}"
    return AIMessage("", tool_calls=[{"name": "add", "args": {"a": a, "b": b}, "id": "call-1"}])


def dies_after(n: int, error: Exception) -> Any:
    """``policy`` for the first ``n`` model calls, then ``error`` on every call (a policy server dying)."""
    calls = 0

    def dying(messages: list[BaseMessage]) -> str | AIMessage:
        nonlocal calls
        calls += 1
        if calls > n:
            raise error
        return policy(messages)

    return dying


def spec(system: str = "You are careful.") -> HarnessSpec:
    return HarnessSpec(name="adder", prompt={"system": system}, parser={"on_no_action": "violation"})


def model(**kwargs: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=[policy], with_tokens=True, **kwargs)


class Recorder:
    """A Reporter that records every update."""

    def __init__(self) -> None:
        self.updates: list[tuple[int, float | None]] = []
        self.started: list[tuple[str, int]] = []
        self.stopped = 0

    def start(self, label: str, total: int) -> str:
        self.started.append((label, total))
        return label

    def update(self, handle: Any, done: int, score: float | None = None) -> None:
        self.updates.append((done, score))

    def stop(self, handle: Any) -> None:
        self.stopped += 1

    def log(self, message: str) -> None:
        pass


async def test_evaluate_aggregates_a_scripted_env_and_stores_everything(tmp_path):
    env, archive, recorder = AdderEnv(), Archive(tmp_path / "a.db"), Recorder()
    result = await evaluate(spec(), "ck-0", env, "val", k=2, seeds=10, n_tasks=4, model=model(), archive=archive,
                            concurrency=3, progress=recorder)
    assert result.seeds == [10, 11] and result.n_tasks == 4 and result.n_rollouts == 8
    assert result.pass_at_k == 0.5 and result.avg_at_k == 0.5
    assert result.mean_reward == pytest.approx(0.75)
    # tasks 0, 2: 2 turns each; odd tasks 1, 3: 3 turns with one violation; k=2 rollouts
    assert result.model_turns == 2 * (2 + 3 + 2 + 3) and result.interface_violations == 4
    assert result.timr == pytest.approx(4 / 20)
    assert result.trivial_baseline == pytest.approx(1 / 6)
    assert result.per_task["val-1"].rewards == [0.5, 0.5] and result.per_task["val-0"].passed == [True, True]
    assert result.stop_reasons == {"final_answer": 8}

    stored = archive.list(Trajectory, evaluation_id=result.evaluation_id)
    assert len(stored) == 8 and {t.seed for t in stored} == {10, 11}
    assert {t.id for t in stored} == {trajectory_id(result.evaluation_id, f"val-{i}", s)
                                      for i in range(4) for s in (10, 11)}
    assert all(t.checkpoint_id == "ck-0" and t.harness_id == spec().id for t in stored)
    assert all(c.prompt_token_ids and len(c.logprobs) == len(c.completion_token_ids) for t in stored for c in t.calls)
    assert sum(len(c.logprobs) for t in stored for c in t.calls) > 0
    assert result.input_tokens == sum(t.input_tokens for t in stored) > 0
    record = archive.get(EvaluationRecord, result.evaluation_id)
    assert record.status == "done" and record.aggregates["pass_at_k"] == 0.5 and record.seeds == [10, 11]
    assert archive.get(HarnessRecord, spec().id) is not None and archive.get(Task, "val-3").prompt.startswith("Task 3")
    assert recorder.started == [(recorder.started[0][0], 4)] and recorder.stopped == 1
    assert recorder.updates[-1] == (4, pytest.approx(0.75))
    assert [d for d, _ in recorder.updates] == sorted(d for d, _ in recorder.updates)


async def test_rollouts_in_flight_never_exceed_the_concurrency(monkeypatch):
    in_flight, peak = 0, 0

    async def stub_rollout(spec, model, env, task, seed=0, checkpoint_id="", split=None):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return Trajectory(task_id=task.id, seed=seed, reward=1.0, passed=True, model_turns=1)

    monkeypatch.setattr(evaluate_module, "arun_rollout", stub_rollout)
    result = await evaluate(spec(), "ck", AdderEnv(size=6), "train", k=3, model=model(), concurrency=4)
    assert peak == 4 and result.n_rollouts == 18 and result.pass_at_k == 1.0


async def test_killing_an_evaluation_half_way_keeps_finished_tasks_and_resumes(tmp_path):
    dies_after_ten = dies_after(10, RuntimeError("the policy server died"))
    env, archive = AdderEnv(), Archive(tmp_path / "a.db")
    dying = ScriptedChatModel(script=[dies_after_ten], with_tokens=True)
    # concurrency 1, k=2: task 0 takes 4 calls, task 1 takes 6, so call 11 fails inside task 2
    with pytest.raises(RuntimeError, match="policy server died"):
        await evaluate(spec(), "ck", env, "val", k=2, n_tasks=4, model=dying, archive=archive, concurrency=1)
    (record,) = archive.list(EvaluationRecord)
    assert record.status == "interrupted"
    kept = archive.list(Trajectory, evaluation_id=record.id)
    assert sorted((t.task_id, t.seed) for t in kept) == [("val-0", 0), ("val-0", 1), ("val-1", 0), ("val-1", 1)]
    assert all(t.stop_reason == "final_answer" and t.calls for t in kept)

    recorder = Recorder()
    result = await evaluate(spec(), "ck", env, "val", k=2, n_tasks=4, model=model(), archive=archive,
                            concurrency=1, progress=recorder)
    assert result.evaluation_id == record.id and result.resumed_tasks == 2
    assert recorder.updates[0] == (2, pytest.approx(0.75))
    assert archive.count(Trajectory, evaluation_id=record.id) == 8 and archive.count(Trajectory) == 8
    assert archive.get(EvaluationRecord, record.id).status == "done"
    assert result.pass_at_k == 0.5 and result.mean_reward == pytest.approx(0.75)


async def test_a_shared_evaluation_is_read_back_by_another_run_and_an_unshared_one_is_not(tmp_path):
    env, archive = AdderEnv(), Archive(tmp_path / "a.db")
    first = await evaluate(spec(), "ck", env, "test", k=2, n_tasks=4, model=model(), archive=archive,
                           run_id="run-a", shared=True)
    # another run, same pair, tasks and seeds: read back whole, no rollout decoded (this policy dies at once)
    dead = ScriptedChatModel(script=[dies_after(0, RuntimeError("decoded again"))], with_tokens=True)
    again = await evaluate(spec(), "ck", env, "test", k=2, n_tasks=4, model=dead, archive=archive,
                           run_id="run-b", shared=True)
    assert again.evaluation_id == first.evaluation_id and again.resumed_tasks == 4
    assert again.per_task == first.per_task and archive.count(Trajectory) == 8
    assert archive.get(EvaluationRecord, first.evaluation_id).run_id == "run-a"  # listed under the run that ran it
    # unshared, the run is part of the id: run-b decodes its own
    with pytest.raises(RuntimeError, match="decoded again"):
        await evaluate(spec(), "ck", env, "test", k=2, n_tasks=4, model=dead, archive=archive, run_id="run-b")
    # another seed is another evaluation, shared or not
    with pytest.raises(RuntimeError, match="decoded again"):
        await evaluate(spec(), "ck", env, "test", k=2, seeds=5, n_tasks=4, model=dead, archive=archive,
                       run_id="run-b", shared=True)


async def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="one seed per rollout"):
        await evaluate(spec(), "ck", AdderEnv(), "val", k=2, seeds=[1, 2, 3], model=model())
    with pytest.raises(ValueError, match="needs model="):
        await evaluate(spec(), "ck", AdderEnv(), "val")
    with pytest.raises(ValueError, match="no 'val' tasks"):
        await evaluate(spec(), "ck", AdderEnv(size=0), "val", model=model())


async def test_rich_reporter_draws_tasks_done_and_the_mean_score():
    out = io.StringIO()
    with RichReporter(console=Console(file=out, width=120, force_terminal=False)) as reporter:
        await evaluate(spec(), "ck", AdderEnv(), "val", n_tasks=2, model=model(), progress=reporter)
    text = out.getvalue()
    assert "2/2" in text and "mean 0.750" in text


def test_eval_cli_prints_the_table_and_the_archive_cli_reads_it_back(tmp_path, monkeypatch):
    import typer
    from typer.testing import CliRunner

    from coevo.cli import archive as archive_cli
    from coevo.cli import eval as eval_cli
    from coevo.harnesses import load_harness

    monkeypatch.setattr(eval_cli, "get_env", lambda ref: AdderEnv())
    monkeypatch.setattr(eval_cli, "load_model", lambda ref: model())
    app = typer.Typer()
    app.command("eval")(eval_cli.eval_cmd)
    app.add_typer(archive_cli.app, name="archive")
    runner, db = CliRunner(), str(tmp_path / "cli.db")
    harness_file = tmp_path / "h.json"
    harness_file.write_text(spec().model_dump_json())

    out = runner.invoke(app, ["eval", "--env", "adder", "--harness", str(harness_file), "--model", "fake:x",
                              "--split", "val", "--k", "2", "--n", "4", "--db", db])
    assert out.exit_code == 0, out.output
    assert "pass@2" in out.output and "mean credit" in out.output and "TIMR" in out.output
    assert "0.750" in out.output and "0.167" in out.output  # score beside the trivial baseline
    archive = Archive(db)
    (evaluation,) = archive.list(EvaluationRecord)
    assert evaluation.status == "done" and archive.count(Trajectory, evaluation_id=evaluation.id) == 8
    assert archive.get(Checkpoint, "fake:x") is not None and archive.list(RunRecord)[0].status == "done"

    listed = runner.invoke(app, ["archive", "list", "--db", db])
    assert listed.exit_code == 0 and evaluation.id[:12] in listed.output and spec().id[:12] in listed.output
    shown = runner.invoke(app, ["archive", "show", evaluation.id[:10], "--db", db])
    assert shown.exit_code == 0 and '"pass_at_k": 0.5' in shown.output
    exported = tmp_path / "out" / "spec.json"
    done = runner.invoke(app, ["archive", "export", spec().id[:10], "-o", str(exported), "--db", db])
    assert done.exit_code == 0 and load_harness(str(exported)).id == spec().id
    missing = runner.invoke(app, ["archive", "show", "ffffffff", "--db", db])
    assert missing.exit_code == 1 and "no row id starts with" in missing.output

    by_id = runner.invoke(app, ["eval", "--env", "adder", "--harness", spec().id[:12], "--model", "fake:x",
                                "--n", "2", "--db", db])
    assert by_id.exit_code == 0, by_id.output
    assert len(archive.list(EvaluationRecord)) == 2


@pytest.mark.parametrize("concurrency", [3, 8])
async def test_a_kill_under_concurrency_leaves_only_whole_tasks(tmp_path, concurrency):
    dies_after_thirteen = dies_after(13, ConnectionError("connection reset"))
    env, archive = AdderEnv(size=6), Archive(tmp_path / "a.db")
    with pytest.raises(ConnectionError):
        await evaluate(spec(), "ck", env, "val", k=2, model=ScriptedChatModel(script=[dies_after_thirteen]),
                       archive=archive, concurrency=concurrency)
    kept = archive.list(Trajectory)
    per_task: dict[str, list[int]] = {}
    for traj in kept:
        per_task.setdefault(traj.task_id, []).append(traj.seed)
    assert all(sorted(seeds) == [0, 1] for seeds in per_task.values())
    assert all(t.stop_reason == "final_answer" for t in kept)
    result = await evaluate(spec(), "ck", env, "val", k=2, model=model(), archive=archive, concurrency=concurrency)
    assert result.resumed_tasks == len(per_task) and archive.count(Trajectory) == 12


async def test_the_heap_is_frozen_while_rollouts_run_and_released_after():
    """Rollouts run with the pre-existing heap out of the GC's full passes (``gc.freeze``); the
    freeze ends with the last concurrent evaluation, and a caller's own freeze is left alone."""
    import gc
    import weakref

    seen: list[int] = []

    def watching(messages: list[BaseMessage]) -> str | AIMessage:
        seen.append(gc.get_freeze_count())
        return policy(messages)

    watcher = ScriptedChatModel(script=[watching])
    assert gc.get_freeze_count() == 0
    await evaluate(spec(), "ck", AdderEnv(), "val", n_tasks=2, model=watcher)
    assert seen and all(count > 0 for count in seen) and gc.get_freeze_count() == 0


    class Cycle:
        pass

    young = Cycle()
    young.self = young  # type: ignore[attr-defined]
    alive = weakref.ref(young)
    del young
    with evaluate_module._frozen_heap():  # young garbage is collected first, not frozen for the evaluation
        assert alive() is None and gc.get_freeze_count() > 0

    gc.freeze()  # the caller's own freeze (e.g. a server that froze its heap before forking)
    try:
        await evaluate(spec(), "ck", AdderEnv(), "val", n_tasks=2, model=watcher)
        assert gc.get_freeze_count() > 0  # still frozen: evaluate did not unfreeze what it did not freeze
    finally:
        gc.unfreeze()
