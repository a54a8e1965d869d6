"""The choice baselines of a numbered TextWorld env, beside SmolLM2's H0 in docs/benchmarks/evoharness.md ("An
environment where H0 succeeds sometimes"): ``--policy random`` picks one of the current admissible
commands uniformly at random each move (what a policy that only emits valid numbers gets), ``--policy
first`` always picks option 1 (what SmolLM2-135M under the retry hook replies: "1." every turn). No
model; not part of CI.

    python benchmarks/textworld_random.py "textworld:challenge=tw-coin_collector,size=20,level=1,admissible=numbered" \\
        --split train --n 8 --k 2 --moves 30 --policy random
"""

from __future__ import annotations

import argparse
import random

from coevo.envs.registry import get_env
from coevo.evaluation.stats import score_estimate

POLICIES = ("random", "first")


def random_play(ref: str, split: str, n: int, k: int, moves: int,
                policy: str = "random") -> tuple[list[float], list[int]]:
    """Per rollout (task i, seed j: ``random.Random(j)``), 1.0 when won within ``moves`` choices, and
    the moves played; each choice is uniform at random (``policy="random"``) or option 1
    (``"first"``). Raises ``ValueError`` for an unknown ``policy``, what ``get_env`` raises for a bad
    ``ref``, and ``ValueError`` for an env without numbered commands (there a number is a game command,
    not a choice)."""
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: use one of {', '.join(POLICIES)}")
    env = get_env(ref)
    if getattr(env, "listing", None) != "numbered":
        raise ValueError(f"{ref!r} does not number its commands: add admissible=numbered to the textworld ref")
    won, played = [], []
    for task in env.tasks(split, n):
        for seed in range(k):
            rng, ep = random.Random(seed), env.episode(task)
            act = {t.name: t for t in ep.tools}["act"]
            while not ep.state["done"] and len(ep.state["commands"]) < moves:
                act.fn(command=str(rng.randint(1, len(ep.state["choices"]))) if policy == "random" else "1")
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
    parser.add_argument("--policy", choices=POLICIES, default="random")
    args = parser.parse_args()
    won, played = random_play(args.env, args.split, args.n, args.k, args.moves, args.policy)
    print(f"{args.policy} choice: success {score_estimate(won)} (Wilson 95 %), "
          f"mean moves {sum(played) / len(played):.1f}")


if __name__ == "__main__":
    main()
