"""The strategy table: every meta-loop strategy's name, paper family (the package of its wiring),
description, whether it trains weights, the meta roles it needs and the weight-update algorithm it
requires — declared once, here, as data at the bottom of the layers.

Everything else derives from ``STRATEGIES``: ``RunConfig.strategy``'s valid values, the CLI's
``--strategy`` help, ``make_context``'s trainer and roles, ``run_meta``'s graph, and the graphs of
``langgraph.json`` (``coevo.graphs.registry`` rewrites it; a unit test fails when the two disagree).
Importing this module is cheap: a strategy's module (and LangGraph) is imported by its dotted path
only when ``Strategy.build`` or ``Strategy.graph`` is called. A new strategy is one more row
(docs/design.md, Strategies; the paper index lists every family's baselines) plus its module in its
family's package.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any

from coevo.errors import InputError

STUDIO = "app/studio.py"
"""The module (path from the repository root) whose attributes are the strategies' Studio graphs."""


@dataclass(frozen=True)
class Strategy:
    """One row of the strategy table.

    ``family``: the paper family's package under ``coevo.graphs`` (``vace``, ``whale``, ...), whose
    module named after the strategy (``module``) has a ``build()`` returning the uncompiled
    ``StateGraph`` and a module-level ``graph``, the compiled one (Studio serves it with a default
    context bound, ``coevo.app.studio``).
    ``trains``: the strategy updates weights (the run gets a ``StageTrainer``). ``roles``: the
    meta roles it calls (``curator``, ``editor``, ``proposer``; later ``profiler``, ``voter``,
    ``summariser``).
    ``algorithm``: the weight-update algorithm it requires (``train.algorithm`` defaults to it).
    ``open_ended``: its ``rounds`` repeats one loop, so a comparison at a rollout budget
    (``coevo compare --budget``) raises ``rounds`` and lets the budget end the run; False: ``rounds``
    sizes a planned schedule (stagewise's cumulative phases), which such a comparison keeps as configured.
    """

    name: str
    family: str
    description: str
    trains: bool
    roles: tuple[str, ...] = ()
    algorithm: str | None = None
    open_ended: bool = True

    @property
    def module(self) -> str:
        """The dotted path of the strategy's module: ``coevo.graphs.<family>.<name>``."""
        return f"coevo.graphs.{self.family}.{self.name}"

    def build(self) -> Any:
        """The strategy's uncompiled ``StateGraph`` (imports its module now)."""
        return importlib.import_module(self.module).build()

    def graph(self) -> Any:
        """The strategy's compiled graph, its module's ``graph`` (compiled once, at its import)."""
        return importlib.import_module(self.module).graph

    @property
    def langgraph_entry(self) -> str:
        """Its ``langgraph.json`` value: the graph ``coevo.app.studio`` binds to a default context."""
        return f"./{STUDIO}:{self.name}"


