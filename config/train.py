"""Settings of a weight stage, declared once for GRPO (Harness-S §7) and RSFT (WHALE §3.1), and
the run config's ``[train]`` section.

``StageSettings`` holds every key a user may set in a run config's ``[train]`` table
(``TrainConfig`` adds the run-level choices to it); ``StageConfig`` adds what a run fixes per round
(``seed``, ``output_dir``) and is what ``train_grpo`` and ``train_rsft`` accept
(``TrainConfig.stage(round, seed, out_dir)`` builds it). They sit with the run config, low in the
layers, because the run config extends them; ``coevo.training`` uses them. Both algorithms read the same names:

=====================  ===========================  ===============================
key                    GRPO (Harness-S §7)          RSFT (WHALE §3.1)
=====================  ===========================  ===============================
``steps``              optimiser steps              rounds
``tasks_per_step``     tasks per generation batch   tasks sampled per round
``num_generations``    group size K (>= 2)          samples per task
=====================  ===========================  ===============================

Torch-free: importing this module loads pydantic only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coevo.config.base import error_lines
from coevo.errors import CoevoError


class StageConfigError(CoevoError, ValueError):
    """A stage config that does not validate; the message names each bad key and what it should be."""


class StageSettings(BaseModel):
    """Every user-set key of a weight stage (LoRA via PEFT), one default each; unknown keys are errors.

    A step samples ``tasks_per_step`` tasks x ``num_generations`` rollouts. GRPO makes
    ``num_iterations`` optimiser steps of it (each in ``micro_batches`` gradient-accumulation
    micro-steps); RSFT keeps the rollouts the verifier passed (or, with ``rsft_threshold`` set, those
    with reward > it) and takes ``epochs`` passes of ``minibatch_size``-row SFT steps.

    Where a default departs from the papers it says so here and in ``configs/chain_sum.toml``:
    ``num_generations`` is 4 (Harness-S §7 and the presets: K = 8) to keep the default CPU job short;
    ``num_iterations`` is 1, so Eq. 7's ratio is 1 (up to float rounding) and ``epsilon``/``epsilon_high``
    have no effect (raise it to 2+ for the clip to act); GRPO turns dropout off, so ``lora_dropout``
    acts in RSFT only. ``coevo.config.knobs.INERT`` lists every such key with its reason.
    """

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=8, ge=1, description="GRPO optimiser steps / RSFT rounds")
    tasks_per_step: int = Field(default=2, ge=1, description="tasks per step (GRPO) or round (RSFT)")
    num_generations: int = Field(default=4, ge=1, description="rollouts per task: GRPO's group size K (>= 2; "
                                 "Harness-S §7 uses 8, the default CPU job 4 to stay short)")
    learning_rate: float = Field(default=3e-4, gt=0)
    max_grad_norm: float = Field(default=1.0, gt=0)
    lora_r: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout; no effect in GRPO, which runs "
                                "with dropout disabled (TRL disable_dropout=True, so pi_theta is the sampling "
                                "distribution); RSFT's SFT steps use it")
    lora_target_modules: str | list[str] = "all-linear"
    max_len: int = Field(default=4096, ge=16, description="tokens per training sequence (longer ones lose their tail)")
    # GRPO only (Harness-S §7; coevo.training.grpo.stage)
    micro_batches: int | None = Field(
        default=None, ge=1, description="gradient-accumulation micro-steps per step; None: one step of the whole "
        "batch with pack_prefixes (its shared prompt tokens run once), else one row each (bounds activation memory "
        "on long prompts: few-shot turns with function docs)")
    pack_prefixes: bool = Field(
        default=True, description="score each micro-batch with the prompt tokens its rows share run once "
        "(coevo.training.grpo.packing: the same log-probs, loss and gradients as row by row)")
    activation_checkpointing: bool = Field(default=True, description="recompute activations in the backward pass")
    max_memory_gb: float | None = Field(
        default=None, gt=0, description="the memory a GRPO or RSFT stage plans for (GB); more micro-steps per step "
        "(GRPO's micro_batches, RSFT's minibatch), then a lower max_len, when its estimate is over, and a clear "
        "refusal when one row does not fit "
        "(coevo.training.memory); None: 60 % of the device's memory, which only refuses a stage whose one row does not "
        "fit (a reshape it would need is logged)")
    merge_sampler: bool = Field(
        default=True, description="the live sampler decodes a step's rollouts with the LoRA adapter merged into the "
        "base weights (coevo.models.merged: one matmul per layer; logits equal up to float rounding)")
    num_iterations: int = Field(
        default=1, ge=1, description="optimiser passes over each generation batch (TRL's num_iterations; each is an "
        "optimiser step, so a stage samples steps / num_iterations batches). With 1 the ratio pi_theta / pi_old is "
        "1 (up to float rounding) and Eq. 7's clip (epsilon, epsilon_high) has no effect; 2 or more lets it act")
    lr_scheduler_type: str = "constant"
    epsilon: float = Field(default=0.20, ge=0, description="Eq. 7 lower clip eta-; no effect with num_iterations = 1 "
                           "(the ratio is 1 up to float rounding)")
    epsilon_high: float = Field(default=0.28, ge=0, description="Eq. 7 upper clip eta+; no effect with num_iterations "
                                "= 1 (the ratio is 1 up to float rounding)")
    importance_correction: bool | None = Field(
        default=None, description="Eq. 16 truncated importance weight; None: on when the sampler is not the trainer")
    is_clip: tuple[float, float] = Field(default=(0.0, 2.0), description="Eq. 16 clip range of pi_old / q")
    action_cost: float | None = Field(
        default=None, ge=0, description="cost-aware GRPO's lambda (EvoHarness-RL): the reward of Eq. 6 is the task "
        "reward - lambda x the rollout's declared BPE harness-action cost (coevo.training.grpo.harness_cost); 0 or "
        "None (unset): off. Strategy evoharness_rl refuses it unset (its paper gives no lambda)")
    resample: int = Field(
        default=0, ge=0, description="rounds of dynamic sampling per step (DAPO §3.2, not in Harness-S: it would "
        "replace Eq. 5's retained groups): a group whose rewards are all equal is replaced by the group of another "
        "stage task when that one has a contrast; 0 (the default): off")
    max_concurrency: int | None = Field(default=None, ge=1, description="rollouts in flight (None: all)")
    sampler_threads: int | None = Field(default=None, ge=1, description="torch threads of the live sampler's decoding "
                                        "worker (None: torch's default); the optimiser step keeps its own")
    use_cpu: bool | None = Field(default=None, description="None: CPU when no CUDA device is visible")
    report_to: str | list[str] = "none"
    logging_steps: int = Field(default=1, ge=1, description="1 gives stage_metrics a history row per step")
    # RSFT only (WHALE §3.1; coevo.training.rsft)
    rsft_threshold: float | None = Field(
        default=None, ge=0, le=1, description="None (WHALE §3.1): keep the rollouts the verifier passed (R = 1); a "
        "number: keep rollouts with reward > it (a stated bar for partial credit)")
    epochs: int = Field(default=1, ge=1)
    minibatch_size: int = Field(default=4, ge=1)
    max_batch: int = Field(default=32, ge=1, description="requests the live sampler batches together")

    @model_validator(mode="after")
    def _batch_divides(self) -> "StageSettings":
        batch = self.tasks_per_step * self.num_generations
        if self.micro_batches is not None and batch % self.micro_batches:
            raise ValueError(f"micro_batches={self.micro_batches} must divide tasks_per_step x num_generations = "
                             f"{batch}; change micro_batches (or leave it unset: one row per micro-step)")
        return self

    @property
    def accumulation_steps(self) -> int:
        """GRPO micro-steps per optimiser step: ``micro_batches``; when unset, one (the whole batch,
        packed) with ``pack_prefixes``, else one per row."""
        return self.micro_batches or (1 if self.pack_prefixes else self.tasks_per_step * self.num_generations)

    def check_grpo(self) -> None:
        """Raise ``ValueError`` unless these settings can run GRPO: Eq. 6 normalises rewards within a
        group, so a group of one rollout has no advantage."""
        if self.num_generations < 2:
            raise StageConfigError(f"GRPO needs num_generations >= 2 (a group of {self.num_generations} rollout has no "
                                   "advantage); raise num_generations or use algorithm 'rsft'")


class StageConfig(StageSettings):
    """The settings of one stage run: ``StageSettings`` plus the ``seed`` of its sampling and
    optimisation, the ``output_dir`` under which the new checkpoint's adapter is saved, and the
    ``logging_dir`` of its TensorBoard steps and ``run_name`` in other trackers
    (``coevo.observe.tracking``)."""

    seed: int = 0
    output_dir: str = "runs/training"
    logging_dir: str | None = Field(
        default=None, description="where TRL's TensorBoard callback writes the stage's steps (report_to tensorboard); "
        "None: TRL's default under output_dir")
    run_name: str | None = Field(default=None, description="the stage's run name in TRL's trackers (MLflow, wandb)")

    @classmethod
    def parse(cls, config: "StageConfig | dict[str, Any] | None") -> "StageConfig":
        """``config`` as a ``StageConfig`` (a dict is validated; ``None`` gives the defaults).

        Raises ``StageConfigError`` naming every bad key (an unknown name, a value out of range).
        """
        if isinstance(config, StageConfig):
            return config
        try:
            return cls.model_validate(config or {})
        except ValidationError as err:
            lines = [f"  {key or '(settings)'}: {message}" for key, message in error_lines(err, cls)]
            raise StageConfigError("stage config is invalid (keys: coevo.config.train.StageSettings):\n"
                                   + "\n".join(lines)) from None


class TrainConfig(StageSettings):
    """The weight-update stage (GRPO per Harness-S §7, or RSFT per WHALE §3.1) with LoRA: the
    ``algorithm``, the sampling ``temperature`` and output budget (``max_new_tokens``) of training
    rollouts, Eq. 5 ``rescue`` under the harnesses accepted earlier in the run, and every
    ``StageSettings`` key (steps, batch, learning rate, LoRA, clip ranges,
    dynamic sampling, RSFT threshold, ...) with its one default."""

    algorithm: Literal["grpo", "rsft"] = "grpo"
    max_new_tokens: int = Field(default=48, ge=1)
    temperature: float = Field(default=0.7, gt=0)
    rescue: bool = Field(default=False, description="GRPO: Harness-S Eq. 5 rescue of groups without success under "
                         "the harnesses accepted earlier in the run (never a gate-rejected candidate): a group whose "
                         "rewards are all equal and below full credit is re-rolled under them")
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
