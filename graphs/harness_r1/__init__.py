"""Harness-R1's family (strategy harness_r1): a harness engineer trained with GRPO on the outcomes of
its own edits, alternating with the target's co-evolution."""
