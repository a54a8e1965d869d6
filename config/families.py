"""The run config's section of each paper family: ``[whale]`` (WHALE, FST, stagewise), ``[pace]``,
``[search]`` (the Meta-Harness search WHALE and PACE share), ``[harness_s]``, ``[rsi]`` (CoEvo-RSI) and
``[evoharness]`` (EvoHarness-RL; its cost-aware GRPO's lambda is ``train.action_cost``) and
``[harness_r1]`` (Harness-R1's harness engineer).
VACE's family reads the shared ``[meta]`` and ``[gate]`` sections (``coevo.config.run``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coevo.config.base import Section


class WhaleConfig(Section):
    """WHALE's phase schedule (WHALE §4, App. A.1/B; strategies whale, fst, stagewise; ``rounds``
    counts the cycles). Lengths: weight phases in epochs of the train tasks (the persistent
    sampler's), harness phases in Meta-Harness iterations of ``search.candidates`` proposals.

    ``fixed``: every weight phase runs ``weight_epochs``, every harness phase ``search_iterations``.
    ``adaptive``: a weight phase stops after ``min_epochs`` once its train reward, averaged over
    ``window_epochs``, has not improved for ``patience_epochs`` (at most ``max_epochs``); a harness
    phase runs at least ``min_iterations`` and stops after ``search_patience`` iterations without a
    new best train score (at most ``max_iterations``). Paper: 0.2 epochs each; 6 and 2.
    """

    schedule: Literal["fixed", "adaptive"] = "fixed"
    weight_epochs: float = Field(default=1.0, gt=0)
    search_iterations: int = Field(default=2, ge=1)
    min_epochs: float = Field(default=0.2, gt=0)
    patience_epochs: float = Field(default=0.2, gt=0)
    window_epochs: float = Field(default=0.2, gt=0)
    max_epochs: float = Field(default=2.0, gt=0)
    min_iterations: int = Field(default=6, ge=1)
    search_patience: int = Field(default=2, ge=1)
    max_iterations: int = Field(default=12, ge=1)


class SearchConfig(Section):
    """The Meta-Harness search the WHALE and PACE families share (WHALE §3.2): ``candidates``
    proposals per iteration (M), each scored with one rollout per task of the search split.

    ``tasks``: the search split D_search, this many tasks of the env's train split taken after the
    first ``env.n_train`` (which the weight phases train on), so harness search and weight updates
    never score the same task (WHALE §5 keeps D_train, D_search and D_test disjoint). 0: score the
    search on the weight phases' own train tasks (not WHALE's protocol; for a suite without spare
    train tasks)."""

    candidates: int = Field(default=2, ge=1, description="Meta-Harness proposals per iteration (M)")
    tasks: int = Field(default=16, ge=0, description="search-split tasks, taken from the train split after the first "
                       "env.n_train (disjoint from the weight phases'); 0: the weight phases' own train tasks")


class PaceConfig(Section):
    """PACE (strategy pace): ``patience``, the gated iterations in a row without a validated gain
    that end a PACE phase (the prompt phase, then the control-logic phase)."""

    patience: int = Field(default=2, ge=1)


class HarnessSConfig(Section):
    """Harness-S (``strategies harness_s``, ``harness_s_he_only``; paper §3.2-3.4, Tables 5 and 8).

    ``proposals``: the proposal budget of each directional-evolution round (its length is the number
    of rounds; paper: 7/8/8), spread over the round's parents; ``parents``: B, the parent slots of
    Eq. 3; ``causes_per_candidate``: at most this many related root causes per candidate (paper: 2-3);
    ``voters``: V, LLM voters per routing call (the offline Rule Router is one voter); ``ballot``: the
    ballot length (weights 1, 3/4, ... down to 1/ballot, Eq. 9); ``ranks``: the router ranks
    evaluated on test (Table 5: Rank-1/2/3); ``rescue_k``: K distinct siblings per rescue (0: the
    group size ``train.num_generations``); ``exact_limit``: the largest number of parent subsets
    Eq. 3 searches exhaustively (above it: greedy, within (1 - 1/e) of the optimum)."""

    proposals: list[int] = Field(default_factory=lambda: [7, 8, 8], min_length=1)
    parents: int = Field(default=4, ge=1)
    causes_per_candidate: int = Field(default=3, ge=1)
    voters: int = Field(default=3, ge=1, description="V, LLM voters per routing call (Eq. 9); no effect with the "
                        "offline roles (one Rule Router)")
    ballot: int = Field(default=4, ge=1)
    ranks: int = Field(default=3, ge=1)
    rescue_k: int = Field(default=0, ge=0)
    exact_limit: int = Field(default=20_000, ge=1)


class RsiConfig(Section):
    """CoEvo-RSI (``coevo_rsi`` strategies): ``promotion_margin`` δ_prom (a new pair replaces the
    incumbent only if its val score beats the incumbent pair's by more than it), ``merge`` (propose
    TIES merges of archived adapters beside selections), the merge's ``combination_type`` and
    ``density`` (None: ``coevo.training.coevo_rsi.merge``'s default), and ``adapt`` (train the best proposal
    under its harness with the ``[train]`` algorithm: ``rsft`` = SFT on its accepted train
    rollouts, ``grpo``)."""

    promotion_margin: float = Field(default=0.0, ge=0)
    merge: bool = True
    combination_type: Literal["ties", "dare_ties", "linear", "ties_svd", "dare_ties_svd", "svd"] = "ties"
    density: float | None = Field(default=None, gt=0, le=1)
    adapt: bool = True


class EvoHarnessConfig(Section):
    """EvoHarness-RL (strategy evoharness_rl; first abstract of
    arXiv:2608.05446): ``sft_steps``, the RSFT rounds of supervised
    harness fine-tuning before the first cost-aware GRPO stage, trained on the BPE-using turns of
    accepted rollouts only (``coevo.training.grpo.harness_cost.harness_sft_rows``; batch, threshold and
    minibatch from ``[train]``); 0: no SFT stage. ``sft_epochs`` and ``sft_learning_rate``: the SFT
    passes over each round's rows and its learning rate (None: ``train.epochs`` and
    ``train.learning_rate``, which the GRPO stages keep): on chain_sum SmolLM2-135M calls the actions
    after 12 optimiser steps at 1e-3, not after 8 (``docs/benchmarks/evoharness.md``). ``teacher``: the SFT
    rollouts are played by the scripted harness teacher (``coevo.training.evoharness.teacher``: the env's
    solution of each train task with the BPE actions used in a fixed schedule, tokenised as the
    policy would) instead of sampled from the policy, which a small model needs (SmolLM2-135M makes
    no BPE action of its own); false: RSFT on the policy's own accepted rollouts."""

    sft_steps: int = Field(default=1, ge=0)
    sft_epochs: int | None = Field(default=None, ge=1, description="SFT passes per round (None: train.epochs)")
    sft_learning_rate: float | None = Field(default=None, gt=0, description="SFT learning rate (None: "
                                            "train.learning_rate)")
    teacher: bool = True


