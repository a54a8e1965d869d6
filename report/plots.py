"""Report figures (matplotlib, Agg): validation per round, train reward per step, harness lineage, the
decomposition's 2×2."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, imported on first use: importing it with this module cost every
    ``coevo`` command about a second and a half at start, plots or not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (PNG, 110 dpi), close it; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def validation_plot(decisions: Sequence[Any], trivial: float | None, path: Path) -> Path:
    """Incumbent score b per round (line) and every candidate's c (green ▲ accepted, red ✕ rejected),
    with the trivial-policy baseline as a dashed line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    rounds = sorted({d.round for d in decisions})
    ax.plot(rounds, [max(d.b for d in decisions if d.round == r) for r in rounds], "o-", color="#444",
            label="incumbent (b)")
    for accepted, marker, color, label in ((True, "^", "#2a9d4b", "accepted candidate (c)"),
                                           (False, "x", "#d1495b", "rejected candidate (c)")):
        pts = [(d.round, d.c) for d in decisions if d.accepted == accepted]
        if pts:
            ax.scatter(*zip(*pts), marker=marker, color=color, s=70, label=label, zorder=3)
    if trivial is not None:
        ax.axhline(trivial, ls="--", color="#999", label=f"trivial baseline ({trivial:.2f})")
    ax.set_xlabel("round")
    ax.set_ylabel("validation score (mean reward)")
    ax.set_xticks(rounds or [0])
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def train_plot(steps: Sequence[dict[str, Any]], trivial: float | None, path: Path) -> Path:
    """Train reward per GRPO/RSFT step across stages, with the trivial baseline."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = list(range(1, len(steps) + 1))
    ax.plot(xs, [s.get("reward", 0.0) for s in steps], "o-", label="train reward (mean over rollouts)")
    if trivial is not None:
        ax.axhline(trivial, ls="--", color="#999", label=f"trivial baseline ({trivial:.2f})")
    ax.set_xlabel("training step (all stages)")
    ax.set_ylabel("reward")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def decompose_plot(cells: dict[str, Any], trivial: float | None, path: Path, title: str = "") -> Path:
    """The 2×2 of ``coevo decompose`` as an interaction plot: the weights (W0, W_final) on the x axis, one
    line per harness (H0 grey, H_final green), each cell's score with its 95 % interval as an error bar
    (``cells``: ``coevo.evaluation.decompose.CELLS`` name -> an ``Estimate``), the trivial baseline dashed.
    Parallel lines: the levers add; diverging lines: a positive interaction."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for harness, color, label in (("h0", "#777", "H0"), ("hf", "#2a9d4b", "H_final")):
        points = [cells[f"{harness}_{w}"] for w in ("w0", "wf")]
        means = [e.mean for e in points]
        errors = [[m - e.low for m, e in zip(means, points)], [e.high - m for m, e in zip(means, points)]]
        ax.errorbar([0, 1], means, yerr=errors, fmt="o-", color=color, capsize=4,
                    label=f"{label}: {means[0]:.3f} → {means[1]:.3f}")
    if trivial is not None:
        ax.axhline(trivial, ls="--", color="#999", label=f"trivial baseline ({trivial:.3f})")
    ax.set_xticks([0, 1], ["W0 (start weights)", "W_final"])
    ax.set_xlim(-0.3, 1.3)
    ax.set_ylabel("test score (mean reward)")
    ax.set_title(title or f"which lever did what (n = {cells['h0_w0'].n})", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def lineage_plot(harnesses: Sequence[Any], accepted: set[str], path: Path) -> Path:
    """Harness lineage: parent → child edges; accepted incumbents green, H0 grey, others red."""
    import networkx as nx

    plt = pyplot()
    g = nx.DiGraph()
    for h in harnesses:
        g.add_node(h.id[:8], origin=h.origin)
        for p in h.parents:
            g.add_edge(p[:8], h.id[:8])
    depth = {n: 0 for n in g.nodes}
    for n in nx.topological_sort(g) if nx.is_directed_acyclic_graph(g) else g.nodes:
        for c in g.successors(n):
            depth[c] = max(depth[c], depth[n] + 1)
    layers: dict[int, list[str]] = {}
    for n, d in depth.items():
        layers.setdefault(d, []).append(n)
    pos = {n: (d, -i) for d, ns in layers.items() for i, n in enumerate(sorted(ns))}
    colors = ["#2a9d4b" if n in {a[:8] for a in accepted}
              else "#bbbbbb" if g.nodes[n].get("origin") == "base" else "#e8a0a8"
              for n in g.nodes]
    fig, ax = plt.subplots(figsize=(max(4, 2.2 * len(layers)),
                                    max(2.5, 0.9 * max((len(v) for v in layers.values()), default=1))))
    nx.draw_networkx(g, pos, ax=ax, node_color=colors, node_size=1500, font_size=7, arrows=True)
    ax.set_axis_off()
    return save_figure(fig, path)


def compare_plot(rows: Sequence[Any], trivial: float | None, path: Path) -> Path:
    """Test score per strategy (``coevo.app.compare.StrategyRow``): the final pair's mean over seeds
    as a bar with its 95 % interval, each seed's score as a dot, the start pair (H0, W0) as a grey
    tick, and the trivial-policy baseline as a dashed line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(rows)), 4.4))
    xs = list(range(len(rows)))
    means = [r.score.mean for r in rows]
    errors = [[r.score.mean - r.score.low for r in rows], [r.score.high - r.score.mean for r in rows]]
    ax.bar(xs, means, color="#8fb8de", yerr=errors, capsize=5, label="final pair, mean over seeds [95 %]")
    for x, r in zip(xs, rows):
        ax.scatter([x] * len(r.per_seed), r.per_seed, color="#1f4e79", s=18, zorder=3,
                   label="one seed" if x == 0 else None)
        ax.hlines(r.start.mean, x - 0.4, x + 0.4, color="#666", lw=2, label="start pair (H0, W0)" if x == 0 else None)
    if trivial is not None:
        ax.axhline(trivial, ls="--", color="#999", label=f"trivial baseline ({trivial:.2f})")
    ax.set_xticks(xs, [r.strategy for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("test score (mean reward)")
    top = max([r.score.high for r in rows] + [trivial or 0.0, 0.05])
    ax.set_ylim(0, min(1.05, 1.2 * top))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    return save_figure(fig, path)


def rollout_plot(comparison: Any, path: Path) -> Path:
    """Score vs rollouts (``coevo.app.compare.Comparison``): per strategy, the incumbent's val score
    at the end of each round against the cumulative train + val rollouts spent by then (means over
    seeds; a line with dots), its test score at the start (x = 0, hollow marker) and for the final
    pair (x = its total rollouts, filled marker), and the matched budget as a dotted vertical line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, row in enumerate(comparison.rows):
        colour = colours[i % len(colours)]
        points = [(p.rollouts, p.val) for p in row.curve if p.val is not None]
        if points:
            ax.plot(*zip(*points), marker="o", color=colour, label=f"{row.strategy} (val)")
        ax.scatter([0], [row.start.mean], facecolors="none", edgecolors=colour, marker="s", zorder=3,
                   label="start pair (H0, W0), test" if i == 0 else None)
        ax.scatter([row.rollouts], [row.score.mean], color=colour, marker="*", s=90, zorder=3,
                   label=f"{row.strategy} (test, final)")
    if comparison.matched_budget is not None:
        ax.axvline(comparison.matched_budget, ls=":", color="#666",
                   label=f"matched budget ({comparison.matched_budget:.0f})")
    ax.set_xlabel("cumulative rollouts (train + val)")
    ax.set_ylabel("score (mean reward)")
    ax.set_ylim(-0.02, 1.05)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    return save_figure(fig, path)


def timr_matrix_plot(timr: dict[tuple[str, str], float], harnesses: Sequence[str], checkpoints: Sequence[str],
                     promoted: set[tuple[str, str]], path: Path) -> Path:
    """CoEvo-RSI Figure 8: TIMR (fraction of model turns with an interface violation, in [0, 1]) of
    each evaluated (harness, checkpoint) pair on val, rows = harnesses, columns = checkpoints (both
    oldest first); blank cells were never evaluated, ★ marks promoted pairs."""
    plt = pyplot()
    import numpy as np

    grid = np.full((len(harnesses), len(checkpoints)), np.nan)
    for (h, c), value in timr.items():
        if h in harnesses and c in checkpoints:
            grid[list(harnesses).index(h), list(checkpoints).index(c)] = value
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(checkpoints) + 2), max(2.5, 0.45 * len(harnesses) + 1.5)))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="Reds", vmin=0.0, vmax=max(0.05, float(np.nanmax(grid))
                                                                                 if timr else 0.05), aspect="auto")
    for i, h in enumerate(harnesses):
        for j, c in enumerate(checkpoints):
            if not np.isnan(grid[i, j]):
                star = "★ " if (h, c) in promoted else ""
                ax.text(j, i, f"{star}{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(checkpoints)), [c[:14] for c in checkpoints], rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(harnesses)), [h[:10] for h in harnesses], fontsize=7)
    ax.set_xlabel("checkpoint")
    ax.set_ylabel("harness")
    fig.colorbar(image, ax=ax, label="TIMR (val)")
    return save_figure(fig, path)
