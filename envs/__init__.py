"""coevo.envs."""
