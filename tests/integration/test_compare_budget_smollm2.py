"""``coevo compare --budget N`` end to end through the CLI with the real SmolLM2-135M (GRPO stages,
offline curator/editor, the default job's showcase tasks, whose H0 replies are at most 12 tokens): 2 strategies x
1 seed at N = 4 rollouts (several seeds at a budget: ``tests/unit/test_equal_spend.py``, on fakes).

Sizes make the spend predictable whatever the model answers: a stage declares and spends
1 step x 2 tasks x 2 rollouts = 4, a val evaluation 2 tasks x k=1 = 2, and no check spends (no
smoke or local check). stage_effect's val evaluations measure and are not charged (coevo.meta.budget),
so both strategies spend 4 on round 0's stage (ungated also refines and adopts, which spends no
rollout) and round 1's stage would overrun: 4 each, one weight stage, the table shows equal spend.
Measured beside it, not charged: each strategy's stage effect, H0's val under W0 and W1 (2 + 2), and
the final pair's val where no phase had evaluated it."""

import json

import pytest
from typer.testing import CliRunner

from coevo.cli.app import app
from coevo.meta.budget import totals
from coevo.records import BudgetRecord, Checkpoint, RunRecord
from coevo.storage import Archive

pytestmark = pytest.mark.integration

BUDGET = 4


def test_compare_at_a_budget_spends_n_rollouts_per_run_on_the_real_small_model(tmp_path):
    db, out = tmp_path / "cmp.db", tmp_path / "report"
    config = tmp_path / "tiny.toml"
    config.write_text(f"""
rounds = 1
out_dir = "{tmp_path}"
[env]
n_train = 4
n_val = 2
n_test = 3
[train]
steps = 1
tasks_per_step = 2
num_generations = 2
resample = 0
max_new_tokens = 8
[meta]
candidates = 1
smoke_tasks = 0
local_check = false
[eval]
k = 1
""")
    args = ["compare", str(config), "--strategies", "rl_only,ungated", "--seeds", "1", "--budget", str(BUDGET),
            "--db", str(db), "-o", str(out)]
    done = CliRunner().invoke(app, args, terminal_width=400)
    assert done.exit_code == 0, done.output
    assert f"at equal spend: {BUDGET} rollouts" in done.output and done.output.count(f"{BUDGET} / {BUDGET}") == 2

    data = json.loads((out / "comparison.json").read_text())
    # at this size no group may hold a contrast: the only warning allowed says so (no learning signal)
    assert data["budget"] == BUDGET and [w for w in data["warnings"] if not w.startswith("no learning signal")] == []
    rows = {r["strategy"]: r for r in data["rows"]}
    for name in ("rl_only", "ungated"):
        row = rows[name]
        assert row["seeds"] == [0] and row["rollouts"] == BUDGET  # equal spend: N for every run
        assert row["spent_by_phase"] == {"train": 4}
        assert row["measured_by_phase"]["stage_effect"] == 4  # + the final val when it is new
        assert row["score"]["n"] == 3 and row["val_estimate"]["n"] == 2
        assert row["ended"] and all(f"at the cap after {BUDGET} rollouts" in e and "weight stage" in e
                                    for e in row["ended"])
    archive = Archive(db)
    assert len(data["runs"]) == 2  # one per strategy
    for run in data["runs"]:
        spent = totals(archive.list(BudgetRecord, run_id=run["run_id"]))["rollouts"]
        assert spent == BUDGET and archive.get(RunRecord, run["run_id"]).config["rounds"] == BUDGET
        assert len([c for c in archive.list(Checkpoint, run_id=run["run_id"]) if c.adapter_path]) == 1
