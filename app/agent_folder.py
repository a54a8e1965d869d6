"""An exported agent's folder on disk (``coevo.app.export`` writes it): where it goes (``destination``: a
new, empty or forced folder, or the next ``vN`` of a versioned one), which files in it coevo did not
write (``added_files``), its serving files (``langgraph.json``, ``graph.py``), its adapter copy, and the
move of a finished folder into place (``move_into_place``). Raises ``AgentFolderError`` with the fix."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from coevo.app.release import ADAPTER, FORMAT_NAME, MANIFEST, VERSION_DIR, AgentFolderError, is_versioned, versions
from coevo.models.adapters import STAGE_MARK, check_adapter
from coevo.records import Checkpoint

GRAPH_MODULE = '''"""The agent coevo exported into this folder, as `langgraph dev` / LangGraph Server serve it
(langgraph.json points here). COEVO_AGENT_MODEL, when set, is the model reference to use instead of
the folder's base model and adapter (e.g. a vLLM server with the adapter loaded); COEVO_AGENT_BASE, the
base model's reference on this machine (local:/path/to/base) when it is not where the folder says."""

import os
from pathlib import Path

from coevo import load_agent

graph = load_agent(Path(__file__).resolve().parent, model=os.environ.get("COEVO_AGENT_MODEL") or None,
                   base=os.environ.get("COEVO_AGENT_BASE") or None)
