"""``coevo export`` and ``coevo.load_agent`` on fakes: a finished run's final pair becomes a self-contained
agent folder (spec, adapter copied and checksummed, base model reference, card, langgraph.json) that loads
in one call and answers as the run's final test did, from a copy with the archive gone; user agents and
Harness-S routing export the same way; versions roll back; bad input is one paragraph naming the fix."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from test_cli_errors import one_paragraph_error
from test_gate_approval import patch_services, write_config
from test_harness_s import _run_harness_s
from test_meta_loop import WordEnv, _run, policy, setup_run
from typer.testing import CliRunner

import coevo
from coevo.app.export import export_agent
from coevo.app.release import AgentFolderError, load_agent, read_manifest, rollback
from coevo.app.run import RunError
from coevo.cli.app import app
from coevo.models.refs import clear_model_cache
from coevo.records import Checkpoint, EvaluationRecord, ExportRecord, RunRecord, Trajectory
from coevo.storage import Archive

runner = CliRunner()


def words(result) -> str:
    return " ".join(result.output.split())


def export(archive, db, out, run_id="run-1", **options):
    return asyncio.run(export_agent(db, run_id, out, archive=archive, env=WordEnv(), **options))


@pytest.fixture
def finished(tmp_path):
    """A finished VACE run on the words env (``test_meta_loop``) whose gate accepted the rule."""
    config, ctx, archive = setup_run(tmp_path, "help")
    state = asyncio.run(_run(config, ctx, archive))
    assert state["incumbent"] != state["start_harness"]
    return config, archive, state, ctx


def stored_replies(archive, evaluation_id) -> dict[str, str | None]:
    """An evaluation's stored answers by task prompt."""
    prompts = {t.id: t.prompt for t in WordEnv().tasks("test")}
    return {prompts[t.task_id]: t.final_answer for t in archive.list(Trajectory, evaluation_id=evaluation_id)}


def test_a_copy_of_the_final_pairs_folder_without_the_archive_answers_as_the_final_test_did(finished, tmp_path):
    config, archive, state, _ = finished
    stored = stored_replies(archive, state["test"]["final"].evaluation_id)
    assert sorted(stored.values()) == ["grape", "lemon", "quince", "yuzu"]
    done = export(archive, config.db, tmp_path / "agent")
    folder = done.folder
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "agent.json", "graph.py", "harness.json",
                                                       "langgraph.json"]
    manifest = read_manifest(folder)
    assert (manifest.kind, manifest.run_id, manifest.harness_id, manifest.checkpoint_id) == (
        "harness", "run-1", state["incumbent"], state["checkpoint"])
    assert manifest.policy == "fake:words" and manifest.adapter is None and manifest.env.tools == []
    assert list(manifest.files) == ["harness.json"] and manifest.coevo_version
    assert json.loads((folder / "langgraph.json").read_text())["graphs"] == {"agent": "./graph.py:graph"}
    assert "load_agent(Path(__file__).resolve().parent" in (folder / "graph.py").read_text()
    (record,) = archive.list(ExportRecord, run_id="run-1")
    assert (record.id, record.path, record.version, record.kind) == (manifest.export_id, str(folder), None, "harness")

    copy = shutil.copytree(folder, tmp_path / "elsewhere" / "agent")
    archive.close()
    shutil.rmtree(folder)
    Path(config.db).unlink()  # the archive (and the run's checkpointer) is gone
    graph = load_agent(copy, model=policy("help"))
    assert {prompt: graph.invoke({"task": prompt})["answer"] for prompt in stored} == stored
    assert asyncio.run(graph.ainvoke({"task": "Repeat the word: apple"}))["answer"] == "apple"
    assert coevo.load_agent is load_agent


