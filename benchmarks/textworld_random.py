"""The random-choice baseline of a numbered TextWorld env: each move picks one of the current
admissible commands uniformly at random (what a policy that only emits valid numbers gets), the
trivial baseline beside SmolLM2's H0 in benchmarks/README.md ("An environment where H0 succeeds
sometimes"). No model; not part of CI.

    python benchmarks/textworld_random.py "textworld:challenge=tw-coin_collector,size=20,level=1,admissible=numbered" \\
        --split train --n 8 --k 2 --moves 30
"""

from __future__ import annotations

import argparse
import random

from coevo.envs.registry import get_env
from coevo.evaluation.stats import score_estimate


def random_play(ref: str, split: str, n: int, k: int, moves: int) -> tuple[list[float], list[int]]:
    """Per rollout (task i, seed j: ``random.Random(j)``), 1.0 when won within ``moves`` random
    choices, and the moves played. Raises what ``get_env`` raises for a bad ``ref``, and ``ValueError``
    for an env without numbered commands (there a number is a game command, not a choice)."""
    env = get_env(ref)
    if getattr(env, "listing", None) != "numbered":
        raise ValueError(f"{ref!r} does not number its commands: add admissible=numbered to the textworld ref")
    won, played = [], []
    for task in env.tasks(split, n):
        for seed in range(k):
            rng, ep = random.Random(seed), env.episode(task)
            act = {t.name: t for t in ep.tools}["act"]
            while not ep.state["done"] and len(ep.state["commands"]) < moves:
                act.fn(command=str(rng.randint(1, len(ep.state["choices"]))))
            ep.close()
            won.append(float(env.score(task, None, ep).passed))
            played.append(len(ep.state["commands"]))
    return won, played


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env")
    parser.add_argument("--split", default="train")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--moves", type=int, default=30)
    args = parser.parse_args()
    won, played = random_play(args.env, args.split, args.n, args.k, args.moves)
    print(f"random choice: success {score_estimate(won)} (Wilson 95 %), "
          f"mean moves {sum(played) / len(played):.1f}")


if __name__ == "__main__":
    main()
