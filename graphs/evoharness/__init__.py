"""EvoHarness-RL's family (strategy evoharness_rl): BPE harness state trained with cost-aware GRPO."""