def test_the_agent_card_names_strategy_lineage_config_scores_with_intervals_and_the_decomposition(finished, tmp_path):
    from test_decompose import lever_policy

    from coevo.app.decompose import decompose

    config, archive, state, ctx = finished
    card = (export(archive, config.db, tmp_path / "a").folder / "README.md").read_text()
    text = " ".join(card.split())
    for fragment in ("from run run-1", "(vace, done)", "| start pair (H0, W0) |", "| this agent (final pair) |",
                     "1.000 [0.51, 1.00] n=4", "0.000 [0.00, 0.49] n=4", "final − start (paired)", "trivial baseline",
                     "same tasks and seeds", "## Lineage", "(base)", "(edit)", state["start_checkpoint"],
                     "## Run config", '"strategy": "vace"', "## Files", "`harness.json`", "exported by coevo"):
        assert fragment in text, (fragment, card)
    assert "Which lever did what" not in card
    ctx.policy = lever_policy
    asyncio.run(decompose(config.db, "run-1", archive=archive, context=ctx))
    card = (export(archive, config.db, tmp_path / "a", force=True).folder / "README.md").read_text()
    assert "## Which lever did what (`coevo decompose`)" in card and "H_final × W_final (final pair)" in card
    assert "interaction" in card


def test_an_adapter_is_copied_and_checksummed_and_a_damaged_copy_or_source_is_refused(finished, tmp_path,
                                                                                     monkeypatch):
    from training_kit import random_adapter, tiny_chat_checkpoint

    config, archive, state, _ = finished
    base = tiny_chat_checkpoint(tmp_path / "base")
    trained = random_adapter(base, tmp_path / "run" / "ckpt-7" / "adapter", seed=7)
    archive.put(trained.model_copy(update={"parents": [state["checkpoint"]], "run_id": "run-1",
                                           "config": {"stage": "grpo"}}))
    run = archive.get(RunRecord, "run-1")
    archive.put(run.model_copy(update={"config": {**run.config, "policy": f"local:{base.base_model}"}}))
    done = export(archive, config.db, tmp_path / "agent", harness=state["incumbent"][:10], checkpoint="ckpt-7")
    manifest = read_manifest(done.folder)
    assert manifest.adapter == "adapter" and manifest.checkpoint_id == "ckpt-7"
    assert {"adapter/adapter_config.json", "adapter/adapter_model.safetensors"} <= set(manifest.files)
    card = (done.folder / "README.md").read_text()
    assert "grpo stage of run run-1" in card and "LoRA adapter in `adapter/`" in card

    try:
        graph = load_agent(done.folder)  # the base reference plus the folder's own adapter, loaded here
        engine_adapter = graph.bound_context.model.adapter_path
        assert Path(engine_adapter).resolve() == (done.folder / "adapter").resolve()
        assert isinstance(graph.invoke({"task": "Repeat the word: fig"})["stop_reason"], str)
    finally:
        clear_model_cache()

    weights = done.folder / "adapter" / "adapter_model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(AgentFolderError, match=r"adapter/adapter_model.safetensors does not match the checksum.*"
                                               r"coevo export run-1 -o DIR --force"):
        load_agent(done.folder)
    load_agent(done.folder, model=policy("help"))  # a served model does not read the local adapter

    Path(trained.adapter_path, "adapter_model.safetensors").write_bytes(b"short")
    with pytest.raises(Exception, match="checkpoint ckpt-7: .*adapter_model.safetensors holds 5 bytes"):
        export(archive, config.db, tmp_path / "other", checkpoint="ckpt-7")
    assert not (tmp_path / "other").exists() and not list(tmp_path.glob("other.partial-*"))
    archive.close()
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    one_paragraph_error(runner.invoke(app, ["export", "run-1", "-o", str(tmp_path / "other"), "--checkpoint",
                                            "ckpt-7", "--db", config.db]),
                        "checkpoint ckpt-7:", "holds 5 bytes", "train it again")


def test_the_env_tools_the_folder_names_are_built_from_its_env_or_passed_in(finished, tmp_path, monkeypatch):
    from training_kit import LookupEnv

    config, archive, state, _ = finished
    folder = asyncio.run(export_agent(config.db, "run-1", tmp_path / "agent", archive=archive, env=LookupEnv())).folder
    assert read_manifest(folder).env.tools == ["lookup"]
    with pytest.raises(AgentFolderError, match="its env 'words', which gives the tools lookup, cannot be built here"
                                               ".*load_agent\\(folder, tools=\\[...\\]\\)"):
        load_agent(folder, model=policy("help"))
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: LookupEnv())
    graph = load_agent(folder, model=policy("help"))
    assert list(graph.bound_context.tools) == ["lookup"]
    assert list(load_agent(folder, model=policy("help"), tools=[]).bound_context.tools) == []


