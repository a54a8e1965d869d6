"""coevo.harnesses."""
