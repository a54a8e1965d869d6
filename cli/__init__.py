"""coevo.cli."""
