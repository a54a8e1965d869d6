"""The package list for setuptools, found rather than listed: the repository root is the package ``coevo``
(pyproject's ``[tool.setuptools] package-dir``), so every folder under it with an ``__init__.py`` is a
subpackage ``coevo.<folder>``. pyproject.toml holds everything else (metadata, package data)."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# the folders of the checkout that are not part of the package (tests, benchmarks and scripts have no
# __init__.py today; excluded by name so that one added there never ships)
NOT_SHIPPED = ["tests", "tests.*", "benchmarks", "benchmarks.*", "scripts", "scripts.*", "docs", "docs.*",
               "build", "build.*", "site", "site.*"]


def coevo_packages() -> list[str]:
    """``coevo`` and ``coevo.<sub>`` for every package setuptools finds under the repository root."""
    return ["coevo", *(f"coevo.{name}" for name in sorted(find_packages(where=".", exclude=NOT_SHIPPED)))]


class BuildPy(build_py):
    """``build_py`` without this file: it lies in the package's folder but is no module of ``coevo``."""

    def find_package_modules(self, package, package_dir):  # noqa: D102
        return [m for m in super().find_package_modules(package, package_dir) if m[:2] != ("coevo", "setup")]


if __name__ == "__main__":
    setup(packages=coevo_packages(), cmdclass={"build_py": BuildPy})