REFINE = ("curator", "editor")
SEARCH = ("proposer",)
HARNESS_S = ("curator", "editor", "profiler", "voter")

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("vace", "vace", "VACE Algorithm 1: train, refine, validate, gate, every round", True, REFINE),
    Strategy("static", "vace", "baseline: H0 and W0 tested as they are", False),
    Strategy("harness_only", "vace", "VACE refinement with frozen weights, gated", False, REFINE),
    Strategy("rl_only", "vace", "the weight stage only, harness frozen at H0", True),
    Strategy("ungated", "vace", "VACE's ablation: train and refine, the candidate adopted ungated",
             True, REFINE),
    Strategy("sia", "vace", "VACE Table 5's SIA-style row: every weight stage first, then every refinement "
             "under the final weights, gated", True, REFINE, open_ended=False),
    Strategy("whale", "whale", "WHALE: cycles of an RSFT weight phase, then a Meta-Harness search "
             "phase (whale.schedule fixed|adaptive)", True, SEARCH, "rsft"),
    Strategy("whale_adaptive", "whale", "WHALE with the adaptive patience schedule whatever whale.schedule "
             "says (WHALE §4, App. A.1), beside whale's fixed one in one comparison", True, SEARCH, "rsft"),
    Strategy("fst", "whale", "WHALE's schedule with harness search confined to the system and user "
             "prompts (FST control)", True, SEARCH, "rsft"),
    Strategy("stagewise", "whale", "the whole weight budget, then the whole harness-search "
             "budget once (matched to WHALE's)", True, SEARCH, "rsft", open_ended=False),
    Strategy("whale_weight_only", "whale", "WHALE's weight-only baseline: RSFT under H0 for the cumulative "
             "weight budget of rounds WHALE cycles", True, (), "rsft", open_ended=False),
    Strategy("whale_harness_only", "whale", "WHALE's harness-only baseline: Meta-Harness search under W0 for "
             "the cumulative search budget of rounds WHALE cycles", False, SEARCH, open_ended=False),
    Strategy("pace", "pace", "PACE: frozen weights; prompt edits until no validated gain, then "
             "control-logic edits, each through the val gate", False, SEARCH),
    Strategy("pace_prompt_only", "pace", "PACE's prompt-only single-mode baseline: the prompt phase alone",
             False, SEARCH),
    Strategy("pace_control_only", "pace", "PACE's control-only single-mode baseline: the control-logic "
             "phase alone", False, SEARCH),
    Strategy("coevo_rsi", "coevo_rsi", "CoEvo-RSI: editors inherit archived bases, models select or "
             "TIES-merge archived checkpoints, adapt, promote with margin", True, (*REFINE, "inheritor")),
    Strategy("coevo_rsi_latest_only", "coevo_rsi",
             "CoEvo-RSI's ablation: inheritance from the latest harness and checkpoint only", True,
             (*REFINE, "inheritor")),
    Strategy("harness_s", "harness_s", "Harness-S: directional evolution of a sibling pool, profiles, "
             "router voters, rescue GRPO under H0, Rank-1 routing", True, HARNESS_S),
    Strategy("harness_s_he_only", "harness_s", "Harness-S's harness evolution with the frozen "
             "policy, then Rank-1 routing", False, HARNESS_S),
    Strategy("grpo_h0_rescue", "harness_s", "Harness-S's GRPO (H0 rescue) control: all-failure groups re-rolled "
             "under H0 itself; no pool", True, (), "grpo"),
    Strategy("random_rescue", "harness_s", "Harness-S with the rescue group under random pool members instead "
             "of the router's top-K", True, HARNESS_S, "grpo"),
    Strategy("mixed_harness", "harness_s", "Harness-S's fixed mixed-harness GRPO: every group half H0, half "
             "selected siblings; no rescue", True, HARNESS_S, "grpo"),
    Strategy("evoharness_rl", "evoharness", "EvoHarness-RL: belief, progress and experience as costed harness "
             "actions; cost-aware GRPO (train.action_cost), experience consolidated between stages", True,
             ("summariser",), "grpo"),
    Strategy("harness_r1", "harness_r1", "Harness-R1: a harness engineer trained with GRPO on its own edits' reruns "
             "(cold-start SFT on accepted edits), alternating with the target's VACE round; it is the editor",
             True, ("curator", "engineer")),
)}

def strategy_names() -> str:
    """The valid strategy names as one comma-separated string (for help texts and errors)."""
    return ", ".join(STRATEGIES)


def get_strategy(name: str) -> Strategy:
    """The row of strategy ``name``. Raises ``ValueError`` naming the valid strategies."""
    if name not in STRATEGIES:
        close = difflib.get_close_matches(str(name), list(STRATEGIES), n=1, cutoff=0.6)
        raise InputError(f"unknown strategy {name!r}{f' (did you mean {close[0]}?)' if close else ''}: use one of "
                         f"{strategy_names()}")
    return STRATEGIES[name]
