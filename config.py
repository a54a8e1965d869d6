"""``RunConfig``: a meta-loop run as a TOML/YAML file, validated by pydantic (every error names the key).

Defaults run fully offline on a laptop CPU: reasoning-gym ``chain_sum`` (two one-digit terms) with
partial credit, the bundled SmolLM2-135M-Instruct policy, offline meta roles, small splits, two
rounds (``configs/default.toml``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coevo.envs.base import RewardMode
from coevo.graphs.registry import get_strategy
from coevo.training.config import StageConfig, StageSettings


class Section(BaseModel):
    """A config section: unknown keys are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


DEFAULT_ENV = ("reasoning_gym:families=chain_sum,size=1000,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1,"
               "reward=partial")
"""The default job's suite: one-digit sums and differences with the family's partial credit, where
SmolLM2-135M has room at the training temperature (README, "What to expect"); BFCL simple_python,
where it has none, is ``configs/bfcl.toml``."""


class EnvConfig(Section):
    """Task suite (``coevo envs list``), split sizes (tasks) and the reward training and the gate use.

    ``n_test`` defaults to 40: a pass rate over 40 tasks has a 95 % Wilson interval no wider than
    ±0.15 whatever the rate (±0.14 at 0.3), so the test score of a run means something on its own.

    ``reward``: ``correct`` (1 when the suite's checker passes the answer, else 0; the default) or
    ``partial`` (the checker's partial credit, e.g. reasoning-gym's substring credit). It may also
    be written in the ref (``reasoning_gym:reward=partial``); written in both, they must agree.
    The env is built with ``get_env(env.ref, **env.settings())``.
    """

    ref: str = DEFAULT_ENV
    n_train: int = Field(default=40, ge=1)
    n_val: int = Field(default=30, ge=1)
    n_test: int = Field(default=40, ge=0)
    reward: RewardMode = "correct"

    @model_validator(mode="after")
    def _one_reward_mode(self) -> "EnvConfig":
        from coevo.envs.registry import parse_ref

        in_ref = parse_ref(self.ref)[1].get("reward")
        if in_ref is None:
            return self
        if "reward" not in self.model_fields_set:
            if in_ref not in ("correct", "partial"):
                raise ValueError(f"the ref's reward={in_ref!r} is not a reward mode; write correct or partial")
            self.reward = in_ref
        elif in_ref != self.reward:
            raise ValueError(f"reward is {self.reward!r} but the ref says reward={in_ref}; keep one of them")
        return self

    def settings(self) -> dict[str, Any]:
        """Keyword arguments for ``get_env`` beside the ref: ``reward`` when the config sets it (in
        the section or the ref); else none, and a suite uses its default (coevo's: ``correct``)."""
        return {"reward": self.reward} if "reward" in self.model_fields_set else {}


class TrainConfig(StageSettings):
    """The weight-update stage (GRPO per Harness-S §7, or RSFT per WHALE §3.1) with LoRA: the
    ``algorithm``, the sampling ``temperature`` and output budget (``max_new_tokens``) of training
    rollouts, Eq. 5 ``rescue`` under the previous round's checked candidates, and every
    ``coevo.training.config.StageSettings`` key (steps, batch, learning rate, LoRA, clip ranges,
    dynamic sampling, RSFT threshold, ...) with its one default."""

    algorithm: Literal["grpo", "rsft"] = "grpo"
    max_new_tokens: int = Field(default=48, ge=1)
    temperature: float = Field(default=0.7, gt=0)
    rescue: bool = Field(default=False, description="GRPO: Harness-S Eq. 5 rescue of all-fail groups under the "
                         "previous round's checked candidates (siblings)")
    vllm: list[str] = Field(default_factory=list, description="GRPO on vLLM: roots (http://host:8000) of servers "
                            "serving the policy's base weights as vllm_model with --enable-lora; each step's adapter "
                            "is hot-loaded and sampled there, every checkpoint is evaluated there "
                            "(coevo.training.vllm_sync.served_ref); empty: the live weights in this process")
    vllm_model: str = Field(default="policy", description="the vLLM servers' --served-model-name of the base weights")

    @field_validator("vllm", mode="before")
    @classmethod
    def _roots(cls, value: Any) -> Any:
        return [r for r in value.split(",") if r] if isinstance(value, str) else value  # --set train.vllm=URL1,URL2

    @model_validator(mode="after")
    def _grpo_groups(self) -> "TrainConfig":
        if self.algorithm == "grpo":
            self.check_grpo()
        elif self.vllm:
            raise ValueError("train.vllm samples GRPO on vLLM servers, but RSFT samples its live weights each round: "
                             "drop train.vllm or set train.algorithm = 'grpo'")
        return self

    def stage(self, round: int, seed: int, out_dir: str | Path) -> StageConfig:
        """The ``StageConfig`` of round ``round`` of a run with seed ``seed``: every setting of this
        section, seed ``seed + 1000 * round`` (each round samples afresh) and adapters saved under
        ``<out_dir>/adapters``."""
        return StageConfig(**self.model_dump(include=set(StageSettings.model_fields)),
                           seed=seed + 1000 * round, output_dir=str(Path(out_dir) / "adapters"))


