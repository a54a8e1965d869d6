#!/usr/bin/env bash
# The wheel works as a package: build it from the checkout's files (tracked and untracked, not ignored), install
# it into a fresh venv and use it from outside the checkout. Run by .ci/run after scripts/setup.sh.
#
# The fresh venv reuses .venv's installed dependencies (torch and the rest, no second download) through a
# .pth line naming .venv's site-packages, placed after its own site-packages; a .pth line only adds a folder
# to sys.path (the .pth files in that folder, the editable install's finder among them, are not run), so
# `coevo` can only come from the wheel, and the script checks that it does.
# It fails when a package file tracked in the checkout is missing from the wheel, when a module of the
# installed package does not import, when a shipped config does not load by its path (configs/papers/vace.toml)
# from outside the checkout, or when a smoke command fails: `coevo --help`, `coevo envs list`,
# `coevo harness validate` of a shipped base harness, and a one-task `coevo eval` with the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# 1. the wheel, built from a copy (no build/ or egg-info left in the checkout)
mkdir "$WORK/src" "$WORK/dist"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$WORK/src"
(cd "$WORK/src" && "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" . 2>"$WORK/build.log") \
  || { cat "$WORK/build.log" >&2; exit 1; }
WHEEL=$(ls "$WORK"/dist/coevo-*.whl)

# 2. a fresh venv with the wheel; dependencies from .venv's site-packages
"$PY" -m venv --without-pip "$WORK/venv"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$SITE/zz_coevo_ci_deps.pth"
"$PY" -m pip --python "$WORK/venv/bin/python" install -q --no-deps --no-index "$WHEEL"

# 3. from outside the checkout: every tracked package file is in the installed package, every module imports,
# and coevo is the wheel's
cd "$WORK"
git -C "$ROOT" ls-files --cached --others --exclude-standard > "$WORK/tracked.txt"
"$WORK/venv/bin/python" - "$SITE" "$WORK/tracked.txt" <<'PY'
import importlib, pkgutil, sys
from pathlib import Path

site, tracked = Path(sys.argv[1]), Path(sys.argv[2]).read_text().split()
import coevo

package = Path(coevo.__file__).parent
assert package == site / "coevo", f"coevo imported from {package}, not from the installed wheel in {site}"
# what is no part of the package: the checkout's tooling, tests and docs, and the build script
outside = ("tests/", "benchmarks/", "scripts/", "docs/", ".ci/")
meta = {"setup.py", "pyproject.toml", "mkdocs.yml", ".gitignore"}
wanted = [f for f in tracked if not f.startswith(outside) and f not in meta and not f.endswith(".md")]
missing = [f for f in wanted if not (package / f).is_file()]
assert not missing, f"the wheel lacks {len(missing)} package file(s): {missing}"
failed, imported = {}, 0
# not imported: a package's __main__ (runs its command) and alembic's env.py (runs inside a migration)
scripts = ("__main__", "coevo.storage.migrations.env")
for mod in pkgutil.walk_packages(coevo.__path__, "coevo."):
    if mod.name.endswith(scripts):
        continue
    try:
        importlib.import_module(mod.name)
        imported += 1
    except Exception as err:  # an optional extra missing here is a failure too: .venv has every extra
        failed[mod.name] = f"{type(err).__name__}: {err}"
assert not failed, f"modules of the installed package that do not import: {failed}"
stray = sorted({m.__file__ for name, m in sys.modules.items()
                if name.split(".")[0] == "coevo" and getattr(m, "__file__", None)
                and not Path(m.__file__).is_relative_to(package)})
assert not stray, f"coevo modules loaded from outside the installed package: {stray}"
# the shipped configs load by their package path from this directory, outside the checkout
from coevo.app.tables import load_table
from coevo.config import load_config

for preset in sorted((package / "configs").rglob("*.toml")):
    rel = preset.relative_to(package).as_posix()
    load_table(rel) if rel.startswith("configs/tables/") else load_config(rel)
print(f"wheel: all {len(wanted)} package files shipped, {imported} modules import from {package}")
PY

# 4. the command line, as a user of the installed package runs it
COEVO=$WORK/venv/bin/coevo
"$COEVO" --help > /dev/null
"$COEVO" envs list | grep -q showcase
"$COEVO" harness validate "$SITE/coevo/harnesses/base/showcase.json"
"$COEVO" eval --env showcase --harness showcase --model local:smollm2-135m --n 1 --split val \
  --db "$WORK/eval.db" > "$WORK/eval.log" 2>&1 || { cat "$WORK/eval.log" >&2; exit 1; }
grep "pass@1" "$WORK/eval.log" || { cat "$WORK/eval.log" >&2; echo "coevo eval printed no pass@1" >&2; exit 1; }
echo "wheel check passed: $(basename "$WHEEL") installs and runs from $WORK"
