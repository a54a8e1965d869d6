"""Experiment trackers (``--report-to``): the meta-loop's numbers as scalars per round, offline.

Every tracker writes files under the run's tracking folder (``tracking_folder``:
``<out_dir>/tracking/<run_id>``) and never opens a network connection:

============  ==============================================================================
tensorboard   event files in ``<folder>/meta`` (``tensorboardX.SummaryWriter``; TRL's own
              ``report_to="tensorboard"`` writes the GRPO stages' steps to ``<folder>/trl/round<t>``)
mlflow        a SQLite store ``<folder>/mlflow.db`` (experiment ``coevo``, one MLflow run per coevo
              run; TRL's callback adds one per GRPO stage)
wandb         an offline run in ``<folder>/wandb`` (``mode="offline"``; ``wandb sync`` uploads it
              later, if ever)
none          nothing (the default: every number is in the archive and the HTML report already)
============  ==============================================================================

The packages are optional: ``pip install 'coevo[tracking]'`` (tensorboardX, mlflow-skinny, alembic) or
``pip install wandb``. A missing one is a ``MissingExtraError`` naming what to install, raised by
``open_tracker`` before the run starts.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol

from coevo.errors import InputError, MissingExtraError
from coevo.masking import redact_data

ReportTo = Literal["none", "tensorboard", "mlflow", "wandb"]
"""The trackers ``--report-to`` accepts (also the names TRL's ``report_to`` uses)."""

_PACKAGES = {"tensorboard": (("tensorboardX",), "tensorboardX", "coevo[tracking]"),
             "mlflow": (("mlflow.tracking", "alembic"), "mlflow-skinny (with alembic)", "coevo[tracking]"),
             "wandb": (("wandb",), "wandb", "wandb")}
"""Tracker -> (modules, PyPI distributions, what to pip install)."""


class Tracker(Protocol):
    """Where scalars go: ``name`` (the ``ReportTo`` value), ``folder`` (its files; None for none),
    ``log(scalars, step)`` and ``close()``."""

    name: str
    folder: Path | None

    def log(self, scalars: Mapping[str, float | int | None], step: int) -> None:
        """Record each finite number of ``scalars`` (tag -> value) at ``step`` (a round, or a
        cumulative count for ``*_vs_rollouts`` tags); None and NaN are skipped."""
        ...

    def close(self) -> None:
        """Flush and close the files."""
        ...


def _finite(scalars: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of ``scalars`` (bools as 0/1) that are finite, as floats."""
    return {k: float(v) for k, v in scalars.items() if isinstance(v, (int, float)) and math.isfinite(v)}


class NullTracker:
    """Tracks nothing (``--report-to none``)."""

    name, folder = "none", None

    def log(self, scalars: Mapping[str, float | int | None], step: int) -> None:
        """Drop the scalars."""

    def close(self) -> None:
        """Nothing to close."""


class TensorBoardTracker:
    """Scalars as TensorBoard event files in ``folder/meta`` (``tensorboardX``; readable with
    TensorBoard or ``coevo.observe.events.read_scalars``)."""

    name = "tensorboard"

    def __init__(self, folder: Path) -> None:
        from tensorboardX import SummaryWriter

        self.folder = folder
        self.writer = SummaryWriter(logdir=str(folder / "meta"))

    def log(self, scalars: Mapping[str, float | int | None], step: int) -> None:
        """One ``add_scalar`` per finite value at ``step``; flushed at once (a killed run keeps them)."""
        for tag, value in _finite(scalars).items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        """Close the event file."""
        self.writer.close()


class MLflowTracker:
    """Scalars as metrics of one MLflow run (named ``run_id``, experiment ``coevo``) in the SQLite
    store ``folder/mlflow.db`` (MLflow 3's file store is in maintenance mode; its SQLite backend
    needs ``alembic``); the run's config as its params (flattened, ``section.key``). While open,
    ``MLFLOW_TRACKING_URI`` and ``MLFLOW_EXPERIMENT_NAME`` point TRL's MLflow callback at the same
    store (a GRPO stage is an MLflow run of its own there); ``close`` restores them."""

    name = "mlflow"

    def __init__(self, folder: Path, run_id: str, config: Mapping[str, Any]) -> None:
        from mlflow.tracking import MlflowClient

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.uri = f"sqlite:///{(folder / 'mlflow.db').resolve()}"
        self.client = MlflowClient(tracking_uri=self.uri)
        experiment = self.client.get_experiment_by_name("coevo")
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment("coevo")
        found = self.client.search_runs([experiment_id], f"tags.`mlflow.runName` = '{run_id}'")
        self.run = found[0] if found else self.client.create_run(experiment_id, run_name=run_id)
        if not found:
            for key, value in _flat(config).items():
                self.client.log_param(self.run.info.run_id, key, str(value)[:500])
        self._env = _set_env({"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_EXPERIMENT_NAME": "coevo"})

    def log(self, scalars: Mapping[str, float | int | None], step: int) -> None:
        """One metric per finite value at ``step`` (MLflow keys: ``/`` kept)."""
        for tag, value in _finite(scalars).items():
            self.client.log_metric(self.run.info.run_id, tag, value, step=step)

    def close(self) -> None:
        """Restore the environment (nothing is buffered: each metric is written at once)."""
        _set_env(self._env)


class WandbTracker:
    """Scalars in an offline Weights & Biases run in ``folder/wandb`` (``mode="offline"``: nothing
    is sent; ``wandb sync`` uploads it if a person chooses to). While open, ``WANDB_MODE=offline``
    keeps TRL's wandb callback offline too; ``close`` restores it."""

    name = "wandb"

    def __init__(self, folder: Path, run_id: str, config: Mapping[str, Any]) -> None:
        import wandb

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._env = _set_env({"WANDB_MODE": "offline"})
        self.run = wandb.init(mode="offline", dir=str(folder), name=run_id, id=run_id, resume="allow",
                              project="coevo", config=dict(config))

    def log(self, scalars: Mapping[str, float | int | None], step: int) -> None:
        """The finite values with the step as ``round`` (wandb's own step must only grow)."""
        values = _finite(scalars)
        if values:
            self.run.log({**values, "round": step})

    def close(self) -> None:
        """Finish the offline run; restore the environment."""
        self.run.finish()
        _set_env(self._env)


def _set_env(values: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (a None value: unset) environment variables; returns their previous values."""
    previous = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    return previous


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def tracking_folder(out_dir: str | Path, run_id: str) -> Path:
    """The run's tracking folder: ``<out_dir>/tracking/<run_id>`` (absolute)."""
    return Path(out_dir).expanduser().resolve() / "tracking" / run_id


def require_tracker(report_to: str) -> None:
    """Raise ``MissingExtraError`` (one paragraph naming what to install) when ``report_to``'s
    package is not installed, ``ValueError`` for an unknown tracker; nothing for ``none``."""
    if report_to == "none":
        return
    if report_to not in _PACKAGES:
        raise InputError(f"report_to {report_to!r} is not a tracker: write one of none, tensorboard, mlflow, wandb")
    modules, package, install = _PACKAGES[report_to]
    try:
        for module in modules:
            __import__(module)
    except ImportError as err:
        raise MissingExtraError(
            f"--report-to {report_to} needs the package {package!r}, which is not installed ({err}). Install it "
            f"with: pip install '{install}' — or run with --report-to none (every number is in the archive and "
            "the HTML report anyway)") from None


def open_tracker(report_to: str, out_dir: str | Path, run_id: str, config: Mapping[str, Any] | None = None) -> Any:
    """The tracker ``report_to`` names, writing under ``tracking_folder(out_dir, run_id)``; a resumed
    run appends to the same files (MLflow, wandb: the same run). ``config`` is logged as the run's
    parameters with its secrets masked (``coevo.masking``). Raises as ``require_tracker``."""
    require_tracker(report_to)
    folder = tracking_folder(out_dir, run_id)
    config = redact_data(dict(config or {}))  # a tracker's parameters never hold a password or key
    if report_to == "tensorboard":
        return TensorBoardTracker(folder)
    if report_to == "mlflow":
        return MLflowTracker(folder, run_id, config or {})
    if report_to == "wandb":
        return WandbTracker(folder, run_id, config or {})
    return NullTracker()
