"""coevo.roles: the meta roles (curator, editor, ...), LLM (any chat model) and offline side by side."""