'''
"""``graph.py`` of an exported folder (and of a versioned folder's root, where it loads ``current``)."""
LANGGRAPH_JSON = {"dependencies": ["."], "graphs": {"agent": "./graph.py:graph"}, "env": {}}


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an agent coevo exported: an ``agent.json`` in the ``coevo-agent`` format (a
    file of that name another tool wrote does not count)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("format", "")).startswith(f"{FORMAT_NAME}/")


def taken(root: Path) -> int:
    """The highest N of any ``vN`` entry of ``root`` (a version folder, whole or not, or a deleted one's
    leftover), 0 when none: a new version takes a number no folder there ever showed."""
    if not root.is_dir():
        return 0
    found = (VERSION_DIR.match(p.name) for p in root.iterdir())
    return max((int(m.group(1)) for m in found if m), default=0)


def destination(out: Path, version: bool, force: bool, recorded: int = 0) -> tuple[Path, int | None]:
    """The folder to write (``out``, or ``out/vN`` with ``version``, reserved by making it empty) and N,
    above every ``vN`` there and ``recorded`` (the highest N the archive recorded there: a deleted
    version's number is not reused).
    Raises ``AgentFolderError`` for an existing export without ``force`` (or, with ``version``, one
    written without it; without ``version``, a versioned folder, whose versions ``force`` would delete),
    for a folder of other files (coevo replaces only a folder it exported) and for a place that cannot
    be written."""
    if out.exists() and not out.is_dir():
        raise AgentFolderError(f"{out} is a file: pass a folder to export into with -o")
    busy = out.is_dir() and any(out.iterdir())
    versioned = out.is_dir() and is_versioned(out)
    if busy and not (versioned or is_export(out)):
        raise AgentFolderError(f"{out} already holds files that are not an exported agent: export into a new or "
                               "empty folder (coevo replaces only a folder it exported, with --force)")
    if version:
        if busy and not versioned:
            raise AgentFolderError(f"{out} holds an agent exported without --version: export versions into a new "
                                   "folder, or replace this one with --force (without --version)")
        number = max(taken(out), recorded) + 1
        while True:  # a concurrent export may take N first: the next one is ours
            try:
                (out / f"v{number}").mkdir(parents=True)
            except FileExistsError:
                number += 1
                continue
            except OSError as err:
                raise unwritable(out, err) from None
            return out / f"v{number}", number
    if busy and versioned:
        found = ", ".join(f"v{n}" for n in versions(out)) or "no version yet"
        raise AgentFolderError(f"{out} is a versioned agent folder ({found}): add a version with --version, or "
                               "export into another folder (--force replaces a single agent folder, never a "
                               "folder of versions)")
    if busy and not force:
        raise AgentFolderError(f"{out} already holds an exported agent: pass --force to replace it, --version to add "
                               "a version beside it in a versioned folder (DIR/vN with a DIR/current pointer), or "
                               "another folder")
    added = added_files(out) if busy else []
    if added:
        shown = ", ".join(added[:5]) + (f" and {len(added) - 5} more" if len(added) > 5 else "")
        raise AgentFolderError(f"{out} holds an exported agent and files coevo did not write there ({shown}), which "
                               "--force would delete: move them out of the folder, or export into another folder")
    return out, None


WRITTEN = {MANIFEST, "README.md", "langgraph.json", "graph.py"}
"""The files of an agent folder that its manifest does not list (it cannot list itself)."""
SCRATCH = ("__pycache__", ".langgraph_api")
"""Folders that loading or serving an agent folder makes in it (``graph.py``'s bytecode, ``langgraph dev``'s
local state): not a user's files."""


def added_files(folder: Path) -> list[str]:
    """The files of the exported folder ``folder`` that coevo did not write (neither listed in its manifest
    nor one of ``WRITTEN``, nor under a ``SCRATCH`` folder), relative to it."""
    try:
        listed = set(json.loads((folder / MANIFEST).read_text()).get("files") or {})
    except (OSError, ValueError, AttributeError):
        listed = set()
    files = (f.relative_to(folder) for f in sorted(folder.rglob("*")) if f.is_file() or f.is_symlink())
    return [f.as_posix() for f in files if f.as_posix() not in listed | WRITTEN and not set(f.parts) & set(SCRATCH)]


def unwritable(out: Path, err: OSError) -> AgentFolderError:
    """The error for an agent folder ``out`` that cannot be written (``err``), with the fix."""
    return AgentFolderError(f"cannot write the agent folder {out} ({err.strerror or err}): pass -o a folder you can "
                            "write to, under a folder that exists or can be made")


def copy_adapter(checkpoint: Checkpoint, folder: Path) -> None:
    """Copy the checkpoint's adapter files into ``folder/adapter`` after checking the source, and check
    the copy. Raises ``CheckpointError`` naming the checkpoint and the file for a missing or damaged one."""
    source = Path(checkpoint.adapter_path or "")
    check_adapter(source, checkpoint.id)
    target = folder / ADAPTER
    target.mkdir()
    for file in sorted(source.iterdir()):
        if file.is_file() and file.name != STAGE_MARK:
            shutil.copy2(file, target / file.name)
    check_adapter(target, checkpoint.id)


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON in ``path``."""
    path.write_text(json.dumps(data, indent=2) + "\n")


def serving_files(folder: Path) -> None:
    """``langgraph.json`` and ``graph.py``: ``langgraph dev`` in ``folder`` serves the agent as ``agent``."""
    (folder / "langgraph.json").write_text(json.dumps(LANGGRAPH_JSON, indent=2) + "\n")
    (folder / "graph.py").write_text(GRAPH_MODULE)


def move_into_place(tmp: Path, target: Path, reserved: bool, force: bool) -> None:
    """Rename the written folder ``tmp`` to ``target``: a version folder onto its reserved empty folder; a
    forced export's old folder is set aside first and deleted only once the new one is in place (put back
    when the rename fails). Raises ``AgentFolderError`` when another export took ``target`` meanwhile (and,
    without ``force``, when one wrote it while this one was writing)."""
    old = None
    if not reserved and target.is_dir() and not any(target.iterdir()):
        target.rmdir()  # the empty folder -o named
    if target.exists() and not reserved and not force:
        raise AgentFolderError(f"{target} was written by another export while this one was writing: nothing was "
                               "replaced; pass --force to replace it, or export into another folder")
    if target.exists() and not reserved:
        old = target.with_name(f"{target.name}.replaced-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(target, old)
    try:
        try:
            os.replace(tmp, target)
        except OSError:
            if not reserved or any(target.iterdir()):
                raise
            target.rmdir()  # a platform that renames onto no folder
            os.rename(tmp, target)
    except OSError as err:
        if old is not None and not target.exists():
            os.rename(old, target)
        raise AgentFolderError(f"cannot move the agent folder into {target} ({err.strerror or err}): another export "
                               "may have written it meanwhile; export again (with --force to replace it)") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
