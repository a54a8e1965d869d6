"""``RunConfig``: a meta-loop run as a TOML/YAML file, validated by pydantic (every error names the key).

Defaults run fully offline on a laptop CPU: reasoning-gym ``chain_sum`` (two one-digit terms) with
partial credit, the bundled SmolLM2-135M-Instruct policy, offline meta roles, small splits, two
rounds (``configs/chain_sum.toml`` lists them). ``coevo run`` without a config runs the default job,
``configs/default.toml`` (VACE on the showcase suite), whose keys it leaves out take these defaults.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from coevo.config.base import RewardMode, Section, error_lines
from coevo.config.families import (
    EvoHarnessConfig,
    HarnessR1Config,
    HarnessSConfig,
    PaceConfig,
    RsiConfig,
    SearchConfig,
    WhaleConfig,
)
from coevo.config.shipped import config_path
from coevo.config.train import TrainConfig
from coevo.errors import CoevoError
from coevo.strategies import get_strategy

DEFAULT_ENV = ("reasoning_gym:families=chain_sum,size=1000,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1,"
               "reward=partial")
"""``RunConfig``'s default suite (``configs/chain_sum.toml``, the default job before the showcase suite): one-digit
sums and differences with the family's partial credit. The default job (``configs/default.toml``) runs the
showcase suite instead, where SmolLM2-135M starts off the floor."""


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
        found = re.search(r"[:,]\s*reward\s*=\s*([^,]*)", self.ref)  # the ref's reward=..., as get_env parses it
        in_ref = found.group(1).strip() if found else None
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


class MetaConfig(Section):
    """Meta roles: ``model`` is ``offline`` (deterministic rules, no key) or a model reference for the
    LLM roles (``local:smollm2-135m``, ``litellm:openai/gpt-4o-mini``, ``router:FILE``; a bare LiteLLM
    string such as ``openai/NAME?api_base=URL`` reads as ``litellm:...``): the policy's chat-model layer
    (``coevo.models.refs.load_model``). ``candidates``: the best-supported directions edited per round;
    ``samples``: the candidates asked for each (the offline editor draws a different operator for
    each, seeded by run, round and direction)."""

    model: str = "offline"
    candidates: int = Field(default=1, ge=1, description="directions edited per round, best supported first: VACE "
                            "proposes one H'[t] (Alg. 1); more are gated under gate.multiplicity; CoEvo-RSI: its K "
                            "editors")
    samples: int = Field(default=1, ge=1, le=8, description="candidates asked for each direction (the offline editor "
                         "draws a different operator for each); several reach the gate under gate.multiplicity; "
                         "Harness-S: per brief, within harness_s.proposals")
    min_failed_tasks: int = Field(default=2, ge=1)
    smoke_tasks: int = Field(default=2, ge=0)
    max_timr_increase: float = Field(default=0.25, ge=0)
    local_check: bool = False
    local_tasks: int = Field(default=6, ge=1, le=30)
    local_controls: int = Field(default=2, ge=0, le=10)
    revisions: int = Field(default=1, ge=0, le=1)
    temperature: float = Field(default=0.6, description="decoding temperature of the LLM meta roles (no effect "
                               "with the offline roles)")


class GateConfig(Section):
    """VACE's validation gate: accept iff c > b + ``min_margin`` (and the paired ``test`` agrees).

    ``multiplicity``: the rule when several candidates reach the gate in one round (m > 1) on the same
    val tasks, where taking the best c would favour a lucky candidate. ``bonferroni`` (the default):
    each candidate must also pass a one-sided paired test at level ``alpha / m`` (``test``, or the
    paired bootstrap when ``test`` is ``none``), which bounds the chance of accepting any non-improving
    candidate by ``alpha``; then the best accepted c wins. ``none``: best of m without control. With
    one candidate (VACE's Alg. 1, ``meta.candidates = 1``) the rule is c > b + ``min_margin`` (plus
    ``test`` when set) and the multiplicity rule does not apply."""

    min_margin: float = Field(default=0.0, ge=0)
    test: Literal["none", "bootstrap", "mcnemar"] = "none"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    approve: bool = False
    multiplicity: Literal["bonferroni", "none"] = "bonferroni"


class EvalConfig(Section):
    """Rollouts on val and test: ``k`` per task, ``concurrency`` requests in flight, decoded at
    ``temperature`` (None: the harness's own ``decoding``, greedy in the shipped base harnesses).

    The papers sample their evaluations (VACE: mean of 3 runs; Harness-S: Pass@3 / Avg@3 at its
    temperature; WHALE: mean@8); ``k > 1`` with a ``temperature`` > 0 reports pass@k and mean@k with
    their intervals. The default job keeps ``k = 1`` and the harness's greedy decoding to stay short
    on a CPU (then pass@k = avg@k and one run per task); ``configs/papers/`` sets the papers' protocol.
    Train-split checks and search scoring decode as the harness says. ``val_k`` sets val's k apart
    (the papers' tables keep test at k = 2 and validate at 1: measured a third cheaper, not half);
    ``share_test`` lets runs of one archive share a test evaluation of the same pair (same harness,
    checkpoint, tasks, seeds and temperature: the same rollouts), since test selects nothing. A ``local:``
    policy's engine batches up to ``concurrency`` requests per forward pass and decodes them on ``threads``
    torch threads."""

    k: int = Field(default=1, ge=1)
    val_k: int | None = Field(default=None, ge=1, description="rollouts per val task (gates, stage effects, "
                              "search validation); None: k. Test keeps k")
    share_test: bool = Field(default=False, description="test evaluations identified without the run: a run of the "
                             "archive that tests the same pair on the same tasks and seeds (a comparison's start "
                             "pair, shared by its strategies of one seed) reads the first one back")
    concurrency: int = Field(default=16, ge=1)
    temperature: float | None = Field(default=None, ge=0, description="decoding temperature of val/test rollouts; "
                                      "None: the harness's own")
    threads: int | None = Field(default=None, ge=1, description="torch threads decoding a local policy's rollouts "
                                "outside weight stages (None: torch's default, one per core)")

    @model_validator(mode="after")
    def _sampled(self) -> "EvalConfig":
        if self.k > 1 and self.temperature == 0:
            raise ValueError(f"k = {self.k} greedy rollouts (temperature 0) are {self.k} copies of one; set "
                             "eval.temperature > 0 (e.g. 0.6) or k = 1")
        return self


MOVED = {"pace_patience": ("pace", "patience"), "candidates": ("search", "candidates")}
"""``[whale]`` keys of older configs -> the (section, key) they are now (``RunConfig`` reads both)."""


class RunConfig(Section):
    """One run of a meta-loop strategy (docs/design.md, The loop)."""

    strategy: str = Field(default="vace", description="a name from the strategy table (coevo.graphs.registry)")
    rounds: int = Field(default=2, ge=1)
    budget: int = Field(default=0, ge=0, description="rollouts on train + val + search the run may spend; a phase "
                        "whose declared size would overrun ends the run before it starts, then the final test runs "
                        "(coevo.meta.budget); 0: no cap")
    updates: int = Field(default=0, ge=0, description="optimiser updates the run's weight stages may make in all "
                         "(Harness-S Table 9's equal-updates protocol; coevo compare --updates): a stage whose "
                         "updates would overrun ends the run before it starts, then the final test runs; 0: no cap")
    seed: int = 0
    db: str = "coevo_runs/coevo.db"
    out_dir: str = "coevo_runs"
    harness: str = Field(default="",
                         description="H0: a spec file or shipped base name; default: the env's base harness; or a "
                         "LangGraph agent factory package.module:make_agent (coevo.harnesses.agent): the env's base "
                         "harness with the fields the factory's params declare, run by the user's graph")
    policy: str = "local:smollm2-135m"
    env: EnvConfig = Field(default_factory=EnvConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    meta: MetaConfig = Field(default_factory=MetaConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    whale: WhaleConfig = Field(default_factory=WhaleConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    pace: PaceConfig = Field(default_factory=PaceConfig)
    harness_s: HarnessSConfig = Field(default_factory=HarnessSConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    report_to: Literal["none", "tensorboard", "mlflow", "wandb"] = Field(
        default="none", description="experiment tracker for the loop's numbers and TRL's weight-stage logs, offline: "
        "files under <out_dir>/tracking/<run id> (coevo.observe.tracking); none: the archive and report only")
    rsi: RsiConfig = Field(default_factory=RsiConfig)
    evoharness: EvoHarnessConfig = Field(default_factory=EvoHarnessConfig)
    harness_r1: HarnessR1Config = Field(default_factory=HarnessR1Config)
    executor: Literal["inprocess", "ray"] = Field(
        default="inprocess", description="where rollouts run: this process, or Ray workers ($RAY_ADDRESS or a local "
                                         "instance; coevo.evaluation.executors)")

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        """Keys that moved to their family's section are read from where older configs (and the
        stored configs of older runs) wrote them: ``whale.pace_patience`` is ``pace.patience``,
        ``whale.candidates`` is ``search.candidates``. Written in both places, it is an error naming
        the new key."""
        if not isinstance(data, dict) or not isinstance(data.get("whale"), dict):
            return data
        data, whale = dict(data), dict(data["whale"])
        for old, (section, key) in MOVED.items():
            if old not in whale:
                continue
            target = dict(data.get(section) or {})
            if key in target:
                raise ValueError(f"whale.{old} moved to {section}.{key} and the config sets both: keep {section}.{key}")
            target[key] = whale.pop(old)
            data[section] = target
        data["whale"] = whale
        return data

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, name: str) -> str:
        get_strategy(name)  # ValueError naming the valid strategies
        return name

    @model_validator(mode="after")
    def _strategy_algorithm(self) -> "RunConfig":
        """A strategy whose row names a weight-update algorithm (WHALE's, FST's and stagewise's: RSFT,
        WHALE §3.1) trains with it whatever ``train.algorithm`` says, so one config serves every
        strategy of a ``coevo compare``; the run's stored config records the algorithm used. Where the
        config chose RSFT itself, a setting RSFT would drop silently is refused (``dropped_by_rsft``);
        EvoHarness-RL without its lambda is refused (``cost_unset``)."""
        row = get_strategy(self.strategy)
        if row.algorithm and self.train.algorithm != row.algorithm:
            self.train.algorithm = row.algorithm  # type: ignore[assignment]
        elif self.train.algorithm == "rsft" and (problem := dropped_by_rsft(self.strategy, self.train.rescue)):
            raise ValueError(problem)
        if (problem := cost_unset(self.strategy, self.train.action_cost)):
            raise ValueError(problem)
        return self


def dropped_by_rsft(strategy: str, rescue: bool) -> str:
    """Why ``train.algorithm = "rsft"`` cannot run ``strategy`` with ``train.rescue = rescue`` as
    configured ("" when it can): RSFT forms no GRPO groups, so Eq. 5's rescue (``train.rescue``) and
    Harness-S's routed rescue (its weight stage: GRPO whose all-failure groups go to the router's
    top-K siblings, Harness-S §3.3) would be dropped without a word."""
    row = get_strategy(strategy)
    if row.family == "harness_s" and row.trains:
        return (f"strategy {strategy} with train.algorithm = \"rsft\": Harness-S's weight stage is GRPO whose "
                "all-failure groups are re-rolled under the siblings the router picks (Eq. 5, Eq. 10), and RSFT "
                "forms no groups, so the run would drop the rescue and its routing without a word; set "
                "train.algorithm = \"grpo\" (configs/papers/harness_s.toml), or run RSFT with a strategy that "
                "has no rescue (rl_only, whale)")
    if rescue:
        return ("train.rescue = true with train.algorithm = \"rsft\": the rescue re-rolls a GRPO group that has no "
                "success (Harness-S Eq. 5), and RSFT forms no groups, so the run would train without it; set "
                "train.algorithm = \"grpo\" to rescue, or train.rescue = false to run RSFT")
    return ""


def cost_unset(strategy: str, action_cost: float | None) -> str:
    """Why ``strategy`` cannot run with ``train.action_cost = action_cost`` ("" when it can):
    evoharness_rl's GRPO is cost-aware (EvoHarness-RL's abstract), and its lambda has no default
    because the paper gives no value; an explicit 0 (the lambda = 0 ablation) runs."""
    if strategy != "evoharness_rl" or action_cost is not None:
        return ""
    return ("strategy evoharness_rl needs train.action_cost (lambda, the cost per BPE harness action in its "
            "cost-aware GRPO reward: task reward - lambda x cost): unset, it would train on the task reward alone, "
            "which is not EvoHarness-RL; its paper gives no value, so set one, e.g. train.action_cost = 0.5 as "
            "configs/papers/evoharness_rl.toml does, or 0 for the lambda = 0 ablation")


class ConfigError(CoevoError, ValueError):
    """A run config that does not validate; the message lists each bad key as ``section.key``."""


def parse_config(data: dict[str, Any], source: str = "config", origins: dict[str, str] | None = None) -> RunConfig:
    """Validate a config mapping. Raises ``ConfigError`` naming every bad key, what it should be and,
    for an unknown key, the key likely meant. ``origins`` maps a dotted key to where it was set (a
    command-line flag such as ``--strategy nope``): the error names that instead of ``source`` for it."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        found = error_lines(err, RunConfig)
        origins = origins or {}

        def origin(key: str) -> str:
            return next((origins[k] for k in origins if key == k or key.startswith(k + ".") or k.startswith(key + ".")),
                        source)

        where = list(dict.fromkeys(origin(key) for key, _ in found))
        lines = [f"  {key or '(top level)'}: {message}" for key, message in found]
        raise ConfigError(f"{' and '.join(where)} {'is' if len(where) == 1 else 'are'} invalid:\n"
                          + "\n".join(lines)) from None


