"""coevo.training: the weight half of co-evolution (docs/design.md, Training).

- ``grpo``: the GRPO core, one readable unit (``grpo.stage.train_grpo``: TRL ``GRPOTrainer`` + PEFT LoRA,
  Harness-S §7 objective, Eq. 5 rescue hook; its trainer subclass, rollout, advantages, samples,
  packing, masking, seeds and action cost).
- ``rsft.train_rsft``: online rejection-sampling fine-tuning (WHALE §3.1); ``schedule``: WHALE's weight
  phases and persistent task sampler.
- ``kinds``: the kinds of weight stage, one typed object each (``GRPO``, ``RSFT``; ``configured`` picks the
  one ``train.algorithm`` names), the ``Room`` they run in and what each declares it can spend
  (``stage_rollouts``).
- ``stage.StageTrainer``: the weight stage of a meta-loop round (``MetaContext.trainer``): runs the kind a
  family chose and records the new checkpoint.
- The families' training, where a reader of the family finds it: ``harness_s`` (``Routed`` rescue,
  ``Mixture``), ``evoharness`` (``sft.HarnessSFT``, the scripted ``teacher``), ``harness_r1`` (the
  engineer's edit env, its GRPO and SFT, its examples), ``coevo_rsi`` (``merge.merge_adapters``: LoRA
  merges with stated exactness, linear task arithmetic, TIES, svd variants).
- ``config.StageConfig``: every setting of a GRPO or RSFT stage, declared once (the run config's
  ``[train]`` section builds it with ``TrainConfig.stage``).
- ``checkpoint``: loading and recording a ``Checkpoint`` (base model + LoRA adapter); ``delta``: the size
  of a LoRA change.
- ``vllm_sync``: hot-load adapters into a vLLM server (GPU path).

Submodules are imported on use: importing ``coevo.training`` loads neither torch nor TRL.
"""
