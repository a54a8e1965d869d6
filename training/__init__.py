"""coevo.training: the weight half of co-evolution (docs/design.md, Training).

- ``grpo.train_grpo``: a GRPO stage on harness rollouts (TRL ``GRPOTrainer`` + PEFT LoRA; Harness-S §7
  objective, Eq. 5 rescue hook); ``trainer.HarnessGRPOTrainer`` is the one-method TRL subclass and
  ``rollout.HarnessRollout`` its ``rollout_func``.
- ``rsft.train_rsft``: online rejection-sampling fine-tuning (WHALE §3.1).
- ``merge.merge_adapters``: LoRA merges with stated exactness (linear task arithmetic, CoEvo-RSI TIES, svd variants).
- ``advantages``: Eq. 6 advantages, effective-group rate, effective-token share, Eq. 15/16 weights.
- ``samples``: trajectories -> rows with a policy-token mask.
- ``config.StageConfig``: every setting of a GRPO or RSFT stage, declared once (the run config's
  ``[train]`` section builds it with ``TrainConfig.stage``).
- ``kinds``: the kinds of weight stage, one typed object each (``GRPO``, ``RSFT``; ``configured`` picks the
  one ``train.algorithm`` names), the ``Room`` they run in and what each declares it can spend
  (``stage_rollouts``); the families' own kinds: ``harness_s`` (``Routed`` rescue, ``Mixture``) and
  ``evoharness.sft.HarnessSFT`` (with its scripted teacher, ``evoharness.teacher``).
- ``stage.StageTrainer``: the weight stage of a meta-loop round (``MetaContext.trainer``): runs the kind a
  family chose and records the new checkpoint.
- ``checkpoint.Checkpoint``: base model + LoRA adapter, parents, config, metrics (also the archive's
  checkpoint record).
- ``vllm_sync``: hot-load adapters into a vLLM server (GPU path).

Submodules are imported on use: importing ``coevo.training`` loads neither torch nor TRL.
"""
