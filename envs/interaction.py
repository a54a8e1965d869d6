"""Multi-turn episodes: how an env hands the agent its next user message.

Some suites (BFCL multi_turn) are conversations: after the agent ends a turn with a text reply,
the user speaks again. An episode that is a conversation puts a callable under
``episode.state[NEXT_USER_TURN]``: called with the agent's turn-ending text, it returns the next
user message, or ``None`` when the conversation is over (then that text is the final answer).
It may also extend ``episode.tools`` (BFCL miss_func reveals a held-out function at a later turn),
so a harness re-reads ``episode.tools`` after each turn.
"""

from __future__ import annotations

from coevo.envs.base import Episode

NEXT_USER_TURN = "next_user_turn"


def next_user_turn(episode: Episode, reply: str | None) -> str | None:
    """The next user message of a conversational episode, or ``None`` (single-turn or finished)."""
    fn = episode.state.get(NEXT_USER_TURN)
    return fn(reply) if callable(fn) else None


def is_conversation(episode: Episode) -> bool:
    """Whether the episode has further user turns to give (see module doc)."""
    return callable(episode.state.get(NEXT_USER_TURN))