class HarnessR1Config(Section):
    """Harness-R1 (strategy harness_r1; arXiv:2608.02276, its abstract):
    the harness engineer, trained with GRPO on the outcomes of its own edits between the target's rounds.

    ``engineer``: its model reference (``local:smollm2-135m``, the cached weights the policy uses, on
    CPU; ``local:BASE+ADAPTER`` a trained one; any reference on a GPU host — only a ``local:`` one
    can be trained here). Cold start: ``sft_epochs`` passes of SFT on the accepted edits of the runs
    ``cold_start_from`` names (empty: the archive's runs with this run's env config, so another suite's
    or another config's edits never come in) before its first GRPO stage (0, or no such edit: no cold
    start); an edit whose evidence is one of this run's val or test tasks, or whose text carries one of
    their answers, is left out (sealed). Each round: ``episodes``
    episodes of ``batch`` failed train tasks of the incumbent, ``steps`` GRPO steps of
    ``episodes_per_step`` episodes x ``group`` patches (G), reward = success of the frozen target
    rerun with the patch minus without it (same tasks, same fresh seed), ``penalty`` for an invalid
    patch. ``temperature``/``max_tokens``/``max_ops``: its decoding and patch size. ``as_editor``:
    the engineer is the editor of any strategy that refines (not only harness_r1). LoRA rank and
    learning rate come from ``[train]``."""

    engineer: str = "local:smollm2-135m"
    sft_epochs: int = Field(default=1, ge=0, description="cold-start SFT passes over the accepted edits (0: none)")
    episodes: int = Field(default=2, ge=1)
    batch: int = Field(default=4, ge=1)
    steps: int = Field(default=1, ge=0, description="engineer GRPO steps per round (0: no GRPO, the engineer as is)")
    episodes_per_step: int = Field(default=1, ge=1)
    group: int = Field(default=2, ge=2, description="patches per episode: GRPO's group size G")
    penalty: float = Field(default=-1.0, le=0, description="the reward of a patch that fails to parse, apply or check")
    temperature: float = Field(default=1.0, gt=0)
    max_tokens: int = Field(default=384, ge=32)
    max_ops: int = Field(default=2, ge=1)
    as_editor: bool = False
    cold_start_from: list[str] = Field(default_factory=list, description=(
        "run ids whose accepted edits the cold start learns from (empty: every run in the archive with this "
        "run's env config)"))
