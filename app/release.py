"""An exported agent folder (``coevo export``, ``coevo.app.export``) read back: ``load_agent`` compiles
the agent it holds, ``rollback`` moves a versioned folder's pointer. A folder convention, not a registry.

A folder (format ``coevo-agent/1``)::

    agent.json       the manifest (``AgentManifest``): run, pair, kind, base model reference, env and its
                     tools, seed, the decoding the pair was tested with, the sha256 of every file below
    harness.json     the harness spec; a user agent's holds its params and ``agent``, the factory's import path
    params.json      a user agent's params alone (``coevo.load_params(".../params.json", YourParams)``)
    router.json      a Harness-S run's pool, profiles and router settings (``coevo.app.bundle``)
    adapter/         the LoRA adapter's files, copied
    README.md        the agent card (``coevo.report.card``)
    langgraph.json   ``langgraph dev`` (or LangGraph Server) in the folder serves ``graph.py:graph``
    graph.py         ``graph = load_agent(<this folder>)``

A versioned folder (``coevo export RUN -o DIR --version``) holds ``v1/``, ``v2/``, ... (each a folder as
above), ``current`` (one line: the version ``load_agent(DIR)`` loads; the newest export, until
``coevo release rollback DIR`` moves it back) and its own ``langgraph.json`` and ``graph.py``, which serve
``current``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, ValidationError

from coevo.envs.base import Episode, Task, Tool
from coevo.errors import CoevoError
from coevo.timestamps import UTCTime, utcnow

FORMAT_NAME, FORMAT_VERSION = "coevo-agent", 1
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"
"""The folder format this coevo writes and reads; a folder of a higher version is refused (``read_manifest``)."""
MANIFEST, CURRENT, ADAPTER = "agent.json", "current", "adapter"
VERSION_DIR = re.compile(r"^v(\d+)$")
Kind = Literal["harness", "agent", "routed"]


class AgentFolderError(CoevoError, ValueError):
    """An agent folder that cannot be loaded as it is (missing, damaged, of a newer format, naming a
    base model this machine lacks); the message names the folder and the fix."""


class EnvInfo(BaseModel):
    """The env the pair was tested on: its reference and ``get_env`` settings, its name, and the names of
    its tools the agent sees (empty: the agent uses none of the env's tools, and loading builds no env)."""

    ref: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    name: str = ""
    tools: list[str] = Field(default_factory=list)


class AgentManifest(BaseModel):
    """``agent.json``: what an exported folder holds (module docstring).

    ``policy`` the base model reference the run's policies loaded (``local:smollm2-135m``,
    ``litellm:...``), ``adapter`` the folder's adapter directory (relative; None: the base alone),
    ``served_as`` the name the checkpoint was served under (a vLLM adapter; load it with
    ``model=``), ``seed`` the rollouts' sampling seed, ``temperature`` the decoding temperature the
    pair was tested at (None: the harness's own), ``experience`` a BPE harness's starting lessons,
    ``files`` the sha256 (hex) of every file by its path relative to the folder, ``version`` N of a
    ``vN`` folder."""

    format: str = FORMAT
    coevo_version: str = ""
    commit: str | None = None
    export_id: str
    exported_at: UTCTime = Field(default_factory=utcnow)
    run_id: str | None = None
    strategy: str = ""
    kind: Kind = "harness"
    harness_id: str
    checkpoint_id: str
    policy: str
    adapter: str | None = None
    served_as: str | None = None
    env: EnvInfo = Field(default_factory=EnvInfo)
    seed: int = 0
    temperature: float | None = None
    experience: list[str] = Field(default_factory=list)
    version: int | None = None
    files: dict[str, str] = Field(default_factory=dict)


def sha256(path: Path) -> str:
    """The sha256 (hex) of the file ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def versions(root: Path) -> list[int]:
    """The version numbers N of ``root``'s ``vN`` folders that hold a manifest, ascending."""
    if not root.is_dir():
        return []
    found = (VERSION_DIR.match(p.name) for p in root.iterdir() if (p / MANIFEST).is_file())
    return sorted(int(m.group(1)) for m in found if m)


def current_version(root: Path) -> int | None:
    """The version ``root/current`` names (None: no pointer). The pointer is the one-line file coevo
    writes, or a symlink to a ``vN`` folder (a hand-made release link). Raises ``AgentFolderError`` for a
    pointer that names no ``vN`` folder of ``root``."""
    pointer = root / CURRENT
    if pointer.is_symlink():
        name = Path(os.readlink(pointer).rstrip("/\\")).name
    elif pointer.is_file():
        name = pointer.read_text().strip()
    else:
        return None
    match = VERSION_DIR.match(name)
    if match is None or not (root / name / MANIFEST).is_file():
        found = ", ".join(f"v{n}" for n in versions(root)) or "none"
        raise AgentFolderError(f"agent folder {root}: its pointer {pointer} names {name!r}, which is no version folder "
                               f"there (versions: {found}); point it at one with `coevo release rollback {root} --to "
                               "vN`, or export again with --version")
    return int(match.group(1))


def is_versioned(root: Path) -> bool:
    """Whether ``root`` is a versioned agent folder: it has a ``current`` pointer (even a dangling one) or a
    ``vN`` folder with a manifest."""
    pointer = root / CURRENT
    return pointer.is_file() or pointer.is_symlink() or bool(versions(root))


def point(root: Path, version: int) -> None:
    """Make ``root/current`` name ``vN`` (written to a temporary file, then renamed over the pointer; a
    symlink pointer is replaced by the file). Raises ``AgentFolderError`` naming the pointer and the fix
    when it cannot be written (a folder named ``current``, a read-only folder)."""
    tmp = root / f".{CURRENT}.{os.getpid()}"
    try:
        tmp.write_text(f"v{version}\n")
        os.replace(tmp, root / CURRENT)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise AgentFolderError(f"agent folder {root}: its pointer {root / CURRENT} cannot be written "
                               f"({err.strerror or err}): coevo's pointer is a one-line file naming the version; "
                               f"move away what is there (a folder named {CURRENT}?) or make {root} writable, then "
                               f"point it again with `coevo release rollback {root} --to v{version}`") from None


def resolve(folder: str | Path) -> Path:
    """The folder holding the manifest ``load_agent(folder)`` loads: ``folder`` itself, or for a versioned
    folder the version ``current`` names. Raises ``AgentFolderError`` naming the folder and the fix."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise AgentFolderError(f"no agent folder at {path}: pass the folder `coevo export RUN -o DIR` wrote "
                               "(`coevo archive list exports` lists them)")
    version = current_version(path)
    if version is not None:
        return path / f"v{version}"
    if (path / MANIFEST).is_file():
        return path
    known = versions(path)
    if known:
        raise AgentFolderError(f"agent folder {path} holds versions ({', '.join(f'v{n}' for n in known)}) but no "
                               f"{CURRENT} pointer naming the one to load: point it at one with `coevo release "
                               f"rollback {path} --to v{known[-1]}`, or pass a version folder ({path}/v{known[-1]})")
    raise AgentFolderError(f"{path} is not an exported agent folder (it has no {MANIFEST} and no {CURRENT} "
                           "pointer): pass the folder `coevo export RUN -o DIR` wrote")


def read_manifest(folder: Path) -> AgentManifest:
    """The manifest of the agent folder ``folder`` (a folder, not a versioned root). Raises
    ``AgentFolderError`` for an unreadable manifest, another format, or a folder written by a newer coevo."""
    file = folder / MANIFEST
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise AgentFolderError(f"agent folder {folder}: {file} cannot be read ({err}); export the agent again "
                               "(`coevo export RUN -o DIR --force`) or copy the folder again") from None
    name, _, number = str(data.get("format", "") if isinstance(data, dict) else "").partition("/")
    if name != FORMAT_NAME or not number.isdigit():
        raise AgentFolderError(f"agent folder {folder}: {file} is not a coevo agent manifest (format "
                               f"{data.get('format') if isinstance(data, dict) else None!r}, expected {FORMAT!r})")
    if int(number) > FORMAT_VERSION:
        raise AgentFolderError(f"agent folder {folder} was exported by coevo {data.get('coevo_version', '?')} in "
                               f"format {data['format']!r}, newer than this coevo reads ({FORMAT!r}, coevo "
                               f"{coevo_version()}): upgrade coevo (pip install -U coevo) where you load it, or export "
                               "the pair again with this coevo")
    try:
        manifest = AgentManifest.model_validate(data)
    except ValidationError as err:
        raise AgentFolderError(f"agent folder {folder}: {file} does not validate ({err.error_count()} problem(s), "
                               f"first: {err.errors()[0]['msg']} at {'/'.join(map(str, err.errors()[0]['loc']))}); "
                               "export the agent again") from None
    outside = [n for n in [manifest.adapter or "", *manifest.files] if n and not _inside(n)]
    if outside:
        raise AgentFolderError(f"agent folder {folder}: {file} names {outside[0]!r}, a path outside the folder (the "
                               "manifest was edited; coevo writes paths relative to the folder): export the agent "
                               "again, or copy the folder again from where it was exported")
    return manifest


def _inside(name: str) -> bool:
    """Whether the manifest path ``name`` stays inside its folder: relative, no ``..``, no drive."""
    path = PurePosixPath(name.replace("\\", "/"))
    return not path.is_absolute() and ".." not in path.parts and not PureWindowsPath(name).drive


def verify(folder: Path, manifest: AgentManifest, adapter: bool = True) -> None:
    """Check every file the manifest lists against its sha256 (the adapter's only when ``adapter``).
    Raises ``AgentFolderError`` naming the folder, the file and the fix for a missing or changed file."""
    for name, digest in manifest.files.items():
        if not adapter and name.startswith(f"{ADAPTER}/"):
            continue
        file = folder / name
        if not file.is_file():
            raise AgentFolderError(f"agent folder {folder}: {name} is missing (the folder was copied in part): copy "
                                   f"the whole folder again, or export the pair again with `coevo export "
                                   f"{manifest.run_id or 'RUN'} -o DIR --harness {manifest.harness_id[:12]} "
                                   f"--checkpoint {manifest.checkpoint_id}`")
        if sha256(file) != digest:
            raise AgentFolderError(f"agent folder {folder}: {name} does not match the checksum it was exported with "
                                   "(the file was changed, or a copy was cut short): copy the folder again from where "
                                   f"it was exported, or export the pair again with `coevo export "
                                   f"{manifest.run_id or 'RUN'} -o DIR --force`")


def coevo_version() -> str:
    """This coevo's version (the installed distribution's; ``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coevo")
    except PackageNotFoundError:
        return "unknown"


def _policy(folder: Path, manifest: AgentManifest, model: Any, base: str | None = None) -> Any:
    """The chat model: ``model`` (a reference string or a chat model) when given, else the base
    reference (``base``, else the manifest's) with the folder's adapter (``local:BASE+<folder>/adapter``).
    A ``local:`` ``model`` without an adapter for a folder that has one is refused: it would load the base
    alone, silently another agent than the one coevo evaluated."""
    from coevo.models.refs import ModelRefError, load_model
    from coevo.models.smollm2 import SmolLM2NotInstalledError

    if model is not None and not isinstance(model, str):
        return model
    ref = model
    if ref is not None and manifest.adapter and ref.startswith("local:") and "+" not in ref:
        raise AgentFolderError(f"agent folder {folder}: model={ref!r} is the base alone, without the folder's adapter: "
                               f"pass base={ref!r} to load it with the adapter (model= is for a served model that has "
                               "the adapter loaded, or a chat model)")
    if ref is None:
        policy = base or manifest.policy
        adapter = folder / manifest.adapter if manifest.adapter else None
        if adapter is not None and not policy.startswith("local:"):
            raise AgentFolderError(f"agent folder {folder}: its adapter was trained for {policy!r}, a "
                                   "server, which this process cannot load an adapter into: serve the adapter (e.g. "
                                   "vLLM --lora-modules) and pass it, load_agent(folder, model='litellm:hosted_vllm/"
                                   "NAME?api_base=URL')")
        ref = f"{policy}+{adapter}" if adapter is not None else policy
    try:
        return load_model(ref)
    except (ModelRefError, SmolLM2NotInstalledError, OSError) as err:
        raise AgentFolderError(f"agent folder {folder}: its model {ref!r} cannot be loaded here ({err}); install or "
                               "copy the base model it names, or say where the same base is here: load_agent(folder, "
                               "base='local:/path/to/base') (the folder's adapter on top), or pass a served model: "
                               "load_agent(folder, model=REF)") from None


def env_tools(folder: Path, env: EnvInfo) -> list[Tool]:
    """The env tools the folder names (``env.tools``), from a fresh episode of the env's first task;
    [] when it names none (no env is built). Raises ``AgentFolderError`` when the env cannot be built."""
    if not env.tools:
        return []
    from coevo.envs.registry import get_env

    try:
        suite = get_env(env.ref, **env.settings)
        task = next(t for split in ("test", "val", "train") for t in suite.tasks(split, 1))  # type: ignore[arg-type]
    except (KeyError, ImportError, TypeError, ValueError, StopIteration) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise AgentFolderError(f"agent folder {folder}: its env {env.ref!r}, which gives the tools "
                               f"{', '.join(env.tools)}, cannot be built here ({message}); install it, or pass the "
                               "tools yourself: load_agent(folder, tools=[...])") from None
    return [t for t in suite.episode(task, 0).tools if t.name in env.tools]


def _decoded(spec: Any, temperature: float | None) -> Any:
    """``spec`` decoding at ``temperature`` (None: its own), as the evaluation decoded it."""
    if temperature is None:
        return spec
    return spec.model_copy(update={"decoding": spec.decoding.model_copy(update={"temperature": temperature})})


def load_agent(folder: str | Path, model: Any = None, tools: Sequence[Tool] | None = None,
               base: str | None = None) -> Any:
    """The compiled LangGraph graph of the agent an exported folder holds, with its policy loaded: the graph
    coevo evaluated (the same harness, decoding temperature, seed and tools).

    ``folder``: what ``coevo export RUN -o DIR`` wrote (a versioned folder loads the version ``current``
    names). ``model``: None (the folder's base model reference plus its adapter, loaded in this process),
    a model reference (``litellm:hosted_vllm/NAME?api_base=URL``: a server with the adapter loaded) or a
    chat model. ``tools``: the env tools the agent sees (coevo ``Tool``\\ s; default: the ones the folder
    names, from a fresh episode of its env, which is built only then). ``base``: the base model's reference
    on this machine when it differs from the one the folder names (``local:/path/to/base``; a folder copied
    to another machine), loaded with the folder's adapter; a ``local:`` ``model`` without an adapter is
    refused for a folder that has one (it would drop the adapter).

    The graph: for a harness (and a Harness-S router) input ``{"task": str}``, output ``HarnessState``
    (``answer``, ``stop_reason``, ``messages``; a routed agent also ``harness``, the sibling chosen); for a
    user agent, the user's own graph over ``{"messages": [...]}``, built by its factory with the evolved
    params and the model wrapped in the harness's decoding.

    Raises ``AgentFolderError`` for a missing folder, one written by a newer coevo, a file that fails its
    checksum, or a model or env this machine cannot load (each message names the folder and the fix);
    ``HarnessError`` for a user agent whose factory does not import.
    """
    from coevo.harnesses.spec import load_harness

    path = resolve(folder)
    manifest = read_manifest(path)
    verify(path, manifest, adapter=model is None)
    spec = load_harness(path / "harness.json")
    policy = _policy(path, manifest, model, base)
    task = Task(id=f"agent-{manifest.export_id[:8]}", env=manifest.env.name or "agent", split="test", prompt="")
    episode = Episode(task=task, tools=list(tools) if tools is not None else env_tools(path, manifest.env))
    if manifest.kind == "agent":
        return _user_agent(_decoded(spec, manifest.temperature), policy, episode)
    if manifest.kind == "routed":
        from coevo.app.bundle import load_router
        from coevo.graphs.harness_s.routed import build_routed_graph

        pool, router = load_router(path / "router.json")
        pool = {h: _decoded(s, manifest.temperature) for h, s in pool.items()}
        return build_routed_graph(pool, router, policy, episode, manifest.seed)
    from coevo.harnesses.runtime import build_harness_graph

    return build_harness_graph(_decoded(spec, manifest.temperature), policy, episode, manifest.seed,
                               manifest.experience)


def _user_agent(spec: Any, policy: Any, episode: Episode) -> Any:
    """A user agent's graph as its rollouts built it (``coevo.harnesses.agent_run``): the factory with the
    spec's params, the policy wrapped to decode as the spec says (no record kept), the episode's tools
    through the spec's tool view when the factory takes them, and the harness's recursion limit."""
    from coevo.harnesses.agent import load_agent as load_factory
    from coevo.harnesses.agent_run import agent_tools, recursion_limit
    from coevo.harnesses.engine import decoding_kwargs
    from coevo.models.recording import RecordingChatModel

    factory = load_factory(spec.agent or "")
    model = RecordingChatModel(policy=policy, decoding=decoding_kwargs(spec), keep_calls=False)
    graph = factory.build(factory.params(spec), model, agent_tools(spec, episode) if factory.takes_tools else ())
    with_config = getattr(graph, "with_config", None)
    return with_config(recursion_limit=recursion_limit(spec)) if with_config is not None else graph


def rollback(folder: str | Path, to: int | None = None) -> tuple[int | None, int]:
    """Point the versioned folder ``folder``'s ``current`` at version ``to`` (default: the newest version
    older than the current one). Returns ``(from, to)`` (from: None when the pointer was missing or named
    no version, which ``to`` repairs). Raises ``AgentFolderError`` for a folder without versions, no older
    version, or an unknown ``to``."""
    root = Path(folder).expanduser()
    known = versions(root)
    if not root.is_dir() or not is_versioned(root):
        raise AgentFolderError(f"{root} is not a versioned agent folder (no {CURRENT} pointer): rollback moves the "
                               "pointer of a folder written with `coevo export RUN -o DIR --version`")
    listed = ", ".join(f"v{n}" for n in known) or "none"
    if not known:
        raise AgentFolderError(f"agent folder {root} holds no version folder (v1, v2, ... with an {MANIFEST}): "
                               "export again with `coevo export RUN -o DIR --version`")
    try:
        now = current_version(root)
    except AgentFolderError:
        now = None  # a dangling pointer: --to repairs it
    if to is None:
        if now is None:
            raise AgentFolderError(f"agent folder {root}: its {CURRENT} pointer is missing or names no version "
                                   f"(versions: {listed}); name the version to point at: `coevo release rollback "
                                   f"{root} --to v{known[-1]}`")
        older = [n for n in known if n < now]
        if not older:
            raise AgentFolderError(f"agent folder {root}: current is v{now}, the oldest version there ({listed}); "
                                   "there is nothing to roll back to")
        to = older[-1]
    if to not in known:
        raise AgentFolderError(f"agent folder {root} has no version v{to} (versions: {listed}); pass one of them "
                               "with --to")
    point(root, to)
    return now, to
