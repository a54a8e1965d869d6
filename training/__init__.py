"""coevo.training."""
