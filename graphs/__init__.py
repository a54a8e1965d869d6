"""coevo.graphs."""