class MetaConfig(Section):
    """Meta roles: ``model`` is ``offline`` (deterministic rules, no key) or a model reference for the
    LLM roles (``local:smollm2-135m``, ``litellm:openai/gpt-4o-mini``, ``router:FILE``; a bare LiteLLM
    string such as ``openai/NAME?api_base=URL`` reads as ``litellm:...``): the policy's chat-model layer
    (``coevo.models.refs.load_model``). ``candidates``: the best-supported directions edited per round;
    ``samples``: the candidates asked for each (the offline editor draws a different operator for
    each, seeded by run, round and direction)."""

    model: str = "offline"
    candidates: int = Field(default=2, ge=1)
    samples: int = Field(default=1, ge=1, le=8)
    min_failed_tasks: int = Field(default=2, ge=1)
    smoke_tasks: int = Field(default=2, ge=0)
    max_timr_increase: float = Field(default=0.25, ge=0)
    local_check: bool = False
    local_tasks: int = Field(default=6, ge=1, le=30)
    local_controls: int = Field(default=2, ge=0, le=10)
    revisions: int = Field(default=1, ge=0, le=1)
    temperature: float = 0.6


class WhaleConfig(Section):
    """Phase schedule of the alternating strategies (WHALE §4, App. A.1/B; ``rounds`` counts the
    cycles) and PACE's phase switch. Lengths: weight phases in epochs of the train tasks (the
    persistent sampler's), harness phases in Meta-Harness iterations of ``candidates`` proposals.

    ``fixed``: every weight phase runs ``weight_epochs``, every harness phase ``search_iterations``.
    ``adaptive``: a weight phase stops after ``min_epochs`` once its train reward, averaged over
    ``window_epochs``, has not improved for ``patience_epochs`` (at most ``max_epochs``); a harness
    phase runs at least ``min_iterations`` and stops after ``search_patience`` iterations without a
    new best train score (at most ``max_iterations``). Paper: 0.2 epochs each; 6 and 2.
    ``pace_patience``: PACE iterations without a validated gain that end a PACE phase.
    """

    schedule: Literal["fixed", "adaptive"] = "fixed"
    weight_epochs: float = Field(default=1.0, gt=0)
    search_iterations: int = Field(default=2, ge=1)
    candidates: int = Field(default=2, ge=1, description="Meta-Harness proposals per iteration (M)")
    min_epochs: float = Field(default=0.2, gt=0)
    patience_epochs: float = Field(default=0.2, gt=0)
    window_epochs: float = Field(default=0.2, gt=0)
    max_epochs: float = Field(default=2.0, gt=0)
    min_iterations: int = Field(default=6, ge=1)
    search_patience: int = Field(default=2, ge=1)
    max_iterations: int = Field(default=12, ge=1)
    pace_patience: int = Field(default=2, ge=1)


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
    voters: int = Field(default=3, ge=1)
    ballot: int = Field(default=4, ge=1)
    ranks: int = Field(default=3, ge=1)
    rescue_k: int = Field(default=0, ge=0)
    exact_limit: int = Field(default=20_000, ge=1)


class GateConfig(Section):
    """VACE's validation gate: accept iff c > b + ``min_margin`` (and the paired ``test`` agrees)."""

    min_margin: float = Field(default=0.0, ge=0)
    test: Literal["none", "bootstrap", "mcnemar"] = "none"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    approve: bool = False


