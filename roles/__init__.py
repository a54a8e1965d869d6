"""coevo.roles: the meta roles (curator, editor, ...), LLM (LiteLLM) and offline side by side."""
