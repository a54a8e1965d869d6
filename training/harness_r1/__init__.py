"""Harness-R1's training (``coevo.graphs.harness_r1`` uses it): the harness engineer's edit environment
(``edit_env``: an episode is a harness, its failures and the train tasks; the reward is the edit's measured
gain), the engineer's own GRPO and SFT stages on it (``engineer``) and its SFT examples from a run's
accepted edits (``engineer_data``)."""
