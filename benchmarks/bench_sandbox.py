"""Per-call cost of the python tool's sandbox: ``run_python("print(1)")`` with the filesystem view
(bubblewrap) and without it (the fallback), interleaved so both see the same machine load.

    python benchmarks/bench_sandbox.py [--calls 30]

Prints the median and the 10th/90th percentiles in milliseconds for each mode and the median
difference (the view's overhead per call). Interpreter start-up dominates both; on a loaded machine
the numbers are indicative only.
"""

from __future__ import annotations

import argparse
import statistics
import time

from coevo.envs.sandbox import isolation, run_python


def _time(view: bool) -> float:
    started = time.perf_counter()
    result = run_python("print(1)", filesystem_view=view)
    elapsed = time.perf_counter() - started
    if result.stdout.strip() != "1":
        raise RuntimeError(f"the sandbox failed (filesystem_view={view}): {result.observation()}")
    return elapsed * 1000


def main() -> None:
    """Run the interleaved measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="calls per mode")
    calls = parser.parse_args().calls
    print(f"isolation: {isolation()}")
    _time(True), _time(False)  # warm: the view is computed once per process
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(calls):
        for view in (True, False):
            times[view].append(_time(view))
    for view, label in ((False, "fallback (no view)"), (True, "bubblewrap view")):
        ts = sorted(times[view])
        q = statistics.quantiles(ts, n=10)
        print(f"{label:20s} n={calls} median={statistics.median(ts):6.1f} ms  p10={q[0]:6.1f}  p90={q[-1]:6.1f}")
    diffs = [a - b for a, b in zip(times[True], times[False])]
    print(f"view overhead per call: median {statistics.median(diffs):+.1f} ms (paired)")


if __name__ == "__main__":
    main()
