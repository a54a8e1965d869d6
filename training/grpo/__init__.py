"""The GRPO core: one stage of GRPO on harness rollouts (Harness-S §7), read in this order.

- ``stage.train_grpo``: the stage (TRL ``GRPOTrainer`` + PEFT LoRA), its TRL arguments and metrics.
- ``trainer.HarnessGRPOTrainer``: the one-method TRL subclass (per-task token weights, truncated
  importance sampling; ``packing`` packs shared prompt prefixes into one forward).
- ``rollout.HarnessRollout``: its ``rollout_func`` — groups of harness rollouts, the Eq. 5 rescue
  (``sibling_rescue``), dynamic resampling, mixed-harness groups.
- ``advantages``: Eq. 6 group advantages, effective-group rate, Eq. 15/16 weights.
- ``samples``: trajectories -> training rows with a policy-token mask.
- ``masking``: failed and tokenless rollouts kept out of the loss.
- ``seeds``: each rollout's seed; ``live``: sampling from the trainer's live weights.
- ``harness_cost``: the action cost that shapes rewards (EvoHarness-RL's cost-aware GRPO) and the rows
  of its supervised harness fine-tuning.

RSFT (``coevo.training.rsft``) samples through the same rollout, samples, masking and seeds.
"""
