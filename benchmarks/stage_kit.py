"""Shared set-up of the weight-stage benchmarks (``profile_stage.py``, ``bench_stage.py``): the
default job's GRPO stage (``configs/default.toml``: reasoning-gym chain_sum, SmolLM2-135M-Instruct,
8 steps x 2 tasks x 4 rollouts at T = 0.7, 48 new tokens, LoRA r 8) under its round-0 harness H0 or
its round-1 harness (H0 + two demonstrations as few-shot chat turns, as the offline editor adds
them; their tasks leave the stage), and a timer that adds up where a stage's time goes.
"""

from __future__ import annotations

import functools
import os
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                     "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
                     "TRL_EXPERIMENTAL_SILENCE": "1"}.items():
    os.environ.setdefault(_key, _value)

ROOT = Path(__file__).resolve().parents[1]


def default_stage(round: int = 0, steps: int | None = None, base_model: str | None = None,
                  **train: Any) -> dict[str, Any]:
    """The default job's stage of ``round`` (0: under H0; 1: under H0 + 2 demonstrations):
    ``env``, ``spec`` (the training variant: T = 0.7, 48 new tokens), ``tasks`` (the stage's train
    tasks), ``config`` (the ``StageConfig``; ``steps`` and ``train`` override ``[train]`` keys),
    ``checkpoint`` (``base_model``, a checkpoint directory; default the base SmolLM2-135M-Instruct)
    and ``run`` (the ``RunConfig``)."""
    from coevo.config import load_config
    from coevo.envs.registry import get_env
    from coevo.harnesses.spec import load_harness
    from coevo.models.checkpoint import Checkpoint
    from coevo.training.kinds import training_spec

    overrides = {f"train.{k}": v for k, v in train.items()}
    if steps is not None:
        overrides["train.steps"] = steps
    run = load_config(ROOT / "configs" / "default.toml", overrides)
    env = get_env(run.env.ref, **run.env.settings())
    tasks = env.tasks("train", n=run.env.n_train)
    spec = load_harness(run.harness or env.name)
    if round:
        demos, tasks = tasks[:2], tasks[2:]
        data = spec.model_dump(mode="json")
        for task in demos:
            data["skills"][f"demo_{task.id[-8:]}"] = {"kind": "demonstration", "input": task.prompt,
                                                     "output": env.reveal(task)}
        spec = load_harness(data)
    config = run.train.stage(round, run.seed, Path(os.environ.get("COEVO_BENCH_OUT", "/tmp/coevo-bench")))
    if base_model is None:
        from coevo.models.smollm2 import ensure_smollm2

        base_model = str(ensure_smollm2())
    checkpoint = Checkpoint(id="base", base_model=base_model)
    return {"env": env, "spec": training_spec(spec, run.train), "tasks": tasks, "config": config,
            "checkpoint": checkpoint, "run": run}


class Timer:
    """Adds up seconds (``seconds[label]``) and calls (``calls[label]``) of wrapped methods."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time every call of ``owner.name`` (a class's method or a module's function) as ``label``."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
                self.calls[label] += 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, original))

    @contextmanager
    def span(self, label: str) -> Iterator[None]:
        """Time the block as ``label``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[label] += time.perf_counter() - started
            self.calls[label] += 1

    def restore(self) -> None:
        """Undo every ``wrap``."""
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()
