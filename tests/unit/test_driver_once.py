"""The run driver builds each thing once per run (``coevo.app.run``): ``coevo run`` opens the archive once
and closes it, compiles no graph (the strategy module's own, compiled at its import, is given the
checkpointer), builds H0 and the services once; answering a gate question goes on with the same
services and graph; the context validates a stored spec once per id and reads the checkpoint a weight
stage recorded once. Counted on the meta-loop tests' fakes (``test_meta_loop``: the words env, a
scripted policy) with the real preflight, env and model references patched to them."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections import Counter

from langgraph.graph.state import StateGraph
from test_gate_approval import two_candidate_run
from test_meta_loop import WordEnv, policy, setup_run
from typer.testing import CliRunner

import coevo.app.run as meta_run
import coevo.app.services as services
import coevo.envs.registry as registry
import coevo.harnesses.agent as agent
import coevo.meta.context as meta_context
import coevo.models.refs as refs
from coevo.cli.app import app
from coevo.harnesses.spec import HarnessSpec, Prompt
from coevo.records import Checkpoint, RunRecord
from coevo.storage import Archive
from coevo.strategies import get_strategy

runner = CliRunner()


def counting(monkeypatch) -> Counter:
    """Count archives opened and closed, graphs compiled, H0 built and run services made from here on."""
    counts: Counter = Counter()
    init, close, compile_, make = Archive.__init__, Archive.close, StateGraph.compile, meta_run.make_context
    original = agent.start_harness

    def opened(self, *args, **kwargs):
        counts["archive opened"] += 1
        init(self, *args, **kwargs)

    def closed(self):
        counts["archive closed"] += 1
        close(self)

    def compiled(self, *args, **kwargs):
        counts["graph compiled"] += 1
        return compile_(self, *args, **kwargs)

    def built(*args, **kwargs):
        counts["H0 built"] += 1
        return original(*args, **kwargs)

    def made(*args, **kwargs):
        counts["services made"] += 1
        return make(*args, **kwargs)

    monkeypatch.setattr(Archive, "__init__", opened)
    monkeypatch.setattr(Archive, "close", closed)
    monkeypatch.setattr(StateGraph, "compile", compiled)
    monkeypatch.setattr(meta_run, "make_context", made)
    for module in list(sys.modules.values()):  # every module that imported start_harness by name
        if vars(module).get("start_harness") is original:
            monkeypatch.setattr(module, "start_harness", built)
    return counts


def words_job(tmp_path, monkeypatch, strategy="harness_only"):
    """A run config file for the words env and the scripted policy, which the registry and the model
    references now return; the strategy's module imported (compiled) as any process running it has."""
    importlib.import_module(get_strategy(strategy).module)
    monkeypatch.setattr(registry, "get_env", lambda ref, **kw: WordEnv())
    monkeypatch.setattr(services, "get_env", lambda ref, **kw: WordEnv())  # a resume's services build the env
    monkeypatch.setattr(refs, "load_model", lambda ref, **kw: policy("help"))
    h0 = tmp_path / "h0.json"
    h0.write_text(HarnessSpec(name="h0", prompt=Prompt(system="Answer the task.")).model_dump_json())
    path = tmp_path / "run.toml"
    path.write_text(f'strategy = "{strategy}"\ndb = "{tmp_path / "run.db"}"\nout_dir = "{tmp_path}"\n'
                    f'harness = "{h0}"\npolicy = "fake:words"\nrounds = 1\n'
                    '[env]\nref = "words"\nn_train = 4\nn_val = 4\nn_test = 4\n[meta]\nlocal_check = false\n')
    return path


def test_coevo_run_opens_the_archive_once_compiles_no_graph_and_builds_h0_and_services_once(tmp_path, monkeypatch):
    path = words_job(tmp_path, monkeypatch)
    counts = counting(monkeypatch)
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert "report:" in result.output and "final pair:" in result.output  # the summary read the same archive
    assert counts == {"archive opened": 1, "archive closed": 1, "H0 built": 1, "services made": 1}


def test_coevo_run_resume_opens_the_archive_once_and_builds_no_h0(tmp_path, monkeypatch):
    path = words_job(tmp_path, monkeypatch)
    assert runner.invoke(app, ["run", str(path)]).exit_code == 0
    with Archive(tmp_path / "run.db") as archive:
        (run,) = archive.list(RunRecord)
    counts = counting(monkeypatch)
    result = runner.invoke(app, ["run", "--resume", run.id[:12], "--db", str(tmp_path / "run.db")])
    assert result.exit_code == 0, result.output
    assert counts == {"archive opened": 1, "archive closed": 1, "services made": 1}  # setup ran in the first


def test_answering_a_gate_question_goes_on_with_the_same_services_and_graph(tmp_path, monkeypatch):
    config, ctx, archive = two_candidate_run(tmp_path)
    importlib.import_module(get_strategy(config.strategy).module)
    counts = counting(monkeypatch)
    checkpointers = []
    opener = meta_run.open_checkpointer
    monkeypatch.setattr(meta_run, "open_checkpointer", lambda *a: checkpointers.append(a) or opener(*a))

    async def drive():
        start = await meta_run.prepare_start(config, approve=True, services=False, archive=archive)
        async with meta_run.start_run(start, archive, "run-1", context=ctx) as run:
            states = [await run.advance()]
            while "__interrupt__" in states[-1]:
                states.append(await run.advance({i.id: "no" for i in states[-1]["__interrupt__"]}))
            return states

    states = asyncio.run(drive())
    assert len(states) >= 3 and "__interrupt__" not in states[-1]  # two questions answered, then the end
    assert archive.get(RunRecord, "run-1").status == "done"
    assert len(checkpointers) == 1  # one graph for the three advances, under one checkpointer
    assert counts == {"H0 built": 1}  # by setup, once (the test's services have none); no archive or graph


def test_the_context_validates_a_stored_spec_once_per_id(tmp_path, monkeypatch):
    config, ctx, archive = setup_run(tmp_path)
    spec = HarnessSpec(name="x", prompt=Prompt(system="Say it."))
    harness_id = archive.add_harness(spec, [], "base", "run-1")
    loads = []
    load = meta_context.load_harness
    monkeypatch.setattr(meta_context, "load_harness", lambda source: loads.append(1) or load(source))
    assert ctx.spec(harness_id) is ctx.spec(harness_id) and ctx.spec(harness_id).id == spec.id
    assert len(loads) == 1


def test_a_weight_stage_reads_the_checkpoint_it_recorded_once(tmp_path, monkeypatch):
    config, ctx, archive = setup_run(tmp_path)
    config.rounds = 1
    reads = Counter()
    get = archive.get

    def counted(kind, id):
        if kind is Checkpoint:
            reads[id] += 1
        return get(kind, id)

    monkeypatch.setattr(archive, "get", counted)
    state = asyncio.run(meta_run.run_meta(config, run_id="run-1", context=ctx, archive=archive))
    stage = state["checkpoint"]  # round 0's weight stage recorded it (FakeTrainer)
    assert stage.endswith("+r0") and reads[stage] == 1
