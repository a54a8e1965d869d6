"""Drawing compiled graphs offline: Mermaid text from LangGraph, PNG through networkx + matplotlib
(LangGraph's own PNG renderers call a web service or need graphviz)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402


def write_graph(graph, stem: Path) -> tuple[Path, Path]:
    """Write ``stem.mmd`` (Mermaid) and ``stem.png`` for a compiled LangGraph graph.

    Conditional edges are drawn dashed. Returns the two paths.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    g = graph.get_graph()
    mmd, png = stem.with_suffix(".mmd"), stem.with_suffix(".png")
    mmd.write_text(g.draw_mermaid())
    dg = nx.DiGraph()
    for node in g.nodes:
        dg.add_node(node)
    for e in g.edges:
        dg.add_edge(e.source, e.target, conditional=e.conditional)
    order = list(dg.nodes)  # LangGraph lists nodes start to end
    pos = {n: (0.0, -i) for i, n in enumerate(order)}
    fig, ax = plt.subplots(figsize=(4, 1.1 * len(order) + 1))
    for cond, style in ((False, "solid"), (True, "dashed")):
        edges = [(u, v) for u, v, d in dg.edges(data=True) if d["conditional"] == cond]
        nx.draw_networkx_edges(dg, pos, edgelist=edges, style=style, ax=ax, arrows=True, arrowsize=14,
                               connectionstyle="arc3,rad=0.35", node_size=2600)
    nx.draw_networkx_nodes(dg, pos, node_color="#e8e4ff", edgecolors="#6b5fd3", node_size=2600, node_shape="s", ax=ax)
    nx.draw_networkx_labels(dg, pos, font_size=9, ax=ax)
    ax.set_xlim(-1.2, 1.2)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return mmd, png