class RsiConfig(Section):
    """CoEvo-RSI (``coevo_rsi`` strategies): ``promotion_margin`` δ_prom (a new pair replaces the
    incumbent only if its val score beats the incumbent pair's by more than it), ``merge`` (propose
    TIES merges of archived adapters beside selections), the merge's ``combination_type`` and
    ``density`` (None: ``coevo.training.merge``'s default), and ``adapt`` (train the best proposal
    under its harness with the ``[train]`` algorithm: ``rsft`` = SFT on its accepted train
    rollouts, ``grpo``)."""

    promotion_margin: float = Field(default=0.0, ge=0)
    merge: bool = True
    combination_type: Literal["ties", "dare_ties", "linear", "ties_svd", "dare_ties_svd", "svd"] = "ties"
    density: float | None = Field(default=None, gt=0, le=1)
    adapt: bool = True


class EvalConfig(Section):
    """Rollouts: ``k`` per task on val and test, ``concurrency`` requests in flight. Decoding
    comes from the harness itself (its ``decoding`` component)."""

    k: int = Field(default=1, ge=1)
    concurrency: int = Field(default=16, ge=1)


class RunConfig(Section):
    """One run of a meta-loop strategy (DESIGN.md, The loop)."""

    strategy: str = Field(default="vace", description="a name from the strategy table (coevo.graphs.registry)")
    rounds: int = Field(default=2, ge=1)
    seed: int = 0
    db: str = "coevo_runs/coevo.db"
    out_dir: str = "coevo_runs"
    harness: str = Field(default="",
                         description="H0: a spec file or shipped base name; default: the env's base harness")
    policy: str = "local:smollm2-135m"
    env: EnvConfig = Field(default_factory=EnvConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    meta: MetaConfig = Field(default_factory=MetaConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    whale: WhaleConfig = Field(default_factory=WhaleConfig)
    harness_s: HarnessSConfig = Field(default_factory=HarnessSConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    report_to: Literal["none", "tensorboard", "mlflow", "wandb"] = Field(
        default="none", description="experiment tracker for the loop's numbers and TRL's weight-stage logs, offline: "
        "files under <out_dir>/tracking/<run id> (coevo.report.tracking); none: the archive and report only")
    rsi: RsiConfig = Field(default_factory=RsiConfig)
    executor: Literal["inprocess", "ray"] = Field(
        default="inprocess", description="where rollouts run: this process, or Ray workers ($RAY_ADDRESS or a local "
                                         "instance; coevo.evaluation.executors)")

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, name: str) -> str:
        get_strategy(name)  # ValueError naming the valid strategies
        return name

    @model_validator(mode="after")
    def _strategy_algorithm(self) -> "RunConfig":
        """A strategy whose row names a weight-update algorithm (WHALE's, FST's and stagewise's: RSFT,
        WHALE §3.1) trains with it whatever ``train.algorithm`` says, so one config serves every
        strategy of a ``coevo compare``; the run's stored config records the algorithm used."""
        wanted = get_strategy(self.strategy).algorithm
        if wanted and self.train.algorithm != wanted:
            self.train.algorithm = wanted  # type: ignore[assignment]
        return self


class ConfigError(ValueError):
    """A run config that does not validate; the message lists each bad key as ``section.key``."""


def parse_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Validate a config mapping. Raises ``ConfigError`` naming every bad key and what it should be."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        lines = [f"  {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in err.errors()]
        raise ConfigError(f"{source} is invalid:\n" + "\n".join(lines)) from None


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Load a TOML (``.toml``) or YAML (``.yaml``/``.yml``) run config; ``None`` gives the defaults.

    ``overrides`` maps dotted keys (``"train.steps"``) to values applied on top. Raises
    ``ConfigError`` for a missing file, a parse error, or invalid keys.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"no config file {str(p)!r}; see configs/default.toml for an example")
        try:
            data = tomllib.loads(p.read_text()) if p.suffix == ".toml" else (yaml.safe_load(p.read_text()) or {})
        except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
            raise ConfigError(f"{p} does not parse: {err}") from None
    for key, value in (overrides or {}).items():
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return parse_config(data, str(path or "defaults"))