def test_versions_point_current_at_the_newest_and_roll_back(finished, tmp_path):
    config, archive, state, _ = finished
    root = tmp_path / "releases"
    first = export(archive, config.db, root, version=True)
    second = export(archive, config.db, root, version=True, harness=state["start_harness"])
    assert (first.folder.name, second.folder.name) == ("v1", "v2")
    assert (root / "current").read_text().strip() == "v2" and (root / "langgraph.json").is_file()
    assert [r.version for r in archive.list(ExportRecord, run_id="run-1")] == [1, 2]
    model = policy("help")
    assert load_agent(root, model=model).invoke({"task": "Repeat the word: fig"})["answer"] == "banana"  # H0
    out = runner.invoke(app, ["release", "rollback", str(root)])
    assert out.exit_code == 0 and "current: v2 -> v1" in words(out), out.output
    assert load_agent(root, model=model).invoke({"task": "Repeat the word: fig"})["answer"] == "fig"
    one_paragraph_error(runner.invoke(app, ["release", "rollback", str(root)]), "current is v1, the oldest")
    assert rollback(root, 2) == (1, 2)
    one_paragraph_error(runner.invoke(app, ["release", "rollback", str(root), "--to", "v9"]), "has no version v9")
    one_paragraph_error(runner.invoke(app, ["release", "rollback", str(first.folder)]), "not a versioned agent folder")


