"""The action-rate curve in the run report (issue 26 item 3): per GRPO step, BPE harness actions per
turn, reads and writes, state size and success, as ``harness_use.png`` and a table; only for a run
with a BPE harness, and without the harness SFT stage's (teacher) rollouts."""

from coevo.harnesses.spec import HarnessSpec
from coevo.records import Checkpoint, RunRecord
from coevo.report.harness_use import harness_use_steps
from coevo.report.html import write_report
from coevo.storage import Archive


def step(rate, reads, writes, chars, success):
    return {"step": 1, "reward": success, "pass_rate": success, "action_rate": rate, "harness_reads": reads,
            "harness_writes": writes, "state_chars": chars, "task_reward": success, "harness_cost": 0.1 * rate}


def run_archive(db, bpe):
    with Archive(db) as archive:
        archive.put(RunRecord(id="r1", strategy="evoharness_rl", config={"env": {"ref": "toy"}}, status="done"))
        h0 = archive.add_harness(HarnessSpec(), [], "base", "r1")
        if bpe:
            archive.add_harness(HarnessSpec(bpe={}), [h0], "bpe", "r1")
        archive.put(Checkpoint(id="ck-sft", base_model="b", parents=["ck0"], run_id="r1",
                               metrics={"history": [{"round": 1, "reward": 1.0, "kept": 4}]}))  # RSFT: no harness use
        archive.put(Checkpoint(id="ck-r0", base_model="b", parents=["ck-sft"], run_id="r1",
                               metrics={"history": [step(0.8, 2.0, 3.0, 120.0, 0.25), step(0.5, 1.0, 2.0, 90.0, 0.5)]}))
        archive.put(Checkpoint(id="ck-r1", base_model="b", parents=["ck-r0"], run_id="r1",
                               metrics={"history": [step(0.2, 0.5, 0.5, 40.0, 0.5)]}))


def test_the_run_report_shows_the_action_rate_curve_and_its_table(tmp_path):
    db = tmp_path / "a.db"
    run_archive(db, bpe=True)
    with Archive(db) as archive:
        steps = harness_use_steps(archive, "r1")
    assert [(s["step"], s["stage"], s["action_rate"], s["reads"], s["writes"], s["success"]) for s in steps] == [
        (1, "ck-r0", 0.8, 2.0, 3.0, 0.25), (2, "ck-r0", 0.5, 1.0, 2.0, 0.5), (3, "ck-r1", 0.2, 0.5, 0.5, 0.5)]
    page = write_report("r1", str(db), tmp_path / "report").read_text()
    assert "Harness use over training" in page and "harness_use.png" in page
    assert (tmp_path / "report" / "harness_use.png").stat().st_size > 1000
    assert "<td>0.8</td><td>2</td><td>3</td><td>120</td><td>0.25</td>" in page


def test_a_run_without_a_bpe_harness_has_no_harness_use_section(tmp_path):
    db = tmp_path / "a.db"
    run_archive(db, bpe=False)
    page = write_report("r1", str(db), tmp_path / "report").read_text()
    assert "Harness use over training" not in page and not (tmp_path / "report" / "harness_use.png").exists()
