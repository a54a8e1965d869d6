"""coevo.nodes."""