def test_an_existing_folder_is_refused_unless_forced_and_only_an_export_is_replaced(finished, tmp_path):
    config, archive, state, _ = finished
    folder = export(archive, config.db, tmp_path / "agent").folder
    with pytest.raises(AgentFolderError, match="already holds an exported agent: pass --force.*--version"):
        export(archive, config.db, folder)
    with pytest.raises(AgentFolderError, match="exported without --version"):
        export(archive, config.db, folder, version=True)
    forced = export(archive, config.db, folder, force=True, harness=state["start_harness"])
    assert read_manifest(forced.folder).harness_id == state["start_harness"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(AgentFolderError, match="holds files that are not an exported agent"):
        export(archive, config.db, mine, force=True)
    assert (mine / "notes.txt").read_text() == "keep"


def test_a_folder_from_a_newer_coevo_or_not_a_folder_is_one_paragraph(finished, tmp_path):
    config, archive, _, _ = finished
    folder = export(archive, config.db, tmp_path / "agent").folder
    data = json.loads((folder / "agent.json").read_text())
    (folder / "agent.json").write_text(json.dumps({**data, "format": "coevo-agent/2", "coevo_version": "9.0"}))
    with pytest.raises(AgentFolderError, match=r"exported by coevo 9.0 in format 'coevo-agent/2', newer than this "
                                               r"coevo reads.*upgrade coevo"):
        load_agent(folder, model=policy("help"))
    with pytest.raises(AgentFolderError, match="is not an exported agent folder"):
        load_agent(tmp_path)
    with pytest.raises(AgentFolderError, match="no agent folder at"):
        load_agent(tmp_path / "nowhere")
    for edited in ({"adapter": "../../elsewhere"}, {"files": {**data["files"], "/etc/hostname": "0" * 64}}):
        (folder / "agent.json").write_text(json.dumps({**data, **edited}))
        with pytest.raises(AgentFolderError, match="a path outside the folder .*export the agent again"):
            load_agent(folder, model=policy("help"))
    (folder / "agent.json").write_text(json.dumps(data))
    spec = (folder / "harness.json").read_text()
    (folder / "harness.json").unlink()
    with pytest.raises(AgentFolderError, match="harness.json is missing.*copy the whole folder again"):
        load_agent(folder, model=policy("help"))
    (folder / "harness.json").write_text(spec)
    with pytest.raises(AgentFolderError, match="its model 'fake:words' cannot be loaded here.*model=REF"):
        load_agent(folder)


def test_a_run_without_a_final_pair_is_refused_in_one_paragraph_naming_its_status_and_the_fix(finished, tmp_path):
    config, archive, state, _ = finished
    archive.put(RunRecord(id="run-9", strategy="vace", config=archive.get(RunRecord, "run-1").config,
                          status="running"))
    with pytest.raises(RunError, match="run run-9 has no final pair yet: its status is 'running'.*--harness ID "
                                       "--checkpoint ID"):
        export(archive, config.db, tmp_path / "x", run_id="run-9")
    archive.put(RunRecord(id="eval-1", strategy="eval", config={}, status="done"))
    with pytest.raises(RunError, match="not a meta-loop run"):
        export(archive, config.db, tmp_path / "x", run_id="eval-1")
    archive.close()
    one_paragraph_error(runner.invoke(app, ["export", "run-9", "-o", str(tmp_path / "x"), "--db", config.db]),
                        "run run-9 has no final pair yet", "its status is 'running'", "coevo export run-9 -o DIR")
    one_paragraph_error(runner.invoke(app, ["export", "nope", "-o", str(tmp_path / "x"), "--db", config.db]),
                        "no run 'nope'")
    one_paragraph_error(runner.invoke(app, ["export", "run-1", "-o", str(tmp_path / "x"), "--db", config.db,
                                            "--checkpoint", "no-such"]), "no checkpoint 'no-such'")
    assert not (tmp_path / "x").exists()


def test_the_cli_exports_lists_and_shows_the_final_pair_and_the_run_summary_names_it(tmp_path, monkeypatch):
    config, ctx, _ = setup_run(tmp_path, "help")
    patch_services(monkeypatch, ctx)
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    ran = runner.invoke(app, ["run", str(write_config(tmp_path, config)), "--no-report"], terminal_width=300)
    assert ran.exit_code == 0, ran.output
    said = re.search(r"final pair: harness (\w+) x checkpoint (\S+) \(adapter none: base weights\); export it as an "
                     r"agent folder: coevo export (\S+) -o agents/\3 --db (\S+)", words(ran))
    assert said and said.group(4) == config.db, ran.output
    run_id = said.group(3)
    shown = runner.invoke(app, ["archive", "show", run_id, "--db", config.db])
    assert shown.exit_code == 0, shown.output
    assert f'"harness": "{Archive(config.db).resolve_id("harnesses", said.group(1))}"' in shown.output
    assert f"coevo export {run_id} -o agents/{run_id} --db {config.db}" in words(shown)
    out = tmp_path / "agents" / run_id
    done = runner.invoke(app, ["export", run_id, "-o", str(out), "--db", config.db])
    assert done.exit_code == 0, done.output
    assert f"exported run {run_id}: harness {said.group(1)}" in words(done) and "coevo.load_agent(" in words(done)
    listed = runner.invoke(app, ["archive", "list", "exports", "--db", config.db], terminal_width=300)
    assert listed.exit_code == 0 and str(out) in listed.output and run_id in listed.output, listed.output
    export_id = read_manifest(out).export_id
    assert runner.invoke(app, ["archive", "show", export_id[:12], "--db", config.db]).output.startswith("export ")
    running = RunRecord(id="run-live", strategy="vace", config={}, status="running")
    Archive(config.db).put(running)
    live = runner.invoke(app, ["archive", "show", "run-live", "--db", config.db])
    assert '"final_pair": "none yet (status running)' in live.output and "coevo export" not in live.output


def test_a_user_agent_exports_its_params_and_factory_and_loads_as_its_own_graph(finished, tmp_path):
    config, archive, state, _ = finished
    from coevo.harnesses.agent import agent_harness
    from coevo.harnesses.spec import HarnessSpec

    spec = agent_harness("coevo.examples.react_agent:make_agent", HarnessSpec())
    agent_id = archive.add_harness(spec, [], "base", "run-1")
    done = export(archive, config.db, tmp_path / "agent", harness=agent_id)
    manifest = read_manifest(done.folder)
    assert manifest.kind == "agent" and manifest.env.tools == []  # its calculator is its own, not the env's
    params = json.loads((done.folder / "params.json").read_text())
    assert set(params) == {"prompt", "skills", "tool_view", "decoding"}
    from coevo import load_params
    from coevo.examples.react_agent import ReactParams

    assert load_params(done.folder / "harness.json", ReactParams).prompt.system.startswith("You are a careful")
    assert "`coevo.examples.react_agent:make_agent`" in (done.folder / "README.md").read_text()
    graph = load_agent(done.folder, model=policy("help"))
    state = graph.invoke({"messages": [("user", "Repeat the word: fig")]})
    assert state["messages"][-1].content == "Final answer: banana"  # no verifier rule in the agent's prompt
    assert graph.config["recursion_limit"] > 25


def test_a_harness_s_run_exports_its_pool_and_router_and_routes_like_its_rank1_test(tmp_path):
    state, archive, _ = _run_harness_s(tmp_path, "harness_s_he_only")
    done = export(archive, str(tmp_path / "run.db"), tmp_path / "agent")
    manifest = read_manifest(done.folder)
    assert manifest.kind == "routed" and manifest.harness_id == state["start_harness"]
    assert (done.folder / "router.json").is_file() and "router.json" in manifest.files
    card = (done.folder / "README.md").read_text()
    assert "Rank-1 routing (this agent)" in card and "sibling pool of 2 harnesses" in card
    graph = load_agent(done.folder, model=policy("help"))
    for task in WordEnv().tasks("test"):
        out = graph.invoke({"task": task.prompt})
        assert out["harness"] == state["parents"][0] and out["answer"] == task.prompt.rsplit(" ", 1)[1]


def test_an_explicit_pair_without_a_stored_test_says_so_on_its_card(finished, tmp_path):
    config, archive, state, _ = finished
    archive.put(Checkpoint(id="side", base_model="fake", run_id="run-1"))
    card = (export(archive, config.db, tmp_path / "a", checkpoint="side").folder / "README.md").read_text()
    assert "No test evaluation of this pair is stored" in card
    assert [e for e in archive.list(EvaluationRecord, run_id="run-1") if e.checkpoint_id == "side"] == []


def test_force_replaces_only_a_coevo_export_never_other_files_or_a_folder_of_versions(finished, tmp_path,
                                                                                     monkeypatch):
    config, archive, state, _ = finished
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.json").write_text('{"name": "another tool\'s agent.json"}')
    (project / "main.py").write_text("keep")
    with pytest.raises(AgentFolderError, match="holds files that are not an exported agent"):
        export(archive, config.db, project, force=True)
    assert sorted(p.name for p in project.iterdir()) == ["agent.json", "main.py"]
    root = tmp_path / "releases"
    export(archive, config.db, root, version=True)
    export(archive, config.db, root, version=True)
    archive.close()
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    one_paragraph_error(runner.invoke(app, ["export", "run-1", "-o", str(root), "--force", "--db", config.db]),
                        f"{root} is a versioned agent folder (v1, v2): add a version with --version")
    assert sorted(p.name for p in root.iterdir()) == ["current", "graph.py", "langgraph.json", "v1", "v2"]
    assert len(Archive(config.db).list(ExportRecord, run_id="run-1")) == 2


