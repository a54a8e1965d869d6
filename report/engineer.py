"""The Harness-R1 part of the run report (arXiv:2608.02276, its
abstract: a harness engineer trained with cold-start SFT, then
GRPO on the outcomes of its own patches): per engineer stage (``EngineerStage``, from the run's final
state), the cold-start SFT examples, the GRPO reward per step (patched minus unpatched rerun of the
frozen target; the penalty for an invalid patch), and the patches' validity rate with its 95 %
interval — as a figure (``engineer.png``: the reward curve over the run's GRPO steps, the validity
rate per stage) and a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from coevo.evaluation.stats import score_estimate
from coevo.graphs.harness_r1.state import EngineerStage
from coevo.report.markup import html_table
from coevo.report.numbers import plain, score_text
from coevo.report.plots import pyplot, save_figure

COLUMNS = ("round", "SFT examples", "GRPO steps", "mean reward per step", "patches", "valid patches [95 %] n",
           "valid patches' mean reward")


def engineer_stages(state: dict[str, Any] | None) -> list[EngineerStage]:
    """The run's engineer stages, oldest first (``state["engineer_stages"]``: ``EngineerStage`` s or
    their dicts, as a checkpointed state reads back); [] for a run without any."""
    return [EngineerStage.model_validate(s) for s in (state or {}).get("engineer_stages") or []]


def validity(stage: EngineerStage) -> Any:
    """The stage's patch validity rate as an ``Estimate`` (Wilson 95 % over its ``patches``); None
    when it sampled none."""
    return score_estimate([1.0] * stage.valid + [0.0] * (stage.patches - stage.valid)) if stage.patches else None


def engineer_plot(stages: Sequence[EngineerStage], path: Path) -> Path:
    """Left: the mean reward of each GRPO step over the run (numbered across stages, one colour per
    round; dashed: 0, the patched rerun no better than the unpatched). Right: each stage's patch
    validity rate with its 95 % interval (under each round: valid / sampled)."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.6))
    step = 0
    for s in stages:
        points = [(step + i + 1, r) for i, r in enumerate(s.rewards) if r is not None]
        step += len(s.rewards)
        if points:
            left.plot(*zip(*points), "o-", label=f"round {s.round}")
    left.axhline(0.0, ls="--", color="#999", label="no change")
    left.set_xlabel("engineer GRPO step (all stages)")
    left.set_ylabel("mean reward (patched − unpatched)")
    left.legend(fontsize=7)
    sampled = [s for s in stages if s.patches]
    if sampled:
        rates = [validity(s) for s in sampled]
        right.bar([f"{s.round}\n({s.valid}/{s.patches})" for s in sampled], [e.mean for e in rates], color="#2a9d8f",
                  yerr=[[e.mean - e.low for e in rates], [e.high - e.mean for e in rates]], capsize=4)
    right.set_ylim(0, 1)
    right.set_xlabel("round (valid / sampled patches)")
    right.set_ylabel("valid patches (rate, 95 %)")
    return save_figure(fig, path)


def engineer_section(state: dict[str, Any] | None, out_dir: Path) -> str:
    """The HTML of the engineer stages (figure ``engineer.png`` in ``out_dir`` and table); "" when the
    run has no engineer stage (not a Harness-R1 run, or no final state given)."""
    stages = engineer_stages(state)
    if not stages:
        return ""
    rows = [[s.round, "–" if s.sft_examples is None else s.sft_examples, len(s.rewards),
             ", ".join(plain(r) for r in s.rewards) or "–", s.patches, score_text(validity(s)), plain(s.valid_reward)]
            for s in stages]
    trained = any(s.rewards or s.patches for s in stages)
    figure = f"<img src='{engineer_plot(stages, out_dir / 'engineer.png').name}' alt='engineer reward curve'>" \
        if trained else "<p>No GRPO step ran (nothing to plot).</p>"
    return ("<h2>Harness engineer (Harness-R1)</h2><p>Per engineer stage: cold-start SFT examples (– none that "
            "round), the mean reward of each GRPO step (success of the frozen target rerun with the patch minus "
            "without it, same train tasks and fresh seed; the penalty for an invalid patch) and how many sampled "
            f"patches parsed, applied and changed the harness.</p>{figure}{html_table(COLUMNS, rows)}")
