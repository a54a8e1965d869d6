"""The EvoHarness-RL part of the run report (arXiv:2608.05446, its
abstract: harness annealing is the shift from frequent
harness calls to selective access over training; harness evolution the state growing compact):
per GRPO step of the run's stages, the BPE harness-action rate per model turn, reads and writes per
rollout, the final state's size, success and the task reward, as a curve
(``harness_use.png``) and a table. The supervised harness fine-tuning stage is left out: its
rollouts are the teacher's (or accepted samples), not the policy's behaviour under training."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from coevo.observe.text import magnitude
from coevo.records import Checkpoint
from coevo.report.markup import html_table
from coevo.report.plots import pyplot, save_figure
from coevo.storage import Archive

COLUMNS = ("step", "stage", "action rate / turn", "reads / rollout", "writes / rollout", "state chars", "success",
           "task reward", "harness cost")


def harness_use_steps(archive: Archive, run_id: str) -> list[dict[str, Any]]:
    """One dict per training step that logged harness use (GRPO's ``history`` entries with
    ``action_rate``; ``coevo.training.grpo.harness_cost.harness_metrics``), stages oldest first: ``step``
    (1-based over the run), ``stage`` (the checkpoint the stage made), ``action_rate`` (BPE actions
    per model turn), ``reads``, ``writes`` (per rollout), ``state_chars``, ``success`` (the step's
    pass rate), ``task_reward``, ``harness_cost``."""
    rows = []
    for c in sorted(archive.list(Checkpoint, run_id=run_id), key=lambda c: c.created_at):
        for h in (c.metrics or {}).get("history", []):
            if "action_rate" not in h:
                continue
            rows.append({"step": len(rows) + 1, "stage": c.id, "action_rate": h["action_rate"],
                         "reads": h.get("harness_reads", 0.0), "writes": h.get("harness_writes", 0.0),
                         "state_chars": h.get("state_chars", 0.0), "success": h.get("pass_rate"),
                         "task_reward": h.get("task_reward"), "harness_cost": h.get("harness_cost", 0.0)})
    return rows


def harness_use_plot(steps: Sequence[dict[str, Any]], path: Path) -> Path:
    """The action-rate curve: harness actions per turn, reads and writes per rollout and success
    per training step (top); the BPE state's size in characters (bottom)."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 5.2), sharex=True)
    xs = [s["step"] for s in steps]
    top.plot(xs, [s["action_rate"] for s in steps], "o-", color="#264653", label="harness actions / turn")
    top.plot(xs, [s["reads"] for s in steps], "s--", color="#2a9d8f", label="reads / rollout")
    top.plot(xs, [s["writes"] for s in steps], "^--", color="#e76f51", label="writes / rollout")
    top.plot(xs, [s["success"] or 0.0 for s in steps], "d:", color="#444", label="success (pass rate)")
    top.set_ylabel("per turn / per rollout / rate")
    top.legend(fontsize=7)
    bottom.plot(xs, [s["state_chars"] for s in steps], "o-", color="#8d6e63")
    bottom.set_ylabel("BPE state (chars)")
    bottom.set_xlabel("training step (all GRPO stages)")
    return save_figure(fig, path)


def harness_use_section(archive: Archive, run_id: str, out_dir: Path) -> str:
    """The HTML of the action-rate curve (``harness_use.png`` in ``out_dir``) and its table; "" when
    the run has no BPE harness or no GRPO step logged harness use."""
    if not any("bpe" in (h.spec or {}) for h in archive.run_harnesses(run_id)):
        return ""
    steps = harness_use_steps(archive, run_id)
    if not steps:
        return ""
    plot = harness_use_plot(steps, out_dir / "harness_use.png")
    table = html_table(COLUMNS, [[s["step"], s["stage"][:12], *(magnitude(s[k]) for k in (
        "action_rate", "reads", "writes", "state_chars", "success", "task_reward", "harness_cost"))] for s in steps])
    return ("<h2>Harness use over training (EvoHarness-RL)</h2><p>BPE harness actions per model turn, reads and "
            "writes per rollout, the final BPE state's size and success, per GRPO step (harness annealing: the "
            f"action rate falling while success holds).</p><img src='{plot.name}' alt='action-rate curve'>{table}")