def test_a_versioned_folder_with_a_dangling_or_missing_pointer_is_repaired_and_numbers_are_not_reused(finished,
                                                                                                     tmp_path):
    config, archive, state, _ = finished
    root = tmp_path / "releases"
    export(archive, config.db, root, version=True)
    export(archive, config.db, root, version=True, harness=state["start_harness"])
    shutil.rmtree(root / "v2")  # deleted by hand: current names no folder
    with pytest.raises(AgentFolderError, match=r"names 'v2', which is no version folder there \(versions: v1\); "
                                               r"point it at one with `coevo release rollback .* --to vN`"):
        load_agent(root, model=policy("help"))
    out = runner.invoke(app, ["release", "rollback", str(root), "--to", "v1"])  # the fix the message names
    assert out.exit_code == 0 and "current: none -> v1" in words(out), out.output
    assert load_agent(root, model=policy("help")).invoke({"task": "Repeat the word: fig"})["answer"] == "fig"

    (root / "current").unlink()  # lost in a copy
    with pytest.raises(AgentFolderError, match=r"holds versions \(v1\) but no current pointer.*`coevo release "
                                               r"rollback .* --to v1`"):
        load_agent(root, model=policy("help"))
    one_paragraph_error(runner.invoke(app, ["release", "rollback", str(root)]), "pointer is missing or names no "
                        "version (versions: v1)", "--to v1")
    os.symlink("v1", root / "current")  # a hand-made release link
    assert load_agent(root, model=policy("help")).invoke({"task": "Repeat the word: fig"})["answer"] == "fig"
    (root / "current").unlink()

    (root / "current").mkdir()  # a deploy script copied a version to current/
    one_paragraph_error(runner.invoke(app, ["release", "rollback", str(root), "--to", "v1"]),
                        f"its pointer {root / 'current'} cannot be written", "a folder named current?")
    (root / "current").rmdir()

    third = export(archive, config.db, root, version=True)  # v2 was recorded: its number is not reused
    assert third.folder.name == "v3" and (root / "current").read_text().strip() == "v3"
    (root / "v4").mkdir()
    (root / "v4" / "notes.txt").write_text("keep")  # a leftover that is no version
    assert export(archive, config.db, root, version=True).folder.name == "v5"
    assert (root / "v4" / "notes.txt").read_text() == "keep"


