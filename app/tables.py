"""The papers' comparison tables (docs/benchmarks/papers.md): a table config (``configs/tables/*.toml``) names a
paper preset (``configs/papers/*.toml``), the suite whose tasks it runs on (``configs/testbed.toml``), the
strategies, seeds and the matched rollout budget; ``run_table`` runs it as one ``coevo compare --budget`` and
adds the numbers that table of its paper asks for beside the comparison's own (``coevo.app.compare``).

A table config::

    [table]
    name = "vace"                           # results: benchmarks/results/table_vace.{json,png}
    title = "VACE Table 2"
    preset = "configs/papers/vace.toml"     # the paper's settings, read (inherited) as they are
    suite = "configs/testbed.toml"          # its [env] and harness replace the preset's
    strategies = ["static", "vace"]
    reference = "vace"                      # paired differences are to this strategy
    seeds = 3
    budget = 800                            # the protocol: rollouts on train + val + search per run, or
                                            # updates = N (weight updates per run), or neither (the rounds)
    extras = ["rejected_test"]              # see EXTRAS

    [overrides]                             # dotted keys on top (what the table changes, with its reason)
    eval.k = 3

The run config is the preset, then the suite's ``env`` and ``harness``, then ``[overrides]``, then the
caller's overrides (``--set``), validated like any config; its ``db`` and ``out_dir`` are the table's own
(``coevo_runs/tables/NAME``) unless overridden.

``EXTRAS``: the numbers each table adds beside the comparison, ``coevo.app.table_extras``.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, ValidationError

from coevo.app.compare import Comparison, compare
from coevo.app.run import anchored
from coevo.app.table_costs import CostLedger, Invocation, stopped_invocations
from coevo.app.table_extras import (
    ContextFor,
    Decomposed,
    Rejection,
    RoundTest,
    decompositions,
    rejected_on_test,
    round_tests,
)
from coevo.config import ConfigError, RunConfig
from coevo.config.run import parse_config, set_dotted
from coevo.config.shipped import config_path
from coevo.graphs.registry import get_strategy
from coevo.observe.progress import Reporter
from coevo.storage import Archive

Extra = Literal["rejected_test", "ranks", "best_reached", "promoted_timr", "decompose"]
EXTRAS: tuple[str, ...] = ("rejected_test", "ranks", "best_reached", "promoted_timr", "decompose")


class TableSpec(BaseModel):
    """A table config's ``[table]`` section (module docstring): ``name`` (file stem of its results),
    ``title``, the ``preset`` and ``suite`` config paths (relative to the working directory), the
    ``strategies`` in table order, the ``reference`` of the paired differences (one of them), ``seeds`` (a
    count from the config's seed), its protocol (``coevo.app.compare``, "Protocols": a rollout ``budget``,
    an ``updates`` cap, or neither: the preset's rounds as caps) and the ``extras`` it adds."""

    model_config = {"extra": "forbid"}

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    title: str = ""
    preset: str
    suite: str
    strategies: list[str] = Field(min_length=1)
    reference: str
    seeds: int = Field(default=3, ge=1)
    budget: int = Field(default=0, ge=0)
    updates: int = Field(default=0, ge=0)
    extras: list[Extra] = Field(default_factory=list)


def _toml(path: str | Path, what: str) -> dict[str, Any]:
    p = config_path(path)
    if not p.is_file():
        raise ConfigError(f"{what}: no file {str(p)!r}; paths in a table config are relative to the directory "
                          "you run from, else to the package (its shipped configs/)")
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{what} {p} does not parse: {err}") from None


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` deep-merged over ``base`` (tables merged key by key, anything else replaced)."""
    out = copy.deepcopy(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_table(path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[TableSpec, RunConfig]:
    """The table config at ``path`` as its ``TableSpec`` and the run config every strategy of it shares
    (module docstring for the layering); ``overrides``: dotted keys applied last (``--set``). Raises
    ``ConfigError`` for a missing or unparsable file, a bad ``[table]`` section, an unknown strategy or a
    reference not among the strategies, and for any invalid key of the resulting run config."""
    data = _toml(path, "table config")
    unknown = set(data) - {"table", "overrides"}
    if unknown:
        raise ConfigError(f"table config {path}: unknown section(s) {sorted(unknown)}; a table config has [table] "
                          "and [overrides] only (run-config keys go under [overrides])")
    try:
        spec = TableSpec.model_validate(data.get("table", {}))
    except ValidationError as err:
        raise ConfigError(f"table config {path}, [table]: {err}") from None
    for name in spec.strategies:
        try:
            get_strategy(name)
        except ValueError as err:
            raise ConfigError(f"table config {path}, [table] strategies: {err}") from None
    if spec.reference not in spec.strategies:
        raise ConfigError(f"table config {path}: reference {spec.reference!r} is not among its strategies "
                          f"{spec.strategies}; name one of them")
    suite = _toml(spec.suite, f"table config {path}, suite")
    run = _merge(_toml(spec.preset, f"table config {path}, preset"), {
        "env": suite.get("env", {}), **({"harness": suite["harness"]} if "harness" in suite else {}),
        "db": f"coevo_runs/tables/{spec.name}.db", "out_dir": f"coevo_runs/tables/{spec.name}"})
    run["env"] = copy.deepcopy(suite.get("env", run.get("env", {})))  # the suite's tasks whole, not merged
    run = _merge(_merge(run, data.get("overrides", {})), set_dotted({}, overrides or {}))
    origins = {k: f"--set {k}={v}" for k, v in (overrides or {}).items()}
    config = parse_config(run, f"table config {path} (preset {spec.preset}, suite {spec.suite})", origins)
    if config.eval.k < 2 or not config.eval.temperature:
        raise ConfigError(f"table config {path}: the papers' tables report sampled mean@k with k >= 2, "
                          f"but the run config has eval.k = {config.eval.k} and eval.temperature = "
                          f"{config.eval.temperature}; set eval.temperature > 0 (in the preset {spec.preset}, or "
                          "--set eval.temperature=1.0) and eval.k >= 2 under [overrides]")
    return spec, config


class TableResult(BaseModel):
    """A table's results (``run_table``): its ``spec``, the shared run ``config`` (JSON), the
    ``comparison``, the extras' raw rows (``rejections``, ``round_tests``) and summaries (``extras``:
    ``coevo.report.tables.table_extras``), the ``commit`` it ran at, and its cost summed over every
    invocation that worked on this comparison (a table stopped and continued runs in several):
    ``wall_s`` and the processes' ``cpu_s`` (user + system seconds, which on a shared machine estimate a
    quiet machine's wall time of a single-threaded run better than the wall time does), each invocation
    listed in ``invocations`` (``Invocation``; ``continued``)."""

    spec: TableSpec
    config: dict[str, Any]
    comparison: Comparison
    rejections: list[Rejection] = Field(default_factory=list)
    round_tests: list[RoundTest] = Field(default_factory=list)
    decompositions: list[Decomposed] = Field(default_factory=list)
    extras: dict[str, Any] = Field(default_factory=dict)
    commit: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    invocations: list[Invocation] = Field(default_factory=list)

    def continued(self, invocation: Invocation, before: "TableResult | None",
                  parts: Sequence["TableResult"] = (), stopped: Sequence[Invocation] = ()) -> "TableResult":
        """This result with ``invocation`` (this process's commit, wall and CPU seconds) after the
        invocations of ``before`` (the results file an earlier invocation wrote; kept only when it is of the
        same comparison id, so a fresh table starts its own count) and those of ``parts`` (results of
        invocations that ran some of its seeds, ``--only-seeds``, perhaps side by side: kept when of the same
        table and run config, each once), ``wall_s``/``cpu_s`` their sums (the parts' CPU summed; wall
        summed too, so beside parts that ran at once it is machine time, not elapsed), then ``stopped``
        (invocations of this table that ended before writing results: ``coevo.app.table_costs``), and
        ``commit`` this invocation's."""
        earlier = before.invocations if before is not None and before.comparison.id == self.comparison.id else []
        if before is not None and not earlier and before.comparison.id == self.comparison.id and before.cpu_s:
            earlier = [Invocation(commit=before.commit, wall_s=before.wall_s, cpu_s=before.cpu_s)]  # older format
        for part in parts:
            if part.spec.name == self.spec.name and part.config == self.config:
                earlier = [*earlier, *part.invocations]
        every = _once([*earlier, *stopped, invocation])
        return self.model_copy(update={"invocations": every, "commit": invocation.commit,
                                       "wall_s": sum(i.wall_s for i in every), "cpu_s": sum(i.cpu_s for i in every)})


def _once(invocations: Sequence[Invocation]) -> list[Invocation]:
    """``invocations`` with each one once, in first-seen order: the same ``id`` (an invocation's records
    and its results share it) is one invocation, whose finished entry replaces a stopped one (a record
    read while it still ran); without an id (older results), equal entries are one."""
    out: list[Invocation] = []
    for invocation in invocations:
        same = next((k for k, seen in enumerate(out) if (seen.id == invocation.id if invocation.id
                                                         else seen == invocation)), None)
        if same is None:
            out.append(invocation)
        elif out[same].stopped and (not invocation.stopped or invocation.wall_s > out[same].wall_s):
            out[same] = invocation  # finished over stopped; of two records, the later one
    return out


def counted(result: TableResult, ledger: CostLedger, part: bool) -> tuple[TableResult, list[Path]]:
    """``result`` (this invocation's ``run_table``) with the cost of every invocation of its table
    (``TableResult.continued``): the results its stem already holds in ``ledger.folder``, with ``part`` False
    its parts' results (``{stem}.seeds-*.json``), the records of its invocations that stopped before writing
    results (``coevo.app.table_costs.stopped_invocations``), and this one's (``ledger.invocation()``). Also
    returns the records folded in: remove them with ``ledger.done(records)`` once the results are written."""
    folder, stem = ledger.folder, ledger.stem
    earlier = folder / f"{stem}.json"
    before = TableResult.model_validate_json(earlier.read_text()) if earlier.is_file() else None
    parts = [] if part else [TableResult.model_validate_json(p.read_text())
                             for p in sorted(folder.glob(f"{stem}.seeds-*.json"))]
    stopped, records = stopped_invocations(folder, stem, ledger.key, parts=not part)
    return result.continued(ledger.invocation(), before, parts, stopped), records


def results_json(result: "TableResult") -> str:
    """``result`` as the compact JSON ``benchmarks/tables.py`` commits: every field but the per-task
    ``trajectory_ids`` (archive row ids, meaningless without the archive, which is not committed: they were
    over a third of a 3-seed table's file) and each per-task outcome's ``task_id`` (its key says it; about a
    third of what was left). It reads back with ``TableResult.model_validate_json`` (``PerTask`` fills the
    ids back in)."""
    import json

    def slim(value: Any, per_task: bool = False) -> Any:
        if isinstance(value, dict):
            return {k: slim({f: x for f, x in v.items() if f != "task_id" or x != k} if per_task and isinstance(v, dict)
                            else v, k == "per_task")
                    for k, v in value.items() if k != "trajectory_ids"}
        return [slim(v) for v in value] if isinstance(value, list) else value

    return json.dumps(slim(result.model_dump(mode="json")), separators=(",", ":"), ensure_ascii=False)


async def run_table(spec: TableSpec, config: RunConfig, reporter: Reporter | None = None,
                    seeds: int | Sequence[int] | None = None, budget: int | None = None,
                    context_for: ContextFor | None = None, archive: Archive | None = None) -> TableResult:
    """Run (or read back) the table's comparison (``coevo.app.compare.compare`` under the spec's protocol:
    ``spec.budget`` rollouts or ``spec.updates`` updates, else the preset's rounds; ``spec.seeds`` seeds,
    paired to ``spec.reference``; ``seeds`` (a count, or explicit seeds: some of the table's, to run them
    in another process at once) and ``budget`` replace the spec's), then its extras (module docstring).
    ``commit``, ``wall_s`` and ``cpu_s`` are left for the caller to fill. ``context_for(run config)`` and
    ``archive`` replace the default services and archive (tests). Raises what ``compare`` raises."""
    from coevo.report.tables import table_extras

    config = anchored(config)
    if archive is None and "://" not in config.db:
        Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    archive = archive or Archive(config.db)
    comparison = await compare(config, spec.strategies, seeds or spec.seeds, reporter=reporter, archive=archive,
                               context_for=context_for, reference=spec.reference,
                               budget=spec.budget if budget is None else budget, updates=spec.updates or None)
    # the extras' evaluations report their progress too (a 3-seed WHALE table re-tests every round's pair)
    rejections = (await rejected_on_test(comparison, config, archive, context_for, reporter)
                  if "rejected_test" in spec.extras else [])
    rounds = (await round_tests(comparison, config, archive, context_for, reporter)
              if "best_reached" in spec.extras else [])
    parts = (await decompositions(comparison, config, archive, context_for, reporter)
             if "decompose" in spec.extras else [])
    extras = table_extras(spec.extras, comparison, archive, rejections, rounds, parts)
    return TableResult(spec=spec, config=config.model_dump(mode="json"), comparison=comparison,
                       rejections=rejections, round_tests=rounds, decompositions=parts, extras=extras)

