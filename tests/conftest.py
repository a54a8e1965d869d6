"""Test-wide settings: offline env vars before anything imports a hub client. The tests share coevo's cache
(``~/.cache/coevo``, or ``$COEVO_CACHE_DIR``: the converted SmolLM2-135M, built TextWorld games) with the user's
runs, so each is built once per machine; a test of the cache itself points it at its ``tmp_path``."""

import os
import sys
import time

for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                   "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
                   "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)

# README command 2 sets up a fresh venv without byte-compiling it (scripts/setup.sh: compiling all of
# site-packages took longer than the imports it saved). Where PYTHONDONTWRITEBYTECODE is set, as on these
# machines, every test process would then compile each of its imports from source: this run writes the bytecode
# of what it imports instead, once, for itself, its workers and the processes they start.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

import pytest  # noqa: E402
from order_kit import load_durations, longest_first  # noqa: E402
from pg_kit import REQUIRE_ENV, PostgresServer, PostgresUnavailable  # noqa: E402


def pytest_configure(config):
    """Under pytest-xdist (README command 2: one worker per core), one torch/OpenMP thread per worker and per
    process a test starts (servers, ``coevo run`` children): two workers each decoding on two threads on a
    2-core box oversubscribe the cores, and the suite ran about a fifth slower. Set before any test imports
    torch; a value already in the environment is kept. And xdist's own reordering of the files (most tests first)
    is turned off: ``pytest_collection_modifyitems`` below orders them."""
    if hasattr(config, "workerinput"):
        for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(key, "1")
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist >= 3.8: hand files out in our order (below)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Test files longest first, by their measured seconds (``tests/order_kit.py``, ``tests/durations.json``), so
    ``--dist loadfile`` hands out the short files last and no worker finishes a long one alone."""
    items[:] = longest_first(items, load_durations(), lambda item: item.nodeid)


@pytest.fixture(autouse=True, scope="session")
def _young_gc_when_a_trainer_starts_or_ends():
    """Transformers' ``Trainer.train`` (every GRPO stage) starts with accelerate's ``free_memory()``, a full GC
    pass, and every weight stage ends with another (``coevo.training.memory.releasing``, before glibc's
    ``malloc_trim``). In a test worker such a pass scans everything the collected test files imported (about
    1.2 million objects): ~0.5 s each, about a seventh of ``test_knobs``'s time. Here both collect the young
    generations only (the trim still runs); the interpreter's own full passes still run, and no test asserts
    what a full pass frees (``test_memory_caps`` tests the release itself, unpatched)."""
    import gc

    from accelerate.utils import memory

    from coevo.training import memory as stage_memory
    from coevo.training.memory import trim_freed_memory

    original, release = memory.clear_device_cache, stage_memory.release_freed_memory

    def clear_device_cache(garbage_collection: bool = False) -> None:
        if garbage_collection:
            gc.collect(1)
        original(garbage_collection=False)

    def release_freed_memory() -> bool:
        gc.collect(1)
        return trim_freed_memory()

    memory.clear_device_cache, stage_memory.release_freed_memory = clear_device_cache, release_freed_memory
    yield
    memory.clear_device_cache, stage_memory.release_freed_memory = original, release


@pytest.fixture(scope="session")
def postgres_server(request):
    """A throwaway PostgreSQL server for the whole session (``tests/pg_kit.py``), started on first use.

    Skips the tests that need it, with the reason, when no server can be started; with
    ``COEVO_REQUIRE_POSTGRES=1`` (``.ci/run``) that is a failure instead.
    """
    server = PostgresServer(os.environ.get("COEVO_TEST_POSTGRES_URL"))
    started = time.monotonic()
    try:
        server.start()
    except PostgresUnavailable as exc:
        server.stop()
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"PostgreSQL is required ({REQUIRE_ENV}=1) but could not start: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL tests skipped: {exc}")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:  # so the CI log shows what the [postgresql] tests ran on
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nPostgreSQL {server.version()} at {server.url} ready in "
                                f"{time.monotonic() - started:.1f} s ({server.origin})")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """The SQLAlchemy URL of a fresh, empty database on the session's PostgreSQL server."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """An empty archive database on each backend in turn: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "coevo.db")
    return request.getfixturevalue("postgres_url")