def test_a_version_number_a_concurrent_export_took_is_skipped(finished, tmp_path, monkeypatch):
    config, archive, state, _ = finished
    root = tmp_path / "releases"
    export(archive, config.db, root, version=True)
    monkeypatch.setattr("coevo.app.agent_folder.taken", lambda root: 0)  # as if v1 appeared after the look
    assert export(archive, config.db, root, version=True).folder.name == "v2"
    assert sorted(p.name for p in root.iterdir()) == ["current", "graph.py", "langgraph.json", "v1", "v2"]


def test_an_unwritable_destination_is_one_paragraph_and_stores_nothing(finished, tmp_path, monkeypatch):
    config, archive, state, _ = finished
    archive.close()
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "agent"  # under a file
    for extra in ([], ["--version"]):
        one_paragraph_error(runner.invoke(app, ["export", "run-1", "-o", str(out), "--db", config.db, *extra]),
                            "cannot write the agent folder", str(out), "pass -o a folder you can write to")
    assert Archive(config.db).list(ExportRecord) == []


def test_force_keeps_a_users_files_added_to_an_exported_folder(finished, tmp_path):
    config, archive, state, _ = finished
    folder = export(archive, config.db, tmp_path / "agent").folder
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "graph.cpython-311.pyc").write_bytes(b"x")  # made by loading graph.py: not the user's
    assert read_manifest(export(archive, config.db, folder, force=True).folder).harness_id == state["incumbent"]
    (folder / "Dockerfile").write_text("FROM python:3.11\n")  # added to deploy the folder
    with pytest.raises(AgentFolderError, match=r"files coevo did not write there \(Dockerfile\), which --force "
                                               "would delete: move them out"):
        export(archive, config.db, folder, force=True, harness=state["start_harness"])
    assert (folder / "Dockerfile").is_file() and read_manifest(folder).harness_id == state["incumbent"]


def test_an_export_that_appears_while_another_writes_is_not_replaced_without_force(finished, tmp_path, monkeypatch):
    import coevo.app.export as module

    config, archive, state, _ = finished
    folder, other = tmp_path / "agent", export(archive, config.db, tmp_path / "other", harness=state["start_harness"])
    write_card = module.agent_card

    def meanwhile(facts):  # a second `coevo export -o agent` finishes first
        shutil.copytree(other.folder, folder)
        return write_card(facts)

    monkeypatch.setattr(module, "agent_card", meanwhile)
    with pytest.raises(AgentFolderError, match="written by another export while this one was writing: nothing was "
                                               "replaced"):
        export(archive, config.db, folder)
    assert read_manifest(folder).harness_id == state["start_harness"] and not list(tmp_path.glob("agent.*"))
    monkeypatch.setattr(module, "agent_card", write_card)
    empty = tmp_path / "empty"
    empty.mkdir()  # made beforehand: an empty folder is written into
    assert read_manifest(export(archive, config.db, empty).folder).harness_id == state["incumbent"]


def test_run_export_closes_the_archive_it_opened_each_time(finished, tmp_path, monkeypatch):
    from coevo.app import export as module

    config, archive, state, _ = finished
    archive.close()
    opened: list[Archive] = []

    class Tracked(Archive):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.closed = False
            opened.append(self)

        def close(self):
            self.closed = True
            super().close()

    monkeypatch.setattr(module, "Archive", Tracked)
    module.run_export(config.db, "run-1", tmp_path / "a", env=WordEnv())
    with pytest.raises(AgentFolderError):
        module.run_export(config.db, "run-1", tmp_path / "a", env=WordEnv())  # refused: closed all the same
    assert len(opened) == 2 and all(a.closed for a in opened)


