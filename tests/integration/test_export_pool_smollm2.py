"""``coevo export`` on the real small model at a tiny size, beside ``test_export_smollm2.py`` (a file of its own
so the two run in parallel): a user agent (``coevo.examples.react_agent:make_agent``) and a Harness-S run export
and load the same way as the default job's final pair."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import messages_from_dict
from test_export_smollm2 import export, final_test, last_reply, moved, run_cli

from coevo import load_agent
from coevo.app.release import read_manifest

pytestmark = pytest.mark.integration


def test_a_user_agent_and_a_harness_s_run_export_and_load_the_same_way(tmp_path):
    agent_run, db = run_cli(tmp_path / "agent", "--harness", "coevo.examples.react_agent:make_agent",
                            "--strategy", "harness_only")
    tasks, stored = final_test(db, agent_run)
    folder = export(agent_run, db, tmp_path / "agents" / "react")
    assert read_manifest(folder).kind == "agent" and (folder / "params.json").is_file()
    graph = load_agent(moved(folder, tmp_path / "agent"))
    out = graph.invoke({"messages": [("user", tasks[0].prompt)]})
    assert last_reply(out["messages"]) == last_reply(messages_from_dict(stored[tasks[0].id].messages))

    hs_run, db = run_cli(tmp_path / "hs", "--strategy", "harness_s_he_only", "--set", "harness_s.proposals=[1]",
                         "--set", "env.n_train=4")
    folder = export(hs_run, db, tmp_path / "agents" / "hs")
    manifest = read_manifest(folder)
    assert manifest.kind == "routed" and manifest.adapter is None
    pool = set(json.loads((folder / "router.json").read_text())["pool"])
    graph = load_agent(moved(folder, tmp_path / "hs"))
    out = graph.invoke({"task": tasks[0].prompt})
    assert out["harness"] in pool and isinstance(out["answer"], (str, type(None)))
