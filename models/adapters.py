"""LoRA adapter folders on disk: written whole or not at all, checked before they are loaded,
so a crash mid-write or a damaged file is one clear error, not a broken run.

A weight stage killed while it saves its adapter used to leave a half-written folder that later
loads failed on with an ~80-line ``SafetensorError`` traceback, or an empty ``adapter_config.json``
that passed the existence check and failed later with "Expecting value". Now:

- ``writing_adapter(target)`` gives a temporary sibling folder (``<target>.partial-<pid>``) to save
  into; only when the save finished and the files check out is it renamed to ``target`` (one
  ``rename`` on one filesystem: a reader sees no adapter or the whole adapter), its files synced first.
- ``check_adapter(path, checkpoint)`` reads what a load would trust without loading any weights: the
  config is a JSON object naming its ``peft_type``, the weights file's safetensors header parses and
  its tensors end exactly where the file does (or a ``.bin`` file is a whole zip archive). It raises
  ``CheckpointError`` naming the checkpoint, the file and the fix.
- ``stage_folder(root, checkpoint_id, run_id)`` makes a stage's output folder with a marker
  (``STAGE_MARK``: run, host, pid, start) so the folders of stages that never finished can be told
  from live ones and removed (``coevo.app.stage_folders``, ``coevo archive gc``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from coevo.errors import CoevoError
from coevo.timestamps import utcnow

CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
PARTIAL = ".partial-"
"""Infix of a folder an adapter is being written into (``<target>.partial-<pid>``)."""
STAGE_MARK = ".coevo-stage.json"
"""The marker file a stage's output folder holds: ``{"checkpoint_id", "run_id", "host", "pid", "started"}``."""


class CheckpointError(CoevoError, ValueError):
    """A checkpoint's adapter folder that is missing, incomplete or damaged; the message names the
    checkpoint, the file and the fix."""


class MissingAdapterError(CheckpointError, FileNotFoundError):
    """A checkpoint's adapter folder, or one of its files, that is not there."""


def _damaged(checkpoint: str, file: Path, what: str) -> CheckpointError:
    kind = MissingAdapterError if what == "is missing" else CheckpointError
    return kind(f"checkpoint {checkpoint}: {file} {what}. The folder was not written whole (a stage "
                           "killed while saving it, or a copy cut short): delete the checkpoint's folder and train it "
                           "again (a resumed run redoes an unfinished stage), or point at another checkpoint")


def _check_safetensors(file: Path, checkpoint: str) -> None:
    size = file.stat().st_size
    with file.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _damaged(checkpoint, file, f"holds {size} bytes, too few for a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise _damaged(checkpoint, file, f"is truncated: its header says {length:,} bytes of header, the file "
                                             f"holds {size - 8:,} after the length")
        try:
            header = json.loads(f.read(length))
        except ValueError:
            raise _damaged(checkpoint, file, "has a safetensors header that is not JSON") from None
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
            and "data_offsets" in t]
    data = size - 8 - length
    if not ends:
        raise _damaged(checkpoint, file, "holds no tensors")
    if max(ends) != data:
        raise _damaged(checkpoint, file, f"is {'truncated' if max(ends) > data else 'longer than its header says'}: "
                                         f"its tensors need {max(ends):,} bytes of data, the file holds {data:,}")


def check_adapter(path: str | Path, checkpoint: str | None = None) -> None:
    """Raise ``CheckpointError`` unless ``path`` is a whole PEFT adapter folder (module docstring):
    ``adapter_config.json`` a JSON object with a ``peft_type``, and ``adapter_model.safetensors``
    with a parsable header whose tensors end where the file ends (or ``adapter_model.bin``, a whole
    zip archive). ``checkpoint`` names it in the message (default: the folder). No weights are read."""
    folder = Path(path).expanduser()
    name = checkpoint or str(folder)
    if not folder.is_dir():
        raise MissingAdapterError(f"checkpoint {name}: its adapter folder {folder} does not exist; point the "
                                  "checkpoint at a PEFT adapter folder (saved with save_pretrained), or train it again")
    config = folder / CONFIG_FILE
    if not config.is_file():
        raise _damaged(name, config, "is missing")
    try:
        raw = json.loads(config.read_text() or "null")
    except (ValueError, UnicodeDecodeError) as err:
        raise _damaged(name, config, f"is not JSON ({err})") from None
    if not isinstance(raw, dict) or not raw.get("peft_type"):
        raise _damaged(name, config, "is empty or names no peft_type" if not raw else "names no peft_type")
    weights = next((folder / w for w in WEIGHT_FILES if (folder / w).is_file()), None)
    if weights is None:
        raise _damaged(name, folder / WEIGHT_FILES[0], "is missing")
    if weights.suffix == ".safetensors":
        _check_safetensors(weights, name)
    elif not zipfile.is_zipfile(weights):
        raise _damaged(name, weights, "is not a whole torch archive")


def _sync(folder: Path) -> None:
    """Flush every file of ``folder`` and the folder itself to disk (a rename must not outrun its data)."""
    for item in [*folder.iterdir(), folder]:
        if item.is_dir() and item != folder:
            continue
        fd = os.open(item, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def writing_adapter(target: str | Path, checkpoint: str | None = None) -> Iterator[Path]:
    """``with writing_adapter(target) as tmp: model.save_pretrained(tmp)``: save into ``tmp`` (a
    fresh sibling of ``target``); on a clean exit the folder is checked (``check_adapter``, raising
    ``CheckpointError`` naming ``checkpoint``), synced and renamed to ``target`` (a leftover
    ``target`` from an earlier attempt is replaced); on any error ``tmp`` is removed and nothing
    appears at ``target``."""
    target = Path(target)
    tmp = target.with_name(f"{target.name}{PARTIAL}{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        check_adapter(tmp, checkpoint or str(target))
        _sync(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
        _sync(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def stage_folder(root: str | Path, checkpoint_id: str, run_id: str | None = None) -> Path:
    """``root/checkpoint_id``, created with its ``STAGE_MARK`` (the run, this host and pid, the time):
    the output folder of the weight stage or merge making checkpoint ``checkpoint_id``."""
    folder = Path(root) / checkpoint_id
    folder.mkdir(parents=True, exist_ok=True)
    mark = {"checkpoint_id": checkpoint_id, "run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
            "started": utcnow().isoformat()}
    (folder / STAGE_MARK).write_text(json.dumps(mark))
    return folder


def read_mark(folder: str | Path) -> dict[str, Any] | None:
    """A stage folder's marker (``stage_folder``), or None when it has none or it does not parse."""
    try:
        mark = json.loads((Path(folder) / STAGE_MARK).read_text())
    except (OSError, ValueError):
        return None
    return mark if isinstance(mark, dict) else None
