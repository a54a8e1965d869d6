"""coevo.storage."""