def set_dotted(data: dict[str, Any], pairs: dict[str, Any], source: str = "the config") -> dict[str, Any]:
    """Set each dotted key of ``pairs`` (``{"eval.k": 3}``) in the nested ``data`` in place, creating
    missing tables (``data["eval"]["k"] = 3``); returns ``data``. Raises ``ConfigError`` when a table on
    the way is something else in ``data`` (``env: null``, ``train = 3``; ``source`` names where it was
    written), which the key cannot be set inside."""
    for key, value in pairs.items():
        node = data
        *parents, leaf = key.split(".")
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                table = ".".join(parents[:i + 1])
                raise ConfigError(f"{key} cannot be set to {value!r} from the command line: {table} is "
                                  f"{json.dumps(node, default=str)[:40]} in {source}, not a table of keys; make "
                                  f"{table} a table there (or remove it), or leave {key} unset")
        node[leaf] = value
    return data


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                flags: dict[str, str] | None = None) -> RunConfig:
    """Load a TOML (``.toml``) or YAML (``.yaml``/``.yml``) run config; ``None`` gives the defaults.

    ``overrides`` maps dotted keys (``"train.steps"``) to values applied on top; ``flags`` the
    command-line flag that set a key (``{"strategy": "--strategy"}``; others: ``--set KEY=VALUE``),
    named in the error when that value is bad. Raises ``ConfigError`` for a missing file, a parse
    error (text that is not UTF-8 included), a top level that is not a mapping (a YAML list or scalar),
    or invalid keys.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = config_path(path)
        if not p.is_file():
            raise ConfigError(f"no config file {str(p)!r}; see configs/default.toml for an example")
        try:
            data = tomllib.loads(p.read_text()) if p.suffix == ".toml" else yaml.safe_load(p.read_text())
        except (tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError) as err:
            raise ConfigError(f"{p} does not parse: {err}") from None
        data = {} if data is None else data
        if not isinstance(data, dict):
            kind = "list" if isinstance(data, list) else type(data).__name__
            raise ConfigError(f"{p}: its top level is a {kind}, but a run config is a mapping of keys "
                              "(strategy: vace, rounds: 2, train: {steps: 4}, ...); see configs/default.toml "
                              "for an example") from None
    set_dotted(data, overrides or {}, str(path) if path is not None else "the config")
    origins = {key: f"{flags[key]} {value}" if flags and key in flags else f"--set {key}={value}"
               for key, value in (overrides or {}).items()}
    return parse_config(data, str(path) if path is not None else "the built-in defaults", origins)
