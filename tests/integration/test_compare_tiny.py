"""``coevo compare`` end to end through the CLI with the real services (GRPO weight stage, offline
curator/editor, reasoning-gym chain_sum) on a tiny random Llama: 2 strategies × 2 seeds, the
table, the report, and a second invocation that reads every run back instead of rerunning it."""

import json

import pytest
from training_kit import tiny_llama_checkpoint
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.harnesses import load_harness
from coevo.records import Checkpoint, RunRecord, Trajectory
from coevo.storage import Archive

pytestmark = pytest.mark.integration

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"


def test_compare_two_strategies_two_seeds_on_a_tiny_model(tmp_path):
    from transformers import AutoTokenizer

    base = tmp_path / "tiny"
    tiny_llama_checkpoint(base)
    tok = AutoTokenizer.from_pretrained(str(base))
    tok.chat_template = TEMPLATE
    tok.save_pretrained(str(base))
    h0 = load_harness("reasoning_gym").model_dump(mode="json")
    h0["budget"]["max_output_tokens"] = 6  # random weights: keep the rollouts short
    (tmp_path / "h0.json").write_text(json.dumps(h0))
    db, out = tmp_path / "cmp.db", tmp_path / "report"
    config = tmp_path / "tiny.toml"
    config.write_text(f"""
rounds = 1
policy = "local:{base}"
harness = "{tmp_path / 'h0.json'}"
out_dir = "{tmp_path}"
[env]
ref = "reasoning_gym:families=chain_sum,size=40,chain_sum.max_terms=2,chain_sum.max_digits=1"
n_train = 2
n_val = 2
n_test = 3
[train]
steps = 1
tasks_per_step = 2
num_generations = 2
max_new_tokens = 4
[meta]
smoke_tasks = 0
""")
    runner = CliRunner()
    args = ["compare", str(config), "--strategies", "rl_only,static", "--seeds", "2", "--db", str(db), "-o", str(out)]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "rl_only" in done.output and "static" in done.output and "n=3" in done.output
    archive = Archive(db)
    runs = [r for r in archive.list(RunRecord) if r.strategy in ("rl_only", "static")]
    assert len(runs) == 4 and all(r.status == "done" for r in runs)
    trained = [c for r in runs for c in archive.list(Checkpoint, run_id=r.id) if c.adapter_path]
    assert len(trained) == 2 and all("effective_group_rate" in c.metrics for c in trained)
    data = json.loads((out / "comparison.json").read_text())
    rows = {r["strategy"]: r for r in data["rows"]}
    assert rows["rl_only"]["seeds"] == [0, 1] and rows["static"]["score"]["n"] == 3
    assert rows["rl_only"]["effective_group_rate"] is not None and rows["static"]["effective_group_rate"] is None
    assert (out / "compare.png").exists() and (out / "index.html").exists()

    trajectories = len(archive.list(Trajectory))
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(Archive(db).list(Trajectory)) == trajectories
    assert [r["source"] for r in json.loads((out / "comparison.json").read_text())["runs"]] == ["reused"] * 4
