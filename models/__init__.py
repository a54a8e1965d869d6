"""coevo.models."""
