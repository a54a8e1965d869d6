"""`langgraph dev` serves the demo harness graph offline: GET /ok and one run through the local API."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    exe = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
    if not Path(exe).exists():
        pytest.fail("langgraph CLI missing: pip install 'coevo[dev]' (langgraph-cli[inmem])")
    port = _free_port()
    env = {**os.environ, "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
           "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_DISABLE_TELEMETRY": "1"}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([exe, "dev", "--port", str(port), "--no-browser", "--no-reload",
                             "--config", str(ROOT / "langgraph.json")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/ok", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    yield base, proc, tmp_path / "server.log"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_langgraph_dev_serves_the_demo_graph_and_runs_it(server):
    base, proc, log = server
    assert proc.poll() is None, log.read_text()[-3000:]
    assert httpx.get(f"{base}/ok", timeout=5).status_code == 200
    graphs = {a["graph_id"] for a in httpx.post(f"{base}/assistants/search", json={"limit": 50}, timeout=10).json()}
    assert {"harness_demo", "vace", "static", "harness_only", "rl_only", "ungated"} <= graphs
    vace = httpx.post(f"{base}/assistants/search", json={"graph_id": "vace"}, timeout=10).json()[0]
    drawn = httpx.get(f"{base}/assistants/{vace['assistant_id']}/graph", timeout=30).json()
    assert {"train", "curate", "edit", "check", "validate", "gate"} <= {n["id"] for n in drawn["nodes"]}
    assistants = httpx.post(f"{base}/assistants/search", json={"graph_id": "harness_demo"}, timeout=10).json()
    assert assistants, "the demo graph is not registered"
    schemas = httpx.get(f"{base}/assistants/{assistants[0]['assistant_id']}/schemas", timeout=30)
    assert schemas.status_code == 200 and schemas.json()["input_schema"], schemas.text  # what Studio loads first
    run = httpx.post(f"{base}/runs/wait", json={"assistant_id": assistants[0]["assistant_id"],
                                               "input": {"task": "What is (17 + 25) * 3?"}}, timeout=60)
    assert run.status_code == 200, run.text
    out = run.json()
    assert out["answer"] == "126"
    assert out["stop_reason"] == "final_answer"
