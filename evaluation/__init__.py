"""coevo.evaluation: the async evaluation engine (pass@k, avg@k, TIMR) over harness × checkpoint × split."""
