"""Write the docs' pictures of a real run: the run's report figures (validation per round, train reward
per step, the harness lineage and, once `coevo decompose RUN` has run, the 2×2 of which lever did what)
copied into ``docs/images/default-job/``, where the getting-started page shows them.

    python scripts/docs_pictures.py RUN_ID --db coevo_runs/coevo.db

The pictures in the repo come from the default job on showcase seed 2 (docs/getting-started.md, "What to
expect", names the run); run it again after a new measurement so the pictures and the numbers agree.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

FIGURES = ("validation.png", "train_reward.png", "lineage.png", "decompose.png")
"""The report figures the docs show."""


def main() -> None:
    """Parse the command line, write the run's report into a temporary folder and copy its figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_id", help="a finished run (coevo archive list)")
    ap.add_argument("--db", default="coevo_runs/coevo.db", help="the archive holding the run")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "images" / "default-job"))
    args = ap.parse_args()
    from coevo.report.html import write_report

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = write_report(args.run_id, args.db, Path(tmp))
        written = [name for name in FIGURES if (page.parent / name).exists()]
        for name in written:
            shutil.copyfile(page.parent / name, out / name)
    missing = sorted(set(FIGURES) - set(written))
    print(f"wrote {', '.join(written)} to {out}" + (f"; the run has no {', '.join(missing)}" if missing else ""))


if __name__ == "__main__":
    main()
