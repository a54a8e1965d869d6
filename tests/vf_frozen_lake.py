"""A verifiers environment package in the shape ``vf-init`` makes (a module with ``load_environment``):
verifiers' own multi-turn ``GymEnv`` around Gymnasium's FrozenLake (4x4, not slippery), offline.

Each model turn is one action word; the environment replies with the new position, and its
``EpisodicSumRubric`` scores the summed step rewards (1 when the goal is reached). Reached by the
adapter as ``verifiers:vf_frozen_lake`` (tests/ is on the test path).
"""

from __future__ import annotations

ACTIONS = ["left", "down", "right", "up"]
MAP = "SFFF/FHFH/FFFH/HFFG"


def describe(square: int) -> str:
    return f"You are on square {square} (row {square // 4}, column {square % 4}) of the lake {MAP}."


def parse_action(text: str) -> int:
    word = text.strip().lower().split()[-1].strip(".") if text.strip() else ""
    if word not in ACTIONS:
        raise ValueError(f"unknown action {text!r}; one of {ACTIONS}")
    return ACTIONS.index(word)


def load_environment(episodes: int = 4, max_steps: int = 20):
    import verifiers as vf
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

    system = (f"You walk on a frozen lake {MAP} (rows top to bottom; S start, F ice, H hole, G goal). "
              f"Reply with one action per turn: {', '.join(ACTIONS)}.")
    return vf.GymEnv(env_cls=FrozenLakeEnv, env_kwargs={"is_slippery": False}, action_parser=parse_action,
                     obs_to_text=describe, num_train_episodes=episodes, num_eval_episodes=episodes,
                     max_episode_steps=max_steps, system_prompt=system)
