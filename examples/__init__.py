"""Examples of bringing your own agent to coevo (README, "Bring your own agent")."""
