"""EvoHarness-RL's training (``coevo.graphs.evoharness`` uses it): supervised harness fine-tuning as a
weight-stage kind (``sft.HarnessSFT``) and the scripted harness teacher that can play its rollouts
(``teacher``). The action cost of its cost-aware GRPO is shaped in the GRPO core's rollouts
(``coevo.training.grpo.harness_cost``), which every stage's rewards pass through."""
