"""Local servers for tests and benchmarks: a tiny OpenAI-compatible stub, free and closed ports,
and `transformers serve` for the bundled SmolLM2-135M."""

from __future__ import annotations

import abc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import httpx


def free_port() -> int:
    """A TCP port nobody listens on right now (also what a dead server looks like)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JsonServer(abc.ABC):
    """A local HTTP server answering each POST with ``self._answer(path, body) -> (status, JSON)``
    (subclasses define it), on a free port; ``root`` is ``http://127.0.0.1:PORT``. A context manager."""

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                status, data = server._answer(self.path, body)
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._lock = threading.Lock()
        self.root = f"http://127.0.0.1:{self._server.server_port}"

    @abc.abstractmethod
    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        """The ``(HTTP status, JSON body)`` a subclass answers to a POST of ``body`` to ``path``."""

    def __enter__(self):
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class StubServer(JsonServer):
    """An OpenAI-compatible ``/v1/chat/completions`` that answers ``reply(messages)`` after
    ``latency_s``, serving at most ``capacity`` requests at once (a server's fixed throughput: more
    wait in line). ``requests`` counts the requests received; ``url`` ends in ``/v1``. A context manager."""

    def __init__(self, reply: Callable[[list[dict]], str] = lambda m: "ok", latency_s: float = 0.0,
                 capacity: int = 64) -> None:
        super().__init__()
        self.reply, self.latency_s, self.requests = reply, latency_s, 0
        self._slots = threading.Semaphore(capacity)
        self.url = f"{self.root}/v1"

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests += 1
        with self._slots:
            time.sleep(self.latency_s)
        text = self.reply(body.get("messages", []))
        return 200, {"id": "stub", "object": "chat.completion", "created": 0, "model": body.get("model"),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


class TransformersServer:
    """``transformers serve`` (ships with transformers; needs ``coevo[serve]``) serving the model
    directory ``model_dir`` on a free local port under the name ``model_dir.name`` (started from its
    parent directory, so the model id is that relative path). ``url`` ends in ``/v1``; ``log`` holds
    the server's output; ``threads`` torch threads (1: on a small shared box two spinning threads
    against the test process made prefill 4-6x slower). A context manager; raises ``RuntimeError``
    with the log tail when the server does not come up within ``start_timeout_s``."""

    def __init__(self, model_dir: Path, log: Path, start_timeout_s: float = 180.0, threads: int = 1) -> None:
        self.model_dir, self.log_path, self.start_timeout_s = Path(model_dir), Path(log), start_timeout_s
        self.threads = threads
        self.name = self.model_dir.name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "TransformersServer":
        exe = Path(sys.executable).parent / "transformers"
        cmd = [str(exe), "serve", self.name, "--device", "cpu", "--host", "127.0.0.1", "--port", str(self.port)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
               "OMP_NUM_THREADS": str(self.threads)}
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self.model_dir.parent, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + self.start_timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"transformers serve did not start: {self.log_path.read_text()[-3000:]}")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()  # uvicorn may linger on its generation thread: then the whole group goes
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)
        self._log.close()


class FakeVLLM(JsonServer):
    """A stand-in for vLLM's OpenAI-compatible server with runtime LoRA updating: ``POST
    /v1/load_lora_adapter`` / ``/v1/unload_lora_adapter`` (vLLM's answers: "already been loaded" for a
    loaded name, 404 for an unknown one or a directory without ``adapter_config.json``) and
    ``/v1/chat/completions`` for the base ``model`` or a loaded adapter (404 otherwise), answering
    ``reply(messages)`` with vLLM's token ids (``token_id:<ASCII code>``, logprob ``logprob`` each)
    and ``prompt_token_ids``. ``events`` lists ``(action, name)``: ``load``, ``unload``, ``chat``.
    ``root`` is the server root (``http://127.0.0.1:PORT``). A context manager."""

    def __init__(self, reply: Callable[[list[dict]], str], model: str = "policy", logprob: float = -0.5) -> None:
        super().__init__()
        self.reply, self.model, self.logprob = reply, model, logprob
        self.adapters: dict[str, str] = {}
        self.events: list[tuple[str, str]] = []

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        name = body.get("lora_name") or body.get("model", "")
        with self._lock:
            if path == "/v1/load_lora_adapter":
                if name in self.adapters:
                    return 400, {"message": f"The lora adapter '{name}' has already been loaded."}
                if not Path(body.get("lora_path", ""), "adapter_config.json").is_file():
                    return 404, {"message": f"No adapter found for {body.get('lora_path')}"}
                self.adapters[name] = body["lora_path"]
            elif path == "/v1/unload_lora_adapter":
                if self.adapters.pop(name, None) is None:
                    return 404, {"message": f"The lora adapter '{name}' cannot be found."}
            elif path != "/v1/chat/completions" or (name != self.model and name not in self.adapters):
                return 404, {"message": f"The model `{name}` does not exist."}
            action = {"/v1/load_lora_adapter": "load", "/v1/unload_lora_adapter": "unload"}.get(path, "chat")
            self.events.append((action, name))
        if path != "/v1/chat/completions":
            return 200, {"message": "Success"}
        text = self.reply(body.get("messages", []))
        prompt = "".join(str(m.get("content") or "") for m in body.get("messages", []))
        content = [{"token": f"token_id:{ord(c) % 128}", "logprob": self.logprob, "top_logprobs": []} for c in text]
        return 200, {"id": "fake", "object": "chat.completion", "created": 0, "model": name,
                     "prompt_token_ids": [ord(c) % 128 for c in prompt[-64:]],
                     "choices": [{"index": 0, "finish_reason": "stop", "logprobs": {"content": content},
                                  "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(text),
                               "total_tokens": len(prompt) + len(text)}}
