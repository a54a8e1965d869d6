"""Where a config path points: the file as given, else the copy the package ships. ``configs/`` lies inside
the package (package data), so ``coevo run configs/papers/vace.toml`` and a table config's
``preset = "configs/papers/vace.toml"`` read the shipped preset from any directory, an installed wheel
included; a file of that name in the directory you run from comes first."""

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The folder of the package ``coevo``: the shipped ``configs/`` lies in it."""


def config_path(path: str | Path) -> Path:
    """``path`` when it names a file or is absolute; else the shipped file at that path relative to the
    package (``configs/default.toml``) when there is one; else ``path`` as given (the caller's error
    names it)."""
    p = Path(path)
    if p.is_file() or p.is_absolute():
        return p
    shipped = PACKAGE_ROOT / p
    return shipped if shipped.is_file() else p
