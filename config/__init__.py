"""The run config (``RunConfig``: a meta-loop run as a TOML/YAML file, validated by pydantic; every
error names the key) and its sections: ``run`` (the run and the shared sections), ``families`` (one
section per paper family), ``train`` (the weight stage), ``base`` (what sections share). Low in the
layers: it reads the strategy table (``coevo.strategies``) and nothing above it."""

from coevo.config.base import RewardMode, Section
from coevo.config.families import (
    EvoHarnessConfig,
    HarnessR1Config,
    HarnessSConfig,
    PaceConfig,
    RsiConfig,
    SearchConfig,
    WhaleConfig,
)
from coevo.config.run import (
    DEFAULT_ENV,
    ConfigError,
    EnvConfig,
    EvalConfig,
    GateConfig,
    MetaConfig,
    RunConfig,
    load_config,
    parse_config,
)
from coevo.config.train import StageConfig, StageConfigError, StageSettings, TrainConfig

__all__ = ["DEFAULT_ENV", "ConfigError", "EnvConfig", "EvalConfig", "EvoHarnessConfig", "GateConfig", "HarnessR1Config",
           "HarnessSConfig", "MetaConfig", "PaceConfig", "RewardMode", "RsiConfig", "RunConfig", "SearchConfig",
           "Section", "StageConfig", "StageConfigError", "StageSettings", "TrainConfig", "WhaleConfig", "load_config",
           "parse_config"]
