"""The agent card: the ``README.md`` of an exported agent folder (``coevo export``), in Markdown.

What a reader of the folder needs without the archive: where the agent came from (run, strategy,
the harness and checkpoint lineages, the run's config, the coevo version and commit that exported it,
the date), how well it did (the run's test scores with n and 95 % intervals, beside the start pair
and the trivial-policy baseline, and the 2×2 of ``coevo decompose`` when the run has one), and how to
load and serve it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coevo.report.decompose import CELL_NAMES, effect_rows
from coevo.report.numbers import difference_text, plain, score_text

if TYPE_CHECKING:
    from coevo.evaluation.decompose import Effects
    from coevo.evaluation.stats import Estimate


@dataclass(frozen=True)
class ScoreRow:
    """One test row: ``label``, the pair, its mean@k ``estimate`` and pass@k ``passes`` (each with n and
    interval; None: not measured), ``k`` rollouts per task and the trivial-policy baseline."""

    label: str
    harness: str
    checkpoint: str
    estimate: Estimate | None
    passes: Estimate | None = None
    k: int = 1
    trivial: float | None = None


@dataclass(frozen=True)
class CardFacts:
    """What the card says (module docstring). ``kind``: ``harness``, ``agent`` (a user agent: ``factory``)
    or ``routed`` (Harness-S: ``pool`` siblings); ``lineage``: (id, name, origin) from H0 to the exported
    harness; ``checkpoints``: (id, what made it) from W0 to the exported checkpoint; ``scores`` and
    ``differences`` (label, paired estimate) on the run's test split; ``decomposition``: (env/split
    title, the cells' harness and checkpoint ids, ``Effects``) of the run's newest ``coevo decompose``."""

    title: str
    run_id: str | None
    strategy: str
    status: str
    kind: str
    harness_id: str
    checkpoint_id: str
    policy: str
    adapter: str | None
    exported_at: dt.datetime
    coevo_version: str
    commit: str | None
    env_ref: str
    tools: list[str] = field(default_factory=list)
    seed: int = 0
    temperature: float | None = None
    served_as: str | None = None
    factory: str | None = None
    pool: int = 0
    version: int | None = None
    lineage: list[tuple[str, str, str]] = field(default_factory=list)
    checkpoints: list[tuple[str, str]] = field(default_factory=list)
    scores: list[ScoreRow] = field(default_factory=list)
    differences: list[tuple[str, Estimate]] = field(default_factory=list)
    decomposition: tuple[str, dict[str, str], Effects] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def _what(facts: CardFacts) -> str:
    if facts.kind == "agent":
        return f"your LangGraph agent `{facts.factory}` with evolved params (`params.json`, `harness.json`)"
    if facts.kind == "routed":
        return (f"a Harness-S sibling pool of {facts.pool} harnesses (H0 included) with its Rank-1 router "
                "(`router.json`, offline Rule Router voters)")
    return "a harness spec (`harness.json`) compiled to coevo's harness graph"


def _scores(facts: CardFacts) -> list[str]:
    if not facts.scores:
        return ["No test evaluation of this pair is stored in the run's archive (the run ran no final test, or "
                "this pair was not tested): `coevo eval --harness ID --checkpoint ID --split test` measures it."]
    lines = ["| | harness | checkpoint | mean@k [95 % interval] n | pass@k | trivial baseline |",
             "|---|---|---|---|---|---|"]
    for r in facts.scores:
        lines.append(f"| {r.label} | `{r.harness[:12]}` | `{r.checkpoint[:24]}` | {score_text(r.estimate)} | "
                     f"{'–' if r.passes is None else f'pass@{r.k} {score_text(r.passes)}'} | {plain(r.trivial)} |")
    for label, est in facts.differences:
        lines.append(f"| {label} (paired) | | | {difference_text(est)} | | |")
    temperature = ("the harness's own decoding" if facts.temperature is None
                   else f"temperature {facts.temperature:g}")
    lines += ["", f"Test split of `{facts.env_ref}`, same tasks and seeds in every row, decoded at {temperature} "
              f"(seed {facts.seed}). Intervals: Wilson for 1/0 rewards, else bootstrap over tasks; a paired "
              "difference is significant when its interval excludes 0."]
    return lines


def _decomposition(facts: CardFacts) -> list[str]:
    if facts.decomposition is None:
        return []
    title, ids, numbers = facts.decomposition
    lines = ["", "## Which lever did what (`coevo decompose`)", "", title, "",
             "| cell | mean@k [95 % interval] n |", "|---|---|"]
    lines += [f"| {name} | {score_text(numbers.cells[cell])} |" for cell, name in CELL_NAMES.items()]
    lines += ["", "| effect (paired per task) | mean [95 % interval] n |", "|---|---|"]
    lines += [f"| {what} | {text} |" for what, text in effect_rows(numbers)]
    lines += ["", f"H0 `{ids['h0'][:12]}`, H_final `{ids['hf'][:12]}`, W0 `{ids['w0']}`, W_final `{ids['wf']}`."]
    return lines


def agent_card(facts: CardFacts) -> str:
    """The folder's ``README.md`` (Markdown) for ``facts``."""
    when = facts.exported_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = f", commit `{facts.commit}`" if facts.commit else ""
    adapter = f" + the LoRA adapter in `{facts.adapter}/`" if facts.adapter else " (no adapter: the base weights)"
    served = f" (served as `{facts.served_as}` during the run)" if facts.served_as else ""
    version = f"version {facts.version} of " if facts.version else ""
    lines = [
        f"# {facts.title}", "",
        f"This folder is {version}an agent exported by coevo {facts.coevo_version}{commit} on {when}: {_what(facts)}, "
        f"on the policy `{facts.policy}`{adapter}{served}.", "",
        "```python",
        "from coevo import load_agent",
        "graph = load_agent(\"path/to/this/folder\")   # model=\"litellm:hosted_vllm/NAME?api_base=URL\" for a server",
        "print(graph.invoke({\"messages\": [(\"user\", \"...\")]})[\"messages\"][-1].content)" if facts.kind == "agent"
        else "print(graph.invoke({\"task\": \"...\"})[\"answer\"])",
        "```", "",
        "Serve it: `langgraph dev` in this folder (graph `agent`; `langgraph.json`). `agent.json` lists every file "
        "with its sha256; loading checks them.", "",
        "| | |", "|---|---|",
        f"| run | `{facts.run_id}` ({facts.strategy}, {facts.status}) |",
        f"| harness | `{facts.harness_id}` |",
        f"| checkpoint | `{facts.checkpoint_id}` |",
        f"| env | `{facts.env_ref}`; tools: {', '.join(f'`{t}`' for t in facts.tools) or 'none'} |",
        "", "## Test scores", "", *_scores(facts), *_decomposition(facts),
        "", "## Lineage", "", "Harness, from H0:", "",
    ]
    lines += [f"{i}. `{h[:12]}` {name} ({origin})" for i, (h, name, origin) in enumerate(facts.lineage, 1)]
    lines += ["", "Checkpoint, from W0:", ""]
    lines += [f"{i}. `{c}` ({what})" for i, (c, what) in enumerate(facts.checkpoints, 1)]
    lines += ["", "## Run config", "", "```json", json.dumps(facts.config, indent=1, sort_keys=True), "```", "",
              "## Files", "", "| file | sha256 |", "|---|---|"]
    lines += [f"| `{name}` | `{digest[:16]}…` |" for name, digest in sorted(facts.files.items())]
    return "\n".join(lines) + "\n"