def test_a_folder_whose_base_model_moved_loads_with_base_and_never_drops_its_adapter(finished, tmp_path,
                                                                                    monkeypatch):
    import runpy

    from training_kit import random_adapter, tiny_chat_checkpoint

    config, archive, state, _ = finished
    base = tiny_chat_checkpoint(tmp_path / "base")
    trained = random_adapter(base, tmp_path / "run" / "ckpt-7" / "adapter", seed=7)
    archive.put(trained.model_copy(update={"parents": [state["checkpoint"]], "run_id": "run-1"}))
    run = archive.get(RunRecord, "run-1")
    archive.put(run.model_copy(update={"config": {**run.config, "policy": f"local:{base.base_model}"}}))
    folder = export(archive, config.db, tmp_path / "agent", checkpoint="ckpt-7").folder
    moved = Path(shutil.move(base.base_model, tmp_path / "elsewhere"))  # another machine keeps the base elsewhere
    try:
        with pytest.raises(AgentFolderError, match=r"its model .* cannot be loaded here.*load_agent\(folder, "
                                                   r"base='local:/path/to/base'\)"):
            load_agent(folder)
        with pytest.raises(AgentFolderError, match=rf"model='local:{moved}' is the base alone, without the folder's "
                                                   rf"adapter: pass base='local:{moved}'"):
            load_agent(folder, model=f"local:{moved}")
        graph = load_agent(folder, base=f"local:{moved}")
        assert Path(graph.bound_context.model.adapter_path).resolve() == (folder / "adapter").resolve()
        monkeypatch.setenv("COEVO_AGENT_BASE", f"local:{moved}")  # langgraph dev in the copied folder
        served = runpy.run_path(str(folder / "graph.py"))["graph"]
        assert Path(served.bound_context.model.adapter_path).resolve() == (folder / "adapter").resolve()
    finally:
        clear_model_cache()


def test_folder_names_with_brackets_are_printed_as_they_are(finished, tmp_path, monkeypatch):
    config, archive, state, _ = finished
    archive.close()
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    for name in ("agent[/b]", "agent[bold]"):
        for sub, extra in (("single", []), ("versions", ["--version"])):
            out = tmp_path / name / sub
            done = runner.invoke(app, ["export", "run-1", "-o", str(out), "--db", config.db, *extra])
            assert done.exit_code == 0 and done.exception is None, done.output
            assert f"coevo.load_agent({str(out)!r})" in words(done) and f"cd {out} && langgraph dev" in words(done)
    export(Archive(config.db), config.db, tmp_path / "agent[bold]" / "versions", version=True)
    moved = runner.invoke(app, ["release", "rollback", str(tmp_path / "agent[bold]" / "versions")])
    assert moved.exit_code == 0 and "agent[bold]/versions/current: v2 -> v1" in words(moved), moved.output
    listed = runner.invoke(app, ["archive", "list", "exports", "--db", config.db], terminal_width=400)
    assert listed.exit_code == 0 and str(tmp_path / "agent[/b]" / "versions" / "v1") in listed.output, listed.output


def test_a_run_whose_archive_folder_has_brackets_prints_its_log_file_and_export_command(tmp_path, monkeypatch):
    home = tmp_path / "runs[bold]"
    home.mkdir()
    config, ctx, _ = setup_run(home, "help")
    patch_services(monkeypatch, ctx)
    monkeypatch.setattr("coevo.envs.registry.get_env", lambda ref, **kw: WordEnv())
    ran = runner.invoke(app, ["run", str(write_config(home, config)), "--no-report"], terminal_width=300)
    assert ran.exit_code == 0 and ran.exception is None, ran.output
    assert f"log file (every line, and the frameworks' messages): {home / 'logs'}" in words(ran)
    assert f"--db {Path(config.db).resolve()}" in words(ran) and f"archive: {Path(config.db).resolve()}" in words(ran)
