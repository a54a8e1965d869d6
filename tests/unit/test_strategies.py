"""The strategy table: langgraph.json, the config's choices, the run's services and each strategy's
wiring all derive from it."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coevo.app.services import make_context
from coevo.config import ConfigError, RunConfig, parse_config
from coevo.graphs.registry import STRATEGIES, get_strategy, langgraph_config, write_langgraph_json
from coevo.roles.engineer import EngineerEditor
from coevo.storage import Archive

ROOT = Path(__file__).resolve().parents[2]


def test_langgraph_json_lists_every_strategy_of_the_table():
    on_disk = json.loads((ROOT / "langgraph.json").read_text())
    assert on_disk["graphs"] == langgraph_config(on_disk)["graphs"], "run `python -m coevo.graphs.registry`"
    for name, strategy in STRATEGIES.items():
        path, attr = on_disk["graphs"][name].split(":")
        assert (ROOT / path).is_file() and attr == name


def test_studio_binds_each_strategy_graph_to_a_lazy_default_context():
    from coevo.app import studio

    for name in STRATEGIES:
        graph = getattr(studio, name)
        assert isinstance(graph.bound_context, studio.DefaultContext) and graph.bound_context.strategy == name
        assert graph.bound_context._built is None  # nothing loaded until a node reads the context
        assert set(graph.get_graph().nodes) == set(get_strategy(name).graph().get_graph().nodes)
        assert studio.studio_config(name).strategy == name  # every default validates (evoharness_rl: its λ)


def test_write_langgraph_json_regenerates_the_file(tmp_path):
    target = tmp_path / "langgraph.json"
    target.write_text(json.dumps({"dependencies": ["."], "graphs": {"vace": "./old.py:graph"}, "env": {"A": "1"}}))
    assert write_langgraph_json(target)
    written = json.loads(target.read_text())
    assert written["env"] == {"A": "1"} and written["graphs"]["ungated"] == "./app/studio.py:ungated"
    assert written["graphs"] == json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert not write_langgraph_json(target)  # already up to date


def test_importing_the_table_imports_no_strategy_module():
    code = ("import sys, coevo.graphs.registry as r; r.get_strategy('vace'); "
            "assert not any(s.module in sys.modules for s in r.STRATEGIES.values()), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_strategy_module_compiles_its_graph_under_its_name(name):
    strategy = STRATEGIES[name]
    module = importlib.import_module(strategy.module)
    assert module.graph.name == name
    nodes = set(strategy.build().compile().get_graph().nodes)
    assert {"setup", "final_test"} <= nodes
    assert bool({"train", "adapt"} & nodes) == strategy.trains  # adapt: CoEvo-RSI's weight stage
    edits = {"editor", "engineer"} & set(strategy.roles)  # Harness-R1's engineer is its editor
    assert (any(n.startswith("curate") for n in nodes) and "edit" in nodes) == bool(edits)


def test_wirings_differ_as_the_design_table_says():
    nodes = {n: set(s.build().compile().get_graph().nodes) - {"__start__", "__end__"} for n, s in STRATEGIES.items()}
    assert nodes["static"] == {"setup", "final_test"}
    assert {"validate", "gate"} <= nodes["vace"] and {"validate", "gate"} <= nodes["harness_only"]
    assert "sample" in nodes["harness_only"] and "train" not in nodes["harness_only"]
    assert "adopt" in nodes["ungated"] and not {"validate", "gate"} & nodes["ungated"]
    assert nodes["rl_only"] == {"setup", "train", "stage_effect", "next_round", "final_test"}
    assert all("stage_effect" in nodes[n] for n in ("vace", "ungated", "rl_only"))
    rsi = {"sample", "survey", "curate_archive", "edit", "check", "inherit", "adapt", "promote"}
    assert rsi <= nodes["coevo_rsi"] and nodes["coevo_rsi_latest_only"] == nodes["coevo_rsi"]
    assert not {"gate", "train"} & nodes["coevo_rsi"]
    assert "curate_briefs" in nodes["harness_s"] and "curate" not in nodes["harness_s"] | nodes["coevo_rsi"]


def test_an_unknown_strategy_is_an_error_naming_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        parse_config({"strategy": "vacee"})
    assert "strategy:" in str(err.value) and all(name in str(err.value) for name in STRATEGIES)
    with pytest.raises(ValueError, match="harness_only"):
        get_strategy("nope")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_the_run_gets_a_trainer_and_roles_only_when_its_strategy_needs_them(tmp_path, name):
    lam = {"action_cost": 0.5} if name == "evoharness_rl" else {}  # its lambda has no default (test_config)
    config = RunConfig(strategy=name, db=str(tmp_path / "run.db"), train=lam)
    ctx = make_context(config, Archive(config.db), "r1", env=object())
    strategy = get_strategy(name)
    assert (ctx.trainer is not None) == strategy.trains
    assert (ctx.curator is not None) == ("curator" in strategy.roles)
    assert (ctx.editor is not None) == bool({"editor", "engineer"} & set(strategy.roles))
    assert isinstance(ctx.editor, EngineerEditor) == ("engineer" in strategy.roles)
    assert ctx.run_id == "r1"


def test_the_engineer_is_any_strategys_editor_with_as_editor(tmp_path):
    config = RunConfig(strategy="harness_only", db=str(tmp_path / "run.db"),
                       harness_r1={"as_editor": True, "engineer": "local:smollm2-135m", "max_ops": 1})
    ctx = make_context(config, Archive(config.db), "r1", env=object())
    assert isinstance(ctx.editor, EngineerEditor) and ctx.editor.max_ops == 1


def test_cli_strategy_help_lists_the_table():
    from coevo.cli.app import app

    out = CliRunner().invoke(app, ["run", "--help"], terminal_width=400).output
    assert all(name in out for name in STRATEGIES)
