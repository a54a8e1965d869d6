"""``RunConfig``: a meta-loop run as a TOML/YAML file, validated by pydantic (every error names the key).

Defaults run fully offline on a laptop CPU: BFCL ``simple_python`` tasks, the bundled
SmolLM2-135M-Instruct policy, offline meta roles, small splits, two rounds (``configs/default.toml``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from coevo.graphs.registry import get_strategy


class Section(BaseModel):
    """A config section: unknown keys are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


class EnvConfig(Section):
    """Task suite (``coevo envs list``) and split sizes (tasks)."""

    ref: str = "bfcl:categories=simple_python"
    n_train: int = Field(default=8, ge=1)
    n_val: int = Field(default=10, ge=1)
    n_test: int = Field(default=10, ge=0)


class TrainConfig(Section):
    """The weight-update stage (GRPO per Harness-S §7, or RSFT per WHALE §3.1) with LoRA."""

    algorithm: Literal["grpo", "rsft"] = "grpo"
    steps: int = Field(default=2, ge=1)
    tasks_per_step: int = Field(default=2, ge=1)
    num_generations: int = Field(default=4, ge=2)
    learning_rate: float = Field(default=2e-4, gt=0)
    lora_r: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    max_new_tokens: int = Field(default=96, ge=1)
    temperature: float = Field(default=1.0, ge=0)
    rsft_threshold: float = Field(default=0.5, ge=0, le=1)


class MetaConfig(Section):
    """Meta roles: ``model`` is ``offline`` (deterministic rules, no key) or a LiteLLM model name."""

    model: str = "offline"
    candidates: int = Field(default=2, ge=1)
    min_failed_tasks: int = Field(default=2, ge=1)
    smoke_tasks: int = Field(default=2, ge=0)
    max_timr_increase: float = Field(default=0.25, ge=0)
    local_check: bool = False
    local_tasks: int = Field(default=6, ge=1, le=30)
    local_controls: int = Field(default=2, ge=0, le=10)
    revisions: int = Field(default=1, ge=0, le=1)
    temperature: float = 0.6


class GateConfig(Section):
    """VACE's validation gate: accept iff c > b + ``min_margin`` (and the paired ``test`` agrees)."""

    min_margin: float = Field(default=0.0, ge=0)
    test: Literal["none", "bootstrap", "mcnemar"] = "none"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    approve: bool = False


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
    harness: str = Field(default="", description="H0: a spec file or shipped base name; default: the env's base harness")
    policy: str = "local:smollm2-135m"
    env: EnvConfig = Field(default_factory=EnvConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    meta: MetaConfig = Field(default_factory=MetaConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, name: str) -> str:
        get_strategy(name)  # ValueError naming the valid strategies
        return name


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
