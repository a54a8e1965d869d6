"""Read TensorBoard event files back: ``read_scalars(folder)`` -> ``{tag: [(step, value), ...]}``.

An event file is a sequence of TFRecords (``uint64`` length, ``uint32`` masked CRC of the length,
the payload, ``uint32`` masked CRC of the payload; little-endian), each payload an ``Event``
protocol buffer. The ``Event`` message comes from ``tensorboardX`` (the ``tracking`` extra), so no
TensorFlow or TensorBoard server is needed; CRCs are not checked (a file cut short by a killed
run ends at its last whole record).
"""

from __future__ import annotations

import struct
from pathlib import Path


def _records(path: Path) -> list[bytes]:
    data, out, at = path.read_bytes(), [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        start, end = at + 12, at + 12 + length
        if end + 4 > len(data):
            break
        out.append(data[start:end])
        at = end + 4
    return out


def read_scalars(folder: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``folder`` (recursively, files in name order):
    tag -> ``(step, value)`` in write order. Scalars written as ``simple_value`` (tensorboardX, TRL
    through it) or as a one-float tensor (``torch.utils.tensorboard``'s newer format) are read.
    Raises ``ImportError`` naming ``coevo[tracking]`` when tensorboardX is missing."""
    try:
        from tensorboardX.proto.event_pb2 import Event
    except ImportError as err:
        raise ImportError(f"reading TensorBoard event files needs tensorboardX ({err}): "
                          "pip install 'coevo[tracking]'") from None
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(folder).rglob("events.out.tfevents.*")):
        for payload in _records(path):
            event = Event.FromString(payload)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.HasField("tensor") and value.tensor.float_val:
                    number = value.tensor.float_val[0]
                else:
                    continue
                scalars.setdefault(value.tag, []).append((int(event.step), float(number)))
    return scalars
